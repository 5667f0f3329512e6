"""Key-event extraction: edits, test runs, completion, error-then-fix, the last unresolved
error and user instructions are kept; the rest is summarized except the last 5 non-key."""

from __future__ import annotations

from collections.abc import Callable

from contextwarden import Message
from contextwarden.strategies import StrategyContext, key_events
from contextwarden.strategies.key_events import key_indices
from contextwarden.testing import ConversationBuilder

MakeCtx = Callable[..., StrategyContext]


def build() -> list[Message]:
    b = ConversationBuilder().system("sys").user("task: fix parse()")
    for i in range(6):
        b.bash(f"grep -rn parse src/m{i}.py", f"src/m{i}.py:1: parse")
    b.bash(
        "python repro.py", "Traceback (most recent call last):\nValueError: bad input", returncode=1
    )  # 14
    for i in range(6, 10):
        b.bash(f"cat src/m{i}.py", "...")
    b.edit("src/parse.py", "x - 1", "x")  # 24
    b.bash("python repro.py", "ok")  # 26: shows the error fixed
    b.user("also keep the old API working")  # 28
    b.bash(
        "python -m pytest tests/test_parse.py", "1 failed\nAssertionError: old api", returncode=1
    )  # 29
    for i in range(10, 16):
        b.bash(f"cat src/m{i}.py", "...")
    return b.build()


def test_key_indices_cover_every_kind_of_event() -> None:
    msgs = build()
    key = key_indices(msgs)

    def find(text: str) -> int:
        return next(
            i
            for i, m in enumerate(msgs)
            if text in m.text or any(text in c.arguments for c in m.tool_calls)
        )

    error = find("repro.py") + 1
    edit = find("src/parse.py")
    fixed = (
        max(i for i, m in enumerate(msgs) if any("repro.py" in c.arguments for c in m.tool_calls))
        + 1
    )
    instruction = find("also keep the old API")
    tests = find("pytest")
    assert {error, edit, fixed, instruction, tests, tests + 1} <= key
    assert not key & {3, 5, 7}  # greps are not events


def test_keeps_key_units_and_recent_context(make_ctx: MakeCtx) -> None:
    msgs = build()
    out = key_events(msgs, make_ctx())
    assert out is not None
    elided = set(out.elided)
    key = key_indices(msgs)
    for k in key:
        start = k - 1 if msgs[k].role == "tool" else k
        assert start not in elided and k not in elided
    assert {2, 3, 4, 5} <= elided
    # the last non-key units (>= 5 messages) and the newest unit are kept
    assert elided.isdisjoint(range(len(msgs) - 8, len(msgs)))
    assert len(msgs) - 9 in elided


def test_none_when_everything_is_key(make_ctx: MakeCtx) -> None:
    b = ConversationBuilder().user("task")
    for i in range(4):
        b.edit(f"f{i}.py", "a", "b")
    assert key_events(b.build(), make_ctx()) is None
