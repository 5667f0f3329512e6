"""The guarantee: the newest message is cut whatever its shape, or the overflow is raised."""

from __future__ import annotations

import json
from typing import Any

import pytest
from histories import agent_run, call, ctx, lines, validity_problems
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwarden import ContextOverflowError
from contextwarden._messages import (
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    assistant,
    system,
    tool_result,
    user,
)
from contextwarden.formats import to_anthropic
from contextwarden.layers import sliding_window, window
from contextwarden.layers.base import LayerContext
from contextwarden.layers.window import ensure_within


def guard(msgs: list[Message], c: LayerContext) -> tuple[Message, ...]:
    """The window, then the limit check (as the warden runs them)."""
    out = sliding_window(msgs, c).messages
    ensure_within(out, c)
    return out


def tokens(c: LayerContext, msgs: tuple[Message, ...] | list[Message]) -> int:
    return c.request_tokens(msgs)


def test_a_user_message_of_ten_thousand_small_parts_is_cut() -> None:
    parts = tuple(TextBlock(f"part {i} of the pasted log") for i in range(10_000))
    msgs = [*agent_run(3), Message("user", parts)]
    c = ctx(window=8_000)
    assert c.budget is not None and tokens(c, msgs) > 5 * c.budget.window
    result = sliding_window(msgs, c)
    assert result.newest_truncated and tokens(c, result.messages) <= c.budget.trigger
    newest = result.messages[-1]
    assert newest.role == "user" and len(newest.content) == 1
    assert newest.text.startswith("part 0 of") and newest.text.endswith(
        "part 9999 of the pasted log"
    )
    assert "characters truncated" in newest.text
    joined = [e for e in result.events if "joined" in e.detail]
    assert len(joined) == 1 and "10000 text parts" in joined[0].detail
    assert validity_problems(result.messages) == []


def test_a_tool_result_of_many_parts_is_cut_and_its_image_kept() -> None:
    from contextwarden._messages import ImageBlock

    image = ImageBlock({"type": "base64", "media_type": "image/png", "data": "AAAA"})
    parts = (*(TextBlock(f"row {i}: ok") for i in range(6_000)), image)
    msgs = [
        *agent_run(2),
        assistant("", tool_calls=[call("big", "query")]),
        Message("tool", (ToolResultBlock("big", parts),)),
    ]
    c = ctx(window=6_000)
    result = sliding_window(msgs, c)
    assert c.budget is not None and tokens(c, result.messages) <= c.budget.trigger
    (res,) = result.messages[-1].tool_results
    assert not isinstance(res.content, str)
    assert isinstance(res.content[0], TextBlock) and res.content[1] == image
    assert "characters truncated" in res.content[0].text
    assert validity_problems(result.messages) == []


def test_huge_tool_call_arguments_are_cut_inside_the_json() -> None:
    body = "\n".join(f"line {i} of the new file" for i in range(20_000))
    args = json.dumps({"path": "src/big.py", "content": body})
    msgs = [
        *agent_run(2),
        assistant("Writing it.", tool_calls=[call("w", "write", args)]),
        tool_result("w", "written"),
    ]
    c = ctx(window=8_000)
    result = sliding_window(msgs, c)
    assert c.budget is not None and tokens(c, result.messages) <= c.budget.trigger
    (cut,) = result.messages[-2].tool_calls
    value = json.loads(cut.arguments)  # still valid JSON
    assert value["path"] == "src/big.py" and "characters truncated" in value["content"]
    assert value["content"].startswith("line 0 of") and value["content"].endswith(
        "line 19999 of the new file"
    )
    assert any("arguments" in e.detail for e in result.events)
    # the call is still answerable and converts to an Anthropic tool_use with an object input
    _, anth = to_anthropic(result.messages)
    assert anth[-2]["content"][-1]["input"]["path"] == "src/big.py"


def test_arguments_that_are_not_json_are_cut_as_text() -> None:
    msgs = [
        *agent_run(1),
        assistant("", tool_calls=[call("r", "raw", "x" * 100_000)]),
        tool_result("r", "done"),
    ]
    c = ctx(window=4_000)
    result = sliding_window(msgs, c)
    assert c.budget is not None and tokens(c, result.messages) <= c.budget.trigger
    assert "characters truncated" in result.messages[-2].tool_calls[0].arguments


def test_a_system_prompt_over_the_window_raises_naming_tokens_and_limit() -> None:
    msgs = [system("You are careful. " * 5_000), user("hi")]  # ~21k tokens of system prompt
    c = ctx(window=8_000, reserve=1_000)
    with pytest.raises(ContextOverflowError) as info:
        guard(msgs, c)
    err = info.value
    assert err.limit == 7_000 and err.tokens is not None and err.tokens > 20_000
    assert "7,000" in str(err) and f"{err.tokens:,}" in str(err)


def test_a_pinned_newest_message_is_never_cut_so_it_overflows() -> None:
    msgs = [*agent_run(2), user("<Pin>" + lines(3_000) + "</Pin>")]
    with pytest.raises(ContextOverflowError):
        guard(msgs, ctx(window=8_000))


def test_huge_task_and_system_are_never_cut_so_the_overflow_is_raised() -> None:
    msgs = [system("S" * 40_000), user("T" * 40_000)] + agent_run(5, with_system=False)[1:]
    snapshot = list(msgs)
    c = ctx(window=8_000)
    out = sliding_window(msgs, c).messages  # the layer itself does what it can
    assert out[0] is msgs[0] and out[1] is msgs[1]
    with pytest.raises(ContextOverflowError) as info:
        ensure_within(out, c)
    assert info.value.limit == 8_000 and info.value.tokens == tokens(c, out)
    assert f"{info.value.tokens:,}" in str(info.value) and "8,000" in str(info.value)
    assert msgs == snapshot


