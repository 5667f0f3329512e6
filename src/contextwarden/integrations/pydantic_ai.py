"""pydantic-ai: a capability that hands the model the warden's copy of the run's messages.

::

    from pydantic_ai import Agent
    from contextwarden.integrations.pydantic_ai import ContextWarden

    warden = ContextWarden(window=128_000)
    agent = Agent("openai:gpt-4o", capabilities=[warden])       # the run keeps every message
    agent = Agent("openai:gpt-4o", history_processors=[warden])  # the run keeps the warden's copy

How it works, and what the hook cannot see: docs/integrations.md (pydantic-ai).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .. import ImageBlock, Message, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock
from ._common import Regrouped, WardenHook, output_limit, require

if TYPE_CHECKING:
    from pydantic_ai import RunContext
    from pydantic_ai import messages as pai
    from pydantic_ai.capabilities import AbstractCapability
else:  # the framework, imported with a message naming the extra when it is missing
    pai = require("pydantic_ai.messages", "pydantic-ai")
    AbstractCapability = require("pydantic_ai.capabilities", "pydantic-ai").AbstractCapability
    # read at runtime: pydantic-ai passes the run context to a processor whose first
    # parameter is annotated with it
    RunContext = require("pydantic_ai", "pydantic-ai").RunContext

__all__ = ["ContextWarden"]

_INSTRUCTIONS = "pai-instructions"
#: pydantic-ai 2.64 added the per-attempt hook the capability uses; before it, the warden runs
#: in ``before_model_request``
_PREPARE_HOOK = hasattr(AbstractCapability, "prepare_model_request")


class ContextWarden(WardenHook, AbstractCapability[Any]):
    """A pydantic-ai capability (``Agent(capabilities=[...])``) and history processor
    (``Agent(history_processors=[...])``) running a :class:`~contextwarden.Warden`
    (:class:`WardenHook`'s arguments; ``model`` default: the serving model's ``model_name``):
    reuse it across runs."""

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # built from Python objects, not from an agent spec

    async def prepare_model_request(self, ctx: Any, request_context: Any) -> Any:
        """Each attempt's request, once its serving model is known (pydantic-ai 2.64 on)."""
        return await self._prepare(request_context)

    async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
        """Before pydantic-ai 2.64 this is the request's only hook, and the model is known."""
        return request_context if _PREPARE_HOOK else await self._prepare(request_context)

    async def _prepare(self, request_context: Any) -> Any:
        params = request_context.model_request_parameters
        instructions = "\n\n".join(p.content for p in params.instruction_parts or ())
        tools = [_tool_definition(t) for t in (*params.function_tools, *params.output_tools)]
        request_context.messages = await self._run(
            request_context.messages,
            model=getattr(request_context.model, "model_name", None),
            instructions=instructions,
            tools=tools,
            limit=output_limit(request_context.model_settings),
        )
        return request_context

    async def __call__(self, ctx: RunContext[Any], messages: list[Any]) -> list[Any]:
        """The history processor: the warden's copy of ``messages``."""
        model = getattr(ctx, "model", None)
        return await self._run(
            messages,
            model=getattr(model, "model_name", None),
            instructions=_latest_instructions(messages),
            tools=None,
            limit=output_limit(getattr(ctx, "model_settings", None)),
        )

    async def _run(
        self,
        messages: Sequence[Any],
        *,
        model: str | None,
        instructions: str,
        tools: list[Mapping[str, Any]] | None,
        limit: int | None,
    ) -> list[Any]:
        history = _History(messages, instructions)
        result = await self.warden.atransform(
            history.canonical, model=self._model or model, tools=tools or None, max_tokens=limit
        )
        self.last_result = result
        return history.back(result.messages)


def _latest_instructions(messages: Sequence[Any]) -> str:
    for m in reversed(messages):
        text = getattr(m, "instructions", None)
        if isinstance(m, pai.ModelRequest) and text:
            return str(text)
    return ""


def _tool_definition(tool: Any) -> Mapping[str, Any]:
    fn = {"name": tool.name, "description": tool.description or ""}
    return {"type": "function", "function": {**fn, "parameters": tool.parameters_json_schema}}


