"""OpenAI Chat Completions (``POST /v1/chat/completions``): ``messages`` through the warden, the
recall tool as a function, and the client's one stream of chunks made of the rounds' streams."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...formats.validate import validate_openai
from ...recall import RECALL_TOOL_NAME, recall_ref
from ..recall import Event, add_usage, encode_event
from ._base import Has, Holding, Ran, Turn, Wire

__all__ = ["CHAT", "ChatWire", "OpenAISplice"]


class ChatWire(Wire):
    paths = ("/v1/chat/completions", "/chat/completions")
    method = "transform_openai"
    check = staticmethod(validate_openai)

    def run(
        self, warden: Any, body: dict[str, Any], has: Has, options: dict[str, Any], marks: bool
    ) -> Ran:
        messages = body["messages"]
        out, result = warden.transform_openai(messages, **options)
        return Ran({"messages": out} if out != messages else {}, result)

    def tool_name(self, tool: Any) -> Any:
        fn = tool.get("function") if isinstance(tool, dict) else None
        return fn.get("name") if isinstance(fn, dict) else None

    def may_offer(self, body: Mapping[str, Any]) -> bool:
        # one choice asked, and no legacy ``functions``, which the API refuses beside ``tools``
        if body.get("n") not in (None, 1) or "functions" in body:
            return False
        return super().may_offer(body)

    def reply_turn(self, reply: dict[str, Any]) -> Turn:
        choices = reply.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        message = first.get("message") if isinstance(first, dict) else None
        return _turn(message if isinstance(message, dict) else {})

    def answer(self, call_id: str, text: str, error: bool) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": call_id, "content": text}

    def splice(self) -> OpenAISplice:
        return OpenAISplice()


CHAT = ChatWire()


def _turn(message: dict[str, Any]) -> Turn:
    recalls = [
        c
        for c in message.get("tool_calls") or []
        if isinstance(c, dict) and CHAT.tool_name(c) == RECALL_TOOL_NAME
    ]
    calls = tuple(
        (str(c.get("id", "")), recall_ref(c["function"].get("arguments"))) for c in recalls
    )
    tool_calls = [
        {"id": i, "type": "function", "function": c["function"]}
        for (i, _), c in zip(calls, recalls, strict=True)
    ]
    content = message.get("content") or None
    return Turn(({"role": "assistant", "content": content, "tool_calls": tool_calls},), calls)


@dataclass
class OpenAISplice(Holding):
    """The client's one Chat Completions stream made of the rounds' streams. Content chunks
    pass as they come, until one carries ``tool_calls``: from there on, and the chunks that end
    the message (a ``finish_reason``, the usage chunk, ``[DONE]``), are held. A later round's
    chunks take the first one's id and lose their role; the last round's held chunks go out at
    the end (usage: the sum over rounds)."""

    first_id: Any = None
    content: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)

    def feed(self, event: Event) -> list[bytes]:
        if event.data.strip() == "[DONE]":
            self.held.append(event)
            return []
        data = event.json()
        if not isinstance(data, dict) or "error" in data:
            self.failed = self.failed or isinstance(data, dict)
            return [event.raw]
        if self.first_id is None:
            self.first_id = data.get("id")
        choices = [c for c in data.get("choices") or [] if isinstance(c, dict)]
        for choice in choices:
            self._accumulate(choice.get("delta"))
        ends = any(c.get("finish_reason") for c in choices) or (
            not choices and isinstance(data.get("usage"), dict)
        )
        if self.holding or ends:
            self.held.append(event)
            return []
        out = self._emit(event, data)
        return [out] if out else []

    def _accumulate(self, delta: Any) -> None:
        if not isinstance(delta, dict):
            return
        if isinstance(delta.get("content"), str):
            self.content.append(delta["content"])
        for call in delta.get("tool_calls") or []:
            if not isinstance(call, dict):
                continue
            self.holding = True
            entry = self.calls.setdefault(
                int(call.get("index") or 0), {"id": "", "name": "", "arguments": ""}
            )
            fn = call.get("function")
            fn = fn if isinstance(fn, dict) else {}
            entry["id"] = call.get("id") or entry["id"]
            entry["name"] = entry["name"] or fn.get("name") or ""
            entry["arguments"] += str(fn.get("arguments") or "")

    def _emit(self, event: Event, data: dict[str, Any]) -> bytes:
        if self.round == 0:
            return event.raw
        choices = [_without_role(c) for c in data.get("choices") or []]
        if isinstance(data.get("usage"), dict):
            data = {**data, "usage": add_usage(self.usage, data["usage"])}
        elif not any(_carries(c) for c in choices):
            return b""  # the round's opening role chunk: the client has had one
        return encode_event("", {**data, "id": self.first_id, "choices": choices})

    def end_round(self) -> Turn:
        calls = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for _, c in sorted(self.calls.items())
        ]
        return _turn({"content": "".join(self.content), "tool_calls": calls})

    def next_round(self) -> None:
        self.advance(self._round_usage())
        self.content, self.calls = [], {}

    def _round_usage(self) -> Any:
        for event in self.held:
            data = event.json()
            if isinstance(data, dict) and isinstance(data.get("usage"), dict):
                return data["usage"]
        return None

    def flush(self) -> list[bytes]:
        return [b for b in super().flush() if b]


def _without_role(choice: Any) -> Any:
    if not isinstance(choice, dict) or not isinstance(choice.get("delta"), dict):
        return choice
    delta = {k: v for k, v in choice["delta"].items() if k != "role"}
    return {**choice, "delta": delta}


def _carries(choice: Any) -> bool:
    """Whether a chunk's choice carries anything but its role."""
    if not isinstance(choice, dict):
        return True
    delta = choice.get("delta")
    return bool(choice.get("finish_reason")) or (
        isinstance(delta, dict) and any(v for v in delta.values())
    )
