"""HistoryIndex: units, positions from the end, and what an append can change."""

from __future__ import annotations

from histories import call, histories
from hypothesis import given
from hypothesis import strategies as st

from contextwarden._messages import (
    Message,
    ToolResultBlock,
    assistant,
    system,
    tool_result,
    user,
)
from contextwarden.layers.units import HistoryIndex, index_of
from contextwarden.strategies.base import Layout


def test_units_of_a_small_history() -> None:
    msgs = [
        system("s"),
        user("task"),
        assistant("", tool_calls=[call("a"), call("b")]),
        tool_result("a", "1"),
        tool_result("b", "2"),
        user("more"),
        assistant("done"),
    ]
    index = HistoryIndex()
    index.extend(msgs, 0)
    assert index.spans() == [(0, 1), (1, 2), (2, 5), (5, 6), (6, 7)]
    assert index.unit_keep == [True, True, False, False, False]
    assert index.task == 1 and index.last_user == 5
    assert index.names == [(), (), (), ("bash",), ("bash",), (), ()]


def test_a_late_result_merges_the_units_in_between() -> None:
    msgs = [
        user("task"),
        assistant("", tool_calls=[call("x")]),
        user("meanwhile"),
        tool_result("x", "late"),
        assistant("ok"),
    ]
    index = HistoryIndex()
    index.extend(msgs[:3], 0)
    assert index.spans() == [(0, 1), (1, 2), (2, 3)]
    index.extend(msgs, 3)
    assert index.spans() == [(0, 1), (1, 4), (4, 5)]


def test_pins_keep_their_unit_and_leading_tool_message_is_its_own_unit() -> None:
    msgs = [
        tool_result("ghost", "x"),
        user("task"),
        assistant("", tool_calls=[call("a")]),
        tool_result("a", "<Pin>keep</Pin>"),
    ]
    index = HistoryIndex()
    index.extend(msgs, 0)
    assert index.spans() == [(0, 1), (1, 2), (2, 4)]
    # everything up to the task is kept (what a client sends before the task stays)
    assert index.unit_keep == [True, True, True]


def test_old_results_counts_blocks_from_the_end() -> None:
    results = tuple(ToolResultBlock(f"c{i}", "r") for i in range(4))
    msgs = [
        user("t"),
        assistant("", tool_calls=[call(f"c{i}") for i in range(4)]),
        Message("tool", results),
        assistant("", tool_calls=[call("d")]),
        tool_result("d", "r"),
    ]
    index = HistoryIndex(keep_results=3)
    index.extend(msgs, 0)
    assert index.old_results(2, 4) == 2 and index.old_results(4, 1) == 0
    assert HistoryIndex(keep_results=0).old_results(2, 4) == 4


@given(histories(), st.data())
def test_extending_equals_building_fresh(msgs: list[Message], data: st.DataObject) -> None:
    keep_results = data.draw(st.integers(0, 8))
    keep_thinking = data.draw(st.integers(0, 3))
    cut = data.draw(st.integers(0, len(msgs)))
    fresh = index_of(msgs, keep_results=keep_results, keep_thinking=keep_thinking)
    inc = index_of(msgs[:cut], keep_results=keep_results, keep_thinking=keep_thinking)
    inc.extend(msgs, cut)
    for attr in (
        "unit_starts",
        "unit_keep",
        "names",
        "task",
        "last_user",
        "n",
        "results",
        "result_blocks",
        "thinking",
        "call_at",
        "result_at",
    ):
        assert getattr(inc, attr) == getattr(fresh, attr), attr
    for i in range(len(msgs)):
        count = len(fresh.names[i])
        assert inc.old_results(i, count) == fresh.old_results(i, count)
        for turn in (True, False):
            assert inc.thinking_is_old(i, keep_current_turn=turn) == fresh.thinking_is_old(
                i, keep_current_turn=turn
            )


def test_a_task_that_moves_after_the_examples_moves_what_is_kept() -> None:
    """aider's opening: its repository map, worked examples, the reset message, then the real
    task. Built message by message, the index first takes the example for the task, then moves
    it; what it keeps is then what a fresh index (and the compaction layout) keeps."""
    msgs = [
        system("You are aider."),
        user("Here are summaries of some files present in my git repository:\nsrc/a.py"),
        assistant("Ok."),
        user("Change get_factorial() to use math.factorial"),
        assistant("Here is the edit."),
        user("I switched to a new code base. Please don't consider the above files."),
        assistant("Ok."),
        user("Fix the parser bug in src/parse.py"),
        *[m for k in range(12) for m in (assistant(f"step {k}"), user(f"result {k}"))],
    ]
    inc = HistoryIndex()
    for n in range(1, len(msgs) + 1):
        inc.extend(msgs[:n], n - 1)
    fresh = HistoryIndex()
    fresh.extend(msgs, 0)
    assert inc.task == fresh.task == 7
    assert inc.unit_keep == fresh.unit_keep
    example = inc.unit_of(3)
    assert not inc.unit_keep[example]  # the example run may go; the real task stays
    assert inc.unit_keep[inc.unit_of(7)]
    layout = Layout.of(msgs)
    assert set(layout.protected) == {
        s for (s, _), k in zip(inc.spans(), inc.unit_keep, strict=True) if k
    }
    assert example in inc.droppable()
