"""The recall tool at the proxy, as pure functions over parsed bodies and server-sent events.

When the request the model sees shows a ``cw:`` reference, the proxy offers the recall tool
(:func:`round_body`) and answers the model's calls of it itself: each round's assistant output
(:class:`Turn`, from a JSON reply or a stream) and the answers become messages (Responses:
input items) appended to the next round's request (:func:`answer_messages`). A client's stream
is made of every round's stream: :class:`AnthropicSplice` and :class:`OpenAISplice` pass text and
thinking on as they come, hold tool calls and the end of each message, and renumber what a later
round sends so that the client reads one well-formed message (the Responses API's splice:
:mod:`.recall_responses`). The rounds against the upstream: :mod:`.recall_rounds`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from .._markers import REF_PATTERN
from ..recall import RECALL_TOOL_NAME, recall_ref, recall_tool

__all__ = [
    "MAX_ROUNDS",
    "AnthropicSplice",
    "ChatApi",
    "Event",
    "OpenAISplice",
    "RecallApi",
    "Turn",
    "add_usage",
    "answer_messages",
    "client_reply",
    "encode_event",
    "hide_recall_tool",
    "is_recall_call",
    "may_offer",
    "parse_events",
    "read_event",
    "reply_turn",
    "round_body",
    "shows_ref",
]

ChatApi = Literal["openai", "anthropic"]
#: The APIs the recall tool is answered on: Chat Completions, Messages and Responses.
RecallApi = Literal["openai", "anthropic", "responses"]

#: Upstream calls one client request may make: its own and up to two answering recall calls.
MAX_ROUNDS = 3

_REF = re.compile(REF_PATTERN.encode())


def shows_ref(body: bytes) -> bool:
    """Whether the request body shows a ``cw:`` reference (something the warden hid)."""
    return b"cw:" in body and _REF.search(body) is not None


def may_offer(api: RecallApi, body: dict[str, Any]) -> bool:
    """Whether the recall tool may be added to ``body``: its ``tools`` (if any) a list without a
    tool of that name, its ``tool_choice`` forcing neither a tool nor none, one choice asked,
    (OpenAI) no legacy ``functions``, which the API refuses beside ``tools``, and (Responses)
    not run in the ``background``, whose output the client fetches later, past the proxy."""
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        return False
    if any(_tool_name(api, t) == RECALL_TOOL_NAME for t in tools or ()):
        return False
    if api == "openai" and (body.get("n") not in (None, 1) or "functions" in body):
        return False
    if api == "responses" and body.get("background") is True:
        return False
    choice = body.get("tool_choice")
    if choice is None:
        return True
    if api in ("openai", "responses"):
        return choice in ("auto", "required")
    return isinstance(choice, dict) and choice.get("type") in ("auto", "any")


def _tool_name(api: RecallApi, tool: Any) -> Any:
    if not isinstance(tool, dict):
        return None
    if api == "openai":
        fn = tool.get("function")
        return fn.get("name") if isinstance(fn, dict) else None
    return tool.get("name")


def round_body(
    api: RecallApi, body: dict[str, Any], extra: list[dict[str, Any]], *, last: bool
) -> dict[str, Any]:
    """One round's request: ``body`` with the recall exchanges so far (``extra``) after its
    messages (Responses: its ``input`` items) and the tool offered at the end of its tools,
    unless the round is the ``last``: then the client's tools alone, or, when it sent none, the
    tool described (the exchanges name it) with ``tool_choice`` none. A Responses request with
    ``store`` false sends the exchanges without item ids (see :func:`_unstored`)."""
    tools = list(body.get("tools") or [])
    out = dict(body)
    if extra:
        key = "input" if api == "responses" else "messages"
        unstored = api == "responses" and body.get("store") is False
        out[key] = [*body[key], *(_unstored(extra) if unstored else extra)]
    if not last:
        out["tools"] = [*tools, recall_tool(api)]
    elif extra and not tools:
        out["tools"] = [recall_tool(api)]
        out["tool_choice"] = {"type": "none"} if api == "anthropic" else "none"
    return out


#: Output items whose ``id`` an unstored request must leave out (the API looks an id up among
#: the items it stored, and stored none); the others are sent back as they came.
_STORED_IDS = frozenset({"message", "reasoning", "function_call"})


def _unstored(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``items`` as a request with ``store`` false sends them back (Codex does the same): no id
    on messages, reasoning and function calls, and a reasoning item only with the
    ``encrypted_content`` that carries it (without it, nothing is left to send)."""
    out = []
    for item in items:
        kind = item.get("type")
        if kind == "reasoning" and not item.get("encrypted_content"):
            continue
        out.append({k: v for k, v in item.items() if k != "id"} if kind in _STORED_IDS else item)
    return out


