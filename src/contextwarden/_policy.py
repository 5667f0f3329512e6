"""The cost model: which edit (if any) a call makes, and how far it cuts.

Every decision the warden takes about a conversation's history is asked here, with its inputs
explicit (:class:`Inputs`): the budget (window, hard limit, and the *fixed part* no edit can
remove: system prompt, tools, task, pins; :class:`~contextwarden._budget.Budget` sets the
trigger and the target in the room it leaves), the request now, how much the history grows per
call, the calls made so far, the model's cache prices and TTL (:class:`CacheRates`), and what a
summary costs. The answer is a :class:`Plan` (what to do, where to aim) with its expected bill.

**Prices.** Providers bill the leading part of a request that is byte-identical to the previous
one as a cached read (0.1x the input price on Anthropic, DeepSeek and gpt-5; 0.5x on gpt-4o) and
the rest as a write (1.25x on Anthropic's 5-minute cache; 1x where writes cost nothing extra).
An edit that changes message ``p`` makes everything after ``p`` a write again, once; the tokens
it removes are then not read on any later call.

**Lossless edits** (mask, strip thinking) are made when:

* **must**: the request is over the trigger (they come before any lossy cut);
* **pays**: ``removed x read x (calls to come + 1) > (suffix rewritten - new tokens) x
  (write - read)``, waiting has cost as much as that rewrite (:func:`batched`: the reads paid
  since the last edit on tokens it could have removed), and the bet is small:
  what it loses if the session ends right after this call (:func:`bet_ok`) is covered by what
  earlier edits saved plus ``loss_cap`` (1%) of the bill sending everything would have made so
  far;
* **free**: the provider's cache has gone cold (longer than its TTL since the previous call)
  or holds nothing yet (the conversation's first call);
* **immediate**: the model has no prompt caching (or ``mode: immediate``).

**How far an optional mask reaches.** The messages after the newest result a mask changes
are new on this call (written anyway), so a mask of the outputs the agent has just acted on
rewrites little more than their stubs, and pays early even at Anthropic's prices; one kept off
the ``mask.keep_recent`` newest results would rewrite all of them each time. So a mask made
because it pays may reach every output the agent has acted on (an assistant message came after
it), and starts at the earliest result from which it pays and is a small bet; it keeps whole
what the agent may quote next (the latest read of each file, while its edits quote or it has
not edited). ``keep_recent`` bounds the masks that must make room, are free or have no cache.

How long a session goes on is unknown; an agent that has made ``n`` calls is counted on for
``n`` more (as likely as not, with no other knowledge, to go on as long as it has), never more
than the calls until the next compaction (which rewrites the request anyway). The loss cap is
what keeps that guess from making a bill dearer than sending everything: a wrong guess costs
under 1% of the bill.

**Lossy cuts** (a compaction with a summary, or a window cut of whole oldest units):
:func:`decide`. Over the trigger, the request is cut to the target, so that a cut buys
``floor((trigger - target) / growth)`` calls before the next one. Where the fixed part leaves
too little room for that (:func:`tight`), the conversation says so once (a ``warning`` event)
and summaries are spaced ``summary_spacing`` calls apart; between them the window is managed
by cutting whole oldest units (no summary call) when over the hard limit. Hence the bound the
docs state (``docs/policy.md``): over ``n`` calls, compactions with a summary are at most
``ceil(n / summary_spacing)``, and at most ``1 + G / (trigger - target)`` while each lands on its
target (``G`` the tokens the history grew by).

A request over the trigger but within the hard limit waits (``wait``) while cutting it now
would not pay for itself before the limit, summarizer calls included (:func:`defers`); a session
expected to reach the limit waits only when cutting at the limit each time costs less per call
than cutting at the trigger (:func:`cheaper_at_limit`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from itertools import accumulate
from typing import TYPE_CHECKING, Any, Literal

from ._lazy import lazy_names
from ._models import find_model

if TYPE_CHECKING:
    from ._budget import Budget
    from ._sections import PolicyConfig

__all__ = ["PolicyConfig"]

#: the settings, given on first use: importing the warden does not load pydantic
_HOMES = {"PolicyConfig": "._sections"}
__getattr__ = lazy_names(__name__, _HOMES, globals())

#: The least favourable cache ratios among the major providers: Anthropic's cached read (0.1x
#: input) and 5-minute write (1.25x input), from Anthropic's prompt-caching pricing page.
CONSERVATIVE_READ = 0.1
CONSERVATIVE_WRITE = 1.25
#: How much less per call cutting at the hard limit must cost than cutting at the trigger for
#: a session expected to reach the limit to wait (:func:`cheaper_at_limit`).
WAIT_MARGIN = 0.1


@dataclass(frozen=True)
class CacheRates:
    """Cache prices as multiples of the input price; ``caching`` False when the model has none."""

    read: float
    write: float
    ttl_s: float | None
    caching: bool

    @property
    def rewrite(self) -> float:
        """What one token moved from a read to a write costs extra."""
        return max(self.write - self.read, 0.0)


def rates_for(
    model: str | None, config: PolicyConfig, overrides: Mapping[str, Any] | None = None
) -> CacheRates:
    """The cache rates the policy weighs edits at for ``model`` (see :class:`PolicyConfig`)."""
    read = write = ttl = None
    caching = True
    if model is not None:
        info = find_model(model, overrides)
        if info is not None:
            price = info.input_price_per_mtok
            cached = getattr(info, "cache_read_price_per_mtok", None)
            written = getattr(info, "cache_write_price_per_mtok", None)
            if getattr(info, "caching", "automatic") == "none":
                caching = False
            if price:
                read = cached / price if cached is not None else None
                write = written / price if written is not None else None
            ttl = getattr(info, "cache_ttl_s", None)
    if config.cache_ttl_s is not None:
        ttl = config.cache_ttl_s
    if not caching or config.mode == "immediate":
        return CacheRates(1.0, 1.0, ttl, False)
    if config.pricing == "conservative":
        read = CONSERVATIVE_READ if read is None else min(read, CONSERVATIVE_READ)
        write = CONSERVATIVE_WRITE if write is None else max(write, CONSERVATIVE_WRITE)
    else:
        read = CONSERVATIVE_READ if read is None else read
        write = CONSERVATIVE_WRITE if write is None else write
    return CacheRates(read, write, ttl if ttl is not None else 300.0, True)


@dataclass(frozen=True)
class Ledger:
    """What a conversation has been billed so far, in input tokens at the rates the policy
    weighs edits at: ``raw``, had every call sent the whole history (the payable baseline), and
    ``ours``, the requests as sent. ``cached``: the tokens the provider's cache holds (the
    previous request); ``cut_from``: the tokens before the first message an edit of the
    current call rewrote (None: no edit yet)."""

    raw: float = 0.0
    ours: float = 0.0
    raw_cached: int = 0
    cached: int = 0
    cut_from: int | None = None

    def call_cost(self, total: int, rates: CacheRates, cold: bool = False) -> float:
        """What a request of ``total`` tokens costs after this ledger's last one."""
        read = (
            0
            if cold
            else min(self.cached, total, self.cut_from if self.cut_from is not None else total)
        )
        return _cost(read, total, rates)

    def settle(self, raw: int, total: int, rates: CacheRates, cold: bool = False) -> Ledger:
        """This ledger after a call whose whole history took ``raw`` tokens and whose request
        ``total``."""
        raw_read = 0 if cold else min(self.raw_cached, raw)
        return Ledger(
            self.raw + _cost(raw_read, raw, rates),
            self.ours + self.call_cost(total, rates, cold),
            raw,
            total,
        )


