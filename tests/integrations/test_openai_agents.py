"""The Agents SDK filter in a real ``Runner`` loop with the SDK's own scripted model (no network)."""

from __future__ import annotations

import asyncio
import copy
import json
import re
from typing import Any

import pytest

pytest.importorskip("agents.testing", reason="openai-agents (with agents.testing) is not installed")

from agents import Agent, ModelSettings, RunConfig, Runner, function_tool
from agents.run_config import CallModelData, ModelInputData
from agents.testing import ModelCall, ModelStep, ScriptedModel
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)

from contextwarden import WardenConfig, count_tokens
from contextwarden.formats import from_responses
from contextwarden.integrations.openai_agents import input_filter
from contextwarden.recall import RECALL_TOOL_NAME

TASK = "TASK: find why tests/test_io.py fails and fix src/io.py without editing the test."
WINDOW = 16_000
CALLS = 60


def file_body(k: int) -> str:
    return "\n".join(
        f"src/mod_{k}.py:{j}: total = compute({j}, {k * j}) # step {j}" for j in range(90)
    )


@function_tool
def read_file(path: str) -> str:
    """Read a file of the repository."""
    k = int(path.rsplit("_", 1)[1].split(".")[0])
    return file_body(k)


def step(k: int, reasoning: bool) -> list[Any]:
    out: list[Any] = []
    if reasoning:
        out.append(
            ResponseReasoningItem(
                id=f"rs_{k}", type="reasoning", summary=[], encrypted_content=f"enc{k}"
            )
        )
    out.append(
        ResponseFunctionToolCall(
            id=f"fc_{k}",
            type="function_call",
            call_id=f"call_{k}",
            name="read_file",
            arguments=json.dumps({"path": f"src/mod_{k}.py"}),
            status="completed",
        )
    )
    return out


def final() -> list[Any]:
    text = ResponseOutputText(type="output_text", text="Fixed.", annotations=[])
    return [
        ResponseOutputMessage(
            id="msg_final", type="message", role="assistant", status="completed", content=[text]
        )
    ]


def check_valid(items: list[Any]) -> None:
    calls: set[str] = set()
    answered: set[str] = set()
    for i, item in enumerate(items):
        t = item.get("type", "message")
        if t == "function_call":
            calls.add(item["call_id"])
        elif t == "function_call_output":
            assert item["call_id"] in calls, f"item {i}: output {item['call_id']} without its call"
            answered.add(item["call_id"])
        elif t == "reasoning":
            # a reasoning item must be followed by the item it produced
            assert i + 1 < len(items) and items[i + 1].get("type") != "reasoning"
    assert calls == answered


def run_agent(reasoning: bool) -> tuple[ScriptedModel, Any, list[tuple[list[Any], list[Any]]]]:
    model = ScriptedModel([*(step(k, reasoning) for k in range(CALLS)), final()])
    agent = Agent(
        name="coder", instructions="You are a coding agent.", model=model, tools=[read_file]
    )
    warden_filter = input_filter(model="gpt-4o", window=WINDOW)
    seen: list[tuple[list[Any], list[Any]]] = []  # (items as given, the same items after)

    async def recording(data: CallModelData[Any]) -> ModelInputData:
        given = data.model_data.input
        before = copy.deepcopy(given)
        out = await warden_filter(data)
        seen.append((before, given))
        return out  # type: ignore[no-any-return]

    config = RunConfig(call_model_input_filter=recording, tracing_disabled=True)
    result = Runner.run_sync(agent, TASK, run_config=config, max_turns=CALLS + 5)
    return model, result, seen


