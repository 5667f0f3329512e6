"""Replay a recorded session call by call, with and without the warden: what it would have sent
and what the provider would have billed, prompt caching counted (:mod:`contextwarden._billing`).

The context of call *k* is everything before the *k*-th assistant message; one warden serves
the whole replay, as in a live agent. The baseline and what is *not payable*: docs/sessions.md.
Pure computation: no network, no file I/O.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from typing import Any, Literal

from ._billing import CachePricing, PromptRequest, bill_after
from ._budget import Budget, reply_tokens
from ._config import WardenConfig
from ._exceptions import ConfigError, UnknownModelError
from ._messages import Message
from ._model_overrides import ModelOverride, apply_model_overrides
from ._models import ModelInfo, assume_model, model_info
from ._tokens import TokenCounter
from ._warden import TransformResult, Warden
from .formats import to_anthropic, to_openai, validate_anthropic, validate_openai
from .transcripts._common import AgentCompaction

__all__ = [
    "ReplayCall",
    "ReplayReport",
    "ReplayTotals",
    "ResolvedModel",
    "compact_history",
    "epoch_seconds",
    "prompt_request",
    "replay",
    "resolve_model",
]

Provider = Literal["openai", "anthropic"]
#: What a replay's "without contextwarden" is: the provider usage the recording states for
#: every call, the agent's history with its own compactions applied (estimated), or the
#: recorded history itself (the agent made no compaction).
Baseline = Literal["recorded-usage", "agent-compactions", "full-history"]
#: Whose cache prices bill a replay: the model's own (from the registry) or Anthropic's ratios
#: (read 0.1x, write 1.25x the model's input price, 5-minute TTL) whatever the model.
PricingMode = Literal["model", "anthropic"]


@dataclass(frozen=True)
class ReplayCall:
    """One LLM call of the replay (``call`` from 1; ``message_index``: the reply it produced).

    ``*_without`` / ``*_with``: without and with the warden. ``tokens_*``: the request's tokens,
    tools included (``tokens_full``: the whole recorded history); ``cumulative_*``: running sums.
    ``summaries_written``: summaries paid for on this call; ``events``: what the warden did, by
    kind; ``valid``: the request passed the provider's validator and fits (else ``problems``).
    ``cached_*`` / ``written_*``: tokens read from / written to the provider's cache;
    ``estimated_cost_*``: USD at the replay's cache prices, ``billed_cost_*``: on the report's
    baseline (``None`` without a price). ``payable`` / ``fits_with``: the request leaves its
    reply room (docs/sessions.md); ``limit``: the hard limit on this call; ``at``: epoch
    seconds, when known; ``recorded_*``: the usage the recording states (prompt tokens in all,
    read, written) and its cost.
    """

    call: int
    message_index: int
    messages_without: int
    messages_with: int
    tokens_without: int
    tokens_with: int
    cumulative_without: int
    cumulative_with: int
    compacted: bool
    summaries_written: int
    strategy: str | None
    newest_truncated: bool
    valid: bool
    problems: tuple[str, ...] = ()
    events: Mapping[str, int] = field(default_factory=dict)
    cached_without: int = 0
    written_without: int = 0
    cached_with: int = 0
    written_with: int = 0
    billed_cost_without: float | None = None
    billed_cost_with: float | None = None
    estimated_cost_without: float | None = None
    estimated_cost_with: float | None = None
    at: float | None = None
    tokens_full: int = 0
    payable: bool = True
    fits_with: bool = True
    limit: int = 0
    recorded_input: int | None = None
    recorded_cached: int | None = None
    recorded_written: int | None = None
    recorded_cost: float | None = None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["problems"] = list(self.problems)
        data["events"] = dict(self.events)
        return data


@dataclass(frozen=True)
class ReplayTotals:
    """The whole replay, summed over calls: input tokens without and with the warden
    (``saved_ratio = 1 - with/without``), summaries written, invalid requests, the list-price
    cost (``None`` without a price), the bill with caching (``billed_cost_*``, the calls' bills
    summed) and ``cache_hit_ratio_*``. The baseline: ``baseline`` names it; ``not_payable_*``
    count the calls that do not fit with room for the reply; ``payable_billed_cost_without`` and
    ``billed_cost_with_on_payable`` bill the payable calls alone (``billed_saved_ratio`` and
    ``dearer`` compare those); ``recorded_*``: the calls with provider usage and their bill.
    """

    calls: int
    input_tokens_without: int
    input_tokens_with: int
    saved_ratio: float
    compactions: int
    compacted_calls: int
    invalid_requests: int
    max_context_without: int
    max_context_with: int
    cost_without: float | None
    cost_with: float | None
    billed_cost_without: float | None = None
    billed_cost_with: float | None = None
    billed_saved_ratio: float | None = None
    cache_hit_ratio_without: float = 0.0
    cache_hit_ratio_with: float = 0.0
    baseline: Baseline = "full-history"
    agent_compactions: int = 0
    not_payable_without: int = 0
    not_payable_with: int = 0
    payable_billed_cost_without: float | None = None
    billed_cost_with_on_payable: float | None = None
    recorded_calls: int = 0
    recorded_billed_cost: float | None = None
    input_tokens_full_history: int = 0
    dearer: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


_NESTED = ("calls", "totals")


@dataclass(frozen=True)
class ReplayReport:
    """A replay: every call, the totals, and what it ran against (``pricing``: whose cache
    prices billed it, ``cache_pricing`` the prices themselves, ``None`` when unknown).
    ``limit`` is the hard limit at the last call (each call's is :attr:`ReplayCall.limit`:
    the reserve is fitted to the replies as they come)."""

    calls: tuple[ReplayCall, ...]
    totals: ReplayTotals
    model: str
    window: int
    limit: int
    trigger: int
    provider: Provider
    input_price_per_mtok: float | None
    pricing: PricingMode | Literal["custom"] = "model"
    cache_pricing: CachePricing | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON form: what it ran against, then ``"calls": [...], "totals": {...}``."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _NESTED}
        data["cache_pricing"] = asdict(self.cache_pricing) if self.cache_pricing else None
        return data | {"calls": [c.as_dict() for c in self.calls], "totals": self.totals.as_dict()}


def _problems(
    result: TransformResult, provider: Provider, window: int, validate: bool = True
) -> list[str]:
    problems: list[str] = []
    if validate:
        msgs = list(result.messages)
        if provider == "anthropic":
            problems = list(validate_anthropic(*to_anthropic(msgs)))
        else:
            problems = list(validate_openai(to_openai(msgs)))
    if result.tokens_after > window:
        problems.append(f"request is {result.tokens_after} tokens, over the {window}-token window")
    return problems


def _summaries(warden: Warden) -> int:
    """How many summaries the warden's compactor has written so far (its cache's size)."""
    cache = getattr(warden.compactor, "cache", None)
    return len(cache) if cache is not None else 0


def cache_pricing(
    model: str,
    pricing: PricingMode | CachePricing = "model",
    overrides: Mapping[str, ModelInfo] | None = None,
) -> CachePricing | None:
    """The cache prices a replay of ``model`` bills at: the registry's for ``"model"``,
    Anthropic's ratios on the model's input price for ``"anthropic"``, or the given
    :class:`CachePricing`. ``None`` when the model's input price is unknown."""
    if isinstance(pricing, CachePricing):
        return pricing
    if pricing == "model":
        return CachePricing.for_model(model, overrides)
    if pricing == "anthropic":
        try:
            price = model_info(model, overrides).input_price_per_mtok
        except UnknownModelError:
            return None
        return CachePricing.ratios(price) if price is not None else None
    raise ConfigError(f"pricing must be 'model', 'anthropic' or a CachePricing, got {pricing!r}")


