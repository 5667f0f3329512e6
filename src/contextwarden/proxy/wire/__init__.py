"""The wire formats the proxy serves, one module each, and the table the one handler reads.

How it works: docs/proxy.md (`contextwarden.proxy.wire`).
"""

from __future__ import annotations

from ._base import Ran, Splice, Turn, Wire
from .chat import CHAT
from .gemini import GEMINI
from .messages import COUNT_TOKENS, MESSAGES
from .responses import RESPONSES

__all__ = ["WIRES", "Ran", "Splice", "Turn", "Wire", "wire_for"]

#: Every wire format, by name.
WIRES: dict[str, Wire] = {w.name: w for w in (CHAT, MESSAGES, COUNT_TOKENS, RESPONSES, GEMINI)}


def wire_for(path: str) -> Wire | None:
    """The wire format serving ``path`` (a POST), None for a path the proxy only forwards."""
    for wire in WIRES.values():
        if wire.serves(path):
            return wire
    return None
