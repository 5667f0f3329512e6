"""Google ADK: a ``before_model_callback`` that hands the model the warden's copy of the request.

::

    from google.adk.agents import LlmAgent
    from contextwarden.integrations.adk import WardenCallback

    agent = LlmAgent(name="coder", model="gemini-2.5-flash", tools=[...],
                     before_model_callback=WardenCallback(window=1_000_000))

How it works, and what the hook cannot see: docs/integrations.md (Google ADK).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .. import (
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ._common import Regrouped, WardenHook, output_limit, require

if TYPE_CHECKING:
    from google.genai import types
else:  # the framework, imported with a message naming the extra when it is missing
    types = require("google.genai.types", "adk")

__all__ = ["WardenCallback"]

_SYSTEM = "adk-system"


class WardenCallback(WardenHook):
    """An ADK ``before_model_callback`` running a :class:`~contextwarden.Warden` (async;
    :class:`WardenHook`'s arguments, ``model`` default: the request's): give one callback to
    every agent of an application."""

    async def __call__(self, callback_context: Any, llm_request: Any) -> None:
        config = llm_request.config
        history = _Contents(llm_request.contents, _system_text(config))
        model = self._model or (llm_request.model if isinstance(llm_request.model, str) else None)
        result = await self.warden.atransform(
            history.canonical,
            model=model,
            tools=_tool_definitions(config),
            max_tokens=output_limit(config),
        )
        self.last_result = result
        llm_request.contents = history.back(result.messages)
        return None


def _system_text(config: Any) -> str:
    system = getattr(config, "system_instruction", None)
    if system is None:
        return ""
    if isinstance(system, str):
        return system
    parts = getattr(system, "parts", None) or []
    return "\n".join(p.text for p in parts if getattr(p, "text", None))


def _tool_definitions(config: Any) -> list[Mapping[str, Any]] | None:
    """The function declarations as OpenAI tool definitions: they count against the window."""
    out: list[Mapping[str, Any]] = []
    for tool in getattr(config, "tools", None) or ():
        for fd in getattr(tool, "function_declarations", None) or ():
            params = fd.parameters_json_schema
            if params is None and fd.parameters is not None:
                params = fd.parameters.model_dump(exclude_none=True, mode="json")
            fn = {"name": fd.name or "", "description": fd.description or ""}
            out.append({"type": "function", "function": {**fn, "parameters": params or {}}})
    return out or None


class _Contents:
    """One request's contents as canonical values, and the way back to ADK ``Content``.

    A model turn is one assistant message keyed ``adk-I``; each part of a user turn is one
    message keyed ``adk-I.J`` (a function response a tool message, text a user message).
    """

    def __init__(self, contents: Sequence[Any], system: str) -> None:
        self.contents = list(contents)
        self.canonical: list[Message] = []
        self.read: dict[str, Message] = {}
        if system:
            self._add(Message("system", (TextBlock(system),), id=_SYSTEM))
        calls: dict[str, list[str]] = {}  # name -> ids of the last model turn's calls
        for i, content in enumerate(self.contents):
            parts = list(content.parts or ())
            if content.role == "model":
                msg, calls = _model_message(parts, f"adk-{i}")
                self._add(msg)
                continue
            for j, part in enumerate(parts):
                key = f"adk-{i}.{j}"
                fr = part.function_response
                if fr is not None:
                    pending = calls.get(fr.name or "", [])
                    call_id = fr.id or (pending.pop(0) if pending else key)
                    text = _response_text(fr.response)
                    self._add(Message("tool", (ToolResultBlock(call_id, text),), id=key))
                elif part.text is not None:
                    self._add(Message("user", (TextBlock(part.text),), id=key))
                elif part.inline_data is not None or part.file_data is not None:
                    self._add(Message("user", (ImageBlock({"type": "adk-part"}),), id=key))
            calls = {}

    def _add(self, msg: Message) -> None:
        self.canonical.append(msg)
        self.read[str(msg.id)] = msg

    def back(self, result: Sequence[Message]) -> list[Any]:
        out = Regrouped(self.contents, lambda _, parts: types.Content(role="user", parts=parts))
        for msg in result:
            key = msg.id if isinstance(msg.id, str) else ""
            if key == _SYSTEM:
                continue  # the system instruction stays in the request's config
            if msg.role == "assistant":
                out.turn(self._model_turn(msg, key))
                continue
            i, j = _position(key)
            if i is not None and j is not None and msg == self.read.get(key):
                out.part(i, self.contents[i].parts[j])
            elif i is not None and j is not None and msg.role == "tool":
                original = self.contents[i].parts[j].function_response
                text = "\n".join(b.text for b in msg.tool_results)
                response = types.FunctionResponse(
                    id=original.id, name=original.name, response={"result": text}
                )
                out.part(-1, types.Part(function_response=response))
            else:  # a text the warden cut or wrote (a summary)
                text = "\n".join([msg.text, *(b.text for b in msg.tool_results)]).strip()
                out.part(-1, types.Part(text=text or " "))
        out.flush()
        return out.out

    def _model_turn(self, msg: Message, key: str) -> Any:
        i, _ = _position(key)
        if i is None:
            return types.Content(role="model", parts=[types.Part(text=msg.text or " ")])
        original = self.contents[i]
        if msg == self.read.get(key):
            return original
        ids = {b.id for b in msg.tool_calls}
        thinking = {b.thinking for b in msg.thinking}
        texts = [b.text for b in msg.content if isinstance(b, TextBlock)]
        kept: list[Any] = []
        for j, part in enumerate(original.parts or ()):
            if part.function_call is not None:
                if (part.function_call.id or f"{key}.{j}") in ids:
                    kept.append(part)
            elif part.thought:
                if (part.text or "") in thinking:
                    kept.append(part)
            elif part.text is not None:
                if texts:
                    text = texts.pop(0)
                    kept.append(part if text == part.text else types.Part(text=text))
            else:  # a part the warden did not read (code, files) stays where it was
                kept.append(part)
        return types.Content(role="model", parts=kept or [types.Part(text=" ")])


def _response_text(response: Any) -> str:
    """A function response as the model reads it: the text of ADK's ``{"result": text}``
    wrapping of a plain return, else the JSON of the whole response."""
    if isinstance(response, Mapping) and list(response) == ["result"]:
        if isinstance(response["result"], str):
            return response["result"]
    return json.dumps(response, default=str, ensure_ascii=False)


def _position(key: str) -> tuple[int | None, int | None]:
    """``adk-I.J`` -> (I, J); ``adk-I`` -> (I, None); anything else (None, None)."""
    if not key.startswith("adk-") or key == _SYSTEM:
        return None, None
    head, _, tail = key[4:].partition(".")
    if not head.isdigit():
        return None, None
    return int(head), int(tail) if tail.isdigit() else None


def _model_message(parts: Sequence[Any], key: str) -> tuple[Message, dict[str, list[str]]]:
    """A model turn as one assistant message, and its calls' ids by name (for responses that
    came back without an id)."""
    blocks: list[Any] = []
    calls: dict[str, list[str]] = {}
    for j, part in enumerate(parts):
        fc = part.function_call
        if fc is not None:
            call_id = fc.id or f"{key}.{j}"
            args = json.dumps(fc.args or {}, default=str, ensure_ascii=False)
            blocks.append(ToolCallBlock(call_id, fc.name or "", args))
            calls.setdefault(fc.name or "", []).append(call_id)
        elif part.thought and part.text is not None:
            blocks.append(ThinkingBlock(part.text))
        elif part.text is not None:
            blocks.append(TextBlock(part.text))
    return Message("assistant", tuple(blocks or [TextBlock(" ")]), id=key), calls