def epoch_seconds(stamp: Any) -> float | None:
    """A transcript timestamp as epoch seconds: numbers in seconds or milliseconds (pi writes
    milliseconds), ISO 8601 strings (Claude Code); ``None`` for anything else."""
    if isinstance(stamp, bool):
        return None
    if isinstance(stamp, int | float):
        # Epoch milliseconds pass 1e11 in 1973; epoch seconds will not reach it for millennia.
        return float(stamp) / 1000 if stamp > 1e11 else float(stamp)
    if isinstance(stamp, str):
        try:
            parsed = datetime.fromisoformat(stamp.strip())
        except ValueError:
            return None
        if parsed.tzinfo is None:
            return None  # a local time of unknown zone: better no TTL than a wrong one
        return parsed.timestamp()
    return None


def _call_time(context: Sequence[Message], reply: Message) -> float | None:
    """When the call was sent: the time of the newest message of its context (a request goes
    out as soon as its last input exists), else of the reply."""
    for message in (context[-1] if context else None, reply):
        if message is not None:
            at = epoch_seconds(message.timestamp)
            if at is not None:
                return at
    return None


def prompt_request(
    messages: Sequence[Message],
    counter: TokenCounter,
    prefix_key: str,
    prefix_tokens: int,
    at: float | None,
) -> PromptRequest:
    """A request as the provider's cache sees it: messages keyed by content."""
    return PromptRequest(
        keys=[m.fingerprint for m in messages],
        tokens=[counter.count_message(m) for m in messages],
        prefix_key=prefix_key,
        prefix_tokens=prefix_tokens,
        at=at,
    )