def _cost(read: int, total: int, rates: CacheRates) -> float:
    if not rates.caching:
        return float(total)
    return read * rates.read + (total - read) * rates.write


def bet_ok(loss: float, ledger: Ledger, config: PolicyConfig) -> bool:
    """Whether an optional edit is a small enough bet: ``loss``, what it costs if the session
    ends right after this call (the suffix it made a write again, less the reads it saved), is
    covered by what earlier edits saved plus ``loss_cap`` of the bill sending everything would
    have made so far: the session then ends at most ``loss_cap`` dearer than that."""
    # what the edits so far saved against sending everything (negative: cost), plus the cap
    return loss <= ledger.raw - ledger.ours + config.loss_cap * ledger.raw


@dataclass(frozen=True)
class Inputs:
    """What a decision is made from. Tokens are the counter's; costs are in input tokens (one
    token at the model's input price).

    ``budget``: window, hard limit, reserve and the fixed part (its trigger and target are in
    the room the fixed part leaves); ``request``: the request's tokens now; ``growth``: tokens
    the history grows by per call; ``calls``: calls made so far; ``new_tokens``: tokens this
    call writes anyway (the new messages); ``summary_cost``: what a compaction's summarizer
    calls cost per token they replace (0 with the embedded summarizer; about 1 per LLM call,
    which reads the span at the input price); ``since_summary``: calls since the last compaction
    with a summary (None: none yet); ``cold``: the provider's cache has expired."""

    budget: Budget
    request: int
    growth: float
    calls: int
    rates: CacheRates
    new_tokens: int = 0
    summary_cost: float = 0.0
    since_summary: int | None = None
    cold: bool = False
    #: the leading system messages and tools: they stay cached through any cut
    lead: int = 0
    #: the bill so far, this call included as it stands (None: no bet check)
    ledger: Ledger | None = None


