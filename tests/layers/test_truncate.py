"""Seed 004 L1: head + tail truncation of oversized tool output."""

from __future__ import annotations

import logging

import pytest
from histories import call, config, ctx
from pydantic import ValidationError

from contextwarden._messages import (
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    assistant,
    tool_result,
    user,
)
from contextwarden.layers import TruncateConfig, truncate_text, truncate_tool_output


def _text(n: int) -> str:
    # distinct characters at every position so head/tail slices are checkable
    return "".join(chr(ord("a") + (i % 26)) for i in range(n))


def test_exact_at_max_and_cut_at_max_plus_one() -> None:
    cfg = TruncateConfig()
    at_max = _text(cfg.max_chars)
    assert truncate_text(at_max, cfg) is at_max

    over = _text(cfg.max_chars + 1)
    out = truncate_text(over, cfg)
    omitted = cfg.max_chars + 1 - cfg.head_chars - cfg.tail_chars
    assert out == (
        over[: cfg.head_chars]
        + f"\n\n... [{omitted} characters truncated] ...\n\n"
        + over[-cfg.tail_chars :]
    )
    assert omitted == 46_001


@pytest.mark.parametrize("n", [50_001, 123_457, 1_000_000])
def test_marker_counts_exactly_the_characters_left_out(n: int) -> None:
    text = _text(n)
    out = truncate_text(text)
    head, rest = out.split("\n\n... [", 1)
    number, tail = rest.split(" characters truncated] ...\n\n", 1)
    assert head == text[:2000] and tail == text[-2000:]
    assert int(number) == n - 4000 == len(text) - len(head) - len(tail)


def test_only_tool_results_are_cut_and_input_is_untouched() -> None:
    big = _text(60_000)
    msgs = [
        user(big),
        assistant("", tool_calls=[call("c1", "read", '{"path": "' + "p" * 60_000 + '"}')]),
        tool_result("c1", big),
    ]
    snapshot = list(msgs)
    result = truncate_tool_output(msgs, ctx())
    assert msgs == snapshot and all(a is b for a, b in zip(msgs, snapshot, strict=True))
    out = result.messages
    assert out[0] is msgs[0] and out[1] is msgs[1]  # user text and call arguments untouched
    assert len(out[2].tool_results[0].text) == 4000 + len(
        "\n\n... [56000 characters truncated] ...\n\n"
    )
    assert msgs[2].tool_results[0].text == big  # the original value is unchanged


def test_block_results_cut_per_text_block_and_images_kept() -> None:
    image = ImageBlock({"type": "base64", "data": "xyz"})
    block = ToolResultBlock("c1", (TextBlock(_text(51_000)), image, TextBlock("small")))
    msgs = [assistant("", tool_calls=[call("c1")]), Message("tool", (block,))]
    out = truncate_tool_output(msgs, ctx()).messages[1].tool_results[0]
    assert isinstance(out.content, tuple)
    assert out.content[1] is image and out.content[2] == TextBlock("small")
    first = out.content[0]
    assert isinstance(first, TextBlock) and "[47000 characters truncated]" in first.text


def test_pinned_messages_are_never_cut() -> None:
    text = _text(70_000)
    msgs = [
        assistant("", tool_calls=[call("c1"), call("c2")]),
        tool_result("c1", text, pinned=True),
        tool_result("c2", "<Pin>decision</Pin>" + text),
    ]
    out = truncate_tool_output(msgs, ctx()).messages
    assert out[1] is msgs[1] and out[2] is msgs[2]


def test_events_name_the_tool_and_sizes_and_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    msgs = [
        user("task"),
        assistant("", tool_calls=[call("c1", "grep")]),
        tool_result("c1", _text(60_000)),
    ]
    with caplog.at_level(logging.WARNING, logger="contextwarden"):
        result = truncate_tool_output(msgs, ctx())
    (event,) = result.events
    assert (event.kind, event.layer, event.index, event.tool_name) == (
        "truncated",
        "truncate",
        2,
        "grep",
    )
    assert event.chars_before == 60_000 and event.chars_after == len(
        result.messages[2].tool_results[0].text
    )
    assert event.tokens_before is not None and event.tokens_after is not None
    assert event.tokens_after < event.tokens_before
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "grep" in caplog.records[0].getMessage()


def test_idempotent_and_disabled() -> None:
    msgs = [assistant("", tool_calls=[call("c1")]), tool_result("c1", _text(80_000))]
    once = truncate_tool_output(msgs, ctx()).messages
    twice = truncate_tool_output(once, ctx())
    assert twice.messages == once and twice.events == ()
    off = truncate_tool_output(msgs, ctx(cfg=config(truncate={"enabled": False})))
    assert off.messages == tuple(msgs) and off.events == ()


def test_config_must_leave_room_for_the_marker() -> None:
    with pytest.raises(ValidationError, match="max_chars"):
        TruncateConfig(max_chars=1000, head_chars=500, tail_chars=500)
    assert TruncateConfig(max_chars=1064, head_chars=500, tail_chars=500).max_chars == 1064


def test_rejects_non_messages_with_their_index() -> None:
    from contextwarden._exceptions import FormatError

    with pytest.raises(FormatError, match="message 1"):
        truncate_tool_output([user("x"), {"role": "user"}], ctx())  # type: ignore[list-item]
