"""Seed 000 L3 / seed 004 L2: the sliding window drops whole units, oldest first."""

from __future__ import annotations

from histories import CharCounter, agent_run, call, config, ctx, lines, validity_problems

from contextwarden._messages import Message, ToolResultBlock, assistant, system, tool_result, user
from contextwarden.layers import sliding_window
from contextwarden.layers.base import LayerContext


def tokens(c: LayerContext, msgs: tuple[Message, ...] | list[Message]) -> int:
    return c.request_tokens(msgs)


def test_under_the_trigger_nothing_changes() -> None:
    msgs = agent_run(5)
    c = ctx(window=100_000)
    result = sliding_window(msgs, c)
    assert all(a is b for a, b in zip(result.messages, msgs, strict=True))
    assert result.events == () and not result.newest_truncated


def test_no_budget_or_disabled_means_no_change() -> None:
    msgs = agent_run(50)
    assert sliding_window(msgs, ctx()).messages == tuple(msgs)
    off = ctx(window=1000, cfg=config(window={"enabled": False}))
    assert sliding_window(msgs, off).messages == tuple(msgs)


def test_one_user_message_then_300_tool_calls() -> None:
    """The usual agent shape; user-turn based trimming keeps nothing useful here."""
    msgs = agent_run(300, result_chars=800)
    c = ctx(window=20_000)
    assert c.budget is not None
    assert tokens(c, msgs) > c.budget.trigger
    result = sliding_window(msgs, c)
    out = result.messages
    assert out[0] is msgs[0] and out[1] is msgs[1]  # system and task
    assert out[-2:] == tuple(msgs[-2:])  # the newest unit
    assert tokens(c, out) <= c.budget.trigger
    assert out[2].role == "assistant"  # the cut never lands on a tool result
    assert validity_problems(out) == []
    # it keeps as much as fits: one more unit would not
    dropped = len(msgs) - len(out)
    assert dropped % 2 == 0
    restored = list(msgs[:2]) + list(msgs[2 + dropped - 2 :])
    assert tokens(c, restored) > c.budget.trigger
    # one event per dropped unit, oldest first, naming the tool
    assert [e.index for e in result.events] == list(range(2, 2 + dropped, 2))
    assert all(e.kind == "dropped" and e.tool_name == "bash" for e in result.events)
    assert all(e.tokens_after == 0 and e.tokens_before for e in result.events)


def test_parallel_calls_are_dropped_or_kept_together() -> None:
    msgs: list[Message] = [user("task")]
    for u in range(6):
        calls = [call(f"u{u}c{i}") for i in range(10)]
        msgs.append(assistant(f"batch {u}", tool_calls=calls))
        msgs.extend(tool_result(c.id, lines(10, tag=c.id)) for c in calls)
    c = ctx(window=5_000)
    assert c.budget is not None and tokens(c, msgs) > c.budget.trigger
    out = sliding_window(msgs, c).messages
    kept_calls = {b.id for m in out for b in m.tool_calls}
    kept_results = {b.tool_call_id for m in out for b in m.tool_results}
    assert kept_calls == kept_results and kept_calls
    assert len(kept_calls) % 10 == 0 and len(kept_calls) < 60
    assert validity_problems(out) == []


def test_system_task_and_pins_survive_everything() -> None:
    msgs = agent_run(40, result_chars=1500)
    msgs[10] = msgs[10].replace(pinned=True)  # an old assistant message
    msgs[21] = tool_result("c9", "<Pin>the user wants tabs</Pin>\n" + lines(10))
    msgs.insert(30, user("<Pin>remember: deploy on friday</Pin>"))
    c = ctx(window=6_000)
    out = sliding_window(msgs, c).messages
    for kept in (msgs[0], msgs[1], msgs[10], msgs[11], msgs[20], msgs[21], msgs[30]):
        assert kept in out  # pinned units keep their call/result partner too
    assert validity_problems(out) == []
    assert c.budget is not None and tokens(c, out) <= c.budget.trigger


