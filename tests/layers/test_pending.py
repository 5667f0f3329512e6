"""The pending layer: tool calls nothing answered at the very end of a history are removed."""

from __future__ import annotations

from histories import call, ctx, validity_problems

from contextwarden._messages import Message, TextBlock, ThinkingBlock, assistant, tool_result, user
from contextwarden.layers import drop_pending_calls


def test_a_trailing_call_only_message_goes() -> None:
    msgs = [user("task"), assistant("ok", tool_calls=[call("a")]), tool_result("a", "1")]
    msgs.append(assistant("", tool_calls=[call("b", "submit")]))
    assert validity_problems(msgs) != []
    result = drop_pending_calls(msgs, ctx())
    assert result.messages == tuple(msgs[:-1])
    (event,) = result.events
    assert (event.kind, event.layer, event.index, event.tool_name) == (
        "dropped",
        "pending",
        3,
        "submit",
    )
    assert event.tokens_after == 0 and validity_problems(result.messages) == []


def test_text_stays_answered_calls_stay() -> None:
    ask = assistant("Let me look.", tool_calls=[call("a", "read"), call("b", "grep")])
    msgs = [user("task"), ask, tool_result("a", "contents")]
    out = drop_pending_calls(msgs, ctx()).messages
    assert out[1].text == "Let me look." and [c.id for c in out[1].tool_calls] == ["a"]
    assert out[2] is msgs[2] and validity_problems(out) == []


def test_thinking_alone_does_not_keep_the_message() -> None:
    signed = ThinkingBlock("plan", signature="s")
    msgs = [user("task"), Message("assistant", (signed, call("x")))]
    assert drop_pending_calls(msgs, ctx()).messages == (msgs[0],)
    with_text = [user("task"), Message("assistant", (signed, TextBlock("hi"), call("x")))]
    assert drop_pending_calls(with_text, ctx()).messages[1].content == (signed, TextBlock("hi"))


def test_complete_histories_are_returned_as_they_are() -> None:
    msgs = [
        user("task"),
        assistant("", tool_calls=[call("a")]),
        tool_result("a", "1"),
        user("next"),
    ]
    result = drop_pending_calls(msgs, ctx())
    assert all(a is b for a, b in zip(result.messages, msgs, strict=True)) and result.events == ()
