"""Anthropic Messages (``POST /v1/messages``; ``/v1/messages/count_tokens`` counts the request
the proxy would send): ``system`` + ``messages`` through the warden, the proxy's prompt-cache
breakpoints, the recall tool as a tool, and the client's one stream of events made of the
rounds' streams.

How it works: docs/proxy.md (`contextwarden.proxy.wire.messages`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..._exceptions import FormatError
from ...formats.anthropic import provider_compaction
from ...formats.cache_control import add_counting, count_cache_breakpoints
from ...formats.validate import validate_anthropic
from ...recall import RECALL_TOOL_NAME, recall_ref
from ..recall import Event, add_usage, encode_event
from ..stats import Route
from ._base import PROVIDER_COMPACTION, Has, Holding, Ran, Turn, Wire, json_object

__all__ = ["COUNT_TOKENS", "MESSAGES", "AnthropicSplice", "MessagesWire"]


class MessagesWire(Wire):
    name: Route = "anthropic"
    provider = "anthropic"
    paths = ("/v1/messages",)
    method = "transform_anthropic"
    api = "anthropic"
    #: whether the proxy's prompt-cache breakpoints are added (see docs/proxy.md)
    breakpoints = True

    def skip(self, body: Mapping[str, Any]) -> tuple[str, str] | None:
        """Server-side compaction asked for, or a compaction block in the history: the server
        compacts it and ignores what precedes the block; the count too is the server's."""
        reason = provider_compaction(body)
        return None if reason is None else (PROVIDER_COMPACTION, reason)

    def run(
        self, warden: Any, body: dict[str, Any], has: Has, options: dict[str, Any], marks: bool
    ) -> Ran:
        messages, system = body["messages"], body.get("system")
        tools = options["tools"]
        new_system, new_messages, result = warden.transform_anthropic(
            messages, system=system, **options
        )
        added = 0
        new_tools = tools
        if marks and self.breakpoints and not _client_caches(has, body, system, messages, tools):
            new_system, new_messages, new_tools, added = add_counting(
                new_system, new_messages, tools, _stable(result, len(new_messages))
            )
        fields: dict[str, Any] = {}
        if new_messages != messages:
            fields["messages"] = new_messages
        if new_system != system:
            fields["system"] = new_system
        if new_tools is not tools:
            fields["tools"] = new_tools
        if fields and "messages" not in fields:
            fields["messages"] = new_messages
        return Ran(fields, result, added)

    def problems(self, body: Mapping[str, Any], memo: dict[str, Any] | None = None) -> list[str]:
        return validate_anthropic(body.get("system"), body["messages"], memo)

    def choice_allows(self, choice: Any) -> bool:
        return isinstance(choice, dict) and choice.get("type") in ("auto", "any")

    def no_choice(self) -> dict[str, Any]:
        return {"tool_choice": {"type": "none"}}

    def reply_turn(self, reply: dict[str, Any]) -> Turn:
        content = reply.get("content")
        return _turn(content if isinstance(content, list) else [])

    def answers(self, turn: Turn, found: list[tuple[str, bool]]) -> list[dict[str, Any]]:
        results = [
            {"type": "tool_result", "tool_use_id": call_id, "content": text}
            | ({"is_error": True} if error else {})
            for (call_id, _), (text, error) in zip(turn.calls, found, strict=True)
        ]
        return [*turn.sent, {"role": "user", "content": results}]

    def splice(self) -> AnthropicSplice:
        return AnthropicSplice()

    def refused(self, splice: Any, status: int, raw: bytes) -> bytes:
        body = json_object(raw)
        if body is not None and isinstance(body.get("error"), dict):
            return encode_event("error", {"type": "error", **body})
        return super().refused(splice, status, raw)


class CountTokensWire(MessagesWire):
    """``/v1/messages/count_tokens``: the same body without a reply, counted as the proxy would
    send it; no recall tool (nothing is generated)."""

    name: Route = "count_tokens"
    paths = ("/v1/messages/count_tokens",)
    recall = False
    breakpoints = False


MESSAGES = MessagesWire()
COUNT_TOKENS = CountTokensWire()


def _stable(result: Any, written: int) -> int | None:
    """The number of leading messages written that the conversation's next edits will not
    rewrite (where a cache breakpoint pays), None when the warden does not say."""
    stable = getattr(result, "stable_prefix", None)
    canonical = getattr(result, "messages", None)
    if isinstance(stable, int) and isinstance(canonical, Sequence):
        # the result counts canonical messages; the system prompt's (those before the first
        # other one) are not among the messages written
        stable -= next(
            (k for k, m in enumerate(canonical[:stable]) if getattr(m, "role", None) != "system"),
            stable,
        )
    if not isinstance(stable, int) or not 0 <= stable <= written:
        return None
    return stable


#: A ``cache_control`` key, and a ``\\u`` escape (which could spell one): literal patterns,
#: searched at the speed of a byte scan.
_CACHE_KEY = re.compile(rb'"cache_control"')
_ESCAPE = re.compile(rb"\\u")