def test_newest_unit_alone_over_is_cut_not_dropped() -> None:
    msgs = agent_run(3) + [
        assistant("reading", tool_calls=[call("big", "read")]),
        tool_result("big", lines(3000, tag="huge")),
    ]
    c = ctx(window=8_000)
    result = sliding_window(msgs, c)
    out = result.messages
    assert result.newest_truncated
    assert c.budget is not None and tokens(c, out) <= c.budget.trigger
    assert out[:2] == tuple(msgs[:2]) and out[-2] is msgs[-2]
    cut = out[-1].tool_results[0].text
    assert "characters truncated] ..." in cut and cut.startswith("huge 0 ")
    kinds = [e.kind for e in result.events]
    assert kinds.count("newest_truncated") == 1 and kinds[-1] == "newest_truncated"
    assert validity_problems(out) == []
    # idempotent: the cut output is left alone
    assert sliding_window(out, c).messages == out


def test_huge_task_and_system_stay_even_if_that_cannot_fit() -> None:
    msgs = [system("S" * 40_000), user("T" * 40_000)] + agent_run(5, with_system=False)[1:]
    c = ctx(window=8_000)
    result = sliding_window(msgs, c)
    assert result.messages[0] is msgs[0] and result.messages[1] is msgs[1]
    assert validity_problems(result.messages) == []


def test_tools_count_against_the_budget() -> None:
    msgs = agent_run(30, result_chars=1000)
    tools = [{"type": "function", "function": {"name": "bash", "description": "d" * 8000}}]
    plain = sliding_window(msgs, ctx(window=12_000)).messages
    with_tools = sliding_window(msgs, ctx(window=12_000, tools=tools))
    assert len(with_tools.messages) < len(plain)
    c = ctx(window=12_000, tools=tools)
    assert c.budget is not None and tokens(c, with_tools.messages) <= c.budget.trigger


def test_orphan_and_out_of_order_results_stay_with_their_unit() -> None:
    msgs = [
        user("task"),
        tool_result("ghost", "orphan result " * 200),  # joins the task's unit
        assistant("a", tool_calls=[call("x1")]),
        user("interjection " * 100),
        tool_result("x1", "late " * 300),  # answers the call before the user message
        assistant("b", tool_calls=[call("x2")]),
        tool_result("x2", "r " * 300),
        assistant("done"),
    ]
    c = ctx(window=1_600)
    out = sliding_window(msgs, c).messages
    ids = [m.tool_results[0].tool_call_id for m in out if m.role == "tool"]
    calls = [b.id for m in out for b in m.tool_calls]
    assert ("x1" in ids) == ("x1" in calls)  # the merged unit went (or stayed) as a whole
    assert "ghost" in ids  # kept with the task


def test_drop_into_recent_messages_warns_once() -> None:
    msgs = agent_run(15, result_chars=3000)
    c = ctx(window=3_000)
    result = sliding_window(msgs, c)
    warnings = [e for e in result.events if e.kind == "warning"]
    assert len(warnings) == 1 and "most recent" in warnings[0].detail


def test_pure_and_idempotent() -> None:
    msgs = agent_run(80, result_chars=900)
    snapshot = list(msgs)
    c = ctx(window=10_000)
    out = sliding_window(msgs, c).messages
    assert msgs == snapshot and all(a is b for a, b in zip(msgs, snapshot, strict=True))
    again = sliding_window(out, ctx(window=10_000))
    assert again.messages == out and again.events == ()


def test_anthropic_shaped_unit_with_text_riding_along() -> None:
    calls = [call(f"p{i}") for i in range(4)]
    tool_msg = Message(
        "tool",
        tuple(ToolResultBlock(cl.id, lines(30)) for cl in calls) + (),
    )
    msgs = [user("task")] + [assistant("go", tool_calls=calls), tool_msg] * 1
    msgs += agent_run(20, with_system=False)[1:]
    out = sliding_window(msgs, ctx(window=4_000)).messages
    assert validity_problems(out) == []
    assert CharCounter().count_messages(out) > 0
