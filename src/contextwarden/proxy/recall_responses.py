"""The client's one Responses API stream made of the recall rounds' streams.

The client reads one response: the first round's ``response.created`` (and ``queued`` /
``in_progress``; the response's echo of the request's ``tools`` never names the recall tool),
then the output items of every round as they come, except the recall calls,
whose events are dropped. From the first call in a round on (a recall call, or a call of the
client's own), the round's events are held until it ends, then dropped (the model called the
tool: the round is answered and the next one asked) or sent. Each event the client gets carries
the next ``sequence_number`` and its item's place among the items the client has as its
``output_index``, so both count up across rounds. The last round's terminal event
(``response.completed``, ``incomplete`` or ``failed``) goes out last, with the first round's id
(the SDK's stream helper refuses a response whose id changes), the items the client saw and the
usage summed over the rounds. The rounds themselves: :mod:`.recall_rounds`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import responses_error_sse
from .recall import (
    Event,
    Turn,
    add_usage,
    encode_event,
    hide_recall_tool,
    is_recall_call,
    responses_turn,
)

__all__ = ["ResponsesSplice"]

#: The events that open a response: the client gets the first round's only.
_OPENING = frozenset({"response.created", "response.queued", "response.in_progress"})
#: The events that end one: the last round's goes out last, the others are dropped.
_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
_ITEM_EVENTS = frozenset({"response.output_item.added", "response.output_item.done"})


def _index(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class ResponsesSplice:
    """The splice state of one client stream (see the module docstring): what the client has
    (its events' next ``sequence_number``, its output items by index, the first round's
    response) and what the current round has sent (its items, which of them are recall calls,
    its held events, its terminal event)."""

    round: int = 0
    failed: bool = False
    seq: int | None = None  # the client's next sequence_number (the upstream's first, at first)
    opened: dict[str, Any] | None = None  # the first round's response, as response.created had it
    shown: dict[int, dict[str, Any]] = field(default_factory=dict)  # the client's items
    usage: Any = None  # the earlier rounds', summed
    holding: bool = False
    held: list[Event] = field(default_factory=list)
    index: dict[int, int] = field(default_factory=dict)  # this round's output_index: the client's
    hidden: set[int] = field(default_factory=set)  # this round's recall calls, by output_index
    items: dict[int, dict[str, Any]] = field(default_factory=dict)  # this round's items
    end: dict[str, Any] | None = None  # this round's terminal event, parsed
    closing: Event | None = None  # and as it came

    def feed(self, event: Event) -> list[bytes]:
        """What to send the client now for ``event``."""
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
        """Begin the next round (the previous one's held events dropped)."""
        response = self.end.get("response") if self.end is not None else None
        self.usage = add_usage(
            self.usage, response.get("usage") if isinstance(response, dict) else None
        )
        self.round += 1
        self.holding, self.held, self.end, self.closing = False, [], None, None
        self.index, self.hidden, self.items = {}, set(), {}

    def flush(self) -> list[bytes]:
        """The held events of the last round and its terminal event, as the client gets them."""
        out = []
        for event in self.held:
            data = event.json()
            out.append(self._emit(event, data) if isinstance(data, dict) else event.raw)
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
