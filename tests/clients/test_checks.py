"""The suite's own parts, without any client: the independent request checker flags what the
providers refuse, and the scripted upstream drives the SDK loops to their final answer with
valid requests and cache figures that follow the breakpoints."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from . import harness
from .checks import anthropic_problems, openai_problems, responses_problems

GOOD_ANTHROPIC: dict[str, Any] = {
    "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "task"}]},
        {"role": "system", "content": "environment"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "t", "signature": "s"},
                {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "a b",
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        },
    ],
}


def _broken(path: list[Any], value: Any) -> dict[str, Any]:
    body = copy.deepcopy(GOOD_ANTHROPIC)
    target: Any = body
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return body


_DELETE = object()


def test_valid_anthropic_request_passes() -> None:
    assert anthropic_problems(GOOD_ANTHROPIC) == []


@pytest.mark.parametrize(
    ("path", "value", "words"),
    [
        (["messages", 0, "role"], "assistant", "first turn"),
        (["messages", 3, "content", 0, "tool_use_id"], "toolu_9", "answers no call"),
        (["messages", 3, "content"], [{"type": "text", "text": "x"}], "not answered"),
        (["messages", 2, "content", 0, "signature"], "", "unsigned thinking"),
        (["messages", 1, "content"], "", "empty system message"),
        (["messages", 0, "content"], [], "empty user content"),
        (["messages", 2, "content", 1, "id"], "bad id!", "bad tool_use id"),
        (["messages", 1], {"role": "user", "content": "again"}, "two user turns"),
        (["messages", 3, "content", 0, "type"], "text", "empty text block"),
    ],
)
def test_anthropic_problems_found(path: list[Any], value: Any, words: str) -> None:
    found = anthropic_problems(_broken(path, value))
    assert any(words in p for p in found), found


def test_system_message_between_call_and_result_is_flagged() -> None:
    body = copy.deepcopy(GOOD_ANTHROPIC)
    body["messages"].insert(3, {"role": "system", "content": "late"})
    assert any("between tool_use" in p for p in anthropic_problems(body))


def test_more_than_four_breakpoints_flagged() -> None:
    body = copy.deepcopy(GOOD_ANTHROPIC)
    body["tools"] = [
        {"name": f"t{i}", "input_schema": {}, "cache_control": {"type": "ephemeral"}}
        for i in range(3)
    ]
    assert any("5 cache_control" in p for p in anthropic_problems(body))


def test_openai_pairing() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    good = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    assert openai_problems({"messages": good}) == []
    assert openai_problems({"messages": good[:2]}) == ["calls ['c1'] never answered"]
    orphan = [good[0], good[2]]
    assert any("answers no pending call" in p for p in openai_problems({"messages": orphan}))


def test_responses_pairing() -> None:
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "t"}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ]
    assert responses_problems({"input": items}) == []
    assert responses_problems({"input": items[:3]}) == ["call 'c1' has no output"]
    assert any("no earlier" in p for p in responses_problems({"input": [items[0], items[3]]}))
    assert any("reasoning" in p for p in responses_problems({"input": [items[0], items[1]]}))


def test_upstream_drives_the_sdk_loops_directly() -> None:
    for make in (harness.openai_sdk, harness.anthropic_sdk):
        run = make(6, None)
        assert run.finished, run.output
        assert run.invalid == []
        assert [r.step for r in run.main] == list(range(1, 8))
        assert run.missing_task() == []


def test_upstream_cache_follows_breakpoints() -> None:
    moving = harness.anthropic_sdk(6, None)
    fixed = harness.anthropic_sdk(6, None, moving_breakpoint=False)
    # the same conversation: the same tokens; a breakpoint on the newest message makes each
    # request read the previous one from the cache, one on the system prompt alone does not
    assert moving.tokens(moving.main) == fixed.tokens(fixed.main)
    assert moving.billed(moving.main) < 0.6 * fixed.billed(fixed.main)
    assert all(r.usage["cache_read_input_tokens"] > 0 for r in moving.main[1:])
