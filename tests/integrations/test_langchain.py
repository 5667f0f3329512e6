"""The LangChain v1 middleware in a real ``create_agent`` loop with a scripted tool-calling model."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

pytest.importorskip("langchain.agents.middleware", reason="langchain v1 is not installed")

from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import Field

from contextwarden import WardenConfig, count_tokens
from contextwarden.formats import from_openai
from contextwarden.integrations.langchain import ContextWardenMiddleware
from contextwarden.recall import RECALL_TOOL_NAME

TASK = "TASK: find why tests/test_io.py fails and fix src/io.py without editing the test."
SYSTEM = "You are a coding agent."
WINDOW = 16_000
CALLS = 60


def file_body(k: int) -> str:
    return "\n".join(
        f"src/mod_{k}.py:{j}: total = compute({j}, {k * j}) # step {j}" for j in range(90)
    )


@tool
def read_file(path: str) -> str:
    """Read a file of the repository."""
    return file_body(int(path.rsplit("_", 1)[1].split(".")[0]))


class ScriptedToolModel(GenericFakeChatModel):
    """``GenericFakeChatModel`` that accepts tools and records every request it receives."""

    seen: list[list[BaseMessage]] = []

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedToolModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def script() -> Iterator[AIMessage]:
    for k in range(CALLS):
        yield AIMessage(
            content="",
            tool_calls=[
                {"name": "read_file", "args": {"path": f"src/mod_{k}.py"}, "id": f"call_{k}"}
            ],
        )
    yield AIMessage(content="Fixed.")


def check_valid(messages: list[BaseMessage]) -> None:
    """No tool message without the AI tool call before it; every call answered."""
    calls: set[str] = set()
    answered: set[str] = set()
    for i, m in enumerate(messages):
        if isinstance(m, AIMessage):
            calls.update(c["id"] for c in m.tool_calls if c["id"])
        elif isinstance(m, ToolMessage):
            assert m.tool_call_id in calls, (
                f"message {i}: ToolMessage {m.tool_call_id} without its call"
            )
            answered.add(m.tool_call_id)
    assert calls == answered


def tokens(messages: list[BaseMessage]) -> int:
    return count_tokens(from_openai(convert_to_openai_messages(messages)), model="gpt-4o")


@pytest.mark.parametrize("run_async", [False, True], ids=["invoke", "ainvoke"])
def test_a_create_agent_loop_stays_valid_within_the_window(run_async: bool) -> None:
    model = ScriptedToolModel(messages=script())
    model.seen = []
    middleware = ContextWardenMiddleware(model="gpt-4o", window=WINDOW)
    agent = create_agent(model, tools=[read_file], system_prompt=SYSTEM, middleware=[middleware])
    start = {"messages": [HumanMessage(TASK)]}
    config = {"recursion_limit": 4 * CALLS}
    if run_async:  # awrap_model_call
        state = asyncio.run(agent.ainvoke(start, config))  # type: ignore[arg-type]
    else:  # wrap_model_call
        state = agent.invoke(start, config)  # type: ignore[arg-type]

    assert state["messages"][-1].content == "Fixed."
    # the agent's own state keeps every message: the task, 60 calls, 60 outputs, the answer
    assert len(state["messages"]) == 1 + 2 * CALLS + 1
    assert all(
        m.content == file_body(k) for k, m in enumerate(state["messages"][2:-1:2])
    )  # outputs whole
    assert len(model.seen) == CALLS + 1
    state_ids = {m.id for m in state["messages"]}
    for sent in model.seen:
        assert isinstance(sent[0], SystemMessage) and sent[0].content.startswith(SYSTEM)
        assert isinstance(sent[1], HumanMessage) and sent[1].content == TASK  # the task kept
        check_valid(sent)
        assert tokens(sent) <= WINDOW
        # the agent's messages keep their ids (a summary the warden wrote has none)
        assert all(m.id in state_ids for m in sent[1:] if m.id is not None)
    assert len(model.seen[-1]) < 1 + len(state["messages"])  # the long end was trimmed
    assert tokens(state["messages"]) > 4 * WINDOW  # ... from far over the window


def history(n: int) -> list[BaseMessage]:
    msgs: list[BaseMessage] = [HumanMessage(TASK, id="task")]
    for k in range(n):
        call = {"name": "read_file", "args": {"path": f"src/mod_{k}.py"}, "id": f"c{k}"}
        msgs.append(AIMessage("", tool_calls=[call], id=f"ai{k}", response_metadata={"k": k}))
        msgs.append(ToolMessage(file_body(k), tool_call_id=f"c{k}", id=f"t{k}", name="read_file"))
    return msgs


def request_for(messages: list[BaseMessage]) -> ModelRequest:
    return ModelRequest(
        model=ScriptedToolModel(messages=iter([])),
        messages=messages,
        system_message=SystemMessage(SYSTEM, id="sys"),
        tools=[read_file],
    )


def test_untouched_messages_are_the_agents_objects() -> None:
    messages = history(3)  # small: nothing to trim
    request = request_for(messages)
    got: list[ModelRequest] = []

    def handler(r: ModelRequest) -> ModelResponse:
        got.append(r)
        return ModelResponse(result=[AIMessage("ok")])

    ContextWardenMiddleware(model="gpt-4o", window=WINDOW).wrap_model_call(request, handler)
    sent = got[0]
    assert sent.system_message is request.system_message
    assert all(a is b for a, b in zip(sent.messages, messages, strict=True))


def test_edited_messages_keep_their_ids_and_metadata_sync_and_async() -> None:
    messages = history(30)  # over a 32k window, under it once the old outputs are masked
    before = [m.model_copy(deep=True) for m in messages]
    got: list[ModelRequest] = []

    def handler(r: ModelRequest) -> ModelResponse:
        got.append(r)
        return ModelResponse(result=[AIMessage("ok")])

    async def ahandler(r: ModelRequest) -> ModelResponse:
        return handler(r)

    for run_async in (False, True):
        got.clear()
        # without compaction the lossless layers edit old outputs in place (masking)
        config = WardenConfig.model_validate({"compaction": {"enabled": False}})
        middleware = ContextWardenMiddleware(model="gpt-4o", window=32_000, config=config)
        if run_async:
            asyncio.run(middleware.awrap_model_call(request_for(messages), ahandler))
        else:
            middleware.wrap_model_call(request_for(messages), handler)
        sent = got[0].messages
        check_valid(sent)
        assert sent[0] is messages[0]
        by_id = {m.id: m for m in messages}
        edited = [m for m in sent if m.id in by_id and m is not by_id[m.id]]
        same = [m for m in sent if m.id in by_id and m is by_id[m.id]]
        assert same  # the newest messages are passed as they are
        assert any(isinstance(m, ToolMessage) for m in edited)  # masked outputs are copies
        for m in edited:
            original = by_id[m.id]
            assert type(m) is type(original)
            if isinstance(m, ToolMessage):
                assert m.tool_call_id == original.tool_call_id and m.name == "read_file"
                assert len(m.content) < len(original.content)
            if isinstance(m, AIMessage):
                assert m.response_metadata == original.response_metadata
        assert middleware.last_result is not None
        assert middleware.last_result.tokens_after <= 32_000
    assert messages == before  # the agent's messages were not changed


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="window must be a positive int"):
        ContextWardenMiddleware(window=-5)
    with pytest.raises(TypeError, match="model must be a model name or a LangChain chat model"):
        ContextWardenMiddleware(model=4)  # type: ignore[arg-type]


# -- the recall tool: offered when a cw: reference is shown, answered in the middleware -------

REF = re.compile(r"cw:[0-9a-f]{16}")
NO_COMPACTION = WardenConfig.model_validate({"compaction": {"enabled": False}})


class PolicyModel(GenericFakeChatModel):
    """A chat model whose reply is ``policy(messages)``; records each request and its tools."""

    policy: Any = None
    seen: list[list[BaseMessage]] = Field(default_factory=list)
    bound: list[list[str]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> PolicyModel:
        self.bound.append([t["function"]["name"] if isinstance(t, dict) else t.name for t in tools])
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self.policy(messages))])


def shown(messages: list[BaseMessage]) -> list[str]:
    return REF.findall("\n".join(str(m.content) for m in messages))


def call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id}


class Recaller:
    """Reads files until a reference is shown, recalls it (with one more read the middleware
    drops), then answers quoting a line only the recalled original holds."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self, messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage) and last.name == RECALL_TOOL_NAME:
            return AIMessage(f"Found: {quote(str(last.content), messages[:-2])}")
        read = call("read_file", {"path": f"src/mod_{self.reads}.py"}, f"call_{self.reads}")
        if refs := shown(messages):
            recall = call(RECALL_TOOL_NAME, {"ref": refs[0]}, "recall_1")
            return AIMessage("", tool_calls=[recall, {**read, "id": "dropped"}])
        self.reads += 1
        return AIMessage("", tool_calls=[read])