@pytest.mark.parametrize("reasoning", [False, True], ids=["plain", "with-reasoning"])
def test_a_long_agent_run_stays_valid_within_the_window(reasoning: bool) -> None:
    model, result, seen = run_agent(reasoning)
    assert result.final_output == "Fixed."
    per_turn = 3 if reasoning else 2
    # the last call's filter saw the whole run: the task, 60 calls and their 60 outputs
    assert len(seen[-1][0]) == 1 + per_turn * CALLS
    assert sum(1 for i in seen[-1][0] if i.get("type") == "function_call") == CALLS
    for before, after in seen:  # the run's own items were not touched
        assert after == before
    # the run keeps every item: its history is whole
    assert len(result.to_input_list()) == 1 + per_turn * CALLS + 1
    for call in model.calls:
        items = call.input
        check_valid(items)
        assert items[0] == {"content": TASK, "role": "user"}
        # the instructions are kept (a compaction may append a note pointing at its summary)
        assert (call.system_instructions or "").startswith("You are a coding agent.")
        tokens = count_tokens(
            from_responses(items, instructions=call.system_instructions), model="gpt-4o"
        )
        assert tokens <= WINDOW
    sent = [len(c.input) for c in model.calls]
    given = [len(b) for b, _ in seen]
    assert sent[-1] < given[-1]  # the long end of the run was trimmed
    assert sent[:3] == given[:3]  # and the short start was not
    # every call of the run was answered by the model: the loop never broke
    assert len(model.calls) == CALLS + 1


def test_the_filter_alone_on_121_items() -> None:
    items: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for k in range(CALLS):
        items.append(
            {
                "type": "function_call",
                "call_id": f"c{k}",
                "name": "read_file",
                "arguments": json.dumps({"path": f"src/mod_{k}.py"}),
            }
        )
        items.append({"type": "function_call_output", "call_id": f"c{k}", "output": file_body(k)})
    assert len(items) == 121
    before = copy.deepcopy(items)
    agent = Agent(name="coder", instructions="Be careful.", tools=[read_file])
    data = CallModelData(
        model_data=ModelInputData(input=items, instructions="Be careful."),
        agent=agent,
        context=None,
    )
    f = input_filter(model="gpt-4o", window=WINDOW)
    out = asyncio.run(f(data))
    assert items == before
    assert (out.instructions or "").startswith("Be careful.")
    assert out.input[0] == items[0]
    check_valid(out.input)
    assert len(out.input) < len(items)
    assert f.last_result is not None and f.last_result.tokens_after <= WINDOW


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="window must be a positive int, got 0"):
        input_filter(window=0)
    with pytest.raises(TypeError, match="config must be a WardenConfig, got dict"):
        input_filter(config={"model": "x"})  # type: ignore[arg-type]
    assert (
        input_filter(config=WardenConfig.model_validate({"model": "gpt-4o"})).warden.config.model
        == "gpt-4o"
    )


def test_items_given_as_sdk_objects_are_read_as_the_sdk_reads_them() -> None:
    call = ResponseFunctionToolCall(
        type="function_call", call_id="c1", name="read_file", arguments='{"path": "src/mod_1.py"}'
    )
    items: list[Any] = [
        {"role": "user", "content": TASK},
        call,
        {"type": "function_call_output", "call_id": "c1", "output": "x = 1"},
    ]
    agent = Agent(name="coder", tools=[read_file])
    data = CallModelData(
        model_data=ModelInputData(input=items, instructions=None), agent=agent, context=None
    )
    out = asyncio.run(input_filter(model="gpt-4o", window=WINDOW)(data))
    assert out.input[1] == call.model_dump(exclude_unset=True)
    assert out.input[2] == items[2] and out.instructions is None


# -- the recall tool: a FunctionTool the SDK runs in-process ----------------------------------

REF = re.compile(r"cw:[0-9a-f]{16}")


def recall_step(call: ModelCall) -> list[Any]:
    """Call the recall tool with the first reference the request shows."""
    ref = REF.findall(json.dumps(call.input))[0]
    return [
        ResponseFunctionToolCall(
            type="function_call",
            call_id="recall_1",
            name=RECALL_TOOL_NAME,
            arguments=json.dumps({"ref": ref}),
        )
    ]