class _History:
    """One call's messages as canonical values, and the way back to pydantic-ai objects.

    A response is one canonical assistant message keyed ``pai-I``; each part of a request is
    one canonical message keyed ``pai-I.J`` (a tool return is a tool message, a user prompt a
    user message, a system prompt a system message).
    """

    def __init__(self, messages: Sequence[Any], instructions: str) -> None:
        self.messages = list(messages)
        self.canonical: list[Message] = []
        self.read: dict[str, Message] = {}  # key -> the canonical value read
        self.origin: dict[str, tuple[int, int]] = {}  # key -> (message, part); part -1: all
        if instructions:
            self._add(Message("system", (TextBlock(instructions),), id=_INSTRUCTIONS), (-1, -1))
        for i, m in enumerate(self.messages):
            if isinstance(m, pai.ModelResponse):
                self._add(_response_message(m, f"pai-{i}"), (i, -1))
                continue
            for j, part in enumerate(m.parts):
                msg = _part_message(part, f"pai-{i}.{j}")
                if msg is not None:
                    self._add(msg, (i, j))

    def _add(self, msg: Message, origin: tuple[int, int]) -> None:
        key = str(msg.id)
        self.canonical.append(msg)
        self.read[key] = msg
        self.origin[key] = origin

    def back(self, result: Sequence[Message]) -> list[Any]:
        out = Regrouped(self.messages, _request)
        for msg in result:
            key = msg.id if isinstance(msg.id, str) else ""
            if key == _INSTRUCTIONS:
                continue  # the instructions go to the model from the request's parameters
            origin = self.origin.get(key)
            if msg.role == "assistant":
                out.turn(self._response(msg, origin))
            elif origin is not None:
                out.part(origin[0], self._part(msg, key, origin))
            else:  # a message the warden wrote (a summary)
                out.part(-1, _new_part(msg))
        out.flush()
        return out.out

    def _part(self, msg: Message, key: str, origin: tuple[int, int]) -> Any:
        original = self.messages[origin[0]].parts[origin[1]]
        if msg == self.read[key]:
            return original
        return dataclasses.replace(original, content="\n".join(_texts(msg)))

    def _response(self, msg: Message, origin: tuple[int, int] | None) -> Any:
        if origin is None:
            return pai.ModelResponse(parts=[pai.TextPart(content=msg.text)])
        original = self.messages[origin[0]]
        if msg == self.read[str(msg.id)]:
            return original
        calls = {b.id: b for b in msg.content if isinstance(b, ToolCallBlock)}
        texts = [b.text for b in msg.content if isinstance(b, TextBlock)]
        thinking = {b.thinking for b in msg.content if isinstance(b, ThinkingBlock)}
        kept: list[Any] = []
        for part in original.parts:
            if isinstance(part, pai.ToolCallPart):
                call = calls.pop(part.tool_call_id, None)
                if call is not None:
                    same = call.arguments == part.args_as_json_str()
                    kept.append(part if same else dataclasses.replace(part, args=call.arguments))
            elif isinstance(part, pai.ThinkingPart):
                if part.content in thinking:
                    kept.append(part)
            elif isinstance(part, pai.TextPart):
                if texts:
                    text = texts.pop(0)
                    kept.append(
                        part if text == part.content else dataclasses.replace(part, content=text)
                    )
            else:  # a part the warden did not read stays where it was
                kept.append(part)
        kept.extend(pai.TextPart(content=t) for t in texts)
        kept.extend(
            pai.ToolCallPart(tool_name=c.name, args=c.arguments, tool_call_id=c.id)
            for c in calls.values()
        )
        return dataclasses.replace(original, parts=kept)


def _request(base: Any, parts: list[Any]) -> Any:
    return pai.ModelRequest(parts=parts) if base is None else dataclasses.replace(base, parts=parts)


def _texts(msg: Message) -> list[str]:
    return [b.text for b in msg.content if isinstance(b, TextBlock | ToolResultBlock)]


def _new_part(msg: Message) -> Any:
    make = pai.SystemPromptPart if msg.role == "system" else pai.UserPromptPart
    return make(content="\n".join(_texts(msg)))


def _response_message(response: Any, key: str) -> Message:
    blocks: list[Any] = []
    for part in response.parts:
        if isinstance(part, pai.ThinkingPart):
            blocks.append(ThinkingBlock(part.content, signature=part.signature))
        elif isinstance(part, pai.TextPart):
            blocks.append(TextBlock(part.content))
        elif isinstance(part, pai.ToolCallPart):
            blocks.append(ToolCallBlock(part.tool_call_id, part.tool_name, part.args_as_json_str()))
    # without blocks: only parts the provider ran itself (native tools, files)
    return Message("assistant", tuple(blocks or [TextBlock(" ")]), id=key)


def _part_message(part: Any, key: str) -> Message | None:
    if isinstance(part, pai.SystemPromptPart):
        return Message("system", (TextBlock(part.content),), id=key)
    if isinstance(part, pai.UserPromptPart):
        return Message("user", tuple(_user_blocks(part.content)), id=key)
    if isinstance(part, pai.BaseToolReturnPart):
        result = ToolResultBlock(part.tool_call_id, part.model_response_str())
        return Message("tool", (result,), id=key)
    if isinstance(part, pai.RetryPromptPart):
        if part.tool_name is None:
            return Message("user", (TextBlock(part.model_response()),), id=key)
        result = ToolResultBlock(part.tool_call_id, part.model_response(), is_error=True)
        return Message("tool", (result,), id=key)
    return None


def _user_blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [TextBlock(content)]
    blocks: list[Any] = []
    for item in content:
        if isinstance(item, str):
            blocks.append(TextBlock(item))
        elif getattr(item, "kind", "") in {"image-url", "binary"}:
            blocks.append(ImageBlock({"type": "pydantic-ai", "kind": item.kind}))
    return blocks or [TextBlock(" ")]