def quote(answer: str, before: list[BaseMessage]) -> str:
    """A line of the recalled content the request before the recall did not show."""
    sent = "\n".join(str(m.content) for m in before)
    return next(line for line in answer.splitlines() if "compute(" in line and line not in sent)


@pytest.mark.parametrize("run_async", [False, True], ids=["invoke", "ainvoke"])
def test_a_recall_is_answered_in_the_middleware(run_async: bool) -> None:
    model = PolicyModel(messages=iter([]), policy=Recaller())
    middleware = ContextWardenMiddleware(model="gpt-4o", window=WINDOW)
    agent = create_agent(model, tools=[read_file], system_prompt=SYSTEM, middleware=[middleware])
    start = {"messages": [HumanMessage(TASK)]}
    config = {"recursion_limit": 4 * CALLS}
    if run_async:
        state = asyncio.run(agent.ainvoke(start, config))  # type: ignore[arg-type]
    else:
        state = agent.invoke(start, config)  # type: ignore[arg-type]

    assert middleware.recalls == 1
    # the agent never saw the recall: no call of it, no answer, no call dropped with it
    messages = state["messages"]
    assert all(c["name"] == "read_file" for m in messages for c in getattr(m, "tool_calls", []))
    assert not any(isinstance(m, ToolMessage) and m.name == RECALL_TOOL_NAME for m in messages)
    assert "dropped" not in {c["id"] for m in messages for c in getattr(m, "tool_calls", [])}
    check_valid(messages)
    # the model's request after its recall call carries the original output, whole
    first = next(i for i, sent in enumerate(model.seen) if shown(sent))
    ref = shown(model.seen[first])[0]
    again = model.seen[first + 1]
    assert isinstance(again[-2], AIMessage) and again[-2].tool_calls[0]["args"] == {"ref": ref}
    assert [c["id"] for c in again[-2].tool_calls] == ["recall_1"]  # the read was dropped
    answer = again[-1]
    assert isinstance(answer, ToolMessage) and answer.name == RECALL_TOOL_NAME
    before = "\n".join(str(m.content) for m in model.seen[first])
    originals = [
        m.content
        for m in messages
        if isinstance(m, ToolMessage) and m.content in answer.content and m.content not in before
    ]
    assert originals  # outputs the request had shortened, back whole
    # ... and the model's final answer quotes what only the originals hold
    assert messages[-1].content.startswith("Found: ")
    found = messages[-1].content.removeprefix("Found: ")
    assert found not in before and any(found in o for o in originals)
    # the agent has tools: the recall tool is offered from the first call on, the tool list
    # the same on every call
    assert len(model.bound) == len(model.seen) == first + 2
    assert not shown(model.seen[0])
    assert all(tools == ["read_file", RECALL_TOOL_NAME] for tools in model.bound), model.bound


