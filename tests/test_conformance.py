"""Conformance: the cases peer projects test for their own trimming, restated for ours.

Written from reading their suites (not copied): LangChain's summarization middleware cutoff
tests (tool pairs, orphans, ten parallel calls), strands-agents' sliding-window table, and
pi-mono's compaction tests (a cut never lands on a tool result). Where our policy differs on
purpose (we always keep the task, the first user message), the expected output says so.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent / "layers"))
from histories import call, config, lines, validity_problems  # noqa: E402

from contextwarden._budget import Budget  # noqa: E402
from contextwarden._messages import Message, ToolResultBlock, assistant, tool_result, user  # noqa: E402
from contextwarden._warden import Warden  # noqa: E402
from contextwarden.layers import LayerContext, sliding_window  # noqa: E402

PER_MESSAGE = 100


class PerMessage:
    """Every message costs 100 tokens, a request nothing more: budgets read as message counts
    (like strands' ``window_size``)."""

    name = "per-message"

    def count_text(self, text: str) -> int:
        return PER_MESSAGE

    def count_message(self, message: Message) -> int:
        return PER_MESSAGE

    def count_messages(
        self, messages: Sequence[Message], *, tools: Sequence[Mapping[str, Any]] | None = None
    ) -> int:
        return PER_MESSAGE * len(messages)


def keep_at_most(n: int) -> LayerContext:
    """A context whose trigger is ``n`` messages."""
    budget = Budget(PER_MESSAGE * n + 1, reserve=0, trigger_ratio=1.0, target_ratio=1.0)
    assert budget.trigger == PER_MESSAGE * n + 1
    return LayerContext(PerMessage(), config(), budget)


def window(msgs: list[Message], n: int) -> tuple[Message, ...]:
    return sliding_window(msgs, keep_at_most(n)).messages


def first_after_task(out: Sequence[Message]) -> Message | None:
    rest = [m for m in out if m.role != "system"][1:]
    return rest[0] if rest else None


# -- strands-agents: the sliding-window table ------------------------------------------------
U1, A1 = user("First message"), assistant("First response")
U2, A2 = user("Second message"), assistant("Second response")
CALL_A = assistant("", tool_calls=[call("123", "tool1")])
RES_A = tool_result("123", "result A")
CALL_B = assistant("", tool_calls=[call("456", "tool2")])
RES_B = tool_result("456", "result B")
FINAL = assistant("Final response")

TABLE = [
    # (case, history, at most n messages, expected)
    ("under the window, latest assistant", [U1, A1], 3, [U1, A1]),
    ("under the window, latest user", [U1], 2, [U1]),
    (
        "over: the oldest unit after the task goes (we keep the task)",
        [U1, A1, U2, A2],
        3,
        [U1, U2, A2],
    ),
    ("a tool pair across the cut goes whole", [U1, CALL_A, RES_A, FINAL], 3, [U1, FINAL]),
    (
        "a tool pair across the cut stays whole",
        [U1, CALL_A, RES_A, FINAL],
        4,
        [U1, CALL_A, RES_A, FINAL],
    ),
    (
        "several pairs: the older one goes",
        [U1, CALL_A, RES_A, CALL_B, RES_B, FINAL],
        4,
        [U1, CALL_B, RES_B, FINAL],
    ),
    (
        "several pairs: both go, never half of one",
        [U1, CALL_A, RES_A, CALL_B, RES_B, FINAL],
        3,
        [U1, FINAL],
    ),
    ("a dangling call at the end is removed", [U1, A1, U2, CALL_A], 10, [U1, A1, U2]),
]


@pytest.mark.parametrize(("case", "history", "n", "expected"), TABLE, ids=[t[0] for t in TABLE])
def test_strands_sliding_window_table(
    case: str, history: list[Message], n: int, expected: list[Message]
) -> None:
    out = window(history, n)
    assert list(out) == expected
    assert validity_problems(out) == []


def test_strands_history_opening_with_a_tool_result() -> None:
    """A history that starts with a tool result (its call was cut off earlier): that result is
    a unit of its own and is dropped first; nothing kept starts with a tool result."""
    history = [RES_A, CALL_B, RES_B, FINAL]
    out = window(history, 3)
    assert list(out) == [CALL_B, RES_B, FINAL]
    assert out[0].role != "tool"


def test_strands_dangling_call_with_text_keeps_the_text() -> None:
    ask = assistant("Let me check.", tool_calls=[call("999", "tool1")])
    out = window([U1, ask], 10)
    assert [m.text for m in out] == ["First message", "Let me check."]
    assert out[-1].tool_calls == ()


# -- LangChain summarization middleware: cutoff cases -----------------------------------------
def test_langchain_cut_on_a_tool_result_moves_to_its_call() -> None:
    """Where a message-count cut would land on a tool result, the unit is kept or dropped with
    its assistant message: never a result without its call."""
    history = [user("initial question"), CALL_A, RES_A, user("followup")]
    for n in range(1, 6):
        out = window(history, n)
        assert (CALL_A in out) == (RES_A in out), n
        assert validity_problems(out) == [], n


def test_langchain_orphan_result_never_starts_what_is_kept() -> None:
    orphan = tool_result("call2", "orphan result")
    history = [user("msg1"), CALL_A, RES_A, orphan, user("msg2")]
    for n in range(1, 6):
        out = window(history, n)
        first = first_after_task(out)
        assert first is None or first.role != "tool", n
        assert (orphan in out) == (CALL_A in out), n  # it travels with the unit before it

    lonely = [user("msg1"), assistant("ai_no_tools"), tool_result("orphan_call", "x"), user("msg2")]
    out = window(lonely, 2)
    assert list(out) == [lonely[0], lonely[3]]


def test_langchain_ten_parallel_calls_stay_together() -> None:
    calls = [call(f"call_{i}", f"tool_{i}") for i in range(10)]
    results = [tool_result(f"call_{i}", f"result_{i}") for i in range(10)]
    history = [user("calling 10 tools"), assistant("calling 10 tools", tool_calls=calls), *results]
    history += [user("thanks"), assistant("done")]
    for n in range(1, 16):
        out = window(history, n)
        kept = [m for m in out if m.role == "tool"]
        assert len(kept) in (0, 10), n
        assert validity_problems(out) == [], n


def test_langchain_pair_kept_even_if_that_keeps_more_than_asked() -> None:
    """Keeping an assistant with its results may keep more than a plain count would."""
    history = [
        user("H" * 300),
        assistant("A" * 200, tool_calls=[call("call-1", "test")]),
        tool_result("call-1", "T" * 50),
        user("H" * 180),
        user("H" * 160),
    ]
    out = window(history, 4)  # a count cut would keep [T, H, H] after the task
    assert list(out) == [history[0], history[3], history[4]]
    out = window(history, 5)
    assert list(out) == history


def test_langchain_nothing_to_drop_means_no_drop() -> None:
    """A single request over the budget with no older history: nothing is dropped (the newest
    unit is cut instead, and the result says so)."""
    c = LayerContext(
        _Chars(), config(), Budget(1_000, reserve=0, trigger_ratio=0.75, target_ratio=0.5)
    )
    only = [user("Current request " + lines(400))]
    result = sliding_window(only, c)
    assert len(result.messages) == 1 and result.newest_truncated
    assert result.messages[0].text.startswith("Current request")
    under = [user("hello"), assistant("hi")]
    assert sliding_window(under, c).messages == tuple(under)


class _Chars:
    name = "chars4"

    def count_text(self, text: str) -> int:
        return -(-len(text) // 4)

    def count_message(self, message: Message) -> int:
        return 4 + -(-message.char_count // 4)

    def count_messages(
        self, messages: Sequence[Message], *, tools: Sequence[Mapping[str, Any]] | None = None
    ) -> int:
        return 3 + sum(self.count_message(m) for m in messages)


# -- pi-mono compaction: a cut never lands on a tool result -------------------------------------
def test_pi_cut_points_in_a_tool_loop() -> None:
    """One user message, then a long tool loop: cuts fall mid-turn, at assistant messages."""
    history: list[Message] = [user("Turn 1")]
    for i in range(30):
        history += [assistant(f"A{i}", tool_calls=[call(f"t{i}")]), tool_result(f"t{i}", "r")]
    for n in (3, 5, 8, 13, 40, 61, 100):
        out = window(history, n)
        first = first_after_task(out)
        assert first is None or first.role == "assistant", n
        assert validity_problems(out) == [], n
    assert list(window(history, 100)) == history  # everything fits: nothing is cut


def test_pi_no_valid_cut_point_keeps_what_there_is() -> None:
    only = [assistant("a")]
    assert list(window(only, 1)) == only


def test_pi_anthropic_results_in_one_message_are_one_unit() -> None:
    calls = [call(f"p{i}") for i in range(3)]
    both = Message("tool", tuple(ToolResultBlock(c.id, "ok") for c in calls))
    history = [user("go"), assistant("", tool_calls=calls), both, assistant("next"), user("more")]
    out = window(history, 3)
    assert both not in out or history[1] in out
    assert validity_problems(out) == []


def test_pi_large_session_cuts_land_on_user_or_assistant(shared_data: Path) -> None:
    from contextwarden._tokens import get_counter
    from contextwarden._transcripts import load_transcript

    path = shared_data / "pi" / "large-session.jsonl"
    if not path.exists():
        pytest.skip(f"{path} not present")
    t = load_transcript(path)
    counter = get_counter(t.model)
    for size in (8_000, 20_000, 50_000, 100_000, 200_000):
        r = Warden(counter=counter).transform(t.messages, model=t.model, window=size)
        out = list(r.messages)
        assert any(e.kind in ("dropped", "context_compacted") for e in r.events) == (
            len(out) < len(t.messages)
        ), size
        # wherever the window cut, what follows is a user or assistant message: a tool
        # message only ever follows its assistant message (or another tool message)
        for i in range(1, len(out)):
            if out[i].role == "tool":
                assert out[i - 1].role in ("assistant", "tool"), (size, i)
        assert validity_problems(out) == [], size
        assert r.budget is not None and r.tokens_after <= r.budget.trigger, size
