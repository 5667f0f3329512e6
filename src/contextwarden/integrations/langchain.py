"""LangChain v1 agents: a middleware that hands the model the warden's copy of the messages.

::

    from langchain.agents import create_agent
    from contextwarden.integrations.langchain import ContextWardenMiddleware

    agent = create_agent(model, tools, middleware=[ContextWardenMiddleware(window=128_000)])

How it works, and what the hook cannot see: docs/integrations.md (LangChain v1).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .. import Message, TransformResult, Warden, WardenConfig
from ..formats.openai import from_openai, to_openai
from ..recall import RECALL_TOOL_NAME, recall_ref, recall_tool, shown_refs
from ._common import answer_recall, hook_warden, output_limit, require
from ._langchain_summaries import (
    ChatModelSummarizer,
    ContextSize,
    keeping,
    model_name,
    trigger_clauses,
)

if TYPE_CHECKING:
    from langchain.agents.middleware import AgentMiddleware, ModelResponse
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import (
        AIMessage,
        ToolMessage,
        convert_to_messages,
        convert_to_openai_messages,
    )
    from langchain_core.utils.function_calling import convert_to_openai_tool
else:  # the framework, imported with a message naming the extra when it is missing
    _lc_middleware = require("langchain.agents.middleware", "langchain")
    AgentMiddleware, ModelResponse = _lc_middleware.AgentMiddleware, _lc_middleware.ModelResponse
    _lc_messages = require("langchain_core.messages", "langchain")
    AIMessage, ToolMessage = _lc_messages.AIMessage, _lc_messages.ToolMessage
    BaseChatModel = require("langchain_core.language_models", "langchain").BaseChatModel
    convert_to_messages = _lc_messages.convert_to_messages
    convert_to_openai_messages = _lc_messages.convert_to_openai_messages
    convert_to_openai_tool = require(
        "langchain_core.utils.function_calling", "langchain"
    ).convert_to_openai_tool

__all__ = ["RECALL_ROUNDS", "ChatModelSummarizer", "ContextSize", "ContextWardenMiddleware"]


_SYSTEM_ID = "lc-system"
#: the most model calls one agent step makes when the model recalls (the last without the tool)
RECALL_ROUNDS = 3
#: content block types that carry a tool call (Anthropic, LangChain's standard, Responses)
_CALL_BLOCKS = frozenset({"tool_use", "tool_call", "function_call"})


class ContextWardenMiddleware(AgentMiddleware):
    """A LangChain v1 ``AgentMiddleware`` running a :class:`~contextwarden.Warden` before each
    model call; reuse it across an agent's threads.

    :class:`~._common.WardenHook`'s arguments, except that ``model`` may be a LangChain chat model
    that writes the summaries (:class:`ChatModelSummarizer`). ``trigger`` and ``keep``, in
    LangChain's units (default: the config's ``trigger_ratio``): docs/integrations.md.
    ``recall`` offers the recall tool; ``recalls`` counts the calls answered."""

    def __init__(
        self,
        model: str | BaseChatModel | None = None,
        window: int | None = None,
        config: WardenConfig | None = None,
        *,
        trigger: ContextSize | Mapping[str, float] | Sequence[Any] | None = None,
        keep: ContextSize | None = None,
        recall: bool = True,
    ) -> None:
        super().__init__()
        if type(recall) is not bool:
            raise TypeError(f"recall must be a bool, got {type(recall).__name__}")
        summarizer = None
        if model is not None and not isinstance(model, str):
            if not isinstance(model, BaseChatModel):
                raise TypeError(
                    f"model must be a model name or a LangChain chat model, got "
                    f"{type(model).__name__}"
                )
            summarizer, model = ChatModelSummarizer(model), None
        self._triggers = trigger_clauses(trigger)
        config = keeping(config, keep)
        self.warden: Warden = hook_warden(config, model, window, summarizer)
        self._model = model
        self.recall = recall
        self.recalls = 0
        self.last_result: TransformResult | None = None

    @property
    def name(self) -> str:
        return "ContextWardenMiddleware"

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        plan = _Plan(self, request)
        options = plan.options()
        result = self.warden.transform(plan.messages, **options)
        if self._due(result):
            result = self.warden.transform(plan.messages, force_compact=True, **options)
        rounds = _Rounds(self, plan.request_for(self, result), result)
        response = handler(rounds.request())
        while rounds.answer(response):
            response = handler(rounds.request())
        return rounds.final(response)

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        plan = _Plan(self, request)
        options = plan.options()
        result = await self.warden.atransform(plan.messages, **options)
        if self._due(result):
            result = await self.warden.atransform(plan.messages, force_compact=True, **options)
        rounds = _Rounds(self, plan.request_for(self, result), result)
        response = await handler(rounds.request())
        while rounds.answer(response):
            response = await handler(rounds.request())
        return rounds.final(response)

    def _due(self, result: TransformResult) -> bool:
        """A ``trigger`` is met on the copy the model would be sent, which this call did not
        compact already."""
        if not self._triggers or result.compaction is not None:
            return False
        if result.budget is None:  # nothing to size a compaction by
            raise ValueError(
                "ContextWardenMiddleware: a trigger needs the model's window to compact: give "
                "window= or a model name the registry knows"
            )
        sizes = {
            "tokens": result.tokens_after,
            "messages": sum(1 for m in result.messages if m.role != "system"),
            "fraction": result.tokens_after / result.budget.window,
        }
        return any(all(sizes[k] >= v for k, v in c.items()) for c in self._triggers)


class _Rounds:
    """One agent step's model calls: the warden's request, then (while the model recalls) the
    same request with its recall calls and their answers appended."""

    def __init__(self, owner: ContextWardenMiddleware, request: Any, result: TransformResult):
        self.owner = owner
        self.base = request
        self.result = result
        # from the first call when the agent has tools (a prompt cache's prefix begins with
        # them: a tool list that changed when the first reference appeared would rewrite it)
        self.offered = owner.recall and bool(request.tools or shown_refs(result.messages))
        self.added: list[Any] = []  # the recall turns so far: AIMessage, ToolMessage...
        self.calls = 0  # model calls made
        self.answered_chars = 0

    def request(self) -> Any:
        """The request for the next model call (the tool offered but on the last round)."""
        self.calls += 1
        if not self.offered:
            return self.base
        overrides: dict[str, Any] = {"messages": [*self.base.messages, *self.added]}
        if self.calls < RECALL_ROUNDS:
            overrides["tools"] = [*self.base.tools, recall_tool("openai")]
        return self.base.override(**overrides)

    def answer(self, response: Any) -> bool:
        """Answer the response's recall calls (keeping them for the next request); False when
        there are none to answer: the response is the step's."""
        ai = _ai_message(response)
        calls = _recall_calls(ai)
        if not self.offered or not calls or self.calls >= RECALL_ROUNDS:
            return False
        self.added.append(_with_calls(ai, calls))
        self.added.extend(self._answer(call) for call in calls)
        return True

    def final(self, response: Any) -> Any:
        """The response the agent gets: without recall calls (a model calling the tool on the
        last round, when it was not offered)."""
        ai = _ai_message(response)
        if not self.offered or not _recall_calls(ai):
            return response
        kept = [c for c in ai.tool_calls if c.get("name") != RECALL_TOOL_NAME]
        clean = _with_calls(ai, kept)
        if isinstance(response, AIMessage):
            return clean
        result = [clean if m is ai else m for m in response.result]
        return ModelResponse(result=result, structured_response=response.structured_response)

    def _answer(self, call: Mapping[str, Any]) -> Any:
        ref = recall_ref(call.get("args"))
        text, is_error = answer_recall(self.owner.warden, self.result, ref, self.answered_chars)
        self.answered_chars += len(text)
        self.owner.recalls += 1
        return ToolMessage(
            content=text,
            tool_call_id=call.get("id") or "",
            name=RECALL_TOOL_NAME,
            status="error" if is_error else "success",
        )


