"""Pinned content: what no lossy step may drop, mask or cut.

A message is pinned by its ``pinned`` flag or by ``<Pin>...</Pin>`` anywhere in its text or tool
results (:attr:`Message.is_pinned`). System messages are protected the same way. Layers leave
protected messages exactly as they are; the sliding window keeps the whole unit around a pinned
message (a pinned tool result cannot stay without the call that produced it).
"""

from __future__ import annotations

from collections.abc import Sequence

from .._messages import PIN_RE, Message, TextBlock, ToolResultBlock

__all__ = ["is_protected", "pinned_spans"]


def is_protected(message: Message) -> bool:
    """True for system messages and pinned messages (flag or ``<Pin>`` tag)."""
    return message.role == "system" or message.is_pinned


def pinned_spans(messages: Sequence[Message]) -> list[tuple[int, str]]:
    """Every ``<Pin>...</Pin>`` body as ``(message index, text)``, in order (for summaries that
    must carry pinned content forward)."""
    return [
        (i, match.group(1))
        for i, m in enumerate(messages)
        for block in m.content
        if isinstance(block, TextBlock | ToolResultBlock)
        for match in PIN_RE.finditer(block.text)
    ]