def make_warden(config: WardenConfig) -> Warden:
    """The warden an agent would build from ``config`` (compaction included unless
    ``compaction.enabled`` is false)."""
    return Warden(config)


def _setup(
    config: WardenConfig | None, warden: Warden | None, model: str, window: int | None, purpose: str
) -> tuple[WardenConfig, Warden, Budget]:
    """The config (default: the seeds' defaults), the warden (default: :func:`make_warden`) and
    the budget for ``model``/``window``; ConfigError naming ``purpose`` when no window is known
    (cannot happen with a model; kept for type checkers)."""
    config = config or WardenConfig.model_validate({})
    warden = warden or make_warden(config)
    budget = warden.budget_for(model, window)
    if budget is None:
        raise ConfigError(f"{purpose} needs a context window: give a model or a window")
    return config, warden, budget


def sent_context(
    messages: Sequence[Message], compactions: Sequence[AgentCompaction], end: int
) -> list[Message]:
    """What the agent itself sent for a call whose context is ``messages[:end]``: the last of
    its own ``compactions`` at or before ``end`` applied (its leading system messages, the
    compaction's replacement, then the messages since)."""
    done = [c for c in compactions if c.at <= end]
    if not done:
        return list(messages[:end])
    last = done[-1]
    lead = 0
    while lead < len(messages) and messages[lead].role == "system":
        lead += 1
    return [*messages[: min(lead, end)], *last.replacement, *messages[max(last.at, lead) : end]]


def recorded_usage(usage: Mapping[str, Any] | None) -> tuple[int, int, int] | None:
    """A recorded provider usage as ``(prompt tokens in all, read from the cache, written to
    it)``, whatever the agent's spelling: Anthropic (``input_tokens`` +
    ``cache_read_input_tokens`` + ``cache_creation_input_tokens``), OpenAI / Codex
    (``input_tokens`` or ``prompt_tokens`` including ``cached_input_tokens`` /
    ``prompt_tokens_details.cached_tokens``), pi (``input``, ``cacheRead``, ``cacheWrite``),
    Gemini CLI (``input`` including ``cached``). ``None`` when it has no prompt count."""
    if not isinstance(usage, Mapping):
        return None

    def num(*keys: str) -> int | None:
        for key in keys:
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return None

    if "cacheRead" in usage or "cacheWrite" in usage:  # pi
        base, read, written = num("input"), num("cacheRead") or 0, num("cacheWrite") or 0
        return None if base is None else (base + read + written, read, written)
    if "cache_read_input_tokens" in usage or "cache_creation_input_tokens" in usage:
        read = num("cache_read_input_tokens") or 0
        written = num("cache_creation_input_tokens") or 0
        prompt = num("prompt_tokens")  # litellm's spelling includes the cached part
        if prompt is not None:
            return prompt, read, written
        base = num("input_tokens")
        return None if base is None else (base + read + written, read, written)
    details = usage.get("prompt_tokens_details")
    cached = num("cached_input_tokens", "cached")
    if cached is None and isinstance(details, Mapping):
        value = details.get("cached_tokens")
        cached = value if isinstance(value, int) else None
    total = num("input_tokens", "prompt_tokens", "input")
    if total is None:
        return None
    return total, cached or 0, 0


