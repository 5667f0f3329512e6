"""The decisions a call asks of the cost model (:mod:`contextwarden._policy`), each one function:
what this call's edits are made for and whether a lossy cut is due (:func:`edit_reason`), and
whether the lossless batch planned pays (:class:`Wager`). The inputs they hand the model
are gathered here (:func:`inputs`): the fixed part, the growth per call, the calls so far, the
ledger of what was billed; nothing here changes the conversation but the ledger and the
one-time warning.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from functools import cached_property
from itertools import accumulate

from .._events import Event, emit
from .._log import EditReason
from .._policy import (
    Inputs,
    Plan,
    cut_at,
    decide,
    edit_pays,
    payable_calls,
    tight_warning,
)
from .._task import fixed_part
from .call import Call
from .state import Bet, State

__all__ = ["Due", "Wager", "edit_reason", "fixed_tokens"]

#: Calls after which the growth per call is measured well enough to warn that the room is tight.
MEASURED_CALLS = 3


@dataclass(frozen=True)
class Due:
    """What a call's new messages make due: ``reason`` for this call's edits; ``must``: a
    lossy cut is planned (the lossless edits come first); ``deferred``: over the trigger, the
    request waits (left whole up to the limit); ``compact``: a compaction (or, without
    summaries, a window cut) must run now, after the lossless edits; ``plan``: the model's."""

    reason: EditReason
    must: bool = False
    deferred: bool = False
    compact: bool = False
    plan: Plan | None = None


def edit_reason(s: State, call: Call, now: float | None) -> Due:
    """What this call's edits are made for, once its new messages are in: ``must`` when the
    model plans a cut (a compaction, a window cut), else ``free`` when the provider's cache
    has gone cold or holds nothing yet (the first call), ``immediate`` without caching,
    ``pays`` otherwise (an edit then must pay for itself and be a small bet)."""
    budget = call.ctx.budget
    cold = (
        call.rates.caching
        and call.rates.ttl_s is not None
        and s.last_time is not None
        and (time.time() if now is None else now) - s.last_time > call.rates.ttl_s
    )
    plan = plan_now(s, call, cold) if budget is not None else None
    must = plan is not None and plan.action in ("compact", "window_cut")
    deferred = plan is not None and plan.action == "wait"
    # nothing is cached on a conversation's first call: it is written whole anyway
    reason: EditReason = "must" if must else ("free" if cold or not s.calls else "pays")
    if not call.rates.caching and not must:
        reason = "immediate"
    return Due(reason, must, deferred, plan=plan)


def fixed_tokens(s: State, call: Call) -> int:
    """The tokens of the request no edit removes: tools, system messages, pinned messages and
    the user's task (counted as they arrive, once)."""
    count = call.ctx.counter.count_message
    base = s.base
    s.fixed_seen = fixed_part(
        base, lambda i: count(base[i]), s.fixed_seen, find_task=s.index.last_user >= 0
    )
    tokens = s.fixed_seen[1]
    return tokens + call.overhead


def pace(s: State, call: Call) -> float:
    """Tokens the history has grown by per call, on average so far (the fixed part aside)."""
    budget = call.ctx.budget
    fixed = budget.fixed if budget is not None else call.overhead
    return max(s.input_tokens + call.overhead - fixed, 0) / (s.calls + 1)


def inputs(s: State, call: Call, total: int, cold: bool = False, *, bet: bool = False) -> Inputs:
    """What the cost model decides from, for a request of ``total`` tokens now; ``bet``: with
    the ledger, so a cut before the hard limit is weighed as a bet."""
    budget = call.ctx.budget
    assert budget is not None
    last = max((e.call for e in s.edits if e.kind == "compaction"), default=None)
    lead = call.overhead  # the leading system messages stay, and stay cached
    for m, t in zip(s.view, s.tokens, strict=False):
        if m.role != "system":
            break
        lead += t
    raw = s.input_tokens + call.overhead
    return Inputs(
        budget,
        total,
        pace(s, call),
        s.calls,
        call.rates,
        new_tokens=sum(s.tokens[s.new_start :]),
        summary_cost=float(call.summary_calls),
        since_summary=None if last is None else s.calls - last,
        cold=cold,
        lead=lead,
        ledger=s.ledger.settle(raw, total, call.rates) if bet else None,
    )


