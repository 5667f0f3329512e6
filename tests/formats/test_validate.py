"""Validators: valid requests pass, each kind of breakage is reported with its index."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from contextwarden import Message, TextBlock, ToolCallBlock, assistant, tool_result, user
from contextwarden.formats import (
    check_messages,
    from_anthropic,
    from_openai,
    validate_anthropic,
    validate_openai,
)

from .providers import anthropic_requests, openai_conversations


def _call(cid: str, name: str = "f") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}


# -- properties ------------------------------------------------------------------------------------
@settings(max_examples=50, deadline=None)
@given(openai_conversations(exotic=True), st.data())
def test_openai_valid_passes_and_a_dropped_tool_message_is_caught(
    d: list[dict[str, Any]], data: st.DataObject
) -> None:
    assert validate_openai(d) == []
    assert check_messages(from_openai(d)) == []
    tools = [i for i, m in enumerate(d) if m["role"] == "tool"]
    assume(tools)
    i = data.draw(st.sampled_from(tools))
    broken = d[:i] + d[i + 1 :]
    cid = d[i]["tool_call_id"]
    assert any(repr(cid) in p for p in validate_openai(broken))
    assert any(repr(cid) in p for p in check_messages(from_openai(broken)))


@settings(max_examples=50, deadline=None)
@given(anthropic_requests(exotic=True), st.data())
def test_anthropic_valid_passes_and_a_dropped_result_is_caught(
    req: tuple[Any, list[dict[str, Any]]], data: st.DataObject
) -> None:
    sys_, d = req
    assert validate_anthropic(sys_, d) == []
    assert check_messages(from_anthropic(d, system=sys_)) == []
    spots = [
        (i, j)
        for i, m in enumerate(d)
        if isinstance(m["content"], list)
        for j, b in enumerate(m["content"])
        if b["type"] == "tool_result"
    ]
    assume(spots)
    i, j = data.draw(st.sampled_from(spots))
    cid = d[i]["content"][j]["tool_use_id"]
    broken = [dict(m) for m in d]
    broken[i]["content"] = [b for k, b in enumerate(d[i]["content"]) if k != j]
    problems = validate_anthropic(sys_, broken)
    assert any(repr(cid) in p for p in problems)


# -- canonical -------------------------------------------------------------------------------------
def test_check_messages_reports_each_problem() -> None:
    c1, c2 = ToolCallBlock("c1", "f"), ToolCallBlock("c2", "g")
    msgs = [
        user("go"),
        assistant(tool_calls=[c1, c2]),
        tool_result("c1", "ok"),
        user("interrupt"),  # c2 never answered
        tool_result("c2", "late"),  # ... and answered too late
        tool_result("zz", "orphan"),
        Message("user", (TextBlock(""),)),
        assistant(tool_calls=[c1]),  # id reused
    ]
    problems = check_messages(msgs)
    assert "message 1: tool call 'c2' (g) is not answered before message 3" in problems
    assert any("message 4: tool result 'c2'" in p and "after other messages" in p for p in problems)
    assert "message 5: tool result 'zz' has no tool call before it" in problems
    assert "message 6 (user): empty content" in problems
    assert "message 7: tool call id 'c1' already used by message 1" in problems


def test_check_messages_pending_tail_and_split_turns() -> None:
    c1 = ToolCallBlock("c1", "f")
    cut = [user("go"), assistant(tool_calls=[c1])]
    assert check_messages(cut) == ["message 1: tool call 'c1' (f) is not answered by the end"]
    assert check_messages(cut, allow_pending=True) == []
    split = [user("go"), assistant(tool_calls=[c1]), assistant("and"), tool_result("c1", "x")]
    assert check_messages(split) == []
    assert check_messages([user("go"), Message("assistant")]) == []  # an empty prefill


# -- OpenAI ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("d", "expected"),
    [
        ([], "messages: the list is empty"),
        ([{"role": "exit", "content": "x"}], "message 0: unknown role 'exit'"),
        ([{"role": "user", "content": ""}], "message 0 (user): empty content"),
        (
            [{"role": "assistant", "content": None}],
            "message 0 (assistant): no content and no tool calls",
        ),
        (
            [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [_call("a")]}],
            "message 1: tool call 'a' has no tool message after it",
        ),
        (
            [
                {"role": "user", "content": "x"},
                {"role": "assistant", "tool_calls": [_call("a")]},
                {"role": "user", "content": "y"},
                {"role": "tool", "tool_call_id": "a", "content": "late"},
            ],
            "message 1: tool call 'a' has no tool message before message 2",
        ),
        (
            [
                {"role": "user", "content": "x"},
                {"role": "tool", "tool_call_id": "q", "content": "r"},
            ],
            "message 1 (tool): 'q' answers no tool call",
        ),
        (
            [{"role": "user", "content": "x"}, {"role": "function", "name": "f", "content": "r"}],
            "message 1 (function): no function_call before it",
        ),
        (
            [
                {"role": "user", "content": "x"},
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f"}}],
                },
                {"role": "tool", "tool_call_id": "a", "content": "r"},
            ],
            "message 1: tool_calls[0].function.arguments must be a string, got null",
        ),
    ],
)
def test_validate_openai_problems(d: list[dict[str, Any]], expected: str) -> None:
    assert expected in validate_openai(d)


def test_validate_openai_checks_tool_names_and_accepts_empty_tool_output() -> None:
    d = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": None, "tool_calls": [_call("a", "ls"), _call("b", "rm")]},
        {"role": "tool", "tool_call_id": "b", "content": ""},
        {"role": "tool", "tool_call_id": "a", "content": "ok"},
    ]
    assert validate_openai(d) == []
    tools = [{"type": "function", "function": {"name": "ls", "parameters": {}}}]
    assert validate_openai(d, tools=tools) == [
        "message 1: tool_calls[1] calls 'rm', which is not among the tools"
    ]


# -- Anthropic -------------------------------------------------------------------------------------
def _use(cid: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": cid, "name": "f", "input": {}}


def _result(cid: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": cid, "content": "r"}


@pytest.mark.parametrize(
    ("system", "d", "expected"),
    [
        (
            None,
            [{"role": "assistant", "content": "x"}],
            "message 0: the first message must have role 'user'",
        ),
        (
            None,
            [{"role": "user", "content": "x"}, {"role": "user", "content": "y"}],
            "message 1: two user messages in a row (roles must alternate)",
        ),
        (None, [{"role": "user", "content": ""}], "message 0 (user): empty content"),
        (
            None,
            [{"role": "user", "content": [{"type": "text", "text": ""}]}],
            "message 0: content[0]: empty text block",
        ),
        (
            None,
            [{"role": "user", "content": "x"}, {"role": "assistant", "content": [_use("a")]}],
            "message 1: tool_use 'a' is not answered by a following user message",
        ),
        (
            None,
            [
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": [_use("a")]},
                {"role": "user", "content": "thanks"},
            ],
            "message 1: tool_use 'a' is not answered in message 2",
        ),
        (
            None,
            [
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": [_use("a")]},
                {"role": "user", "content": [{"type": "text", "text": "t"}, _result("a")]},
            ],
            "message 2: content[1]: tool_result after other content (tool results come first)",
        ),
        (
            None,
            [{"role": "user", "content": [_result("a")]}],
            "message 0: content[0]: tool_result 'a' answers no tool_use of the previous assistant message",
        ),
        (
            None,
            [
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": [_use("a"), _result("a")]},
            ],
            "message 1: content[1]: tool_result outside a user message",
        ),
        (
            None,
            [
                {"role": "user", "content": "x"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "t"},
                        {"type": "text", "text": "a"},
                    ],
                },
            ],
            "message 1: content[0]: thinking block without its signature",
        ),
        (
            None,
            [{"role": "user", "content": "x"}, {"role": "assistant", "content": [_use("a.b")]}],
            "message 1: content[0].id must match [a-zA-Z0-9_-]+, got 'a.b'",
        ),
        (
            [{"type": "image"}],
            [{"role": "user", "content": "x"}],
            "system[0]: expected a text block",
        ),
        (
            None,
            [{"role": "tool", "content": "x"}],
            "message 0: role must be 'user', 'assistant' or 'system', got 'tool'",
        ),
    ],
)
def test_validate_anthropic_problems(system: Any, d: list[dict[str, Any]], expected: str) -> None:
    assert expected in validate_anthropic(system, d)


def test_validate_anthropic_allows_an_empty_final_prefill() -> None:
    d = [{"role": "user", "content": "x"}, {"role": "assistant", "content": ""}]
    assert validate_anthropic("s", d) == []


@given(anthropic_requests(exotic=True), anthropic_requests(), st.data())
def test_the_anthropic_check_resumed_from_its_memo_finds_what_a_whole_check_finds(
    request: tuple[Any, list[dict[str, Any]]], other: tuple[Any, list[dict[str, Any]]], data: Any
) -> None:
    """A conversation's successive requests (growing, cut, edited, a breakpoint moved, broken
    by another history's messages), checked with one memo: the problems a check of the whole
    request finds, each time."""
    system, messages = request
    pool = [*messages, *other[1], {"role": "user", "content": ""}, {"role": "assistant"}]
    memo: dict[str, Any] = {}
    body = list(messages)
    for _ in range(data.draw(st.integers(1, 6))):
        change = data.draw(st.integers(0, 3))
        if change == 0 and body:
            body = body[: data.draw(st.integers(0, len(body)))]
        elif change == 1:
            body = [*body, *data.draw(st.lists(st.sampled_from(pool), max_size=4))]
        elif change == 2 and body:
            at = data.draw(st.integers(0, len(body) - 1))
            body = [
                *body[:at],
                {**body[at], "cache_control": {"type": "ephemeral"}},
                *body[at + 1 :],
            ]
        else:
            body = [*messages, *body[len(messages) :]]
        assert validate_anthropic(system, body, memo) == validate_anthropic(system, body)
