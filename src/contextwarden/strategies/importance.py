"""Importance-scoring compaction (seed 003): score every message, keep the ones that matter,
summarize the rest except the most recent few.

Scores (a unit scores the maximum of its messages; kept when ``>= config.importance_threshold``,
default 3.0):

==========================================  =====
message                                     score
==========================================  =====
system, the task, pinned                    kept always (never scored)
user message                                2.0
assistant message                           1.0
tool result                                 0.5
+ the result reports an error               +3.0  (errors and what fixed them steer the work)
+ the assistant edits a file                +2.5
+ the assistant runs tests                  +2.0
+ the assistant states a decision / cause   +2.0
+ the assistant declares the task done      +2.0
+ a user message with a requirement         +1.0  ("must", "should", "don't", "please"...)
only ls / cat / find / read-only calls      -1.0  (to the call and its output)
an earlier summary message                  0     (folded into the new summary)
==========================================  =====

Low-scoring units are summarized, except the last ``config.keep_recent_low`` low messages
(default 5, widened to whole units) kept as recent context; the newest unit is always kept.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .._messages import Message
from ._signals import (
    is_completion,
    is_decision,
    is_error_result,
    is_readonly_listing,
    message_call_kinds,
)
from .base import Layout, StrategyContext, StrategyOutcome, is_summary_message, summary_request

__all__ = ["BASE_SCORES", "importance", "score_message", "score_unit"]

BASE_SCORES = {"system": 10.0, "user": 2.0, "assistant": 1.0, "tool": 0.5}
ERROR_BONUS = 3.0
EDIT_BONUS = 2.5
TEST_BONUS = 2.0
DECISION_BONUS = 2.0
COMPLETION_BONUS = 2.0
REQUIREMENT_BONUS = 1.0
READONLY_PENALTY = -1.0

_REQUIREMENT = re.compile(
    r"\b(?:must|should|shouldn't|don't|do not|never|always|please|need|make sure|instead)\b",
    re.IGNORECASE,
)


def score_message(message: Message) -> float:
    """The score of one message on its own (see the module table)."""
    if is_summary_message(message):
        return 0.0
    score = BASE_SCORES[message.role]
    if message.role == "tool" and is_error_result(message):
        score += ERROR_BONUS
    elif message.role == "assistant":
        kinds = message_call_kinds(message)
        if "edit" in kinds:
            score += EDIT_BONUS
        if "test" in kinds:
            score += TEST_BONUS
        if is_decision(message):
            score += DECISION_BONUS
        if is_completion(message):
            score += COMPLETION_BONUS
    elif message.role == "user" and _REQUIREMENT.search(message.text):
        score += REQUIREMENT_BONUS
    return score


def score_unit(unit: Sequence[Message]) -> float:
    """A unit's score: its best message, minus the read-only penalty when its only calls look
    around (``ls``, ``cat``...) and found no error."""
    best = max(score_message(m) for m in unit)
    head = unit[0]
    if head.role == "assistant" and is_readonly_listing(head.tool_calls):
        if not any(is_error_result(m) for m in unit):
            best += READONLY_PENALTY
    return best


def importance(messages: Sequence[Message], ctx: StrategyContext) -> StrategyOutcome | None:
    """Elide the low-scoring units except the last ``keep_recent_low`` low messages."""
    layout = Layout.of(messages)
    body = layout.body()
    threshold = ctx.config.importance_threshold
    low = [(s, e) for s, e in body if score_unit(messages[s:e]) < threshold]
    kept_low = 0
    while low and kept_low < ctx.config.keep_recent_low:
        s, e = low.pop()
        kept_low += e - s
    if not low or all(is_summary_message(messages[s]) for s, _ in low):
        return None
    elided = layout.indices(low)
    return StrategyOutcome(
        "importance",
        elided,
        (summary_request(messages, elided, ctx),),
        detail=f"kept {len(body) - len(low)} of {len(body)} units (threshold {threshold})",
    )