def _client_caches(
    has: Has, body: Mapping[str, Any], system: Any, messages: list[Any], tools: Any
) -> bool:
    """Whether the client asked for prompt caching itself: a breakpoint anywhere, or top-level
    automatic caching. A request we cannot read counts as yes (we leave it as it is)."""
    if body.get("cache_control") is not None:
        return True
    if not has(_CACHE_KEY, 15) and not has(_ESCAPE, 2):
        return False  # the common case, without walking the history: the key is nowhere
    try:
        return count_cache_breakpoints(system, messages, tools) > 0
    except FormatError:
        return True


def _turn(blocks: list[Any]) -> Turn:
    kept: list[dict[str, Any]] = []
    calls: list[tuple[str, str]] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "tool_use":
            if block.get("name") != RECALL_TOOL_NAME:
                continue  # the client's call: never shown to it, asked again after the recall
            calls.append((str(block.get("id", "")), recall_ref(block.get("input"))))
        elif kind == "text" and not block.get("text"):
            continue  # the API refuses an empty text block
        kept.append(block)
    return Turn(({"role": "assistant", "content": kept},), tuple(calls))


@dataclass
class AnthropicSplice(Holding):
    """The client's one Messages stream made of the rounds' streams. Text, thinking and other
    blocks pass as they come, until a ``tool_use`` block starts: from there on, and the
    ``message_delta`` / ``message_stop`` that end a message, are held. A round that called the
    tool is followed by another, whose ``message_start`` is dropped and whose block indices
    follow those the client has; the last round's held events go out at the end (usage: the
    sum over rounds)."""

    offset: int = 0
    passed: int = 0
    blocks: dict[int, dict[str, Any]] = field(default_factory=dict)
    inputs: dict[int, list[str]] = field(default_factory=dict)
    round_usage: dict[str, Any] = field(default_factory=dict)

    def feed(self, event: Event) -> list[bytes]:
        data = event.json()
        kind = data.get("type") if isinstance(data, dict) else None
        if not isinstance(data, dict) or kind in (None, "ping", "error"):
            self.failed = self.failed or kind == "error"
            return [event.raw]
        self._accumulate(kind, data)
        if kind == "message_start":
            return [event.raw] if self.round == 0 else []
        block = data.get("content_block")
        if kind == "content_block_start" and isinstance(block, dict):
            self.holding = self.holding or block.get("type") == "tool_use"
            self.passed += 0 if self.holding else 1
        if self.holding or kind in ("message_delta", "message_stop"):
            self.held.append(event)
            return []
        return [self._emit(event, data)]

    def _accumulate(self, kind: str, data: dict[str, Any]) -> None:
        index = data.get("index")
        if kind == "message_start":
            usage = (data.get("message") or {}).get("usage")
            self.round_usage = dict(usage) if isinstance(usage, dict) else {}
        elif kind == "message_delta" and isinstance(data.get("usage"), dict):
            self.round_usage.update({k: v for k, v in data["usage"].items() if v is not None})
        elif kind == "content_block_start" and isinstance(index, int):
            self.blocks[index] = dict(data.get("content_block") or {})
        elif kind == "content_block_delta" and index in self.blocks:
            _apply_delta(self.blocks[index], self.inputs.setdefault(index, []), data)

    def _emit(self, event: Event, data: dict[str, Any]) -> bytes:
        if self.round == 0:
            return event.raw
        if isinstance(data.get("index"), int):
            data = {**data, "index": data["index"] + self.offset}
        if data.get("type") == "message_delta":
            data = {**data, "usage": add_usage(self.usage, self.round_usage)}
        return encode_event(event.name or str(data.get("type")), data)

    def end_round(self) -> Turn:
        blocks = []
        for index in sorted(self.blocks):
            block = dict(self.blocks[index])
            if block.get("type") == "tool_use" and self.inputs.get(index):
                block["input"] = json_object("".join(self.inputs[index])) or {}
            blocks.append(block)
        return _turn(blocks)

    def next_round(self) -> None:
        self.advance(self.round_usage)
        self.offset += self.passed
        self.passed, self.blocks, self.inputs, self.round_usage = 0, {}, {}, {}


def _apply_delta(block: dict[str, Any], inputs: list[str], data: dict[str, Any]) -> None:
    delta = data.get("delta")
    if not isinstance(delta, dict):
        return
    kind = delta.get("type")
    if kind == "text_delta":
        block["text"] = str(block.get("text", "")) + str(delta.get("text", ""))
    elif kind == "thinking_delta":
        block["thinking"] = str(block.get("thinking", "")) + str(delta.get("thinking", ""))
    elif kind == "signature_delta":
        block["signature"] = delta.get("signature", "")
    elif kind == "input_json_delta":
        inputs.append(str(delta.get("partial_json", "")))