def masked_request(recall: bool = True) -> tuple[ContextWardenMiddleware, ModelRequest]:
    middleware = ContextWardenMiddleware(
        model="gpt-4o", window=32_000, config=NO_COMPACTION, recall=recall
    )
    return middleware, request_for(history(30))


def test_at_most_three_model_calls_the_last_without_the_tool() -> None:
    middleware, request = masked_request()
    got: list[ModelRequest] = []

    def handler(r: ModelRequest) -> ModelResponse:  # a model that recalls forever
        got.append(r)
        ref = shown(r.messages)[0]
        calls = [call(RECALL_TOOL_NAME, {"ref": ref}, f"r{len(got)}")]
        return ModelResponse(result=[AIMessage("still looking", tool_calls=calls)])

    response = middleware.wrap_model_call(request, handler)
    assert len(got) == 3 and middleware.recalls == 2
    names = [
        [t["function"]["name"] if isinstance(t, dict) else t.name for t in r.tools] for r in got
    ]
    assert names == [["read_file", RECALL_TOOL_NAME]] * 2 + [["read_file"]]
    assert len(got[2].messages) == len(got[0].messages) + 4  # two calls, two answers
    (final,) = response.result
    assert final.tool_calls == [] and final.content == "still looking"  # never the recall
    assert request.tools == [read_file] and len(request.messages) == 61  # the request as given


