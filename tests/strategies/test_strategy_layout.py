"""The layout rules every strategy relies on: units, protected messages, refs, assembly."""

from __future__ import annotations

from contextwarden import Message, TextBlock
from contextwarden.strategies import StrategyOutcome, make_ref
from contextwarden.strategies.base import (
    HINT_RE,
    Layout,
    assemble,
    check_outcome,
    is_summary_message,
)
from contextwarden.testing import ConversationBuilder


def history() -> list[Message]:
    return (
        ConversationBuilder()
        .system("sys")
        .user("task: fix calc.py")
        .bash("ls", "a b")
        .parallel(
            [("bash", {"command": "cat a"}, "A", False), ("bash", {"command": "cat b"}, "B", False)]
        )
        .pin("never touch setup.py")
        .bash("pytest", "1 passed")
        .assistant("done")
        .build()
    )


def test_units_never_start_on_a_tool_result_and_keep_parallel_calls_together() -> None:
    msgs = history()
    layout = Layout.of(msgs)
    assert [msgs[s].role for s, _ in layout.units] == [
        "system",
        "user",
        "assistant",
        "assistant",
        "user",
        "assistant",
        "assistant",
    ]
    # the parallel call (assistant + two tool messages) is one unit
    assert (4, 7) in layout.units
    assert layout.task == 1


def test_protected_units_are_system_task_and_pins() -> None:
    msgs = history()
    layout = Layout.of(msgs)
    assert {msgs[s].role for s in layout.protected} == {"system", "user"}
    assert 7 in layout.protected  # the <Pin> message
    assert all(s not in layout.protected for s, _ in layout.body())


def test_body_excludes_the_newest_unit_unless_asked() -> None:
    layout = Layout.of(history())
    assert layout.units[-1] not in layout.body()
    assert layout.units[-1] in layout.body(keep_last=False)


def test_make_ref_is_stable_and_content_addressed() -> None:
    a, b = history(), history()
    assert make_ref(a[2:4]) == make_ref(b[2:4])
    assert make_ref(a[2:4]) != make_ref(a[4:7])
    assert make_ref(a[2:4]).startswith("cw:")


def test_assemble_puts_one_summary_where_the_span_was() -> None:
    msgs = history()
    outcome = StrategyOutcome("t", (2, 3, 4, 5, 6), summary="S")
    new = assemble(msgs, outcome, "<completed>\nx\n</completed>", "cw:1")
    assert [m.role for m in new] == [
        "system",
        "user",
        "user",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert is_summary_message(new[2])
    assert new[2].text.startswith("[Context summary: 5 earlier messages were compacted; ref cw:1]")
    assert new[3] is msgs[7]  # kept verbatim, same object


def test_rebuild_folds_the_hint_into_system_once() -> None:
    msgs = history()
    outcome = StrategyOutcome("full", (2, 3, 4, 5, 6), summary="S", rebuild=True)
    once = assemble(msgs, outcome, "S", "cw:1")
    assert "cw:1" in once[0].text and once[0].text.startswith("sys")
    again = assemble(once, StrategyOutcome("full", (2,), summary="S", rebuild=True), "S", "cw:2")
    assert again[0].text.count("[contextwarden:") == 1
    assert "cw:2" in again[0].text and "cw:1" not in again[0].text
    assert HINT_RE.sub("", again[0].text) == "sys"


def test_rebuild_without_text_block_appends_one() -> None:
    msgs = [Message("system", ()), *history()[1:]]
    new = assemble(msgs, StrategyOutcome("f", (2, 3), summary="S", rebuild=True), "S", "cw:9")
    assert isinstance(new[0].content[-1], TextBlock) and "cw:9" in new[0].text


def test_check_outcome_rejects_cuts_inside_a_unit_and_protected_messages() -> None:
    msgs = history()
    assert check_outcome(msgs, StrategyOutcome("t", (4, 5), summary="S")) is not None
    assert check_outcome(msgs, StrategyOutcome("t", (1,), summary="S")) is not None
    assert check_outcome(msgs, StrategyOutcome("t", (7,), summary="S")) is not None
    assert check_outcome(msgs, StrategyOutcome("t", (3, 2), summary="S")) is not None
    assert check_outcome(msgs, StrategyOutcome("t", (), summary="S")) is not None
    assert check_outcome(msgs, StrategyOutcome("t", (2, 3))) is not None  # nothing to write
    assert check_outcome(msgs, StrategyOutcome("t", (2, 3, 4, 5, 6), summary="S")) is None
