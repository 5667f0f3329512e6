"""Incremental chunk summaries: chunks of ``config.chunk_turns`` units (default 20) from the start
of the elidable history (so early chunks, and their cached summaries, stay the same from call
to call), every chunk but the last summarised, each summary updating the previous one. None
for a single chunk."""

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