def test_offered_from_the_first_call_to_an_agent_with_tools_and_never_with_recall_off() -> None:
    got: list[ModelRequest] = []

    def handler(r: ModelRequest) -> ModelResponse:
        got.append(r)
        return ModelResponse(result=[AIMessage("ok")])

    small = request_for(history(3))  # nothing shortened: no reference shown
    ContextWardenMiddleware(model="gpt-4o", window=WINDOW).wrap_model_call(small, handler)
    assert not shown(got[0].messages)
    assert got[0].tools[0] is read_file and got[0].tools[1]["function"]["name"] == RECALL_TOOL_NAME
    # an agent without tools: nothing shown, nothing offered
    ContextWardenMiddleware(model="gpt-4o", window=WINDOW).wrap_model_call(
        small.override(tools=[]), handler
    )
    assert got[1].tools == []
    middleware, request = masked_request(recall=False)
    middleware.wrap_model_call(request, handler)
    assert shown(got[2].messages)  # references shown, but recall is off
    assert got[2].tools == [read_file]
    assert middleware.recalls == 0
    with pytest.raises(TypeError, match="recall must be a bool"):
        ContextWardenMiddleware(recall="yes")  # type: ignore[arg-type]


class LimitedModel(ScriptedToolModel):
    """The scripted model with the output limit a chat model gives its provider."""

    max_tokens: int | None = None


@pytest.mark.parametrize("limit", [None, 6_000])
def test_the_models_max_tokens_keeps_its_room(limit: int | None) -> None:
    """At a 32k window (DeepSeek's prices: a cut waits for the hard limit) the requests go
    past 26k with the reserve fitted to the short replies; a model whose ``max_tokens`` is
    6,000 gets requests that leave them."""
    model = LimitedModel(messages=script(), max_tokens=limit)
    model.seen = []
    middleware = ContextWardenMiddleware(model="deepseek-v4-flash", window=32_000)
    agent = create_agent(model, tools=[read_file], system_prompt=SYSTEM, middleware=[middleware])
    agent.invoke({"messages": [HumanMessage(TASK)]}, {"recursion_limit": 4 * CALLS})
    largest = max(tokens(seen) for seen in model.seen)
    if limit is None:
        assert largest > 26_000
    else:
        assert largest + limit <= 32_000
