"""OpenAI Responses (``POST /v1/responses``): ``instructions`` + ``input`` items through the
warden (:func:`~contextwarden.formats.from_responses` / :func:`~contextwarden.formats.to_responses`),
the recall tool as a function, and the client's one stream of events made of the rounds'.

How it works: docs/proxy.md (`contextwarden.proxy.wire.responses`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...formats.responses import provider_compaction
from ...formats.validate import validate_responses
from ...recall import RECALL_TOOL_NAME, recall_ref
from ..errors import ErrorKind, responses_error_code, responses_error_sse
from ..recall import Event, add_usage, encode_event
from ..stats import Route
from ._base import (
    PROVIDER_COMPACTION,
    Has,
    Holding,
    Ran,
    Splice,
    Turn,
    Wire,
    json_object,
    refused_message,
)

__all__ = ["RESPONSES", "ResponsesSplice", "ResponsesWire", "hide_recall_tool"]

#: Request fields that mean "the server holds the history": forwarded untouched.
_SERVER_STATE = ("previous_response_id", "conversation")


class ResponsesWire(Wire):
    name: Route = "responses"
    items = "input"
    paths = ("/v1/responses", "/responses")
    method = "transform_responses"
    api = "responses"
    check = staticmethod(validate_responses)

    def skip(self, body: Mapping[str, Any]) -> tuple[str, str] | None:
        for key in _SERVER_STATE:
            if body.get(key) is not None:
                return key, "the server holds the earlier history; forwarded unchanged"
        reason = provider_compaction(body)  # the server compacts it as it goes
        return None if reason is None else (PROVIDER_COMPACTION, reason)

    def count_tools(self, body: Mapping[str, Any]) -> list[Any] | None:
        """Function tools in the chat shape the counter reads; hosted tools (``web_search``,
        ``file_search``...) are described server-side."""
        tools = body.get("tools")
        if not isinstance(tools, list):
            return None
        out: list[Any] = []
        for t in tools:
            if isinstance(t, Mapping) and t.get("type") == "function" and "name" in t:
                fn = {k: v for k, v in t.items() if k in ("name", "description", "parameters")}
                out.append({"type": "function", "function": fn})
        return out or None

    def run(
        self, warden: Any, body: dict[str, Any], has: Has, options: dict[str, Any], marks: bool
    ) -> Ran:
        items = body["input"]
        instructions = body.get("instructions")
        new_instructions, new_items, result = warden.transform_responses(
            items, instructions=instructions, **options
        )
        if new_items == items and new_instructions == instructions:
            return Ran({}, result)
        return Ran({"input": new_items, "instructions": new_instructions}, result)

    def may_offer(self, body: Mapping[str, Any]) -> bool:
        # not run in the background, whose output the client fetches later, past the proxy
        return body.get("background") is not True and super().may_offer(body)

    def sent_back(self, body: Mapping[str, Any], extra: list[dict[str, Any]]) -> list[Any]:
        return _unstored(extra) if body.get("store") is False else extra

    def reply_turn(self, reply: dict[str, Any]) -> Turn:
        return responses_turn(reply.get("output"))

    def answer(self, call_id: str, text: str, error: bool) -> dict[str, Any]:
        # an error says so in its text: the item has no error flag
        return {"type": "function_call_output", "call_id": call_id, "output": text}

    def splice(self) -> ResponsesSplice:
        return ResponsesSplice()

    def client_reply(self, reply: dict[str, Any], usage: Any) -> dict[str, Any]:
        """Without recall calls in ``output`` (a model may call the tool on the last round,
        which does not offer it) and the recall tool in ``tools``."""
        out = hide_recall_tool(super().client_reply(reply, usage))
        if isinstance(reply.get("output"), list):
            out["output"] = [i for i in reply["output"] if not is_recall_call(i)]
        return out

    def always_rewrite(self) -> bool:
        return True

    def broke(self, splice: Splice, kind: ErrorKind, message: str) -> bytes:
        assert isinstance(splice, ResponsesSplice)
        return splice.fail(responses_error_code(kind), f"contextwarden proxy: {message}")

    def refused(self, splice: Splice, status: int, raw: bytes) -> bytes:
        """The upstream's refusal of a later round as the API's error events, its code and
        words when its body has them (``rate_limit_exceeded`` for a 429 that says none)."""
        assert isinstance(splice, ResponsesSplice)
        body = json_object(raw)
        error = body.get("error") if body is not None else None
        error = error if isinstance(error, dict) else {}
        code = error.get("code") or error.get("type")
        if not isinstance(code, str) or not code:
            code = "rate_limit_exceeded" if status == 429 else "server_error"
        message = error.get("message")
        return splice.fail(code, message if isinstance(message, str) else refused_message(status))


RESPONSES = ResponsesWire()

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


def is_recall_call(item: Any) -> bool:
    """Whether a Responses output item is a call of the recall tool."""
    return (
        isinstance(item, dict)
        and item.get("type") == "function_call"
        and item.get("name") == RECALL_TOOL_NAME
    )


def hide_recall_tool(response: dict[str, Any]) -> dict[str, Any]:
    """A Responses ``response`` object without the recall tool in ``tools`` (the request's
    tools, which it repeats): the client never sees the tool. ``response`` itself when the
    tool is not there."""
    tools = response.get("tools")
    if not isinstance(tools, list):
        return response
    kept = [t for t in tools if RESPONSES.tool_name(t) != RECALL_TOOL_NAME]
    return response if len(kept) == len(tools) else {**response, "tools": kept}


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


#: The events that open a response: the client gets the first round's only.
_OPENING = frozenset({"response.created", "response.queued", "response.in_progress"})
#: The events that end one: the last round's goes out last, the others are dropped.
_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
_ITEM_EVENTS = frozenset({"response.output_item.added", "response.output_item.done"})


def _index(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class ResponsesSplice(Holding):
    """The splice state of one client stream (see docs/proxy.md): what the client has
    (its events' next ``sequence_number``, its output items by index, the first round's
    response) and what the current round has sent (its items, which of them are recall calls,
    its held events, its terminal event)."""

    seq: int | None = None  # the client's next sequence_number (the upstream's first, at first)
    opened: dict[str, Any] | None = None  # the first round's response, as response.created had it
    shown: dict[int, dict[str, Any]] = field(default_factory=dict)  # the client's items
    index: dict[int, int] = field(default_factory=dict)  # this round's output_index: the client's
    hidden: set[int] = field(default_factory=set)  # this round's recall calls, by output_index
    items: dict[int, dict[str, Any]] = field(default_factory=dict)  # this round's items
    end: dict[str, Any] | None = None  # this round's terminal event, parsed
    closing: Event | None = None  # and as it came

    def feed(self, event: Event) -> list[bytes]:
        data = event.json()
        kind = data.get("type") if isinstance(data, dict) else None
        if not isinstance(data, dict) or not isinstance(kind, str):
            return [event.raw]
        if kind == "error":
            self.failed = True
            return [self._emit(event, data)]
        if kind in _OPENING:
            if self.round:
                return []
            response = data.get("response")
            if not isinstance(response, dict):
                return [self._emit(event, data)]
            shown = hide_recall_tool(response)
            if kind == "response.created":
                self.opened = shown
            return [self._emit(event, {**data, "response": shown}, rewritten=shown is not response)]
        if kind in _TERMINAL:
            self.end, self.closing = data, event
            self.failed = self.failed or kind == "response.failed"
            return []
        at = _index(data.get("output_index"))
        item = data.get("item")
        if at is not None and kind in _ITEM_EVENTS and isinstance(item, dict):
            self.items[at] = item
            if is_recall_call(item):
                self.hidden.add(at)
            elif "call_id" in item or item.get("type") == "mcp_approval_request":
                self.holding = True
        if at is not None and at in self.hidden:
            self.holding = True
            return []
        if self.holding:
            self.held.append(event)
            return []
        return [self._emit(event, data)]

    def _emit(self, event: Event, data: dict[str, Any], *, rewritten: bool = False) -> bytes:
        """``event`` (its ``data``) as the client gets it: renumbered, its bytes as they came
        when that changed nothing and ``data`` is not ``rewritten``."""
        out = dict(data)
        if self.seq is None:
            self.seq = _index(data.get("sequence_number")) or 0
        out["sequence_number"] = self.seq
        self.seq += 1
        at = _index(data.get("output_index"))
        if at is not None:
            if at not in self.index:
                self.index[at] = len(self.shown)
                self.shown[len(self.shown)] = {}
            out["output_index"] = self.index[at]
            if data.get("type") in _ITEM_EVENTS and isinstance(data.get("item"), dict):
                self.shown[self.index[at]] = data["item"]
        if out == data and not rewritten:
            return event.raw
        return encode_event(event.name, out)

    def end_round(self) -> Turn:
        """The round's :class:`Turn`, once its stream ended: none to answer unless it ended
        with ``response.completed`` (its output read from there, else from its item events)."""
        if self.end is None or not isinstance(self.end.get("response"), dict):
            return Turn((), ())
        response = self.end["response"]
        output = response.get("output")
        if not isinstance(output, list):
            output = [self.items[i] for i in sorted(self.items)]
        for at, mine in self.index.items():
            if at < len(output) and isinstance(output[at], dict):
                self.shown[mine] = output[at]  # the item as finished
        if self.end.get("type") != "response.completed":
            return Turn((), ())
        return responses_turn(output)

    def next_round(self) -> None:
        response = self.end.get("response") if self.end is not None else None
        self.advance(response.get("usage") if isinstance(response, dict) else None)
        self.end, self.closing, self.index, self.hidden, self.items = None, None, {}, set(), {}

    def flush(self) -> list[bytes]:
        """The held events of the last round and its terminal event, as the client gets them."""
        out = super().flush()
        if self.end is not None and self.closing is not None:
            finished = self._finish(self.end)
            out.append(self._emit(self.closing, finished, rewritten=finished is not self.end))
        return out

    def _finish(self, data: dict[str, Any]) -> dict[str, Any]:
        """The terminal event as the client gets it: after a first round, or with a recall call
        left out, its response has the first round's id, the items the client has and the
        usage summed over the rounds."""
        response = data.get("response")
        if not isinstance(response, dict):
            return data
        if not (self.round or self.hidden):
            shown = hide_recall_tool(response)
            return data if shown is response else {**data, "response": shown}
        response = hide_recall_tool(response)
        output = response.get("output")
        for at, item in enumerate(output if isinstance(output, list) else []):
            if at not in self.index and at not in self.hidden and isinstance(item, dict):
                self.index[at] = len(self.shown)  # an item that came without events
                self.shown[len(self.shown)] = item
        finished = {
            **response,
            "output": [self.shown[i] for i in sorted(self.shown) if self.shown[i]],
            "usage": add_usage(self.usage, response.get("usage")),
        }
        if self.opened is not None and "id" in self.opened:
            finished["id"] = self.opened["id"]
        return {**data, "response": finished}

    def fail(self, code: str, message: str) -> bytes:
        """The error events that end the client's stream when a later round cannot be had
        (the upstream refused it, or it broke): ``error``, then ``response.failed`` with the
        items the client has and the usage so far (see
        :func:`~.errors.responses_error_sse`)."""
        self.failed = True
        seq = self.seq or 0
        response = None
        if self.opened is not None:
            output = [self.shown[i] for i in sorted(self.shown) if self.shown[i]]
            response = {**self.opened, "output": output, "usage": self.usage}
        self.seq = seq + (1 if response is None else 2)
        return responses_error_sse(code, message, seq, response)