def _ai_message(response: Any) -> Any:
    """The model's ``AIMessage`` in a handler's response (``None`` if it has none)."""
    if isinstance(response, AIMessage):
        return response
    for m in getattr(response, "result", None) or ():
        if isinstance(m, AIMessage):
            return m
    return None


def _recall_calls(ai: Any) -> list[Mapping[str, Any]]:
    return [] if ai is None else [c for c in ai.tool_calls if c.get("name") == RECALL_TOOL_NAME]


def _with_calls(ai: Any, calls: Sequence[Mapping[str, Any]]) -> Any:
    """A copy of ``ai`` making only ``calls`` (content blocks of other calls left out)."""
    ids = {c.get("id") for c in calls}
    content = ai.content
    if isinstance(content, list):
        content = [b for b in content if not _other_call(b, ids)]
    return ai.model_copy(update={"tool_calls": list(calls), "content": content})


def _other_call(block: Any, ids: set[Any]) -> bool:
    if not isinstance(block, Mapping) or block.get("type") not in _CALL_BLOCKS:
        return False
    return block.get("id") not in ids and block.get("call_id") not in ids


class _Plan:
    """One call's conversion: canonical messages, and the way back to LangChain objects."""

    def __init__(self, owner: ContextWardenMiddleware, request: Any) -> None:
        self.request = request
        self.model = owner._model or model_name(request.model)
        # the output limit the call gives the provider: its settings', else the model's own
        self.max_tokens = output_limit(getattr(request, "model_settings", None), request.model)
        self.tools = _tool_definitions(request.tools)
        # with recall on, its definition is always counted: it may be offered, and the same
        # tools every call keep the conversation's key
        recall = [recall_tool("openai")] if owner.recall else []
        self.counted = [*(self.tools or ()), *recall] or None
        system = request.system_message
        originals = [system, *request.messages] if system is not None else list(request.messages)
        self.originals: dict[str, Any] = {}  # canonical id -> the agent's message
        self.canonical: dict[str, Message] = {}  # canonical id -> its canonical value
        self.messages: list[Message] = []
        for i, lc in enumerate(originals):
            if i == 0 and system is not None:
                key = _SYSTEM_ID
            else:
                key = lc.id if isinstance(lc.id, str) and lc.id else f"lc-{i}"
                if key in self.originals:  # a duplicated id: fall back to the position
                    key = f"lc-{i}"
            try:
                converted = from_openai([convert_to_openai_messages(lc)])
            except Exception as exc:  # a message shape the OpenAI adapter cannot read
                raise ValueError(
                    f"ContextWardenMiddleware: message {i} ({type(lc).__name__}) could not be "
                    f"read: {exc}"
                ) from exc
            for k, m in enumerate(converted):  # a tool message with images may split in two
                mkey = key if k == 0 else f"{key}#{k}"
                msg = m.replace(id=mkey)
                self.originals[mkey] = lc
                self.canonical[mkey] = msg
                self.messages.append(msg)

    def options(self) -> dict[str, Any]:
        """The warden's options for this call (besides the messages)."""
        return {"model": self.model, "tools": self.counted, "max_tokens": self.max_tokens}

    def request_for(self, owner: ContextWardenMiddleware, result: TransformResult) -> Any:
        owner.last_result = result
        system: Any = None
        out: list[Any] = []
        for msg in result.messages:
            lc = self._back(msg)
            if msg.id == _SYSTEM_ID:
                system = lc
            else:
                out.append(lc)
        if system is None and out and _is_system(out[0]) and self.request.system_message is None:
            system = out.pop(0)  # a system message the warden added (a compaction note)
        overrides: dict[str, Any] = {"messages": out}
        if system is not self.request.system_message:
            overrides["system_message"] = system
        return self.request.override(**overrides)

    def _back(self, msg: Message) -> Any:
        """The LangChain message for one canonical output message."""
        key = msg.id if isinstance(msg.id, str) else ""
        original = self.originals.get(key)
        given = self.canonical.get(key)
        if original is not None and (msg is given or msg == given):
            return original  # untouched: the agent's own object
        d = to_openai([msg])[0]
        fresh = convert_to_messages([d])[0]
        if original is None:
            return fresh
        update: dict[str, Any] = {"content": fresh.content}
        if getattr(original, "type", None) == "ai":
            update["tool_calls"] = getattr(fresh, "tool_calls", [])
        return original.model_copy(update=update)


def _is_system(lc: Any) -> bool:
    return getattr(lc, "type", None) == "system"


def _tool_definitions(tools: Sequence[Any] | None) -> list[Mapping[str, Any]] | None:
    """The request's tools as OpenAI tool definitions: they count against the window."""
    if not tools:
        return None
    out: list[Mapping[str, Any]] = []
    for tool in tools:
        try:
            out.append(convert_to_openai_tool(tool))
        except Exception:  # a provider's built-in tool (a dict it alone understands)
            if isinstance(tool, Mapping):
                out.append(dict(tool))
    return out or None