def quote_step(call: ModelCall) -> list[Any]:
    """Answer quoting a line of the recalled content the request before did not show."""
    answer = call.input[-1]["output"]
    sent = json.dumps(call.input[:-2])
    line = next(
        x for x in answer.splitlines() if "compute(" in x and json.dumps(x)[1:-1] not in sent
    )
    text = ResponseOutputText(type="output_text", text=f"Found: {line}", annotations=[])
    return [
        ResponseOutputMessage(
            id="msg_final", type="message", role="assistant", status="completed", content=[text]
        )
    ]


def test_the_recall_tool_reads_back_what_the_request_shortened() -> None:
    reads = 30
    steps = [*(step(k, False) for k in range(reads))]
    model = ScriptedModel([*steps, ModelStep.respond(recall_step), ModelStep.respond(quote_step)])
    # room for the answer: an explicit reserve cuts at 24k of 32k (fitted to these short
    # replies, the reserve would let the request wait to 31k, leaving the answer 1k tokens)
    warden_filter = input_filter(
        model="gpt-4o", window=2 * WINDOW, config=WardenConfig(reserve_tokens=8_000)
    )
    agent = Agent(
        name="coder",
        instructions="You are a coding agent.",
        model=model,
        tools=[read_file, warden_filter.recall_tool()],
    )
    config = RunConfig(call_model_input_filter=warden_filter, tracing_disabled=True)
    result = Runner.run_sync(agent, TASK, run_config=config, max_turns=reads + 5)

    assert warden_filter.recalls == 1
    # the tool is offered on every call (its definition counted, the conversation's key stable)
    assert all(RECALL_TOOL_NAME in [t.name for t in c.tools] for c in model.calls)
    recall_call = model.calls[-2]
    ref = json.loads(recall_step(recall_call)[0].arguments)["ref"]
    last = model.calls[-1].input
    assert last[-2]["name"] == RECALL_TOOL_NAME and ref in last[-2]["arguments"]
    answer = last[-1]["output"]
    assert answer.startswith(f"[recalled {ref}:")
    # the answer carries outputs whole that the request with the reference had shortened
    shown = json.dumps(recall_call.input)
    whole = [
        b for b in map(file_body, range(reads)) if b in answer and json.dumps(b)[1:-1] not in shown
    ]
    assert whole
    assert result.final_output.startswith("Found: ")
    found = result.final_output.removeprefix("Found: ")
    assert any(found in b for b in whole) and json.dumps(found)[1:-1] not in shown


def test_the_recall_tool_names_an_unknown_reference() -> None:
    warden_filter = input_filter(model="gpt-4o", window=WINDOW)
    tool = warden_filter.recall_tool()
    assert tool.name == RECALL_TOOL_NAME and tool.params_json_schema["required"] == ["ref"]
    text = asyncio.run(tool.on_invoke_tool(None, json.dumps({"ref": "cw:0000000000000000"})))  # type: ignore[arg-type]
    assert "No content is kept under cw:0000000000000000" in text
    assert warden_filter.recalls == 1


@pytest.mark.parametrize("limit", [None, 6_000])
def test_the_agents_max_tokens_keeps_its_room(limit: int | None) -> None:
    """At a 32k window (DeepSeek's prices: a cut waits for the hard limit) the inputs go past
    26k with the reserve fitted to the short replies; an agent whose ``model_settings`` ask
    for 6,000 output tokens gets inputs that leave them."""
    model = ScriptedModel([*(step(k, False) for k in range(CALLS)), final()])
    agent = Agent(
        name="coder",
        instructions="You are a coding agent.",
        model=model,
        tools=[read_file],
        model_settings=ModelSettings(max_tokens=limit),
    )
    warden_filter = input_filter(model="deepseek-v4-flash", window=32_000)
    config = RunConfig(call_model_input_filter=warden_filter, tracing_disabled=True)
    Runner.run_sync(agent, TASK, run_config=config, max_turns=CALLS + 5)
    largest = max(
        count_tokens(from_responses(c.input, instructions=c.system_instructions), model="gpt-4o")
        for c in model.calls
    )
    if limit is None:
        assert largest > 26_000
    else:
        assert largest + limit <= 32_000