def plan_now(s: State, call: Call, cold: bool) -> Plan:
    """The cost model's plan for the request now; warns once (when the growth per call is
    measured) that a summary cannot buy its calls in the room the fixed part leaves."""
    budget = call.ctx.budget
    assert budget is not None
    if s.total <= budget.trigger:
        return Plan("none", budget.target, "under the trigger")
    policy = s.config.policy
    plan = decide(
        inputs(s, call, s.total, cold, bet=True),
        policy,
        summarises=s.config.compaction.enabled,
    )
    if plan.tight and not s.warned_tight and s.calls >= MEASURED_CALLS:
        s.warned_tight = True
        emit(
            call.out.events,
            Event(
                "warning",
                "policy",
                tokens_before=budget.fixed,
                tokens_after=budget.limit,
                detail=tight_warning(budget, pace(s, call), policy),
                data={"fixed": budget.fixed, "limit": budget.limit, "tight": True},
            ),
        )
    return plan


class Wager:
    """Whether a mask/strip batch is made now (see :mod:`contextwarden._policy`), asked of
    one call's state as it stands: what the answers read of it (the suffix sums of the view's
    tokens, the bill so far, where the next cut comes) is gathered once, so a search over
    where a mask starts asks it many times for the price of one."""

    def __init__(self, s: State, call: Call, reason: EditReason) -> None:
        self.s, self.call, self.reason = s, call, reason
        self.policy = s.config.policy
        tokens = s.tokens
        suffix = [*accumulate(reversed(tokens))][::-1]
        suffix.append(0)
        self.suffix = suffix
        self.new_tokens = suffix[min(s.new_start, len(tokens))]
        self.raw = s.input_tokens + call.overhead
        self.bet = Bet(self.new_tokens, s.ledger, self.raw, s.total, call.rates, self.policy)
        self.cuts = call.ctx.budget is not None and s.config.compaction.enabled
        self.base: Inputs | None = None
        self.cut: dict[int, int] = {}

    def small(self, removed: int, first: int) -> bool:
        """Whether removing ``removed`` tokens from view position ``first`` on is a small
        enough bet (:func:`~contextwarden._policy.bet_ok`)."""
        return self.bet.small(removed, self.suffix[min(first, len(self.suffix) - 1)])

    @cached_property
    def payable(self) -> int | None:
        """The calls an edit may pay back over: while the whole history could still be sent
        (:func:`~contextwarden._policy.payable_calls`)."""
        budget = self.call.ctx.budget
        return payable_calls(self.raw, budget.window, pace(self.s, self.call)) if budget else None

    def pays(self, removed: int, first: int) -> bool:
        """Whether the batch removing ``removed`` tokens from view position ``first`` on is
        made now."""
        s, call, policy = self.s, self.call, self.policy
        if self.reason == "pays":
            rewritten = self.suffix[min(first, len(self.suffix) - 1)] - removed
            new, rates = self.new_tokens, call.rates
            # paying back over the longest horizon comes first: it does not need to know
            # where the next cut comes, and most batches fail it
            if not edit_pays(removed, rewritten, new, s.calls, rates, policy):
                return False
            bill, idle, left = self.bet.ledger, s.idle, self.left(removed)
            return edit_pays(
                removed, rewritten, new, s.calls, rates, policy, left, ledger=bill, idle=idle
            )
        if self.reason == "immediate":
            return edit_pays(removed, 0, 0, s.calls, call.rates, policy)
        return True

    def left(self, removed: int, bound: bool = False) -> int | None:
        """The calls a batch removing ``removed`` tokens pays back over: to the next cut, while
        the whole history could be sent; ``bound``: the most for one removing up to that many
        (more removed, a later cut; over the trigger, up to the hard limit: ``cut_at``)."""
        budget, total = self.call.ctx.budget, self.s.total
        left = self._until(total - removed) if self.cuts else None
        if bound and left is not None and budget is not None and total > budget.trigger:
            left = max(int((budget.limit - total + removed) / pace(self.s, self.call)), 0)
        if self.payable is not None:
            left = self.payable if left is None else min(left, self.payable)
        return left

    def _until(self, request: int) -> int | None:
        """About how many calls, at the growth per call, until a request of ``request``
        tokens is cut (:func:`~contextwarden._policy.cut_at`, which reads the request only up
        to the trigger); None when the history does not grow."""
        if self.base is None:
            self.base = inputs(self.s, self.call, self.s.total)
        base = self.base
        if base.growth <= 0:
            return None
        key = max(request, base.budget.trigger)
        at = self.cut.get(key)
        if at is None:
            at = self.cut[key] = cut_at(replace(base, request=key), self.policy)
        return max(int((at - request) / base.growth), 0)
