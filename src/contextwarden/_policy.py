"""When the warden edits a conversation: must, pays, free (cache-aware).

Providers bill the leading part of a request that is byte-identical to the previous one as a
cached read (0.1x the input price on Anthropic, DeepSeek and gpt-5; 0.5x on gpt-4o) and the rest
as a write (1.25x on Anthropic's 5-minute cache; 1x where writes cost nothing extra). An edit
that changes message ``p`` makes everything after ``p`` a write again, once; the tokens it
removes are then not read on any later call. So an edit is made when:

* **must**: the request would otherwise be over the trigger (the window and compaction then cut
  to the target, so the following calls only append);
* **pays**: ``removed x read x (calls to come + 1) > (suffix rewritten - new tokens) x
  (write - read)``, and the edit removes at least ``clear_at_least`` tokens (edits come in
  batches);
* **free**: the provider's cache has gone cold (longer than its TTL since the conversation's
  previous call), so the next request is a full write whatever it holds;
* **immediate**: the model has no prompt caching (or ``mode: immediate``): every call, as
  soon as an edit helps (with ``clear_at_least: 0``).

The calls to come are unknown. An agent that has run 40 steps is as likely as not to run
about as many more, but an edit that has not paid back when the session ends leaves the bill
dearer than sending everything, so the policy counts on only ``horizon_ratio`` (half) of the
calls made so far, at least ``min_horizon``, unless ``horizon`` fixes the number; and never more
than the calls until the next compaction is expected (the request grows by about as much per
call as it has so far), since a compaction rewrites the request anyway.

The same test decides whether a request over the trigger but within the hard limit is cut now
or waits (``compaction.defer``): cutting to the target removes ``request - target`` tokens and
rewrites the target, plus the summarizer's calls when it is an LLM, and is made only when that
pays back within the calls expected before the limit. When the session is expected to reach the
hard limit, the cut comes anyway; it is made now unless cutting each time the request reaches
the limit costs less per call, over many cuts, than cutting each time it passes the trigger
(:func:`cheaper_at_limit`: waiting spaces the rewrites out, and reads more in between). With
cheap cache reads (DeepSeek's at 2% of the input price) it waits for the limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._models import find_model

__all__ = ["PolicyConfig"]

#: The least favourable cache ratios among the major providers: Anthropic's cached read (0.1x
#: input) and 5-minute write (1.25x input), from Anthropic's prompt-caching pricing page.
CONSERVATIVE_READ = 0.1
CONSERVATIVE_WRITE = 1.25
#: How much less per call cutting at the hard limit must cost than cutting at the trigger for
#: a session expected to reach the limit to wait (:func:`cheaper_at_limit`).
WAIT_MARGIN = 0.1


class PolicyConfig(BaseModel):
    """When lossless edits (masking, stripping thinking) are made; see :mod:`contextwarden._policy`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["cache_aware", "immediate"] = Field(
        "cache_aware",
        description="cache_aware: edit when over the trigger, when an edit pays for itself in "
        "cache reads, or when the cache has gone cold; immediate: every call, as soon as an "
        "edit helps. Models without prompt caching always behave as immediate. "
        "Default: cache_aware.",
    )
    clear_at_least: int = Field(
        4_000,
        ge=0,
        description="A mask/strip edit that is not required removes at least this many tokens "
        "at once, so the cache is rewritten rarely. 0 with mode immediate masks as soon as a result leaves the recent ones. "
        "Default: 4000.",
    )
    pricing: Literal["conservative", "model"] = Field(
        "conservative",
        description="The cache prices an edit is weighed at. conservative: the model's own, "
        "bounded by the least favourable major provider's (read 0.1x, write 1.25x), so a "
        "decision pays wherever the request is routed; model: the model's own. "
        "Default: conservative.",
    )
    horizon: int | None = Field(
        None,
        ge=1,
        description="Calls expected to come after this one. Default: none (horizon_ratio of "
        "the calls the conversation has made so far, at least min_horizon).",
    )
    horizon_ratio: float = Field(
        0.5,
        gt=0,
        le=1,
        description="The calls to come, as a share of the calls made so far (at least "
        "min_horizon): how long a session goes on is unknown, and an edit that does not pay "
        "back before the session ends makes the bill dearer than sending everything. "
        "Default: 0.5.",
    )
    min_horizon: int = Field(
        4, ge=0, description="The least number of calls to come assumed. Default: 4."
    )
    cache_ttl_s: float | None = Field(
        None,
        gt=0,
        description="Seconds an unused cached prefix lives; after that pending edits are free. "
        "Default: the model registry's figure.",
    )


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


NO_CACHE = CacheRates(1.0, 1.0, None, False)


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


def expected_calls(calls_so_far: int, config: PolicyConfig) -> int:
    """How many more calls the session is counted on to make: ``config.horizon`` when set,
    else ``horizon_ratio`` of the calls made so far, at least ``min_horizon``."""
    if config.horizon is not None:
        return config.horizon
    return max(int(calls_so_far * config.horizon_ratio), config.min_horizon)


def cheaper_at_limit(aim: int, trigger: int, limit: int, pace: float, rates: CacheRates) -> bool:
    """Whether, in a session that goes on, cutting the request back to ``aim`` tokens each time
    it reaches ``limit`` costs less per call than cutting it each time it passes ``trigger``,
    growing by ``pace`` tokens a call. A cut rewrites what it keeps (``aim`` at the write
    price); between cuts each call reads the request again (at the read price), on average
    half-way between ``aim`` and where the cut comes. An LLM summarizer's calls do not tip it
    either way: each reads what its cut replaces, and both ways replace ``pace`` tokens a call.
    Waiting must save at least :data:`WAIT_MARGIN` of the per-call cost: a session that ends
    soon after the cut at the limit pays for that cut and gets little back, so a close call
    cuts early."""
    if pace <= 0 or limit <= trigger or trigger <= aim:
        return False

    def per_call(at: int) -> float:
        calls = (at - aim) / pace
        return aim * rates.write / calls + rates.read * (aim + at) / 2

    return per_call(limit) < (1 - WAIT_MARGIN) * per_call(trigger)


def edit_pays(
    removed: int,
    rewritten: int,
    new_tokens: int,
    calls_so_far: int,
    rates: CacheRates,
    config: PolicyConfig,
    calls_left: int | None = None,
    extra_cost: float = 0.0,
) -> bool:
    """Whether an optional edit that removes ``removed`` tokens and rewrites ``rewritten``
    tokens (the suffix after the first message it changes, as it will be sent) pays, given the
    ``new_tokens`` this call writes anyway (see the module docstring). ``calls_left`` caps the
    calls it pays over: the calls until the next compaction is expected, which rewrites the
    request anyway (None: no compaction in sight). ``extra_cost``, in input tokens, is what
    else the edit costs (the summarizer calls of a compaction)."""
    if removed <= 0:
        return False
    if not rates.caching:
        return removed >= config.clear_at_least or config.clear_at_least == 0
    if removed < config.clear_at_least:
        return False
    horizon = expected_calls(calls_so_far, config)
    if calls_left is not None:
        horizon = min(horizon, calls_left)
    gain = removed * rates.read * (horizon + 1)
    cost = max(rewritten - new_tokens, 0) * rates.rewrite + extra_cost
    return gain > cost
