"""The CrewAI hooks in a real ``Crew.kickoff()`` whose LLM (CrewAI's own OpenAI client) talks to
a scripted OpenAI-compatible server on loopback that checks every request."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("crewai.hooks", reason="crewai is not installed (make test-crewai)")

from crewai import LLM, Agent, Crew, Task
from crewai.tools import tool

from contextwarden import count_tokens, from_openai
from contextwarden.integrations.crewai import WardenHooks

from .fake_llm import FINAL, FakeLLM, file_body

WINDOW = 16_000
CALLS = 40
TASK = "Find why tests/test_io.py fails and fix src/io.py."


@tool("read_file")
def read_file(path: str) -> str:
    """Read a file of the repository."""
    return file_body(int(path.rsplit("_", 1)[1].split(".")[0]))


@pytest.fixture(autouse=True)
def quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """No telemetry, tracing or first-run prompts from a test."""
    for name in ("CREWAI_DISABLE_TELEMETRY", "CREWAI_DISABLE_TRACKING", "OTEL_SDK_DISABLED"):
        monkeypatch.setenv(name, "true")
    monkeypatch.setenv("CREWAI_TRACING_ENABLED", "false")


@pytest.fixture
def hooks() -> Iterator[WardenHooks]:
    registered = WardenHooks(model="gpt-4o", window=WINDOW).register()
    yield registered
    registered.unregister()


def crew_for(fake: FakeLLM, history: list[dict[str, Any]] | None = None) -> tuple[Agent, Crew]:
    llm = LLM(model="openai/gpt-4o", base_url=fake.base_url, api_key="sk-test")
    agent = Agent(
        role="coder",
        goal="fix the failing test",
        backstory="You are a coding agent.",
        llm=llm,
        tools=[read_file],
        max_iter=4 * CALLS,
    )
    task = Task(description=TASK, expected_output="the fix", agent=agent)
    return agent, Crew(agents=[agent], tasks=[task])


def tokens(body: dict[str, Any]) -> int:
    return count_tokens(from_openai(body["messages"]), model="gpt-4o", tools=body.get("tools"))


def test_a_long_crew_run_is_cut_to_the_window_with_every_request_valid(
    hooks: WardenHooks,
) -> None:
    with FakeLLM(calls=CALLS) as fake:
        agent, crew = crew_for(fake)
        out = crew.kickoff()

    assert out.raw == FINAL
    assert len(fake.received) == CALLS + 1
    assert fake.invalid() == []  # tool results beside their calls, no call unanswered
    for r in fake.received:
        assert tokens(r.body) <= WINDOW
        assert any(TASK in str(m.get("content")) for m in r.body["messages"][:3])
    last = fake.received[-1].body["messages"]
    # the executor keeps every message: system, task, 40 calls, 40 whole outputs, the answer
    kept = agent.agent_executor.messages
    assert len(kept) == 2 + 2 * CALLS + 1
    outputs = [m["content"] for m in kept if m["role"] == "tool"]
    assert outputs == [file_body(k) for k in range(CALLS)]
    assert count_tokens(from_openai(kept), model="gpt-4o") > 4 * WINDOW
    assert len(last) < len(kept)
    assert hooks.last_result is not None and hooks.last_result.tokens_after <= WINDOW


def test_the_callers_messages_are_not_touched_and_unedited_dicts_are_handed_over() -> None:
    hooks = WardenHooks(model="gpt-4o", window=WINDOW)
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    history.append({"role": "user", "content": TASK})
    for k in range(20):
        call = {
            "id": f"c{k}",
            "type": "function",
            "function": {"name": "read_file", "arguments": "{}"},
        }
        history.append({"role": "assistant", "content": None, "tool_calls": [call]})
        history.append({"role": "tool", "tool_call_id": f"c{k}", "content": file_body(k)})
    before = copy.deepcopy(history)

    class Context:  # what CrewAI hands a hook: the executor, its message list, its LLM
        def __init__(self) -> None:
            self.executor = object()
            self.messages = list(history)
            self.llm = None

    context = Context()
    hooks.before_llm_call(context)
    sent = list(context.messages)
    assert history == before  # the caller's list and dicts as they were
    assert len(sent) < len(history)
    assert sent[0] is history[0] and sent[1] is history[1]
    assert sent[-1] is history[-1]  # the newest result, untouched, is the very dict
    # the model answered; the executor appends the reply: the hook gives back the whole list
    context.messages.append({"role": "assistant", "content": FINAL})
    hooks.after_llm_call(context)
    assert context.messages == [*before, {"role": "assistant", "content": FINAL}]


def test_bad_input_is_named() -> None:
    hooks = WardenHooks(model="gpt-4o", window=WINDOW)

    class Context:
        executor = None
        messages: list[Any] = [{"role": "user", "content": TASK}, "not a message"]
        llm = None

    with pytest.raises(TypeError, match="message 1: expected a dict, got str"):
        hooks.before_llm_call(Context())
    with pytest.raises(ValueError, match="window must be a positive int"):
        WardenHooks(window=-1)