def _recorded(reply: Message, prices: CachePricing | None) -> dict[str, Any]:
    found = recorded_usage(reply.usage)
    if found is None:
        return {}
    total, read, written = found
    cost = None if prices is None else prices.cost(read, written, max(0, total - read - written))
    return {
        "recorded_input": total,
        "recorded_cached": read,
        "recorded_written": written,
        "recorded_cost": cost,
    }


def count_calls(messages: Sequence[Message]) -> int:
    """How many calls a replay of ``messages`` makes (its assistant messages)."""
    return sum(1 for m in messages if m.role == "assistant")


def replay(
    messages: Sequence[Message],
    *,
    model: str,
    window: int | None = None,
    config: WardenConfig | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    provider: Provider = "openai",
    warden: Warden | None = None,
    on_call: Callable[[ReplayCall], None] | None = None,
    pricing: PricingMode | CachePricing = "model",
    compactions: Sequence[AgentCompaction] = (),
    validate: bool = True,
) -> ReplayReport:
    """Replay ``messages`` (a recorded history) call by call; see the module docstring.

    ``model`` picks the tokenizer and the list price; ``window`` overrides the model's context
    window (else ``config.context_window``, else the registry's). ``config`` configures the
    warden (default: the seeds' defaults, compaction with the embedded summarizer); pass
    ``warden`` to replay with one of your own. ``provider`` is the API whose validator checks
    each request. ``on_call`` is called after each call (for a progress bar). ``pricing``:
    whose cache prices bill the calls (default ``"model"``: the registry's for ``model``;
    ``"anthropic"``: read 0.1x and write 1.25x its input price; or a :class:`CachePricing`).

    Raises :class:`~contextwarden.UnknownModelError` for a model the registry lacks when no
    window is given. ``messages`` is never mutated.
    """
    config, warden, budget = _setup(config, warden, model, window, "replay")
    overrides = warden.models
    prices = cache_pricing(model, pricing, overrides)
    # Token arithmetic needs the cache's rules (TTL, minimum) even without a price.
    rules = prices or CachePricing.ratios(0.0)
    counter = warden.counter_for(model)
    tool_list = list(tools) if tools else None
    prefix_key = json.dumps(tool_list, sort_keys=True, ensure_ascii=False, default=str)
    prefix_tokens = counter.count_messages([], tools=tool_list)
    # Sizes as recorded decide what fits when every call has them (the recorded baseline);
    # otherwise our estimates do, so that both sides of the comparison count alike.
    by_record = all(recorded_usage(m.usage) is not None for m in messages if m.role == "assistant")
    longest = 0  # the longest reply so far, this call's included (the baseline's reserve)
    previous_without: PromptRequest | None = None
    previous_with: PromptRequest | None = None
    total_without = total_with = 0
    calls: list[ReplayCall] = []
    for index, message in enumerate(messages):
        if message.role != "assistant":
            continue
        longest = max(longest, reply_tokens(counter.count_message(message), message.usage))
        context = messages[:index]
        at = _call_time(context, message)
        before = _summaries(warden)
        result = warden.transform(context, model=model, window=budget.window, tools=tools, now=at)
        problems = _problems(result, provider, budget.window, validate)
        agent_sent = sent_context(messages, compactions, index)
        if len(agent_sent) == len(context) and all(
            a is b for a, b in zip(agent_sent, context, strict=True)
        ):
            tokens_sent = result.tokens_before
        else:
            tokens_sent = counter.count_messages(agent_sent, tools=tool_list)
        total_without += tokens_sent
        total_with += result.tokens_after
        sent_without = prompt_request(agent_sent, counter, prefix_key, prefix_tokens, at)
        sent_with = prompt_request(result.messages, counter, prefix_key, prefix_tokens, at)
        bill_without = bill_after(previous_without, sent_without, rules)
        bill_with = bill_after(previous_with, sent_with, rules)
        previous_without, previous_with = sent_without, sent_with
        recorded = _recorded(message, prices)
        cost_without = cost_with = None
        if prices is not None:
            cost_without, cost_with = bill_without.cost, bill_with.cost
            if by_record:
                # The recorded bill, changed by what contextwarden changes in the estimate:
                # what a recording leaves out (Claude Code's system prompt and tools) costs
                # the same with and without it.
                cost_without = recorded["recorded_cost"]
                cost_with = cost_without + (bill_with.cost - bill_without.cost)
        limit = budget.for_reply(longest)
        calls.append(
            ReplayCall(
                call=len(calls) + 1,
                message_index=index,
                messages_without=len(agent_sent),
                messages_with=len(result.messages),
                tokens_without=tokens_sent,
                tokens_with=result.tokens_after,
                cumulative_without=total_without,
                cumulative_with=total_with,
                compacted=result.compaction is not None,
                summaries_written=_summaries(warden) - before,
                strategy=result.compaction.strategy if result.compaction is not None else None,
                newest_truncated=result.newest_truncated,
                valid=not problems,
                problems=tuple(problems),
                events=dict(Counter(e.kind for e in result.events)),
                cached_without=bill_without.cached_tokens,
                written_without=bill_without.written_tokens,
                cached_with=bill_with.cached_tokens,
                written_with=bill_with.written_tokens,
                billed_cost_without=cost_without,
                billed_cost_with=cost_with,
                estimated_cost_without=bill_without.cost if prices is not None else None,
                estimated_cost_with=bill_with.cost if prices is not None else None,
                at=at,
                tokens_full=result.tokens_before,
                payable=(recorded["recorded_input"] if by_record else tokens_sent) <= limit.limit,
                fits_with=result.tokens_after <= limit.limit,
                limit=result.budget.limit if result.budget is not None else budget.limit,
                **recorded,
            )
        )
        if on_call is not None:
            on_call(calls[-1])
    try:
        info: ModelInfo | None = model_info(model, overrides)
    except KeyError:  # UnknownModelError: a window was given for a model we do not know
        info = None
    return ReplayReport(
        calls=tuple(calls),
        totals=_totals(calls, info, prices, len(compactions)),
        model=model,
        window=budget.window,
        limit=calls[-1].limit if calls else budget.limit,
        trigger=budget.trigger,
        provider=provider,
        input_price_per_mtok=info.input_price_per_mtok if info is not None else None,
        pricing=pricing if isinstance(pricing, str) else "custom",
        cache_pricing=prices,
    )


