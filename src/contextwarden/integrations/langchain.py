"""LangChain v1 agents: a middleware that hands the model the warden's copy of the messages.

::

    from langchain.agents import create_agent
    from contextwarden.integrations.langchain import ContextWardenMiddleware

    agent = create_agent(model, tools, middleware=[ContextWardenMiddleware(window=128_000)])

On every model call (``wrap_model_call`` / ``awrap_model_call``) the middleware converts the
request's system message and messages to canonical values, runs the warden, and calls the model
with the result through ``request.override(...)``. The agent's state is not touched: it keeps
every message, the model sees the shorter list. Messages the warden left alone are handed over
as the very objects the agent holds (ids, metadata, ``response_metadata`` intact); an edited
message (a masked tool output, a cut huge output) is a copy of the original with new content;
a summary the warden wrote is a new ``HumanMessage``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._config import WardenConfig
from .._messages import Message
from .._warden import TransformResult, Warden
from ..formats.openai import from_openai, to_openai
from ._common import hook_warden, require

if TYPE_CHECKING:
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import convert_to_messages, convert_to_openai_messages
    from langchain_core.utils.function_calling import convert_to_openai_tool
else:  # the framework, imported with a message naming the extra when it is missing
    AgentMiddleware = require("langchain.agents.middleware", "langchain").AgentMiddleware
    _lc_messages = require("langchain_core.messages", "langchain")
    convert_to_messages = _lc_messages.convert_to_messages
    convert_to_openai_messages = _lc_messages.convert_to_openai_messages
    convert_to_openai_tool = require(
        "langchain_core.utils.function_calling", "langchain"
    ).convert_to_openai_tool

__all__ = ["ContextWardenMiddleware"]

_SYSTEM_ID = "lc-system"


class ContextWardenMiddleware(AgentMiddleware):
    """A LangChain v1 ``AgentMiddleware`` running a :class:`~contextwarden.Warden` before each
    model call.

    ``model`` names the tokenizer and (without ``window``) the registry's window; left out, the
    chat model's own ``model_name`` / ``model`` is used when it has one, else ``config.model``.
    ``window`` overrides the window (default: ``config.context_window``, else the registry's).
    ``config`` is the :class:`~contextwarden.WardenConfig` (default: the defaults). One
    middleware keeps one Warden, and the warden one log per conversation: reuse the middleware
    across the threads of an agent. ``last_result`` is the latest call's
    :class:`~contextwarden.TransformResult`.
    """

    def __init__(
        self,
        model: str | None = None,
        window: int | None = None,
        config: WardenConfig | None = None,
    ) -> None:
        super().__init__()
        self.warden: Warden = hook_warden(config, model, window)
        self._model = model
        self.last_result: TransformResult | None = None

    @property
    def name(self) -> str:
        return "ContextWardenMiddleware"

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        plan = _Plan(self, request)
        result = self.warden.transform(plan.messages, model=plan.model, tools=plan.tools)
        return handler(plan.request_for(self, result))

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        plan = _Plan(self, request)
        result = await self.warden.atransform(plan.messages, model=plan.model, tools=plan.tools)
        return await handler(plan.request_for(self, result))


class _Plan:
    """One call's conversion: canonical messages, and the way back to LangChain objects."""

    def __init__(self, owner: ContextWardenMiddleware, request: Any) -> None:
        self.request = request
        self.model = owner._model or _model_name(request.model)
        self.tools = _tool_definitions(request.tools)
        originals: list[Any] = []
        if request.system_message is not None:
            originals.append(request.system_message)
        originals.extend(request.messages)
        self.originals: dict[str, Any] = {}  # canonical id -> the agent's message
        self.canonical: dict[str, Message] = {}  # canonical id -> its canonical value
        self.messages: list[Message] = []
        for i, lc in enumerate(originals):
            if i == 0 and request.system_message is not None:
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


def _model_name(model: Any) -> str | None:
    for attr in ("model_name", "model", "model_id"):
        name = getattr(model, attr, None)
        if isinstance(name, str) and name:
            return name
    return None


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
