"""The LangChain middleware in ``SummarizationMiddleware``'s shape: summaries written by a chat
model the user passes, ``trigger`` / ``keep`` in LangChain's units, in a real ``create_agent``
loop with a scripted tool-calling model."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langchain.agents.middleware", reason="langchain v1 is not installed")

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult

from contextwarden.integrations.langchain import ContextWardenMiddleware

from .test_langchain import (
    CALLS,
    SYSTEM,
    TASK,
    ScriptedToolModel,
    check_valid,
    read_file,
    script,
    tokens,
)

SUMMARY_MARK = "SUMMARY-BY-THE-USERS-CHAT-MODEL"


class SummaryModel(GenericFakeChatModel):
    """A chat model that writes a four-part summary and records what it was asked."""

    asked: list[list[BaseMessage]] = []
    fail: bool = False

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.asked.append(list(messages))
        if self.fail:
            raise RuntimeError("the summary model is down")
        text = (
            f"<completed>\n{SUMMARY_MARK}: read the modules one by one.\n</completed>\n"
            f"<remaining>\n{TASK}\n</remaining>\n"
            "<current_state>\nno file changed yet\n</current_state>\n<notes>\n</notes>"
        )
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])


def run(
    middleware: ContextWardenMiddleware, run_async: bool = False
) -> tuple[Any, ScriptedToolModel]:
    model = ScriptedToolModel(messages=script())
    model.seen = []
    agent = create_agent(model, tools=[read_file], system_prompt=SYSTEM, middleware=[middleware])
    start = {"messages": [HumanMessage(TASK)]}
    config = {"recursion_limit": 4 * CALLS}
    if run_async:
        state = asyncio.run(agent.ainvoke(start, config))  # type: ignore[arg-type]
    else:
        state = agent.invoke(start, config)  # type: ignore[arg-type]
    return state, model


def summaries(sent: list[BaseMessage]) -> list[BaseMessage]:
    return [m for m in sent if isinstance(m, HumanMessage) and SUMMARY_MARK in str(m.content)]


@pytest.mark.parametrize("run_async", [False, True], ids=["invoke", "ainvoke"])
def test_the_users_chat_model_writes_the_summary_at_a_token_trigger(run_async: bool) -> None:
    writer = SummaryModel(messages=iter([]))
    writer.asked = []
    trigger = 8_000  # far under gpt-4o's own trigger (0.75 of 128k)
    middleware = ContextWardenMiddleware(
        model=writer, window=128_000, trigger=("tokens", trigger), keep=("messages", 6)
    )
    state, model = run(middleware, run_async)

    assert state["messages"][-1].content == "Fixed."
    assert len(state["messages"]) == 1 + 2 * CALLS + 1  # the state keeps every message
    assert writer.asked, "the chat model wrote no summary"
    system, user = writer.asked[0]
    assert isinstance(system, SystemMessage) and "<completed>" in str(system.content)
    assert "src/mod_0.py" in str(user.content)  # the span it summarises
    one_step = 2_600  # a call and its output: the copy grows by that past the trigger
    compacted = 0
    for sent in model.seen:
        check_valid(sent)
        assert tokens(sent) <= trigger + one_step
        assert isinstance(sent[1], HumanMessage) and sent[1].content == TASK
        if summaries(sent):
            compacted += 1
            # keep=("messages", 6): the last six messages after the summary are the agent's
            assert all(m.id in {s.id for s in state["messages"]} for m in sent[-6:])
    assert compacted >= CALLS // 2
    assert tokens(state["messages"]) > 10 * trigger


def test_a_message_trigger_keeps_the_copy_short() -> None:
    writer = SummaryModel(messages=iter([]))
    writer.asked = []
    middleware = ContextWardenMiddleware(
        model=writer,
        window=128_000,
        trigger=[("messages", 24), {"tokens": 10**6, "messages": 1}],
        keep=("messages", 8),
    )
    state, model = run(middleware)

    assert state["messages"][-1].content == "Fixed."
    for sent in model.seen:
        check_valid(sent)
        assert len([m for m in sent if not isinstance(m, SystemMessage)]) <= 24 + 2
    assert max(len(s) for s in model.seen) < len(state["messages"]) // 3
    assert writer.asked and any(summaries(sent) for sent in model.seen)


def test_a_failing_summary_model_falls_back_and_the_loop_goes_on() -> None:
    writer = SummaryModel(messages=iter([]), fail=True)
    writer.asked = []
    middleware = ContextWardenMiddleware(model=writer, window=128_000, trigger=("tokens", 8_000))
    state, model = run(middleware)

    assert writer.asked  # asked, failed ...
    assert state["messages"][-1].content == "Fixed."  # ... and the agent went on
    assert max(tokens(sent) for sent in model.seen) <= 8_000 + 2_600
    # the embedded extractive summary stood in for the chat model's
    assert all(not summaries(sent) for sent in model.seen)
    assert any(
        isinstance(m, HumanMessage) and "<completed>" in str(m.content)
        for sent in model.seen
        for m in sent
    )


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"trigger": ("pages", 3)}, ValueError, r"trigger must be \('tokens', N\)"),
        (
            {"trigger": [("tokens", 100), ("messages", 0)]},
            ValueError,
            r"trigger\[1\]: messages must be a whole number > 0, got 0",
        ),
        (
            {"trigger": ("fraction", 1.5)},
            ValueError,
            r"trigger: fraction must be in \(0, 1\], got 1.5",
        ),
        ({"keep": ("fraction", 0.9)}, ValueError, "above the trigger_ratio 0.75"),
        ({"keep": ("tokens", 2.5)}, ValueError, "keep: tokens must be a whole number"),
        ({"model": 42}, TypeError, "model must be a model name or a LangChain chat model, got int"),
    ],
)
def test_bad_sizes_are_named(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        ContextWardenMiddleware(**kwargs)


def test_a_trigger_without_a_window_says_so() -> None:
    middleware = ContextWardenMiddleware(trigger=("fraction", 0.5))  # a fake model: no window
    with pytest.raises(ValueError, match="a trigger needs the model's window to compact"):
        run(middleware)


@pytest.mark.parametrize("keep", [("tokens", 6_000), ("fraction", 0.05)])
def test_keep_in_tokens_caps_the_copy_after_a_compaction(keep: Any) -> None:
    writer = SummaryModel(messages=iter([]))
    writer.asked = []
    middleware = ContextWardenMiddleware(
        model=writer, window=128_000, trigger=("tokens", 20_000), keep=keep
    )
    state, model = run(middleware)

    assert state["messages"][-1].content == "Fixed."
    cap = 6_000 if keep[0] == "tokens" else int(0.05 * 128_000)
    sizes = [tokens(sent) for sent in model.seen]
    shown = [[str(m.content) for m in summaries(sent)] for sent in model.seen]
    compacted = [i for i in range(1, len(sizes)) if shown[i] and shown[i] != shown[i - 1]]
    assert len(compacted) >= 3
    assert all(sizes[i] <= cap for i in compacted)
    assert max(sizes) <= 20_000 + 2_600
