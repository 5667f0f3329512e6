"""The pydantic-ai capability in real ``Agent`` runs against a scripted ``FunctionModel``."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

pytest.importorskip("pydantic_ai.capabilities", reason="pydantic-ai is not installed")

from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

from contextwarden import WardenConfig, count_tokens, from_openai
from contextwarden.integrations.pydantic_ai import ContextWarden

from .fake_llm import FINAL, FakeLLM, file_body

TASK = "TASK: find why tests/test_io.py fails and fix src/io.py without editing the test."
INSTRUCTIONS = "You are a coding agent."
WINDOW = 16_000
CALLS = 60
LIMITS = UsageLimits(request_limit=4 * CALLS)


def openai_dicts(messages: list[ModelMessage], instructions: str | None) -> list[dict[str, Any]]:
    """The request as an OpenAI chat body would carry it (what the tokens are counted on)."""
    out: list[dict[str, Any]] = []
    if instructions:
        out.append({"role": "system", "content": instructions})
    for m in messages:
        if isinstance(m, ModelResponse):
            calls = [
                {
                    "id": p.tool_call_id,
                    "type": "function",
                    "function": {"name": p.tool_name, "arguments": p.args_as_json_str()},
                }
                for p in m.parts
                if isinstance(p, ToolCallPart)
            ]
            text = "".join(p.content for p in m.parts if isinstance(p, TextPart))
            out.append({"role": "assistant", "content": text or None, "tool_calls": calls})
            continue
        for p in m.parts:
            if isinstance(p, ToolReturnPart):
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": p.tool_call_id,
                        "content": p.model_response_str(),
                    }
                )
            elif isinstance(p, RetryPromptPart | UserPromptPart | SystemPromptPart):
                text = p.model_response() if isinstance(p, RetryPromptPart) else p.content
                role = "system" if isinstance(p, SystemPromptPart) else "user"
                out.append({"role": role, "content": str(text)})
    for d in out:
        if not d.get("tool_calls", True):
            del d["tool_calls"]
    return out


def check_valid(messages: list[ModelMessage]) -> None:
    """Requests and responses alternate, from a request to a request; every call of a response
    is answered in the next request and every tool return answers a call of the response before."""
    assert isinstance(messages[0], ModelRequest) and isinstance(messages[-1], ModelRequest)
    for i, m in enumerate(messages):
        if i:
            assert type(m) is not type(messages[i - 1]), f"message {i}: two {type(m).__name__}s"
        if isinstance(m, ModelRequest):
            returned = {p.tool_call_id for p in m.parts if isinstance(p, ToolReturnPart)}
            prev = messages[i - 1] if i else None
            called = (
                {p.tool_call_id for p in prev.parts if isinstance(p, ToolCallPart)}
                if isinstance(prev, ModelResponse)
                else set()
            )
            assert returned == called, f"message {i}: returns {returned} for calls {called}"


class Script:
    """A model that reads ``CALLS`` files, one tool call a turn (with its reasoning when
    ``think``), then answers; it records the messages and instructions of every request it
    gets."""

    def __init__(self, calls: int = CALLS, ids: str = "c", think: bool = False) -> None:
        self.calls = calls
        self.ids = ids
        self.think = think
        self.requests: list[tuple[list[ModelMessage], str | None]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append((list(messages), info.instructions))
        k = len(self.requests) - 1
        if k < self.calls:
            call = ToolCallPart(
                "read_file", {"path": f"src/mod_{k}.py"}, tool_call_id=f"{self.ids}{k}"
            )
            thought = ThinkingPart(
                f"mod_{k - 1} was fine; next, src/mod_{k}.py.", signature=f"sig{k}"
            )
            return ModelResponse(parts=[thought, call] if self.think else [call])
        return ModelResponse(parts=[TextPart("Fixed.")])


def make_agent(script: Script, capability: Any) -> Agent[None, str]:
    capabilities = [capability] if capability is not None else []
    agent = Agent(FunctionModel(script), instructions=INSTRUCTIONS, capabilities=capabilities)

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return file_body(int(path.rsplit("_", 1)[1].split(".")[0]))

    return agent


def tokens(messages: list[ModelMessage], instructions: str | None) -> int:
    return count_tokens(from_openai(openai_dicts(messages, instructions)), model="gpt-4o")


@pytest.mark.parametrize("run_async", [False, True], ids=["run_sync", "run"])
def test_a_long_agent_run_is_cut_to_the_window_and_the_run_keeps_everything(
    run_async: bool,
) -> None:
    script = Script()
    warden = ContextWarden(model="gpt-4o", window=WINDOW)
    agent = make_agent(script, warden)
    if run_async:
        result = asyncio.run(agent.run(TASK, usage_limits=LIMITS))
    else:
        result = agent.run_sync(TASK, usage_limits=LIMITS)

    assert result.output == "Fixed."
    assert len(script.requests) == CALLS + 1
    for sent, instructions in script.requests:
        check_valid(sent)
        assert instructions == INSTRUCTIONS
        assert tokens(sent, instructions) <= WINDOW
        first = sent[0].parts
        assert any(isinstance(p, UserPromptPart) and p.content == TASK for p in first)
    # the run keeps every message: the task, 60 calls and their whole outputs, the answer
    history = result.all_messages()
    assert len(history) == 1 + 2 * CALLS + 1
    returns = [p for m in history for p in m.parts if isinstance(p, ToolReturnPart)]
    assert [p.content for p in returns] == [file_body(k) for k in range(CALLS)]
    assert tokens(history, INSTRUCTIONS) > 4 * WINDOW  # ... far over the window
    assert len(script.requests[-1][0]) < len(history)
    assert warden.last_result is not None and warden.last_result.tokens_after <= WINDOW


def test_the_callers_history_is_not_mutated_and_untouched_messages_are_its_objects() -> None:
    first = make_agent(Script(calls=40), ContextWarden(model="gpt-4o", window=WINDOW))
    earlier = first.run_sync(TASK, usage_limits=LIMITS).all_messages()
    kept = copy.deepcopy(earlier)

    script = Script(calls=5, ids="d")
    agent = make_agent(script, ContextWarden(model="gpt-4o", window=WINDOW))
    result = agent.run_sync("Now run the tests.", message_history=earlier)

    assert earlier == kept  # the list and every message in it as they were
    assert result.all_messages()[: len(earlier)] == earlier
    for sent, instructions in script.requests:
        check_valid(sent)
        assert tokens(sent, instructions) <= WINDOW
    last = script.requests[-1][0]
    # what the warden did not edit is the caller's own object; what it did is a copy
    own = [m for m in last if any(m is e for e in earlier)]
    assert own and len(own) < len(earlier)
    # the task is the caller's own part; the summary of what was cut a new user part
    task, summary = last[0].parts[:2]
    assert task is earlier[0].parts[0]
    assert isinstance(summary, UserPromptPart) and "cw:" in summary.content
    assert not any(summary is p for m in earlier for p in m.parts)


def test_as_a_history_processor_the_run_keeps_the_wardens_copy() -> None:
    script = Script()
    warden = ContextWarden(model="gpt-4o", window=WINDOW)
    result = make_agent(script, ProcessHistory(warden)).run_sync(TASK, usage_limits=LIMITS)

    assert result.output == "Fixed."
    for sent, instructions in script.requests:
        check_valid(sent)
        assert tokens(sent, instructions) <= WINDOW
    # pydantic-ai writes a processor's output back to the run: the history is the short copy
    history = result.all_messages()
    check_valid(history[:-1])
    assert tokens(history, INSTRUCTIONS) <= WINDOW + 1_000
    assert len(history) < 1 + 2 * CALLS + 1


def test_reasoning_of_an_earlier_turn_is_stripped_from_copies_of_the_responses() -> None:
    earlier = make_agent(Script(calls=12, think=True), None).run_sync(TASK, usage_limits=LIMITS)
    history = earlier.all_messages()
    thoughts = [p for m in history for p in m.parts if isinstance(p, ThinkingPart)]
    assert len(thoughts) == 12

    script = Script(calls=2, ids="d", think=True)
    lossless = WardenConfig.model_validate({"compaction": {"enabled": False}})
    warden = ContextWarden(model="gpt-4o", window=24_000, config=lossless)
    result = make_agent(script, warden).run_sync(
        "Now run the tests.", message_history=history, usage_limits=LIMITS
    )

    kept = [p for m in result.all_messages() for p in m.parts if isinstance(p, ThinkingPart)]
    assert len(kept) == 12 + 2  # the run keeps every thought, signature and all
    last = script.requests[-1][0]
    check_valid(last)
    sent = [p for m in last for p in m.parts if isinstance(p, ThinkingPart)]
    assert sent and sent[-1] is kept[-1]  # the current turn's reasoning kept as is
    stripped = [
        m
        for m in last
        if isinstance(m, ModelResponse)
        and not any(m is h for h in history)
        and any(m.parts[-1] is h.parts[-1] for h in history)
    ]
    assert stripped  # copies of the earlier turn's responses without their reasoning ...
    for m in stripped:
        assert [type(p) for p in m.parts] == [ToolCallPart]  # ... keeping their calls


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="window must be a positive int, got 0"):
        ContextWarden(window=0)
    with pytest.raises(TypeError, match="model must be a string, got int"):
        ContextWarden(model=4)  # type: ignore[arg-type]


def test_over_the_wire_with_pydantic_ais_openai_client_every_request_is_valid() -> None:
    openai_models = pytest.importorskip("pydantic_ai.models.openai")
    from pydantic_ai.providers.openai import OpenAIProvider

    warden = ContextWarden(window=WINDOW)  # the model name comes from the serving model
    with FakeLLM(calls=40) as fake:
        provider = OpenAIProvider(base_url=fake.base_url, api_key="sk-test")
        model = openai_models.OpenAIChatModel("gpt-4o", provider=provider)
        agent = Agent(model, instructions=INSTRUCTIONS, capabilities=[warden])

        @agent.tool_plain
        def read_file(path: str) -> str:
            """Read a file of the repository."""
            return file_body(int(path.rsplit("_", 1)[1].split(".")[0]))

        result = agent.run_sync(TASK, usage_limits=LIMITS)

    assert result.output == FINAL
    assert len(fake.received) == 41 and fake.invalid() == []
    for r in fake.received:
        body = r.body
        assert (
            count_tokens(from_openai(body["messages"]), model="gpt-4o", tools=body["tools"])
            <= WINDOW
        )
    assert len(result.all_messages()) == 1 + 2 * 40 + 1
