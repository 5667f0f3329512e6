"""Importance scoring: keep units scoring >= 3.0, summarize the rest except the last 5 low."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from contextwarden import Message, assistant, tool_result, user
from contextwarden._messages import ToolCallBlock
from contextwarden.strategies import StrategyContext, importance
from contextwarden.strategies.importance import (
    BASE_SCORES,
    score_message,
    score_messages,
    score_unit,
)
from contextwarden.testing import ConversationBuilder

MakeCtx = Callable[..., StrategyContext]


def call(command: str, name: str = "bash") -> ToolCallBlock:
    return ToolCallBlock("c1", name, f'{{"command": "{command}"}}')


@pytest.mark.parametrize(
    ("message", "flags", "expected"),
    [
        (user("thanks"), {}, BASE_SCORES["user"]),
        (user("you must keep the API stable"), {}, BASE_SCORES["user"] + 1.0),
        (user("<returncode>0</returncode>\n<output>x</output>"), {}, BASE_SCORES["tool"]),
        (assistant("looking around"), {}, BASE_SCORES["assistant"]),
        (assistant("", tool_calls=[call("sed -i s/a/b/ x.py")]), {"edit": True}, 1.0 + 2.5),
        (assistant("", tool_calls=[call("python -m pytest -q")]), {}, 1.0 + 2.0),
        (assistant("The root cause is the off-by-one in parse()"), {}, 1.0 + 2.0),
        (assistant("The task is complete."), {}, 1.0 + 2.0),
        (tool_result("c1", "Traceback"), {"error": True}, 0.5 + 3.0),
        (tool_result("c1", "<returncode>0</returncode>\nok"), {}, 0.5),
        (user("[Context summary: 3 earlier messages were compacted; ref cw:1]"), {}, 0.0),
    ],
)
def test_score_table(message: Message, flags: dict[str, bool], expected: float) -> None:
    assert score_message(message, **flags) == pytest.approx(expected)


def test_facts_decide_errors_and_edits() -> None:
    msgs = (
        ConversationBuilder()
        .user("task")
        .bash("grep -n foo x.py", "", returncode=1)  # no match: not an error
        .bash(
            "python repro.py", "Traceback (most recent call last):\nValueError: bad", returncode=1
        )
        .bash("cat > fix.py << 'EOF'\nprint(1)\nEOF", "")
        .build()
    )
    scores = score_messages(msgs)
    assert scores[2] == pytest.approx(BASE_SCORES["tool"])
    assert scores[4] == pytest.approx(BASE_SCORES["tool"] + 3.0)
    assert scores[5] == pytest.approx(BASE_SCORES["assistant"] + 2.5)


def test_read_only_listing_units_lose_a_point() -> None:
    def unit(command: str) -> list[Message]:
        return [
            assistant("", tool_calls=[call(command)]),
            tool_result("c1", "<returncode>0</returncode>\na b"),
        ]

    for command in ("ls -la", "cat x.py", "find . -name '*.py'"):
        u = unit(command)
        assert score_unit(u, score_messages(u)) == pytest.approx(BASE_SCORES["assistant"] - 1.0)
    u = unit("python x.py")
    assert score_unit(u, score_messages(u)) == pytest.approx(BASE_SCORES["assistant"])


def build() -> list[Message]:
    b = ConversationBuilder().system("sys").user("task: fix parse()")
    for i in range(8):
        b.bash(f"cat mod{i}.py", f"print({i})")
    b.bash("python repro.py", "Traceback (most recent call last):\nValueError: bad", returncode=1)
    for i in range(8, 14):
        b.bash(f"ls dir{i}", "a b c")
    b.edit("parse.py", "x - 1", "x")
    for i in range(14, 22):
        b.bash(f"cat mod{i}.py", f"print({i})")
    return b.build()


def test_keeps_high_units_and_the_last_five_low(make_ctx: MakeCtx) -> None:
    msgs = build()
    out = importance(msgs, make_ctx())
    assert out is not None
    elided = set(out.elided)
    error_call = next(
        i for i, m in enumerate(msgs) if "repro.py" in "".join(c.arguments for c in m.tool_calls)
    )
    edit_call = next(
        i for i, m in enumerate(msgs) if any(c.name == "str_replace_editor" for c in m.tool_calls)
    )
    assert {error_call, error_call + 1, edit_call, edit_call + 1}.isdisjoint(elided)
    # the newest unit is always kept; before it, the last low units covering >= 5 messages
    # (3 units of 2 messages) are kept too; the low unit before those is summarized
    assert elided.isdisjoint(range(len(msgs) - 8, len(msgs)))
    assert {len(msgs) - 10, len(msgs) - 9} <= elided
    assert 2 in elided  # the first cat
    assert all(msgs[i].role != "tool" or i - 1 in elided for i in elided)


def test_threshold_is_configurable(make_ctx: MakeCtx) -> None:
    msgs = build()
    strict = importance(msgs, make_ctx(importance_threshold=10.0))
    loose = importance(msgs, make_ctx(importance_threshold=-5.0))
    assert strict is not None and loose is None
    assert len(strict.elided) > len(importance(msgs, make_ctx()).elided)  # type: ignore[union-attr]


def test_keep_recent_low_zero_still_keeps_the_newest_unit(make_ctx: MakeCtx) -> None:
    msgs = build()
    out = importance(msgs, make_ctx(keep_recent_low=0))
    assert out is not None
    assert len(msgs) - 1 not in out.elided and len(msgs) - 2 not in out.elided
    assert len(msgs) - 3 in out.elided and len(msgs) - 4 in out.elided