def _totals(
    calls: Sequence[ReplayCall],
    info: ModelInfo | None,
    prices: CachePricing | None,
    compactions: int,
) -> ReplayTotals:
    without = calls[-1].cumulative_without if calls else 0
    with_ = calls[-1].cumulative_with if calls else 0
    sent_without = sum(c.cached_without + c.written_without for c in calls)
    sent_with = sum(c.cached_with + c.written_with for c in calls)
    # the baseline (see the module docstring): the payable calls, and the recorded bill
    payable = [c for c in calls if c.payable]
    recorded = [c for c in calls if c.recorded_input is not None]
    every = bool(calls) and len(recorded) == len(calls)
    billed_without = billed_with = payable_without = payable_with = saved = None
    dearer = False
    if prices is not None:
        billed_without = sum(c.billed_cost_without or 0.0 for c in calls)
        billed_with = sum(c.billed_cost_with or 0.0 for c in calls)
        payable_without = sum(c.billed_cost_without or 0.0 for c in payable)
        payable_with = sum(c.billed_cost_with or 0.0 for c in payable)
        saved = (1 - payable_with / payable_without) if payable_without else 0.0
        dearer = payable_with > payable_without + 1e-12
    return ReplayTotals(
        calls=len(calls),
        input_tokens_without=without,
        input_tokens_with=with_,
        saved_ratio=(1 - with_ / without) if without else 0.0,
        compactions=sum(c.summaries_written for c in calls),
        compacted_calls=sum(1 for c in calls if c.compacted),
        invalid_requests=sum(1 for c in calls if not c.valid),
        max_context_without=max((c.tokens_without for c in calls), default=0),
        max_context_with=max((c.tokens_with for c in calls), default=0),
        cost_without=info.cost(without) if info is not None else None,
        cost_with=info.cost(with_) if info is not None else None,
        billed_cost_without=billed_without,
        billed_cost_with=billed_with,
        cache_hit_ratio_without=(
            sum(c.cached_without for c in calls) / sent_without if sent_without else 0.0
        ),
        cache_hit_ratio_with=(sum(c.cached_with for c in calls) / sent_with if sent_with else 0.0),
        input_tokens_full_history=sum(c.tokens_full for c in calls),
        baseline=(
            "recorded-usage" if every else "agent-compactions" if compactions else "full-history"
        ),
        agent_compactions=compactions,
        not_payable_without=len(calls) - len(payable),
        not_payable_with=sum(1 for c in calls if not c.fits_with),
        recorded_calls=len(recorded),
        recorded_billed_cost=(
            sum(c.recorded_cost or 0.0 for c in recorded) if recorded and prices else None
        ),
        payable_billed_cost_without=payable_without,
        billed_cost_with_on_payable=payable_with,
        billed_saved_ratio=saved,
        dearer=dearer,
    )


