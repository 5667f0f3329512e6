"""The litellm proxy hook, called as the litellm proxy calls it (real ``CustomLogger``,
``UserAPIKeyAuth`` and ``DualCache``), on chat and Responses requests."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest

pytest.importorskip("litellm", reason="litellm is not installed")

from litellm.caching.dual_cache import DualCache
from litellm.integrations.custom_logger import CustomLogger
from litellm.proxy._types import UserAPIKeyAuth

from contextwarden import count_tokens
from contextwarden.formats import from_openai, from_responses, validate_openai
from contextwarden.integrations.litellm import ContextWardenHook

TASK = "TASK: find why tests/test_io.py fails and fix src/io.py without editing the test."
WINDOW = 16_000


def body(k: int) -> str:
    return "\n".join(f"src/mod_{k}.py:{j}: total = compute({j}, {k * j})" for j in range(90))


def chat(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"role": "system", "content": "Be careful."},
        {"role": "user", "content": TASK},
    ]
    for k in range(n):
        call = {"id": f"c{k}", "type": "function", "function": {"name": "cat", "arguments": "{}"}}
        out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        out.append({"role": "tool", "tool_call_id": f"c{k}", "content": body(k)})
    return out


def call(hook: CustomLogger, data: dict[str, Any], call_type: str) -> Any:
    return asyncio.run(
        hook.async_pre_call_hook(UserAPIKeyAuth(api_key="sk-x"), DualCache(), data, call_type)
    )


def test_a_chat_request_is_trimmed_valid_within_the_window() -> None:
    hook = ContextWardenHook(window=WINDOW)
    data = {"model": "gpt-4o", "messages": chat(60), "temperature": 0, "metadata": {"team": "a"}}
    before = copy.deepcopy(data)
    out = call(hook, data, "acompletion")
    assert data == before  # the request litellm holds is not changed
    sent = out["messages"]
    assert validate_openai(sent) == []
    assert sent[1] == data["messages"][1]  # the task
    assert count_tokens(from_openai(sent), model="gpt-4o") <= WINDOW
    assert count_tokens(from_openai(data["messages"]), model="gpt-4o") > 4 * WINDOW
    assert {k: v for k, v in out.items() if k != "messages"} == {
        k: v for k, v in data.items() if k != "messages"
    }


def test_a_responses_request_is_trimmed_and_previous_response_id_left_alone() -> None:
    hook = ContextWardenHook(model="gpt-4o", window=WINDOW)
    items: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for k in range(60):
        items.append(
            {
                "type": "function_call",
                "call_id": f"c{k}",
                "name": "cat",
                "arguments": json.dumps({"k": k}),
            }
        )
        items.append({"type": "function_call_output", "call_id": f"c{k}", "output": body(k)})
    out = call(
        hook, {"model": "gpt-4o", "input": items, "instructions": "Be careful."}, "aresponses"
    )
    assert out["input"][0] == items[0]
    assert (
        count_tokens(from_responses(out["input"], instructions=out["instructions"]), model="gpt-4o")
        <= WINDOW
    )
    held = {"model": "gpt-4o", "input": items, "previous_response_id": "resp_1"}
    assert call(hook, held, "aresponses") is held


def test_an_unknown_alias_gets_the_lossless_layers() -> None:
    hook = ContextWardenHook()
    data = {"model": "my-team-alias", "messages": chat(30)}
    out = call(hook, data, "completion")
    assert validate_openai(out["messages"]) == []
    assert hook.last_result is not None
    assert hook.last_result.tokens_after < hook.last_result.tokens_before  # old outputs masked


def test_other_calls_pass_through() -> None:
    data = {"model": "text-embedding-3-small", "input": ["a", "b"]}
    assert call(ContextWardenHook(window=WINDOW), data, "aembedding") is data


def test_a_request_keeps_the_room_its_max_tokens_asks_for() -> None:
    """An agent's calls at a 32k window (DeepSeek's prices: a cut waits for the hard limit):
    the requests go past 26k while the reserve is fitted to the short replies; with
    ``max_tokens: 6000`` every request leaves those 6,000 tokens."""

    def loop(**extra: Any) -> list[int]:
        hook = ContextWardenHook(window=32_000)
        history = chat(28)
        sent = []
        for k in range(4, len(history) + 1, 2):  # system, task, then each call and its result
            data = {"model": "deepseek-v4-flash", "messages": history[:k], **extra}
            out = call(hook, data, "acompletion")
            sent.append(count_tokens(from_openai(out["messages"]), model="deepseek-v4-flash"))
        return sent

    assert max(loop()) > 26_000
    assert max(loop(max_tokens=6_000)) + 6_000 <= 32_000
