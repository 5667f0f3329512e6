"""The ADK callback in a real ``LlmAgent`` run (``InMemoryRunner``) whose ``Gemini`` model, with
the google-genai client, talks to a scripted Gemini server on loopback that checks every
request."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest

pytest.importorskip("google.adk.agents", reason="google-adk is not installed")

from google.adk.agents import LlmAgent
from google.adk.models import Gemini
from google.adk.models.llm_request import LlmRequest
from google.adk.runners import InMemoryRunner
from google.genai import types

from contextwarden import WardenConfig, count_tokens, from_openai
from contextwarden.integrations.adk import WardenCallback

from .fake_llm import FINAL, FakeLLM, file_body

WINDOW = 16_000
CALLS = 40
TASK = "Find why tests/test_io.py fails and fix src/io.py."
INSTRUCTION = "You are a coding agent."


def read_file(path: str) -> str:
    """Read a file of the repository."""
    return file_body(int(path.rsplit("_", 1)[1].split(".")[0]))


def as_openai(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A Gemini request as chat messages, to count its tokens the way the warden's budget does."""
    out: list[dict[str, Any]] = []
    pending: list[str] = []  # the Gemini API carries no call ids: responses answer in order
    for p in (body.get("systemInstruction") or {}).get("parts", []):
        out.append({"role": "system", "content": p["text"]})
    for c in body["contents"]:
        for p in c["parts"]:
            if "text" in p:
                role = "assistant" if c["role"] == "model" else "user"
                out.append({"role": role, "content": p["text"]})
            elif "functionCall" in p:
                fc = p["functionCall"]
                pending.append(f"g{len(out)}")
                call = {"name": fc["name"], "arguments": json.dumps(fc.get("args") or {})}
                out.append(
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [{"id": pending[-1], "type": "function", "function": call}],
                    }
                )
            elif "functionResponse" in p:
                fr = p["functionResponse"]
                content = json.dumps(fr["response"], ensure_ascii=False)
                call_id = pending.pop(0)
                out.append({"role": "tool", "tool_call_id": call_id, "content": content})
    return out


async def run_agent(fake: FakeLLM, callback: WardenCallback) -> tuple[str | None, list[Any]]:
    agent = LlmAgent(
        name="coder",
        model=Gemini(model="gemini-2.5-flash", base_url=fake.root),
        instruction=INSTRUCTION,
        tools=[read_file],
        before_model_callback=callback,
    )
    runner = InMemoryRunner(agent=agent, app_name="cw")
    session = await runner.session_service.create_session(app_name="cw", user_id="u")
    message = types.Content(role="user", parts=[types.Part(text=TASK)])
    final = None
    async for event in runner.run_async(user_id="u", session_id=session.id, new_message=message):
        for part in (event.content.parts or []) if event.content else []:
            final = part.text or final
    stored = await runner.session_service.get_session(
        app_name="cw", user_id="u", session_id=session.id
    )
    assert stored is not None
    return final, stored.events


def test_a_long_agent_run_is_cut_to_the_window_with_every_request_valid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "test-key")
    callback = WardenCallback(model="gemini-2.5-flash", window=WINDOW)
    with FakeLLM(calls=CALLS) as fake:
        final, events = asyncio.run(run_agent(fake, callback))

    assert final == FINAL
    assert len(fake.received) == CALLS + 1
    assert fake.invalid() == []  # every response in the turn after its call, none left out
    for r in fake.received:
        assert count_tokens(from_openai(as_openai(r.body)), model="gpt-4o") <= WINDOW
        assert r.body["contents"][0]["parts"][0]["text"] == TASK
        assert r.body["systemInstruction"]["parts"][0]["text"].startswith(INSTRUCTION)
    # the session keeps every event: the task, 40 calls and their whole outputs, the answer
    responses = [
        p.function_response.response
        for e in events
        for p in (e.content.parts or [] if e.content else [])
        if p.function_response is not None
    ]
    assert responses == [{"result": file_body(k)} for k in range(CALLS)]
    assert len(events) == 1 + 2 * CALLS + 1
    assert len(fake.received[-1].body["contents"]) < len(events)
    assert callback.last_result is not None
    assert callback.last_result.tokens_before > 4 * WINDOW
    assert callback.last_result.tokens_after <= WINDOW


def history(n: int) -> list[types.Content]:
    contents = [types.Content(role="user", parts=[types.Part(text=TASK)])]
    for k in range(n):
        call = types.FunctionCall(id=f"c{k}", name="read_file", args={"path": f"src/mod_{k}.py"})
        contents.append(types.Content(role="model", parts=[types.Part(function_call=call)]))
        result = types.FunctionResponse(
            id=f"c{k}", name="read_file", response={"result": file_body(k)}
        )
        contents.append(types.Content(role="user", parts=[types.Part(function_response=result)]))
    return contents


