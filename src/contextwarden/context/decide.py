"""The decisions a call asks of the policy, each one function: whether an edit is due and why
(:func:`edit_reason`), whether the lossless batch planned pays (:func:`lossless_pays`), and
whether a compaction must run now (:func:`compaction_due`).

The conversation plans each edit as a value and asks here whether to make it; nothing here
changes the conversation. The arithmetic is :mod:`contextwarden._policy`'s.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._log import EditReason
from .._policy import cheaper_at_limit, edit_pays, expected_calls
from ..layers.window import compaction_target
from .call import Call
from .state import State

if TYPE_CHECKING:
    pass

__all__ = ["Due", "compaction_due", "edit_reason", "lossless_pays"]


@dataclass(frozen=True)
class Due:
    """What a call's new messages make due: ``reason`` for this call's edits; ``must``: over
    the trigger; ``deferred``: over the trigger within the hard limit, cutting now would not
    pay (the request waits, left whole up to the limit); ``compact``: a compaction (or a
    window cut) must run now, after the lossless edits."""

    reason: EditReason
    must: bool = False
    deferred: bool = False
    compact: bool = False


def edit_reason(s: State, call: Call, now: float | None) -> Due:
    """What this call's edits are made for, once its new messages are in: over the trigger
    (``must``) unless cutting now would not pay before the hard limit (``deferred``), else
    ``free`` when the provider's cache has gone cold, ``immediate`` without caching, ``pays``
    otherwise (an edit then must pay for itself)."""
    budget = call.ctx.budget
    cold = (
        call.rates.caching
        and call.rates.ttl_s is not None
        and s.last_time is not None
        and (time.time() if now is None else now) - s.last_time > call.rates.ttl_s
    )
    must = budget is not None and s.total > budget.trigger
    deferred = False
    if must and not cold and _defers(s, call, s.total):
        must = False  # over the trigger, within the hard limit: cutting now does not pay
        deferred = True
    reason: EditReason = "must" if must else ("free" if cold else "pays")
    if not call.rates.caching and not must:
        reason = "immediate"
    return Due(reason, must, deferred)


def compaction_due(s: State, call: Call) -> bool:
    """Over the trigger after the lossless edits: cut to the target now, not just under the
    trigger, so the next calls only append instead of trimming a little on every call (a
    window cut, which loses what it drops, waits until the lossless edits are not enough);
    not within the cool-down after the last compaction."""
    budget = call.ctx.budget
    if budget is None:
        return False
    summarises = s.config.compaction.enabled
    aim = compaction_target(budget) if summarises else budget.trigger
    return s.total > aim and not _cooling(s, call)


def lossless_pays(s: State, call: Call, reason: EditReason, removed: int, first: int) -> bool:
    """Whether a mask/strip batch removing ``removed`` tokens from view position ``first`` on
    is made now (see :mod:`contextwarden._policy`)."""
    policy = s.config.policy
    if reason == "pays":
        rewritten = sum(s.tokens[first:]) - removed
        new_tokens = sum(s.tokens[s.new_start :])
        left = _calls_until_compaction(s, call, s.total - removed)
        return edit_pays(removed, rewritten, new_tokens, s.calls, call.rates, policy, left)
    if reason == "immediate":
        return edit_pays(removed, 0, 0, s.calls, call.rates, policy)
    return True


def _cooling(s: State, call: Call) -> bool:
    """Within the cool-down after the last compaction: the request has grown by less than
    ``compaction.cooldown_ratio`` of the window since, and is within the hard limit."""
    budget = call.ctx.budget
    if s.compacted_at is None or budget is None:
        return False
    grown = s.total - s.compacted_at
    return grown < s.config.compaction.cooldown_ratio * budget.window and s.total <= budget.limit


def _pace(s: State) -> float:
    """Tokens the history has grown by per call, on average so far."""
    return s.input_tokens / (s.calls + 1)


def _calls_until_compaction(s: State, call: Call, total: int) -> int | None:
    """About how many calls, at the pace the history has grown so far, until a request of
    ``total`` tokens is compacted: when it reaches the trigger, or the hard limit when a
    compaction before it would not pay (see :func:`_defers`). None without a window or
    compaction."""
    budget = call.ctx.budget
    if budget is None or not s.config.compaction.enabled:
        return None
    pace = _pace(s)
    if pace <= 0:
        return None
    at = budget.limit if _defers(s, call, max(total, budget.trigger)) else budget.trigger
    return max(int((at - total) / pace), 0)


def _defers(s: State, call: Call, total: int) -> bool:
    """Whether a request of ``total`` tokens, over the trigger and within the hard limit,
    waits: cutting it to the target now (a compaction or a window cut) would not pay for
    itself, at the model's cache prices, within the calls the session can be expected to
    still make before the limit (:func:`~contextwarden._policy.edit_pays`); a session
    expected to reach the limit, where the cut comes anyway, waits only when cutting at the
    limit each time costs less per call (:func:`~contextwarden._policy.cheaper_at_limit`).
    Cheap cache reads (DeepSeek's at 2% of the input price) make reading a long request
    again cheaper than rewriting a short one."""
    budget = call.ctx.budget
    if (
        budget is None
        or not s.config.compaction.defer
        or not call.rates.caching
        or budget.trigger >= budget.limit
        or total > budget.limit
    ):
        return False
    pace = _pace(s)
    if pace <= 0:
        return False
    summarises = s.config.compaction.enabled
    aim = compaction_target(budget) if summarises else budget.trigger
    until_limit = int((budget.limit - total) / pace)
    if expected_calls(s.calls, s.config.policy) > until_limit:
        # the session is expected to reach the limit: the cut comes anyway, now or there
        return cheaper_at_limit(aim, budget.trigger, budget.limit, pace, call.rates)
    lead = 0  # the leading system messages stay, and stay cached
    for m, t in zip(s.view, s.tokens, strict=False):
        if m.role != "system":
            break
        lead += t
    removed = max(total - aim, 0)
    # each summarizer call reads about what the compaction replaces, at the input price
    summaries = call.summary_calls * removed if summarises else 0
    return not edit_pays(
        removed,
        max(aim - lead - call.overhead, 0),
        sum(s.tokens[s.new_start :]),
        s.calls,
        call.rates,
        s.config.policy,
        until_limit,
        summaries,
    )
