"""Seed 000 L2: thinking only on the newest assistant message that has it, within provider rules."""

from __future__ import annotations

from histories import call, config, ctx

from contextwarden._messages import (
    Message,
    TextBlock,
    ThinkingBlock,
    assistant,
    tool_result,
    user,
)
from contextwarden.layers import strip_thinking


def think(text: str, i: int) -> ThinkingBlock:
    return ThinkingBlock(text, signature=f"sig-{i}")


def a(i: int, *, calls: bool = True, thinking: bool = True) -> Message:
    blocks: list[object] = [think(f"reasoning {i} " * 20, i)] if thinking else []
    blocks.append(TextBlock(f"answer {i}"))
    if calls:
        blocks.append(call(f"c{i}"))
    return Message("assistant", tuple(blocks))  # type: ignore[arg-type]


def test_previous_turns_lose_thinking_newest_keeps_it() -> None:
    msgs = [
        user("q1"),
        a(1, calls=False),
        user("q2"),
        a(2),
        tool_result("c2", "ok"),
        a(3, calls=False),
        user("q3"),
        a(4, calls=False),
    ]
    result = strip_thinking(msgs, ctx())
    out = result.messages
    assert out[7] is msgs[7]  # newest with thinking (and the current turn)
    for i in (1, 3, 5):
        assert not out[i].thinking and out[i].text == msgs[i].text
        assert out[i].tool_calls == msgs[i].tool_calls
    assert [e.index for e in result.events] == [1, 3, 5]
    assert all(e.kind == "thinking_stripped" and e.chars_after == 0 for e in result.events)


def test_tool_loop_in_progress_keeps_all_its_thinking() -> None:
    """Anthropic: thinking of the current assistant turn (after the last user message) stays."""
    msgs = [user("q1"), a(1, calls=False), user("q2")]
    for i in range(2, 8):
        msgs += [a(i), tool_result(f"c{i}", "ok")]
    out = strip_thinking(msgs, ctx()).messages
    assert not out[1].thinking
    assert out[3:] == tuple(msgs[3:])

    # without the protection only the newest keeps it
    off = strip_thinking(msgs, ctx(cfg=config(thinking={"keep_current_turn": False}))).messages
    kept = [i for i, m in enumerate(off) if m.thinking]
    assert kept == [len(msgs) - 2]


def test_one_user_message_agent_run_is_all_current_turn() -> None:
    msgs = [user("task")] + [m for i in range(5) for m in (a(i), tool_result(f"c{i}", "ok"))]
    result = strip_thinking(msgs, ctx())
    assert result.messages == tuple(msgs) and result.events == ()


def test_signed_and_redacted_blocks_go_whole_never_edited() -> None:
    redacted = ThinkingBlock("", redacted=True, data="opaque-payload")
    signed = think("secret reasoning", 7)
    old = Message("assistant", (redacted, signed, TextBlock("hi")))
    msgs = [user("q1"), old, user("q2"), a(2, calls=False), user("q3")]
    out = strip_thinking(msgs, ctx()).messages
    assert out[1].content == (TextBlock("hi"),)
    assert out[3].thinking == (think("reasoning 2 " * 20, 2),)  # kept byte for byte, signature too


def test_thinking_only_message_keeps_it_rather_than_becoming_empty() -> None:
    only = Message("assistant", (think("just thinking", 1),))
    msgs = [user("q1"), only, user("q2"), a(2, calls=False), user("q3")]
    out = strip_thinking(msgs, ctx()).messages
    assert out[1] is only


def test_keep_recent_n_and_pins() -> None:
    msgs = [m for i in range(6) for m in (user(f"q{i}"), a(i, calls=False))] + [user("last")]
    msgs[3] = msgs[3].replace(pinned=True)
    out = strip_thinking(msgs, ctx(cfg=config(thinking={"keep_recent": 2}))).messages
    assert [i for i, m in enumerate(out) if m.thinking] == [3, 9, 11]


def test_idempotent_disabled_and_pure() -> None:
    msgs = [m for i in range(4) for m in (user(f"q{i}"), a(i, calls=False))] + [user("next")]
    snapshot = list(msgs)
    once = strip_thinking(msgs, ctx()).messages
    assert msgs == snapshot
    assert strip_thinking(once, ctx()).messages == once
    off = strip_thinking(msgs, ctx(cfg=config(thinking={"enabled": False})))
    assert off.messages == tuple(msgs) and off.events == ()


def test_assistant_without_thinking_untouched() -> None:
    msgs = [user("q"), assistant("plain"), user("q2"), a(1, calls=False), user("q3")]
    out = strip_thinking(msgs, ctx()).messages
    assert out[1] is msgs[1]
