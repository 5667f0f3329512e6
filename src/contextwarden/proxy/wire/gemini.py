"""Gemini API (``POST /v1beta/models/{model}:generateContent`` and ``:streamGenerateContent``,
``?alt=sse`` for server-sent events): ``systemInstruction`` + ``contents`` through the warden
(:func:`~contextwarden.formats.gemini.from_gemini` / :func:`~contextwarden.formats.gemini.to_gemini`),
the recall tool as a function declaration, and the client's one stream of chunks made of the
rounds' streams.

How it works: docs/proxy.md (`contextwarden.proxy.wire.gemini`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...formats._common import limit_value
from ...formats.gemini import from_gemini, to_gemini
from ...formats.validate import validate_gemini
from ...recall import RECALL_TOOL_NAME, recall_ref, recall_tool
from ..recall import Event, add_usage, encode_event
from ..stats import Route
from ._base import Has, Holding, Ran, Turn, Wire

__all__ = ["GEMINI", "GeminiSplice", "GeminiWire"]

#: ``/v1beta/models/gemini-2.5-pro:streamGenerateContent`` (``v1``, ``v1alpha`` alike).
_PATH = re.compile(
    r"^/v1(?:beta|alpha)?/(?:models|tunedModels)/([^/:]+):(streamG|g)enerateContent$"
)
_SYSTEM_KEYS = ("systemInstruction", "system_instruction")


class GeminiWire(Wire):
    name: Route = "gemini"
    provider = "gemini"
    items = "contents"
    check = staticmethod(validate_gemini)

    def serves(self, path: str) -> bool:
        return _PATH.match(path) is not None

    def model(self, body: Mapping[str, Any], path: str) -> str | None:
        found = _PATH.match(path)
        return found.group(1) if found else None

    def stream(self, body: Mapping[str, Any], path: str) -> bool:
        found = _PATH.match(path)
        return bool(found and found.group(2) == "streamG")

    def limit(self, body: Mapping[str, Any]) -> int | None:
        config = body.get("generationConfig", body.get("generation_config"))
        if not isinstance(config, Mapping):
            return None
        return limit_value(config.get("maxOutputTokens", config.get("max_output_tokens")))

    def count_tools(self, body: Mapping[str, Any]) -> list[Any] | None:
        """The function declarations in the chat shape the counter reads."""
        out = [
            {"type": "function", "function": {k: v for k, v in d.items() if k != "behavior"}}
            for d in _declarations(body.get("tools"))
        ]
        return out or None

    def run(
        self, warden: Any, body: dict[str, Any], has: Has, options: dict[str, Any], marks: bool
    ) -> Ran:
        contents = body["contents"]
        key = next((k for k in _SYSTEM_KEYS if k in body), _SYSTEM_KEYS[0])
        system = body.get(key)
        messages = from_gemini(contents, system)
        result = warden.transform(messages, **options)
        canonical = list(result.messages)
        if body.get("cachedContent") is not None and system is None:
            # the cache holds the system instruction: a new one goes as the first user turn
            canonical = [m.replace(role="user") if m.role == "system" else m for m in canonical]
        new_system, new_contents = to_gemini(canonical)
        if new_contents == contents and new_system == system:
            return Ran({}, result)
        return Ran({"contents": new_contents, key: new_system}, result)

    # -- the recall tool -------------------------------------------------------------------------
    def recall_tool(self) -> dict[str, Any]:
        fn = recall_tool("openai")["function"]
        return {"functionDeclarations": [fn]}

    def may_offer(self, body: Mapping[str, Any]) -> bool:
        """Not beside ``cachedContent`` (its tools are in the cache), nor on a call for
        structured output (``responseMimeType`` JSON or a response schema: Gemini CLI's loop
        check retries for minutes on a reply that is a call), nor when the client's
        ``toolConfig`` forbids calls or names the functions allowed."""
        if body.get("cachedContent") is not None:
            return False
        config = body.get("generationConfig")
        if isinstance(config, dict) and (
            config.get("responseMimeType") == "application/json"
            or config.get("responseJsonSchema") is not None
            or config.get("responseSchema") is not None
        ):
            return False
        tools = body.get("tools")
        if tools is not None and not isinstance(tools, list):
            return False
        if any(d.get("name") == RECALL_TOOL_NAME for d in _declarations(tools)):
            return False
        config = body.get("toolConfig")
        calling = config.get("functionCallingConfig") if isinstance(config, Mapping) else None
        return not isinstance(calling, Mapping) or not (
            calling.get("allowedFunctionNames") or calling.get("mode") == "NONE"
        )

    def no_choice(self) -> dict[str, Any]:
        return {"toolConfig": {"functionCallingConfig": {"mode": "NONE"}}}

    def reply_turn(self, reply: dict[str, Any]) -> Turn:
        return _turn(_reply_parts(reply))

    def answers(self, turn: Turn, found: list[tuple[str, bool]]) -> list[dict[str, Any]]:
        parts = []
        for (call_id, _), (text, error) in zip(turn.calls, found, strict=True):
            fn: dict[str, Any] = {
                "name": RECALL_TOOL_NAME,
                "response": {"error" if error else "output": text},
            }
            if call_id:
                fn["id"] = call_id
            parts.append({"functionResponse": fn})
        return [*turn.sent, {"role": "user", "parts": parts}]

    def splice(self) -> GeminiSplice:
        return GeminiSplice()

    def usage(self, reply: Mapping[str, Any]) -> Any:
        return reply.get("usageMetadata")

    def client_reply(self, reply: dict[str, Any], usage: Any) -> dict[str, Any]:
        """Without recall calls (a model may call the tool on the last round, which does not
        offer it), its ``usageMetadata`` the sum over the rounds."""
        out = _without_recall(reply)
        return out if usage is None else {**out, "usageMetadata": usage}


GEMINI = GeminiWire()


def _declarations(tools: Any) -> list[dict[str, Any]]:
    """The function declarations of a request's tools (camelCase or snake_case)."""
    out: list[dict[str, Any]] = []
    for tool in tools if isinstance(tools, list) else ():
        if isinstance(tool, Mapping):
            found = tool.get("functionDeclarations", tool.get("function_declarations"))
            out += [d for d in found or () if isinstance(d, dict) and "name" in d]
    return out


