"""Full summary, the last resort: the system prompt with a summary hint folded in, the task and
pinned units verbatim, ONE summary message (the four-part summary plus, verbatim, the last
``config.recent_memories`` memories, the task list and the latest git diff stats), and the
widest recent tail that fits the target (:func:`~.sliding_window.recent_tail`; at least the
newest unit, which the final guard cuts when it alone is too large). Asks the caller to reset
its turn counter."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from .._messages import Message
from ..summarizers.base import request_facts
from .base import (
    Layout,
    Section,
    StrategyContext,
    StrategyOutcome,
    summarize_units,
    summary_request,
)
from .sliding_window import recent_tail

__all__ = ["full_summary", "state_sections"]


def state_sections(
    messages: Sequence[Message], elided: Sequence[int], ctx: StrategyContext
) -> tuple[Section, ...]:
    """The verbatim state sections of the full summary (empty ones left out)."""
    facts = request_facts(summary_request(messages, elided, ctx))
    n = ctx.config.recent_memories
    sections: list[Section] = []
    if n and facts.memories:
        sections.append(("Recent memories (oldest first)", facts.memories[-n:]))
    if facts.plan:
        sections.append(("Task list", tuple(f"[{t.status}] {t.text}" for t in facts.plan)))
    if facts.diff_stat:
        sections.append(("Git diff stats", facts.diff_stat))
    return tuple(sections)


def full_summary(messages: Sequence[Message], ctx: StrategyContext) -> StrategyOutcome | None:
    """Elide everything but system, task, pins and the newest unit into one summary (the newest
    unit is what the model answers: it is always kept; when it is too large, the final guard
    cuts it instead)."""
    layout = Layout.of(messages)
    # the recent tail that fits the target stays: a cut far below the target loses what the
    # agent works on for nothing
    body = layout.body(recent_tail(messages, layout, ctx)) or layout.body()
    detail = "rebuilt as system + summary hint + task + summary; turn counter reset"
    out = summarize_units("full_summary", messages, layout, body, ctx, detail, rebuild=True)
    if out is None:
        return None
    return replace(out, appendix=state_sections(messages, out.elided, ctx), reset_turns=True)
