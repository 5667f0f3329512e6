"""Sliding-window compaction (first in every order): summarise everything between the task and the
widest recent tail that fits the compaction target beside the fixed part and the summary (whole
units, at least the newest); when nothing would be elided (a forced compaction under the
target), keep the last ``config.sliding_window_size`` messages (default 9: 5 assistant + 4
user/tool). None when there is nothing but an earlier summary to summarise."""

from __future__ import annotations

from collections.abc import Sequence

from .._messages import Message
from .base import Layout, StrategyContext, StrategyOutcome, summarize_units

__all__ = ["recent_tail", "sliding_window"]

#: Characters per token assumed for the summary that is not written yet (English prose runs
#: about 4; 3 errs towards a larger summary, so the kept tail errs small).
SUMMARY_CHARS_PER_TOKEN = 3


def recent_tail(messages: Sequence[Message], layout: Layout, ctx: StrategyContext) -> int:
    """The earliest unit boundary whose tail fits the target beside the fixed part and the
    summary: at least the newest unit, so one summary reaches the target whenever the newest
    unit lets it (and a cut never goes further below the target than the next unit's size)."""
    newest = layout.units[-1][0] if layout.units else len(messages)
    count = ctx.counter.count_message
    room = ctx.budget.target - ctx.counter.count_messages([], tools=ctx.tools)
    room -= ctx.config.summary_max_chars // SUMMARY_CHARS_PER_TOKEN
    room -= sum(
        count(m)
        for start, end in layout.units
        if start in layout.protected and start < newest
        for m in messages[start:end]
    )
    tail = newest
    used = sum(count(m) for m in messages[newest:])
    for start, end in reversed(layout.units):
        if start >= newest or start in layout.protected:
            continue
        size = sum(count(m) for m in messages[start:end])
        if used + size > room:
            break
        used += size
        tail = start
    return tail


def sliding_window(messages: Sequence[Message], ctx: StrategyContext) -> StrategyOutcome | None:
    """Elide every unit between the task and the widest recent tail that fits the target."""
    layout = Layout.of(messages)
    size = ctx.config.sliding_window_size
    minimum = layout.tail_from_end((size + 1) // 2, size // 2)
    tail = recent_tail(messages, layout, ctx)
    units = layout.body(tail) or layout.body(minimum)  # asked anyway (forced): the minimum
    detail = f"kept the last {len(messages) - tail} messages"
    return summarize_units("sliding_window", messages, layout, units, ctx, detail)