Action = Literal["none", "wait", "compact", "window_cut"]


@dataclass(frozen=True)
class Plan:
    """What the cost model decided for the history: ``action`` (``none``: under the trigger;
    ``wait``: over it, within the hard limit, cutting now does not pay or a summary was made
    too recently; ``compact``: a compaction with a summary down to ``aim``; ``window_cut``: whole
    oldest units dropped down to ``aim``, no summary), why, and ``bill``: the expected cost per
    call (input tokens) until the next cut, at the model's cache prices. ``tight``: the fixed
    part leaves too little room for a summary to buy ``summary_spacing`` calls."""

    action: Action
    aim: int
    reason: str
    bill: float = 0.0
    tight: bool = False


def expected_calls(calls_so_far: int, config: PolicyConfig) -> int:
    """How many more calls the session is counted on to make: ``config.horizon`` when set, else
    as many as it has made so far (at least 1)."""
    if config.horizon is not None:
        return config.horizon
    return max(calls_so_far, 1)


def tight(budget: Budget, growth: float, config: PolicyConfig) -> bool:
    """Whether the fixed part leaves too little room for a summary to buy
    ``summary_spacing`` calls at ``growth`` tokens a call."""
    # the calls a cut to the target buys before the request is over the trigger again
    bought = int((budget.trigger - budget.target) / growth) if growth > 0 else 1 << 30
    return bought < config.summary_spacing


def tight_warning(budget: Budget, growth: float, config: PolicyConfig) -> str:
    """What the warden (once) and ``inspect`` say when :func:`tight` holds."""
    return (
        f"between the trigger ({budget.trigger:,} tokens) and the target ({budget.target:,}), "
        f"in the room the fixed part (system prompt, tools, task, pins: {budget.fixed:,}) "
        f"leaves under the limit ({budget.limit:,}), a summary buys fewer than "
        f"{config.summary_spacing} calls at {growth:,.0f} tokens a call: summaries are spaced "
        "that far apart, and whole oldest turns are cut between them"
    )


def cheaper_at_limit(aim: int, trigger: int, limit: int, pace: float, rates: CacheRates) -> bool:
    """Whether, in a session that goes on, cutting the request back to ``aim`` tokens each time
    it reaches ``limit`` costs less per call than cutting it each time it passes ``trigger``,
    growing by ``pace`` tokens a call. A cut rewrites what it keeps (``aim`` at the write
    price); between cuts each call reads the request again (at the read price), on average
    half-way between ``aim`` and where the cut comes. Waiting must save at least
    :data:`WAIT_MARGIN` of the per-call cost: a session that ends soon after the cut at the
    limit pays for that cut and gets little back, so a close call cuts early."""
    if pace <= 0 or limit <= trigger or trigger <= aim:
        return False
    return per_call(aim, limit, pace, rates) < (1 - WAIT_MARGIN) * per_call(
        aim, trigger, pace, rates
    )


