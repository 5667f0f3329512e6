"""What the recall rounds of every wire format share: whether a request shows a ``cw:``
reference, server-sent events read and written, usage objects added up.

How it works: docs/proxy.md (`contextwarden.proxy.recall`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .._markers import REF_PATTERN

__all__ = [
    "MAX_ROUNDS",
    "Event",
    "add_usage",
    "encode_event",
    "parse_events",
    "read_event",
    "shows_ref",
]

#: Upstream calls one client request may make: its own and up to two answering recall calls.
MAX_ROUNDS = 3

_REF = re.compile(REF_PATTERN.encode())


def shows_ref(body: bytes) -> bool:
    """Whether the request body shows a ``cw:`` reference (something the warden hid)."""
    return b"cw:" in body and _REF.search(body) is not None


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