@dataclass(frozen=True)
class Turn:
    """One round's reply as the next round sends it back (``sent``: the assistant message with
    its text, thinking and recall calls; Responses: the output items but the client's calls)
    and its recall calls: (call id, ref). The client's own tool calls are left out."""

    sent: tuple[dict[str, Any], ...]
    calls: tuple[tuple[str, str], ...]


def _anthropic_turn(blocks: list[Any]) -> Turn:
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


def _openai_turn(message: dict[str, Any]) -> Turn:
    recalls = [
        c
        for c in message.get("tool_calls") or []
        if isinstance(c, dict) and _tool_name("openai", c) == RECALL_TOOL_NAME
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


def is_recall_call(item: Any) -> bool:
    """Whether a Responses output item is a call of the recall tool."""
    return (
        isinstance(item, dict)
        and item.get("type") == "function_call"
        and item.get("name") == RECALL_TOOL_NAME
    )


def responses_turn(output: Any) -> Turn:
    """The :class:`Turn` of a Responses reply's ``output`` items: all of them, as returned
    (reasoning with its ``encrypted_content``, ids and call ids kept), but the calls the client
    is to answer: an item with a ``call_id`` that no output item of the reply answers (a hosted
    tool's call comes with its output) or an MCP approval request."""
    items = [i for i in output if isinstance(i, dict)] if isinstance(output, list) else []
    answered = {str(i.get("call_id")) for i in items if str(i.get("type", "")).endswith("_output")}
    sent: list[dict[str, Any]] = []
    calls: list[tuple[str, str]] = []
    for item in items:
        if is_recall_call(item):
            calls.append((str(item.get("call_id", "")), recall_ref(item.get("arguments"))))
        elif item.get("type") == "mcp_approval_request" or (
            "call_id" in item and str(item.get("call_id")) not in answered
        ):
            continue  # the client's call: never shown to it, asked again after the recall
        sent.append(item)
    return Turn(tuple(sent), tuple(calls))


def reply_turn(api: RecallApi, reply: dict[str, Any]) -> Turn:
    """The :class:`Turn` of a whole (not streamed) reply."""
    if api == "responses":
        return responses_turn(reply.get("output"))
    if api == "anthropic":
        content = reply.get("content")
        return _anthropic_turn(content if isinstance(content, list) else [])
    choices = reply.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    return _openai_turn(message if isinstance(message, dict) else {})


def answer_messages(
    api: RecallApi, turn: Turn, answers: list[tuple[str, bool]]
) -> list[dict[str, Any]]:
    """The messages a round appends: ``turn``'s assistant message, then each call's answer
    (text, is_error): Anthropic ``tool_result`` blocks in one user message, OpenAI ``tool``
    messages; Responses: ``turn``'s items, then a ``function_call_output`` item per call (an
    error says so in its text: the item has no error flag)."""
    pairs = zip(turn.calls, answers, strict=True)
    if api == "anthropic":
        results = [
            {"type": "tool_result", "tool_use_id": call_id, "content": text}
            | ({"is_error": True} if error else {})
            for (call_id, _), (text, error) in pairs
        ]
        return [*turn.sent, {"role": "user", "content": results}]
    if api == "responses":
        return [
            *turn.sent,
            *(
                {"type": "function_call_output", "call_id": call_id, "output": text}
                for (call_id, _), (text, _) in pairs
            ),
        ]
    return [
        *turn.sent,
        *(
            {"role": "tool", "tool_call_id": call_id, "content": text}
            for (call_id, _), (text, _) in pairs
        ),
    ]


def client_reply(api: RecallApi, reply: dict[str, Any], usage: Any) -> dict[str, Any]:
    """The last round's whole reply as the client gets it: its ``usage`` the sum over the
    rounds (``usage``, when known) and, on the Responses API, its ``output`` without recall
    calls (a model may call the tool on the last round, which does not offer it) and its
    ``tools`` without the tool (:func:`hide_recall_tool`)."""
    out = dict(reply) if usage is None else {**reply, "usage": usage}
    if api == "responses":
        out = hide_recall_tool(out)
        if isinstance(reply.get("output"), list):
            out["output"] = [i for i in reply["output"] if not is_recall_call(i)]
    return out


def hide_recall_tool(response: dict[str, Any]) -> dict[str, Any]:
    """A Responses ``response`` object without the recall tool in ``tools`` (the request's
    tools, which it repeats): the client never sees the tool. ``response`` itself when the
    tool is not there."""
    tools = response.get("tools")
    if not isinstance(tools, list):
        return response
    kept = [t for t in tools if _tool_name("responses", t) != RECALL_TOOL_NAME]
    return response if len(kept) == len(tools) else {**response, "tools": kept}


def add_usage(a: Any, b: Any) -> Any:
    """Two usage objects added field by field: numbers summed, nested objects alike, a field
    only one of them has kept (either may be None)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return {
            k: add_usage(a[k], b[k]) if k in a and k in b else a.get(k, b.get(k)) for k in a | b
        }
    if _number(a) and _number(b):
        return a + b
    return a if b is None else b


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True)
class Event:
    """One server-sent event: its bytes as received (a blank line ends them), its name and its
    data lines joined."""

    raw: bytes
    name: str = ""
    data: str = ""

    def json(self) -> Any:
        """The data as JSON, None when it is not."""
        try:
            return json.loads(self.data) if self.data else None
        except ValueError:
            return None


def read_event(raw: bytes) -> Event:
    """The event of ``raw`` (one event's lines, ``\\n``-separated)."""
    name, data = "", []
    for line in raw.decode("utf-8", "replace").split("\n"):
        field_name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field_name == "event":
            name = value
        elif field_name == "data":
            data.append(value)
    return Event(raw, name, "\n".join(data))


def parse_events(buffer: bytes) -> tuple[list[Event], bytes]:
    """The whole events at the start of ``buffer`` and the bytes left after them (``\\r\\n``
    read as ``\\n``)."""
    buffer = buffer.replace(b"\r\n", b"\n")
    events: list[Event] = []
    while (end := buffer.find(b"\n\n")) >= 0:
        events.append(read_event(buffer[: end + 2]))
        buffer = buffer[end + 2 :]
    return events, buffer


def encode_event(name: str, data: Any) -> bytes:
    """One server-sent event carrying ``data`` as JSON (named when ``name``)."""
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


@dataclass
class AnthropicSplice:
    """The client's one Messages stream made of the rounds' streams. Text, thinking and other
    blocks pass as they come, until a ``tool_use`` block starts: from there on, and the
    ``message_delta`` / ``message_stop`` that end a message, are held. A round that called the
    tool is followed by another, whose ``message_start`` is dropped and whose block indices
    follow those the client has; the last round's held events go out at the end (usage: the
    sum over rounds)."""

    round: int = 0
    offset: int = 0
    passed: int = 0
    holding: bool = False
    failed: bool = False
    held: list[Event] = field(default_factory=list)
    blocks: dict[int, dict[str, Any]] = field(default_factory=dict)
    inputs: dict[int, list[str]] = field(default_factory=dict)
    usage: Any = None  # the earlier rounds', summed
    round_usage: dict[str, Any] = field(default_factory=dict)

    def feed(self, event: Event) -> list[bytes]:
        """What to send the client now for ``event``."""
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
        """The round's :class:`Turn`, once its stream ended."""
        blocks = []
        for index in sorted(self.blocks):
            block = dict(self.blocks[index])
            if block.get("type") == "tool_use" and self.inputs.get(index):
                block["input"] = _json_object("".join(self.inputs[index]))
            blocks.append(block)
        return _anthropic_turn(blocks)

    def next_round(self) -> None:
        """Begin the next round (the previous one's held events dropped)."""
        self.usage = add_usage(self.usage, self.round_usage)
        self.offset += self.passed
        self.round += 1
        self.passed, self.holding, self.held = 0, False, []
        self.blocks, self.inputs, self.round_usage = {}, {}, {}

    def flush(self) -> list[bytes]:
        """The held events of the last round, as the client gets them."""
        out = []
        for event in self.held:
            data = event.json()
            out.append(self._emit(event, data) if isinstance(data, dict) else event.raw)
        return out


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


def _json_object(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return {}


@dataclass
class OpenAISplice:
    """The client's one Chat Completions stream made of the rounds' streams. Content chunks
    pass as they come, until one carries ``tool_calls``: from there on, and the chunks that end
    the message (a ``finish_reason``, the usage chunk, ``[DONE]``), are held. A later round's
    chunks take the first one's id and lose their role; the last round's held chunks go out at
    the end (usage: the sum over rounds)."""

    round: int = 0
    first_id: Any = None
    holding: bool = False
    failed: bool = False
    held: list[Event] = field(default_factory=list)
    content: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    usage: Any = None  # the earlier rounds', summed

    def feed(self, event: Event) -> list[bytes]:
        """What to send the client now for ``event``."""
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
        """The round's :class:`Turn`, once its stream ended."""
        calls = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for _, c in sorted(self.calls.items())
        ]
        return _openai_turn({"content": "".join(self.content), "tool_calls": calls})

    def next_round(self) -> None:
        """Begin the next round (the previous one's held chunks dropped)."""
        self.usage = add_usage(self.usage, self._round_usage())
        self.round += 1
        self.holding, self.held, self.content, self.calls = False, [], [], {}

    def _round_usage(self) -> Any:
        for event in self.held:
            data = event.json()
            if isinstance(data, dict) and isinstance(data.get("usage"), dict):
                return data["usage"]
        return None

    def flush(self) -> list[bytes]:
        """The held chunks of the last round, as the client gets them."""
        out = []
        for event in self.held:
            data = event.json()
            out.append(self._emit(event, data) if isinstance(data, dict) else event.raw)
        return [b for b in out if b]


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
