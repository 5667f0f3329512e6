"""Importance-scoring compaction: score every message, keep the ones that matter,
summarize the rest except the most recent few.

Scores (a unit scores the maximum of its messages; kept when ``>= config.importance_threshold``,
default 3.0):

==========================================  =====
message                                     score
==========================================  =====
system, the task, pinned                    kept always (never scored)
user message                                2.0
assistant message                           1.0
tool result (or a user message carrying     0.5
one, mini-swe-agent's text protocol)
+ the result reports an error               +3.0  (errors and what fixed them steer the work)
+ the assistant edits a file                +2.5
+ the assistant runs tests                  +2.0
+ the assistant states a decision / cause   +2.0
+ the assistant declares the task done      +2.0
+ a user message with a requirement         +1.0  ("must", "should", "don't", "please"...)
only ls / cat / find / read-only calls      -1.0  (to the call and its output, unless it failed)
an earlier summary message                  0     (folded into the new summary)
==========================================  =====

Errors and file edits come from :func:`~contextwarden.analysis.facts.extract_facts` (which
knows that ``grep`` exiting 1 found nothing rather than failed, and that ``cat > f << EOF``
writes ``f``); the other signals from :mod:`._signals`.

Low-scoring units are summarized, except the last ``config.keep_recent_low`` low messages
(default 5, widened to whole units) kept as recent context; the newest unit is always kept.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .._memo import Memo
from .._messages import Message
from ..analysis.actions import reads_as_output
from ..analysis.facts import walk_facts
from ._signals import is_completion, is_decision, is_readonly_listing, message_call_kinds
from .base import Layout, StrategyContext, StrategyOutcome, elide_except_recent, is_summary_message

__all__ = ["BASE_SCORES", "importance", "score_message", "score_messages", "score_unit"]

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


def score_message(message: Message, *, error: bool = False, edit: bool = False) -> float:
    """The score of one message (see the module table); ``error`` and ``edit`` say whether the
    history's facts found an error in it or a file written by it."""
    if is_summary_message(message):
        return 0.0
    role = "tool" if message.role == "user" and reads_as_output(message.text) else message.role
    score = BASE_SCORES[role]
    if error:
        score += ERROR_BONUS
    if role == "assistant":
        if edit:
            score += EDIT_BONUS
        if "test" in message_call_kinds(message):
            score += TEST_BONUS
        if is_decision(message):
            score += DECISION_BONUS
        if is_completion(message):
            score += COMPLETION_BONUS
    elif role == "user" and _REQUIREMENT.search(message.text):
        score += REQUIREMENT_BONUS
    return score


def score_messages(messages: Sequence[Message], *, memo: Memo | None = None) -> list[float]:
    """Every message's score, the history's facts read once (``memo``: the compactor's)."""
    facts = walk_facts(messages, memo=memo)
    errors = {e.index for e in facts.errors}
    edits = facts.writes
    return [score_message(m, error=i in errors, edit=i in edits) for i, m in enumerate(messages)]


def score_unit(unit: Sequence[Message], scores: Sequence[float]) -> float:
    """A unit's score: its best message, minus the read-only penalty when its only calls look
    around (``ls``, ``cat``...) and nothing in it failed."""
    best = max(scores)
    head = unit[0]
    if head.role == "assistant" and is_readonly_listing(head.tool_calls):
        if best < BASE_SCORES["assistant"] + ERROR_BONUS:
            best += READONLY_PENALTY
    return best


def importance(messages: Sequence[Message], ctx: StrategyContext) -> StrategyOutcome | None:
    """Elide the low-scoring units except the last ``keep_recent_low`` low messages."""
    layout = Layout.of(messages)
    body = layout.body()
    scores = score_messages(messages, memo=ctx.memo)
    threshold = ctx.config.importance_threshold
    low = [(s, e) for s, e in body if score_unit(messages[s:e], scores[s:e]) < threshold]
    return elide_except_recent(
        "importance",
        messages,
        layout,
        low,
        ctx,
        lambda n: f"kept {len(body) - n} of {len(body)} units (threshold {threshold})",
    )
