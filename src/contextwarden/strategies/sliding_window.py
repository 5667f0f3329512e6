"""Sliding-window compaction (first in every order): keep as much recent history
verbatim as the compaction target allows and summarize everything between the task and it.

The kept tail is the widest that fits the target (at least the newest unit), grown whole unit
by whole unit (a tool call stays with its results) while the system prompt, the task, pinned
units, the summary (its cap, as tokens) and the tail fit: so one summary lands on the target.
When nothing would be elided (a forced compaction under the target), the last
``config.sliding_window_size`` messages are kept (default 9: 5 assistant + 4 user/tool). System
messages, the task and pinned units are kept where they are. Returns None when there is nothing
(or only an earlier summary) to summarize.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._messages import Message
from .base import (
    Layout,
    StrategyContext,
    StrategyOutcome,
    compaction_target,
    is_summary_message,
    summary_request,
)

__all__ = ["recent_tail", "sliding_window"]

#: Characters per token assumed for the summary that is not written yet (English prose runs
#: about 4; 3 errs towards a larger summary, so the kept tail errs small).
SUMMARY_CHARS_PER_TOKEN = 3


def _widest_tail(
    messages: Sequence[Message], layout: Layout, minimum: int, ctx: StrategyContext
) -> int:
    """The earliest unit boundary at or before ``minimum`` whose tail still fits the target."""
    count = ctx.counter.count_message
    room = compaction_target(ctx.budget) - ctx.counter.count_messages([], tools=ctx.tools)
    room -= ctx.config.summary_max_chars // SUMMARY_CHARS_PER_TOKEN
    room -= sum(
        count(m)
        for start, end in layout.units
        if start in layout.protected and start < minimum
        for m in messages[start:end]
    )
    tail = minimum
    used = sum(count(m) for m in messages[minimum:])
    for start, end in reversed(layout.units):
        if start >= minimum or start in layout.protected:
            continue
        size = sum(count(m) for m in messages[start:end])
        if used + size > room:
            break
        used += size
        tail = start
    return tail


def recent_tail(messages: Sequence[Message], layout: Layout, ctx: StrategyContext) -> int:
    """The widest recent tail that fits the target beside the fixed part and the summary: at
    least the newest unit, so one summary reaches the target whenever the newest unit lets it
    (and a cut never goes further below the target than the next unit's size)."""
    newest = layout.units[-1][0] if layout.units else len(messages)
    return _widest_tail(messages, layout, newest, ctx)


def sliding_window(messages: Sequence[Message], ctx: StrategyContext) -> StrategyOutcome | None:
    """Elide every unit between the task and the widest recent tail that fits the target."""
    layout = Layout.of(messages)
    size = ctx.config.sliding_window_size
    minimum = layout.tail_from_end((size + 1) // 2, size // 2)
    tail = recent_tail(messages, layout, ctx)
    units = layout.body(tail) or layout.body(minimum)  # asked anyway (forced): the minimum
    if not units or all(is_summary_message(messages[s]) for s, _ in units):
        return None
    elided = layout.indices(units)
    return StrategyOutcome(
        "sliding_window",
        elided,
        (summary_request(messages, elided, ctx),),
        detail=f"kept the last {len(messages) - tail} messages",
    )
