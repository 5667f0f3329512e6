"""Incremental chunk summaries: split the history into chunks of
``config.chunk_turns`` turns (default 20; a turn is a unit: one user message, or one assistant
message with its tool results), summarize every chunk but the last, each summary updating the
previous one, and keep the last chunk whole.

Chunks are counted from the start of the elidable history, so the early chunks are the same
messages from one call to the next and their summaries come from the cache. Returns None when
the history holds a single chunk.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._messages import Message
from .base import Layout, StrategyContext, StrategyOutcome, is_summary_message, summary_request

__all__ = ["incremental"]


def incremental(messages: Sequence[Message], ctx: StrategyContext) -> StrategyOutcome | None:
    """Elide all chunks but the last; one chained summary request per elided chunk."""
    layout = Layout.of(messages)
    body = layout.body()
    size = ctx.config.chunk_turns
    chunks = [body[k : k + size] for k in range(0, len(body), size)]
    if len(chunks) < 2:
        return None
    early = [u for chunk in chunks[:-1] for u in chunk]
    if all(is_summary_message(messages[s]) for s, _ in early):
        return None
    requests = tuple(summary_request(messages, layout.indices(chunk), ctx) for chunk in chunks[:-1])
    return StrategyOutcome(
        "incremental",
        layout.indices(early),
        requests,
        detail=f"summarized {len(chunks) - 1} chunks of {size} turns, kept the last",
    )
