"""The AutoGen context with the real ``autogen-core``: a scripted tool loop of 60 large results."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

pytest.importorskip("autogen_core", reason="autogen-core is not installed")

from autogen_core import CancellationToken, FunctionCall
from autogen_core.model_context import ChatCompletionContext
from autogen_core.models import (
    AssistantMessage,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    SystemMessage,
    UserMessage,
)

from contextwarden import WardenConfig, count_tokens
from contextwarden.integrations.autogen import SOURCE, WardenChatCompletionContext, to_message
from contextwarden.recall import RECALL_TOOL_NAME

TASK = "TASK: find why tests/test_io.py fails and fix src/io.py without editing the test."
WINDOW = 16_000
CALLS = 120  # long enough to be compacted once masks keep each old output to a few lines
REF = re.compile(r"cw:[0-9a-f]{16}")


def file_body(k: int) -> str:
    return "\n".join(
        f"src/mod_{k}.py:{j}: total = compute({j}, {k * j}) # step {j}" for j in range(90)
    )


def check_valid(messages: list[Any]) -> None:
    calls: set[str] = set()
    answered: set[str] = set()
    for i, m in enumerate(messages):
        if isinstance(m, AssistantMessage) and isinstance(m.content, list):
            calls.update(c.id for c in m.content)
        elif isinstance(m, FunctionExecutionResultMessage):
            for r in m.content:
                assert r.call_id in calls, f"message {i}: result {r.call_id} without its call"
                answered.add(r.call_id)
    assert calls == answered


def tokens(messages: list[Any]) -> int:
    return count_tokens([to_message(m, f"x{i}") for i, m in enumerate(messages)], model="gpt-4o")


async def tool_loop(context: ChatCompletionContext) -> list[list[Any]]:
    """The loop an AutoGen agent runs: ask the context, call the model, add the reply and the
    tool results. The 'model' here is a script; every view it is given is returned."""
    views: list[list[Any]] = []
    await context.add_message(SystemMessage(content="You are a coding agent."))
    await context.add_message(UserMessage(content=TASK, source="user"))
    for k in range(CALLS):
        views.append(await context.get_messages())
        call = FunctionCall(id=f"c{k}", name="read_file", arguments=json.dumps({"k": k}))
        await context.add_message(
            AssistantMessage(content=[call], thought=f"read {k}", source="coder")
        )
        result = FunctionExecutionResult(content=file_body(k), name="read_file", call_id=f"c{k}")
        await context.add_message(FunctionExecutionResultMessage(content=[result]))
    views.append(await context.get_messages())
    return views


def test_a_tool_loop_stays_valid_within_the_window_and_the_store_keeps_everything() -> None:
    context = WardenChatCompletionContext(model="gpt-4o", window=WINDOW)
    views = asyncio.run(tool_loop(context))
    stored = asyncio.run(context.save_state())["messages"]
    assert len(stored) == 2 + 2 * CALLS  # every message kept, whole
    assert stored[-1]["content"][0]["content"] == file_body(CALLS - 1)
    assert tokens(context._messages) > 4 * WINDOW
    for view in views:
        check_valid(view)
        assert isinstance(view[0], SystemMessage) and view[0].content.startswith("You are")
        assert view[1] is context._messages[1]  # the task: the stored object itself
        assert tokens(view) <= WINDOW
    assert len(views[-1]) < len(context._messages)


def test_edits_are_copies_and_untouched_messages_the_stored_objects() -> None:
    config = WardenConfig.model_validate({"compaction": {"enabled": False}})
    context = WardenChatCompletionContext(model="gpt-4o", window=32_000, config=config)
    for m in [SystemMessage(content="sys"), UserMessage(content=TASK, source="user")]:
        asyncio.run(context.add_message(m))
    for k in range(30):
        call = FunctionCall(id=f"c{k}", name="read_file", arguments="{}")
        asyncio.run(context.add_message(AssistantMessage(content=[call], source="coder")))
        result = FunctionExecutionResult(content=file_body(k), name="read_file", call_id=f"c{k}")
        asyncio.run(context.add_message(FunctionExecutionResultMessage(content=[result])))
    before = [m.model_copy(deep=True) for m in context._messages]
    view = asyncio.run(context.get_messages())
    check_valid(view)
    stored = {id(m) for m in context._messages}
    edited = [m for m in view if id(m) not in stored]
    assert edited and all(isinstance(m, FunctionExecutionResultMessage) for m in edited)
    for m in edited:  # masked: shorter, same call id and tool name
        k = int(m.content[0].call_id[1:])
        assert m.content[0].name == "read_file" and len(m.content[0].content) < len(file_body(k))
    assert view[-1] is context._messages[-1]
    assert context._messages == before  # the store was not changed


def test_a_summary_is_a_user_message_from_contextwarden() -> None:
    context = WardenChatCompletionContext(model="gpt-4o", window=WINDOW)
    views = asyncio.run(tool_loop(context))
    summaries = [m for v in views for m in v if isinstance(m, UserMessage) and m.source == SOURCE]
    assert summaries  # the default config compacts this run


def test_component_config_round_trip() -> None:
    config = WardenConfig.model_validate({"compaction": {"enabled": False}})
    context = WardenChatCompletionContext(model="gpt-4o", window=WINDOW, config=config)
    dumped = context.dump_component()
    assert dumped.provider == "contextwarden.integrations.autogen.WardenChatCompletionContext"
    loaded = WardenChatCompletionContext.load_component(dumped)
    assert isinstance(loaded, WardenChatCompletionContext)
    assert loaded.warden.config.context_window == WINDOW
    assert loaded.warden.config.compaction.enabled is False


def test_not_an_autogen_message() -> None:
    with pytest.raises(TypeError, match="message ag-0: not an AutoGen LLMMessage"):
        to_message({"role": "user"}, "ag-0")


def test_the_recall_tool_reads_back_a_masked_result() -> None:
    """The loop an AutoGen agent runs with the recall tool among its tools: the model calls it
    with a reference its view shows, the agent runs it, the next view carries the original."""
    config = WardenConfig.model_validate({"compaction": {"enabled": False}})
    context = WardenChatCompletionContext(model="gpt-4o", window=32_000, config=config)
    tool = context.recall_tool()
    assert tool.name == RECALL_TOOL_NAME and tool.schema["parameters"]["required"] == ["ref"]
    for m in [SystemMessage(content="sys"), UserMessage(content=TASK, source="user")]:
        asyncio.run(context.add_message(m))
    for k in range(30):
        call = FunctionCall(id=f"c{k}", name="read_file", arguments="{}")
        asyncio.run(context.add_message(AssistantMessage(content=[call], source="coder")))
        result = FunctionExecutionResult(content=file_body(k), name="read_file", call_id=f"c{k}")
        asyncio.run(context.add_message(FunctionExecutionResultMessage(content=[result])))
    view = asyncio.run(context.get_messages())
    masked = next(
        m.content[0]
        for m in view
        if isinstance(m, FunctionExecutionResultMessage) and REF.search(m.content[0].content)
    )
    ref = REF.findall(masked.content)[0]
    arguments = json.dumps({"ref": ref})
    asyncio.run(
        context.add_message(
            AssistantMessage(
                content=[FunctionCall(id="r1", name=RECALL_TOOL_NAME, arguments=arguments)],
                source="coder",
            )
        )
    )
    output = asyncio.run(tool.run_json(json.loads(arguments), CancellationToken(), call_id="r1"))
    text = tool.return_value_as_string(output)
    original = file_body(int(masked.call_id[1:]))
    assert original in text and original not in masked.content
    answer = FunctionExecutionResult(content=text, name=RECALL_TOOL_NAME, call_id="r1")
    asyncio.run(context.add_message(FunctionExecutionResultMessage(content=[answer])))
    after = asyncio.run(context.get_messages())
    assert original in after[-1].content[0].content  # the model's next view carries it
    assert context.recalls == 1
    unknown = asyncio.run(tool.run_json({"ref": "cw:0000000000000000"}, CancellationToken()))
    assert "No content is kept under cw:0000000000000000" in unknown