def test_the_request_is_replaced_not_the_contents_it_was_built_from() -> None:
    contents = history(20)
    before = copy.deepcopy(contents)
    request = LlmRequest(model="gemini-2.5-flash", contents=list(contents))
    callback = WardenCallback(window=WINDOW)
    assert asyncio.run(callback(None, request)) is None  # None: ADK goes on to call the model

    assert contents == before  # the session's contents and parts as they were
    sent = request.contents
    assert len(sent) < len(contents)
    assert sent[-1] is contents[-1]  # untouched: the session's very objects
    task, summary = sent[0].parts
    assert task is contents[0].parts[0]
    # what was cut is summarised in a new part of the first turn, with the reference to it
    assert "cw:" in (summary.text or "") and summary not in contents[0].parts
    assert callback.last_result is not None and callback.last_result.tokens_after <= WINDOW


def test_a_masked_output_keeps_its_calls_id_and_name() -> None:
    contents = history(20)
    request = LlmRequest(model="gemini-2.5-flash", contents=list(contents))
    lossless = {"compaction": {"enabled": False}, "window": {"enabled": False}}
    callback = WardenCallback(window=WINDOW, config=WardenConfig.model_validate(lossless))
    asyncio.run(callback(None, request))

    responses = [p.function_response for c in request.contents for p in c.parts or []]
    masked = [fr for fr in responses if fr is not None and "cw:" in fr.response["result"]]
    assert len(masked) >= 10
    for fr in masked:  # ADK's own shape, the call's id and name, a shortened output
        k = int(fr.id[1:])
        assert fr.name == "read_file" and fr.id == f"c{k}"
        assert fr.response["result"].startswith(file_body(k).splitlines()[0])
        assert len(fr.response["result"]) < len(file_body(k)) / 4


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="window must be a positive int, got 0"):
        WardenCallback(window=0)


ADK_SUMMARY = "ADK-EVENTS-SUMMARY: the agent read src/mod_0.py to src/mod_19.py."


def test_with_adks_events_compaction_both_apply_and_every_request_is_valid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two user turns of 20 tool calls each; ADK summarises the first turn's events after it
    ends (its own summary LLM), the callback fits every request of both turns to the window."""
    from collections.abc import AsyncGenerator

    from google.adk.apps.app import App, EventsCompactionConfig
    from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
    from google.adk.models import BaseLlm, LlmResponse

    class Summarizer(BaseLlm):
        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse, None]:
            part = types.Part(text=ADK_SUMMARY)
            yield LlmResponse(content=types.Content(role="model", parts=[part]))

    monkeypatch.setenv("GOOGLE_API_KEY", "test-key")
    callback = WardenCallback(model="gemini-2.5-flash", window=WINDOW)
    turn = 20

    async def main(fake: FakeLLM) -> list[Any]:
        agent = LlmAgent(
            name="coder",
            model=Gemini(model="gemini-2.5-flash", base_url=fake.root),
            instruction=INSTRUCTION,
            tools=[read_file],
            before_model_callback=callback,
        )
        compaction = EventsCompactionConfig(
            compaction_interval=1,
            overlap_size=0,
            summarizer=LlmEventSummarizer(llm=Summarizer(model="summary")),
        )
        app = App(name="cw", root_agent=agent, events_compaction_config=compaction)
        runner = InMemoryRunner(app=app)
        session = await runner.session_service.create_session(app_name="cw", user_id="u")
        for text in (TASK, "Now run the tests."):
            message = types.Content(role="user", parts=[types.Part(text=text)])
            async for _ in runner.run_async(
                user_id="u", session_id=session.id, new_message=message
            ):
                pass
        stored = await runner.session_service.get_session(
            app_name="cw", user_id="u", session_id=session.id
        )
        assert stored is not None
        return stored.events

    with FakeLLM(calls=2 * turn + 1, answers=frozenset({turn})) as fake:
        events = asyncio.run(main(fake))

    assert len(fake.received) == 2 * turn + 2
    assert fake.invalid() == []
    for r in fake.received:
        assert count_tokens(from_openai(as_openai(r.body)), model="gpt-4o") <= WINDOW
    # ADK put its summary of the first turn in the second turn's requests; the warden's cuts
    # come on top of it
    second = [json.dumps(r.body) for r in fake.received[turn + 1 :]]
    assert all(ADK_SUMMARY in body for body in second)
    assert ADK_SUMMARY not in json.dumps(fake.received[turn].body)
    # the session keeps every event, and ADK's compaction event beside them
    assert any(e.actions and e.actions.compaction for e in events)
    outputs = [
        p.function_response.response["result"]
        for e in events
        for p in (e.content.parts or [] if e.content else [])
        if p.function_response is not None
    ]
    assert len(outputs) == 2 * turn and outputs[0] == file_body(0)
