"""Sliding-window compaction (seed 003, first in every order): keep the most recent messages
whole and summarize everything between the task and them.

Keeps ``config.sliding_window_size`` recent messages (default 9: 5 assistant + 4 user/tool, odd so
the kept tail does not start with two messages of one role), widened to whole units so a tool
call and its results stay together. System messages, the task and pinned units are kept where
they are. Returns None when there is nothing (or only an earlier summary) to summarize.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._messages import Message
from .base import Layout, StrategyContext, StrategyOutcome, is_summary_message, summary_request

__all__ = ["sliding_window"]


def sliding_window(messages: Sequence[Message], ctx: StrategyContext) -> StrategyOutcome | None:
    """Elide every unit between the task and the last ``sliding_window_size`` messages."""
    layout = Layout.of(messages)
    size = ctx.config.sliding_window_size
    tail = layout.tail_from_end((size + 1) // 2, size // 2)
    units = layout.body(tail)
    if not units or all(is_summary_message(messages[s]) for s, _ in units):
        return None
    elided = layout.indices(units)
    return StrategyOutcome(
        "sliding_window",
        elided,
        (summary_request(messages, elided, ctx),),
        detail=f"kept the last {len(messages) - tail} messages",
    )
