"""Properties of the pydantic-ai and ADK hooks on generated tool-call histories: whatever the
window, the copy is valid for the provider (every result right after its call, every call
answered), within the window, the history it was made from is unchanged, and what the warden left
alone is handed over as the caller's own object."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwarden import WardenConfig

#: histories: per turn, how many parallel calls and how many lines each output has
TURNS = st.lists(
    st.tuples(st.integers(1, 3), st.lists(st.integers(1, 400), min_size=3, max_size=3)),
    min_size=1,
    max_size=25,
)
WINDOWS = st.integers(6_000, 40_000)
# no summaries: the copies then hold the caller's own objects wherever nothing was masked
LOSSLESS_AND_CUTS = WardenConfig.model_validate({"compaction": {"enabled": False}})
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def marked(text: str) -> bool:
    """The text says where it was shortened: a masked output's reference, a cut's marker."""
    return any(mark in text for mark in ("cw:", "omitted", "truncated"))


def output(turn: int, call: int, lines: int) -> str:
    return "\n".join(f"out {turn}.{call} line {j}: value = {j * turn}" for j in range(lines))


@SETTINGS
@given(turns=TURNS, window=WINDOWS)
def test_pydantic_ai_copies(turns: list[tuple[int, list[int]]], window: int) -> None:
    pytest.importorskip("pydantic_ai.capabilities")
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    from contextwarden.integrations.pydantic_ai import ContextWarden

    history: list[Any] = [ModelRequest(parts=[UserPromptPart("Fix the failing test.")])]
    for t, (n, sizes) in enumerate(turns):
        calls = [ToolCallPart("read", {"k": c}, tool_call_id=f"t{t}c{c}") for c in range(n)]
        history.append(ModelResponse(parts=calls))
        returns = [
            ToolReturnPart("read", output(t, c, sizes[c]), tool_call_id=f"t{t}c{c}")
            for c in range(n)
        ]
        history.append(ModelRequest(parts=returns))
    before = copy.deepcopy(history)
    warden = ContextWarden(model="gpt-4o", window=window, config=LOSSLESS_AND_CUTS)
    sent = asyncio.run(warden(None, history))  # type: ignore[arg-type]

    assert history == before
    assert warden.last_result is not None and warden.last_result.tokens_after <= window
    assert isinstance(sent[0], ModelRequest) and isinstance(sent[-1], ModelRequest)
    for i, m in enumerate(sent):
        if i:
            assert type(m) is not type(sent[i - 1])
        if isinstance(m, ModelRequest):
            prev = sent[i - 1] if i else None
            called = {
                p.tool_call_id for p in getattr(prev, "parts", []) if isinstance(p, ToolCallPart)
            }
            returned = {p.tool_call_id for p in m.parts if isinstance(p, ToolReturnPart)}
            assert returned == called
    originals = [p for m in history for p in m.parts]
    for m in sent:
        for p in m.parts:
            if not any(p is q for q in originals):  # a copy: masked or cut, never invented
                assert isinstance(p, ToolReturnPart | UserPromptPart)
                assert isinstance(p, UserPromptPart) or marked(p.content)
    if not warden.last_result.newest_truncated:  # the newest output, whole, is the caller's
        assert sent[-1] is history[-1] or sent[-1].parts[-1] is history[-1].parts[-1]


@SETTINGS
@given(turns=TURNS, window=WINDOWS)
def test_adk_copies(turns: list[tuple[int, list[int]]], window: int) -> None:
    pytest.importorskip("google.adk.models.llm_request")
    from google.adk.models.llm_request import LlmRequest
    from google.genai import types

    from contextwarden.integrations.adk import WardenCallback

    contents = [types.Content(role="user", parts=[types.Part(text="Fix the failing test.")])]
    for t, (n, sizes) in enumerate(turns):
        calls = [
            types.Part(function_call=types.FunctionCall(id=f"t{t}c{c}", name="read", args={"k": c}))
            for c in range(n)
        ]
        contents.append(types.Content(role="model", parts=calls))
        results = [
            types.Part(
                function_response=types.FunctionResponse(
                    id=f"t{t}c{c}", name="read", response={"result": output(t, c, sizes[c])}
                )
            )
            for c in range(n)
        ]
        contents.append(types.Content(role="user", parts=results))
    before = copy.deepcopy(contents)
    request = LlmRequest(model="gemini-2.5-flash", contents=list(contents))
    callback = WardenCallback(window=window, config=LOSSLESS_AND_CUTS)
    asyncio.run(callback(None, request))
    sent = request.contents

    assert contents == before
    assert callback.last_result is not None and callback.last_result.tokens_after <= window
    assert sent[0].role == "user" and sent[-1].role == "user"
    for i, c in enumerate(sent):
        if i:
            assert c.role != sent[i - 1].role
        ids = [p.function_response.id for p in c.parts or [] if p.function_response]
        if c.role == "user" and i:
            called = [p.function_call.id for p in sent[i - 1].parts or [] if p.function_call]
            assert sorted(ids) == sorted(called)
    originals = [p for c in contents for p in c.parts or []]
    for c in sent:
        for p in c.parts or []:
            if not any(p is q for q in originals):  # a copy: masked or cut, never invented
                fr = p.function_response
                assert fr is not None and fr.id and fr.name == "read"
                assert marked(fr.response["result"])
    if not callback.last_result.newest_truncated:  # the newest output, whole, is the caller's
        assert sent[-1] is contents[-1] or sent[-1].parts[-1] is contents[-1].parts[-1]