def per_call(aim: int, at: int, pace: float, rates: CacheRates, summary: float = 0.0) -> float:
    """The cost per call, in input tokens, of cutting to ``aim`` each time the request reaches
    ``at``, growing ``pace`` a call: the cut's write (and ``summary``, its summarizer's cost)
    spread over the calls it buys, plus the reads in between."""
    calls = max((at - aim) / pace, 1.0) if pace > 0 else 1.0
    return (aim * rates.write + summary) / calls + rates.read * (aim + at) / 2


def edit_pays(
    removed: int,
    rewritten: int,
    new_tokens: int,
    calls_so_far: int,
    rates: CacheRates,
    config: PolicyConfig,
    calls_left: int | None = None,
    extra_cost: float = 0.0,
    ledger: Ledger | None = None,
    idle: float | None = None,
) -> bool:
    """Whether an optional edit that removes ``removed`` tokens and rewrites ``rewritten``
    tokens (the suffix after the first message it changes, as it will be sent) pays, given the
    ``new_tokens`` this call writes anyway (see the module docstring). ``calls_left`` caps the
    calls it pays over: the calls until the next compaction is expected, which rewrites the
    request anyway (None: no compaction in sight). ``extra_cost``, in input tokens, is what
    else the edit costs (the summarizer calls of a compaction). ``ledger``: the bill so far; when
    given, the edit must also be a small bet (:func:`bet_ok`). ``idle``: what the calls since
    the last edit paid to read tokens an edit could have removed; when given, the edit waits
    until that, with what waiting costs this call, reaches its rewrite (:func:`batched`)."""
    if removed <= 0:
        return False
    if not rates.caching:
        return True
    horizon = expected_calls(calls_so_far, config)
    if calls_left is not None:
        horizon = min(horizon, calls_left)
    gain = removed * rates.read * (horizon + 1)
    cost = max(rewritten - new_tokens, 0) * rates.rewrite + extra_cost
    if gain <= cost:
        return False
    if idle is not None and not batched(idle, removed, cost, rates, new_tokens):
        return False
    if ledger is None:
        return True
    return bet_ok(cost - removed * rates.read, ledger, config)


def may_pay(
    most: Iterable[tuple[int, int]],
    suffix: Mapping[int, int],
    new_tokens: int,
    calls_so_far: int,
    rates: CacheRates,
    config: PolicyConfig,
    calls_left: int | None = None,
) -> bool:
    """Whether a batch of optional edits whose first change is at one of ``most``'s view
    positions (newest first, each with the most the batch removes there) may pass
    :func:`edit_pays`'s test over at most ``calls_left`` calls, rewriting the tokens from there
    on (``suffix``, by view position) less those removed. The test only gets easier as a batch
    removes more (more saved, less rewritten): one failing it with the bounds fails it as made."""
    if not rates.caching:
        return True
    read, rewrite = rates.read, rates.rewrite
    horizon = expected_calls(calls_so_far, config) + 1
    if calls_left is not None:
        horizon = min(horizon, calls_left + 1)
    sums = accumulate(bound for _, bound in most)
    return any(
        removed > 0
        and removed * read * horizon > max(suffix[p] - removed - new_tokens, 0) * rewrite
        for (p, _), removed in zip(most, sums, strict=True)
    )


def batched(idle: float, removed: int, cost: float, rates: CacheRates, new_tokens: int) -> bool:
    """Whether an optional edit is made now rather than batched with later ones: once waiting
    has cost as much as the edit's rewrite (``cost``). Waiting costs ``idle`` (the reads paid
    since the last edit on tokens one could have removed), this call's reads of ``removed``,
    and a dearer rewrite: the ``new_tokens`` this call writes anyway, which an edit made later
    writes again. Each edit rewrites the request after its first change, so many edits that
    start far back cost many long rewrites; an edit of what the agent has just read rewrites
    little more than its stubs, and waiting would only add this call's tokens to it. This is
    the rent-or-buy rule with a price that rises while one waits: it batches edits to how fast
    the removable tokens grow and how dear a rewrite is at the model's prices, with no size to
    tune."""
    return idle + removed * rates.read + new_tokens * rates.rewrite >= cost


