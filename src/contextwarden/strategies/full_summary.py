"""Full summary, the last resort (seeds 002 and 003): rebuild the history as the system prompt
with a summary hint folded in, the original task verbatim, pinned units verbatim, and ONE summary
message holding the four-part summary plus, verbatim, the agent's last memories
(``config.recent_memories``, default 10), its task list and the latest git diff stats (read by
:func:`~contextwarden.summarizers.facts.extract_facts`; lines the summary already holds are not
repeated).

The newest unit is kept too when it costs at most :data:`LAST_UNIT_SHARE` of the compaction target (the
model should still see the question or tool output it is answering); otherwise it is summarized
with the rest. The outcome asks the caller to reset its turn counter (``reset_turns``).
"""

from __future__ import annotations

from collections.abc import Sequence

from .._messages import Message
from ..summarizers.base import request_facts
from .base import (
    Layout,
    Section,
    StrategyContext,
    StrategyOutcome,
    compaction_target,
    is_summary_message,
    summary_request,
)

__all__ = ["LAST_UNIT_SHARE", "full_summary", "state_sections"]

#: The newest unit is kept verbatim when it costs at most this share of the budget's target.
LAST_UNIT_SHARE = 0.25


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
    """Elide everything but system, task, pins (and a small newest unit) into one summary."""
    layout = Layout.of(messages)
    body = layout.body(keep_last=False)
    if body and body[-1] == layout.units[-1]:
        s, e = body[-1]
        cost = sum(ctx.counter.count_message(m) for m in messages[s:e])
        if cost <= compaction_target(ctx.budget) * LAST_UNIT_SHARE and not is_summary_message(
            messages[s]
        ):
            body = body[:-1]
    if not body or all(is_summary_message(messages[s]) for s, _ in body):
        return None
    elided = layout.indices(body)
    return StrategyOutcome(
        "full_summary",
        elided,
        (summary_request(messages, elided, ctx),),
        rebuild=True,
        appendix=state_sections(messages, elided, ctx),
        reset_turns=True,
        detail="rebuilt as system + summary hint + task + summary; turn counter reset",
    )