@dataclass(frozen=True)
class ResolvedModel:
    """What a command counts, replays and bills a recording with: ``config`` (the user's,
    with ``model`` and ``context_window`` settled, and an assumed model described in its
    ``models:`` section so the warden knows it), the model's ``name``, its ``info`` and the
    ``notes`` saying what was assumed (empty when nothing was)."""

    config: WardenConfig
    name: str
    info: ModelInfo
    notes: tuple[str, ...]

    @property
    def window(self) -> int:
        """The context window every command uses."""
        return self.info.context_window

    @property
    def priced(self) -> bool:
        """Whether a bill can be made (the model has an input price)."""
        return self.info.input_price_per_mtok is not None


def resolve_model(
    config: WardenConfig, recorded_model: str | None = None, recorded_window: int | None = None
) -> ResolvedModel:
    """The model and window for a recording: ``--model`` (or the config's ``model``), else the
    recording's; ``--window`` (or the config's ``context_window``), else the window the
    recording states, else the model's. The model is resolved by
    :func:`~contextwarden._models.assume_model`, which never fails: another spelling, a
    family, a local server (billed at 0) or an unknown model (128,000 tokens, no bill) are
    stated in ``notes``."""
    name = config.model or recorded_model
    window = config.context_window or recorded_window
    info, note = assume_model(name, window, apply_model_overrides(config))
    notes = [note] if note else []
    key = name or info.name
    models = dict(config.models)
    if note is not None and key not in models:
        described = set(ModelOverride.model_fields) - {"cache_write_1h_price_per_mtok"}
        models[key] = ModelOverride(**{f: getattr(info, f) for f in described})
    update = {"model": key, "context_window": info.context_window, "models": models}
    return ResolvedModel(config.model_copy(update=update), key, info, tuple(notes))


def compact_history(
    messages: Sequence[Message],
    *,
    model: str,
    window: int | None = None,
    config: WardenConfig | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    force: bool = False,
) -> TransformResult:
    """The history an agent would send next, compacted: the warden's working copy of the
    whole of ``messages`` (lossless layers; compaction when over the trigger; the window).

    ``force`` compacts even under the trigger (the API trigger), with the
    warden's summarizer (the config's ``summarizer:``). ``messages`` is never mutated.
    """
    config, warden, budget = _setup(config, None, model, window, "compaction")
    return warden.transform(
        messages, model=model, window=budget.window, tools=tools, force_compact=force
    )
