"""Token counting. (Skeleton: the protocol is fixed; the backends are being written.)"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ._messages import Message

__all__ = ["TokenCounter"]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens. Implementations cache per message by :attr:`Message.fingerprint`."""

    name: str

    def count_text(self, text: str) -> int:
        """Tokens in a plain string (exactly the BPE encoding's length for exact counters)."""
        ...

    def count_message(self, message: Message) -> int:
        """Tokens one message costs in a request, framing included."""
        ...

    def count_messages(
        self, messages: Sequence[Message], *, tools: Sequence[Mapping[str, Any]] | None = None
    ) -> int:
        """Tokens a whole request costs: messages, tool definitions and reply priming."""
        ...