def defers(inputs: Inputs, config: PolicyConfig, summarises: bool) -> bool:
    """Whether a request over the trigger and within the hard limit waits: cutting it to the
    target now (a compaction, or a window cut) would not pay for itself, at the model's cache
    prices, within the calls the session can be expected to still make before the limit; a
    session expected to reach the limit, where the cut comes anyway, waits only when cutting at
    the limit each time costs less per call (:func:`cheaper_at_limit`). Cheap cache reads
    (DeepSeek's at 2% of the input price) make reading a long request again cheaper than
    rewriting a short one."""
    budget, rates, pace = inputs.budget, inputs.rates, inputs.growth
    total = inputs.request
    if not rates.caching or budget.trigger >= budget.limit or total > budget.limit or pace <= 0:
        return False
    aim = budget.target if summarises else budget.trigger
    until_limit = int((budget.limit - total) / pace)
    removed = max(total - aim, 0)
    summaries = inputs.summary_cost * removed if summarises else 0.0
    if inputs.ledger is not None:
        # a cut before the limit is a bet too: the whole history could still be sent
        rewritten = max(aim - inputs.lead - inputs.new_tokens, 0)
        loss = rewritten * rates.rewrite + summaries - removed * rates.read
        if not bet_ok(loss, inputs.ledger, config):
            return True
    if expected_calls(inputs.calls, config) > until_limit:
        return cheaper_at_limit(aim, budget.trigger, budget.limit, pace, rates)
    return not edit_pays(
        removed,
        max(aim - inputs.lead, 0),
        inputs.new_tokens,
        inputs.calls,
        rates,
        config,
        until_limit,
        summaries,
    )


def decide(inputs: Inputs, config: PolicyConfig, *, summarises: bool) -> Plan:
    """The lossy cut a request needs now (see the module docstring). ``summarises``: a
    compaction with a summary is available (else every cut is a window cut)."""
    budget = inputs.budget
    total = inputs.request
    narrow = tight(budget, inputs.growth, config)
    aim = budget.target if summarises else budget.trigger
    bill = per_call(
        budget.target,
        budget.trigger,
        inputs.growth,
        inputs.rates,
        inputs.summary_cost * max(budget.trigger - budget.target, 0),
    )
    if total <= budget.trigger:
        return Plan("none", aim, "under the trigger", bill, narrow)
    over_limit = total > budget.limit
    if not inputs.cold and defers(inputs, config, summarises):
        return Plan("wait", aim, "cutting now does not pay before the limit", bill, narrow)
    if not summarises:
        return Plan("window_cut", aim, "over the trigger, no summaries", bill, narrow)
    spaced = inputs.since_summary is None or inputs.since_summary >= config.summary_spacing
    if spaced:
        return Plan("compact", aim, "over the trigger", bill, narrow)
    if over_limit:
        return Plan(
            "window_cut", budget.target, "over the limit, a summary is recent", bill, narrow
        )
    return Plan("wait", aim, "a summary is recent; within the limit", bill, narrow)


def cut_at(inputs: Inputs, config: PolicyConfig) -> int:
    """The request's size at which a request growing from ``inputs.request`` is cut: the
    trigger, or the hard limit when a cut at the trigger would not pay (:func:`defers`). It
    reads ``inputs.request`` only as ``max(request, trigger)``."""
    budget = inputs.budget
    at_trigger = replace(inputs, request=max(inputs.request, budget.trigger))
    return budget.limit if defers(at_trigger, config, True) else budget.trigger


def payable_calls(raw: int, window: int, growth: float) -> int | None:
    """Calls until sending the whole history (``raw`` tokens now) would be over the window:
    the calls on which what the agent could have sent is still the measure of an edit's bet
    (after them, the whole history cannot be sent). None when it already is over, or the
    history does not grow."""
    if growth <= 0 or raw > window:
        return None
    return int((window - raw) / growth)