def test_ensure_within_returns_the_tokens_and_needs_a_budget() -> None:
    msgs = agent_run(3)
    c = ctx(window=100_000)
    assert ensure_within(msgs, c) == tokens(c, msgs)
    assert ensure_within(msgs, c, 123) == 123
    assert ensure_within([system("x" * 10**6)], ctx()) > 0  # no budget: no limit


# -- property: within the limit, or the overflow is raised ---------------------------------------
@st.composite
def newest_shapes(draw: st.DrawFn) -> list[Message]:
    n = draw(st.integers(1, 3_000))
    size = draw(st.integers(1, 400))
    text = [TextBlock(f"{i}:" + "w" * size) for i in range(n)]
    kind = draw(st.sampled_from(["user_parts", "result_parts", "result_text", "args", "mixed"]))
    if kind == "user_parts":
        return [Message("user", tuple(text))]
    if kind == "result_parts":
        return [
            assistant("", tool_calls=[call("n", "read")]),
            Message("tool", (ToolResultBlock("n", tuple(text)),)),
        ]
    if kind == "result_text":
        return [assistant("", tool_calls=[call("n", "read")]), tool_result("n", "r" * n * size)]
    args = json.dumps({"items": [f"{i}" * size for i in range(n)], "note": "z" * (n * size)})
    done = tool_result("n", "ok")
    if kind == "args":
        return [assistant("", tool_calls=[ToolCallBlock("n", "write", args)]), done]
    return [Message("assistant", (*text[:50], ToolCallBlock("n", "write", args))), done]


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(newest_shapes(), st.integers(0, 30_000), st.sampled_from([4_000, 8_000, 32_000]))
def test_within_the_limit_or_overflow(
    newest: list[Message], system_chars: int, window: int
) -> None:
    msgs = [system("s" * system_chars), user("the task"), *newest]
    c = ctx(window=window, reserve=window // 8)
    assert c.budget is not None
    try:
        out = guard(msgs, c)
    except ContextOverflowError as err:
        assert err.tokens is not None and err.limit == c.budget.limit and err.tokens > err.limit
        # only when what is never cut is already near the limit on its own
        fixed = tokens(c, msgs[:2])
        assert fixed > c.budget.limit - 600
        return
    assert tokens(c, out) <= c.budget.limit


def test_overflow_error_without_a_message_names_tokens_and_limit() -> None:
    err = ContextOverflowError(tokens=12_345, limit=8_000)
    assert (err.tokens, err.limit) == (12_345, 8_000)
    assert str(err) == "the request needs 12,345 tokens, over the limit of 8,000"
    assert str(ContextOverflowError("custom", tokens=1, limit=0)) == "custom"


def test_huge_arguments_are_parsed_once_per_cut_not_per_search_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = "\n".join(f"line {i} of the new file" for i in range(20_000))
    args = json.dumps({"path": "src/big.py", "content": body})
    msgs = [
        *agent_run(2),
        assistant("Writing it.", tool_calls=[call("w", "write", args)]),
        tool_result("w", "written"),
    ]
    parsed: list[int] = []
    real = window._parsed_arguments

    def counting(arguments: str) -> object:
        parsed.append(len(arguments))
        return real(arguments)

    monkeypatch.setattr(window, "_parsed_arguments", counting)
    result = sliding_window(msgs, ctx(window=8_000))
    assert (
        "characters truncated" in json.loads(result.messages[-2].tool_calls[0].arguments)["content"]
    )
    # the candidates' listing, the cut's own parse, the result's length: not one per step of
    # the binary search for the longest cut that fits (about 17 for 500k characters)
    assert len([n for n in parsed if n >= len(args)]) <= 2


@pytest.mark.parametrize("kind", ["arguments", "parts"])
def test_a_newest_message_of_thousands_of_strings_is_counted_a_few_times(kind: str) -> None:
    """A newest message of 1,000 strings of 1,600 characters, over twice the window, with the
    exact o200k counter: a string whose bytes are fewer than what the request is still over by
    cannot bring it under, so it is cut to its shortest without counting the message again.
    The message is counted a few dozen times, not once per string (each count reads all of
    it), and the cut still lands within the trigger with every string kept in part."""
    from contextwarden import get_counter

    exact = get_counter("gpt-4o")
    counted: list[int] = []

    class Counting:
        def __getattr__(self, name: str) -> Any:
            return getattr(exact, name)

        def count_message(self, message: Message) -> int:
            counted.append(message.char_count)
            return exact.count_message(message)

    values = [f"{i:04d} " + "value text " * 145 for i in range(1_000)]
    if kind == "arguments":
        args = json.dumps({"path": "big.json", "items": values})
        newest = [assistant("", tool_calls=[call("w", "write", args)]), tool_result("w", "ok")]
    else:
        newest = [Message("user", tuple(TextBlock(v) for v in values))]
    msgs = [*agent_run(2), *newest]
    base = ctx(window=100_000)
    c = LayerContext(Counting(), base.config, base.budget, None)  # type: ignore[arg-type]
    assert c.budget is not None and tokens(c, msgs) > 2 * c.budget.window
    counted.clear()
    result = sliding_window(msgs, c)
    assert result.newest_truncated and tokens(c, result.messages) <= c.budget.trigger
    assert len([n for n in counted if n > 100_000]) < 100  # 1,000 strings
    cut = result.messages[-2] if kind == "arguments" else result.messages[-1]
    if kind == "arguments":
        kept = json.loads(cut.tool_calls[0].arguments)["items"]
    else:
        kept = [b.text for b in cut.content if isinstance(b, TextBlock)]
    assert [k[:4] for k in kept] == [f"{i:04d}" for i in range(1_000)]