def _reply_parts(reply: Mapping[str, Any]) -> list[Any]:
    candidates = reply.get("candidates")
    first = candidates[0] if isinstance(candidates, list) and candidates else None
    content = first.get("content") if isinstance(first, dict) else None
    parts = content.get("parts") if isinstance(content, dict) else None
    return parts if isinstance(parts, list) else []


def _call(part: Any) -> dict[str, Any] | None:
    fn = part.get("functionCall") if isinstance(part, dict) else None
    return fn if isinstance(fn, dict) else None


def _is_recall(part: Any) -> bool:
    fn = _call(part)
    return fn is not None and fn.get("name") == RECALL_TOOL_NAME


def _turn(parts: list[Any]) -> Turn:
    """The model's parts as the next round sends them back (thought signatures with them),
    but the client's own calls, and the recall calls: (id, ref)."""
    kept: list[dict[str, Any]] = []
    calls: list[tuple[str, str]] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        fn = _call(part)
        if fn is not None and fn.get("name") != RECALL_TOOL_NAME:
            continue  # the client's call: never shown to it, asked again after the recall
        if fn is not None:
            calls.append((str(fn.get("id") or ""), recall_ref(fn.get("args"))))
        kept.append(part)
    return Turn(({"role": "model", "parts": kept},), tuple(calls))


def _without_recall(chunk: dict[str, Any]) -> dict[str, Any]:
    """A reply (or stream chunk) without recall calls in its first candidate."""
    parts = _reply_parts(chunk)
    if not any(_is_recall(p) for p in parts):
        return chunk
    first = dict(chunk["candidates"][0])
    first["content"] = {**first["content"], "parts": [p for p in parts if not _is_recall(p)]}
    return {**chunk, "candidates": [first, *chunk["candidates"][1:]]}


@dataclass
class GeminiSplice(Holding):
    """The client's one stream made of the rounds' streams (each chunk a whole
    ``GenerateContentResponse``). Chunks of text and thought pass as they come, until one
    carries a function call: from there on, and the chunk with the ``finishReason``, are held.
    A round that called the tool is followed by another; the last round's held chunks go out at
    the end, without recall calls, their ``usageMetadata`` the sum over rounds."""

    parts: list[Any] = field(default_factory=list)
    round_usage: Any = None

    def feed(self, event: Event) -> list[bytes]:
        data = event.json()
        if not isinstance(data, dict) or "error" in data:
            self.failed = self.failed or isinstance(data, dict)
            return [event.raw]
        parts = _reply_parts(data)
        self.parts += parts
        if isinstance(data.get("usageMetadata"), dict):
            self.round_usage = data["usageMetadata"]
        candidates = data.get("candidates")
        ends = isinstance(candidates, list) and any(
            isinstance(c, dict) and c.get("finishReason") for c in candidates
        )
        self.holding = self.holding or any(_call(p) is not None for p in parts)
        if self.holding or ends:
            self.held.append(event)
            return []
        return [self._emit(event, data)]

    def _emit(self, event: Event, data: dict[str, Any]) -> bytes:
        out = _without_recall(data)
        if self.round and isinstance(out.get("usageMetadata"), dict):
            out = {**out, "usageMetadata": add_usage(self.usage, out["usageMetadata"])}
        return event.raw if out is data else encode_event(event.name, out)

    def end_round(self) -> Turn:
        return _turn(_merged(self.parts))

    def next_round(self) -> None:
        self.advance(self.round_usage)
        self.parts, self.round_usage = [], None


def _merged(parts: list[Any]) -> list[Any]:
    """A stream's parts as one content: runs of plain text (no signature, not a thought)
    joined, every other part as it came."""
    out: list[Any] = []
    for part in parts:
        plain = isinstance(part, dict) and set(part) == {"text"}
        if plain and out and isinstance(out[-1], dict) and set(out[-1]) == {"text"}:
            out[-1] = {"text": out[-1]["text"] + part["text"]}
        else:
            out.append(dict(part) if plain else part)
    return out
