"""Replay a recorded session call by call, with and without the warden: what it would have sent.

The context of call *k* is everything before the *k*-th assistant message (what the agent sent
to get that message). An agent using contextwarden keeps its own full history and gives the
warden that history before every call; the warden returns a working copy to send. One
:class:`~contextwarden._warden.Warden` (and one compactor) serves the whole replay, so its
caches behave as in a live agent: a summary is written once and reused while the span it
replaces is unchanged.

For every call the replay records the tokens sent without contextwarden (the raw context) and
with it, the running totals, what the warden did, and whether the request it produced is valid
for the provider (converted with :mod:`contextwarden.formats` and checked by its validator)
and fits the window.

It also records what the provider would bill, prompt caching included (see
:mod:`contextwarden._billing`): per call, the tokens read from the cache (the leading messages
equal to the previous request's, compared by content) and written to it, with and without the
warden, and the cost at the model's cache prices, or at Anthropic's ratios (read 0.1x, write
1.25x) with ``pricing="anthropic"``. Where the transcript has timestamps (pi, Claude Code) the
cache's TTL applies between calls and the warden is told each call's time; without them the
calls are back to back. Pure computation: no network, no file I/O (the CLI does that).
"""

from __future__ import annotations

import inspect
import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from ._billing import CachePricing, CallBill, PromptRequest, bill_requests
from ._config import WardenConfig
from ._exceptions import ConfigError, UnknownModelError
from ._messages import Message

if TYPE_CHECKING:
    from ._budget import Budget
    from ._tokens import TokenCounter
    from ._warden import TransformResult, Warden

__all__ = [
    "ReplayCall",
    "ReplayReport",
    "ReplayTotals",
    "compact_history",
    "iter_replay",
    "replay",
]

Provider = Literal["openai", "anthropic"]
#: Whose cache prices bill a replay: the model's own (from the registry) or Anthropic's ratios
#: (read 0.1x, write 1.25x the model's input price, 5-minute TTL) whatever the model.
PricingMode = Literal["model", "anthropic"]

#: The provider API a recording's requests went to, by transcript format.
_PROVIDERS: Mapping[str, Provider] = {
    "openai": "openai",
    "openai-jsonl": "openai",
    "mini-swe-agent": "openai",
    "openhands": "openai",
    "anthropic": "anthropic",
    "pi": "anthropic",
    "claude-code": "anthropic",
}


def provider_for(fmt: str) -> Provider:
    """The provider whose request format a transcript format maps to (OpenAI for unknown)."""
    return _PROVIDERS.get(fmt, "openai")


@dataclass(frozen=True)
class ReplayCall:
    """One LLM call of the replay.

    ``call`` counts from 1; ``message_index`` is the assistant message this call produced.
    ``tokens_without``/``tokens_with`` are the request's tokens (tool definitions included)
    without and with the warden; ``cumulative_*`` the running sums up to this call.
    ``compacted``: the compactor's output was used for this call; ``summaries_written``:
    summaries produced during this call (cache misses: the ones paid for); ``events``: what
    the warden did, counted by event kind. ``valid``: the converted request passed the
    provider's validator and fits the window; ``problems`` says why not.

    Billed, prompt caching counted: ``cached_*`` tokens read from the provider's cache (the
    leading messages equal to the previous request's), ``written_*`` tokens written to it,
    ``billed_cost_*`` the call's input cost in USD at the replay's cache prices (``None`` when
    the model has no price). ``at``: the call's time in epoch seconds, when the transcript
    has timestamps.
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
    at: float | None = None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["problems"] = list(self.problems)
        data["events"] = dict(self.events)
        return data


@dataclass(frozen=True)
class ReplayTotals:
    """The whole replay: input tokens summed over calls without and with the warden,
    ``saved_ratio = 1 - with/without``, compactions (summaries written), calls that used a
    compacted history, invalid requests, calls over the window without and with the warden,
    and the list-price input cost in USD (``None`` when the model has no known price).

    What the provider would bill, prompt caching counted: ``billed_cost_*`` in USD at the
    replay's cache prices (``None`` when unknown), ``billed_saved_ratio = 1 - with/without``
    (``None`` when unknown), and ``cache_hit_ratio_*``: tokens read from the cache over all
    input tokens.
    """

    calls: int
    input_tokens_without: int
    input_tokens_with: int
    saved_ratio: float
    compactions: int
    compacted_calls: int
    invalid_requests: int
    over_window_without: int
    over_window_with: int
    max_context_without: int
    max_context_with: int
    cost_without: float | None
    cost_with: float | None
    billed_cost_without: float | None = None
    billed_cost_with: float | None = None
    billed_saved_ratio: float | None = None
    cache_hit_ratio_without: float = 0.0
    cache_hit_ratio_with: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ReplayReport:
    """A replay: every call, the totals, and what it ran against (``pricing``: whose cache
    prices billed it, ``cache_pricing`` the prices themselves, ``None`` when unknown)."""

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
        """The JSON form: ``{"calls": [...], "totals": {...}, ...}``."""
        return {
            "model": self.model,
            "window": self.window,
            "limit": self.limit,
            "trigger": self.trigger,
            "provider": self.provider,
            "input_price_per_mtok": self.input_price_per_mtok,
            "pricing": self.pricing,
            "cache_pricing": asdict(self.cache_pricing) if self.cache_pricing else None,
            "calls": [c.as_dict() for c in self.calls],
            "totals": self.totals.as_dict(),
        }


def make_warden(config: WardenConfig) -> Warden:
    """The warden an agent would build from ``config``: ``Warden(config)``, compaction with
    the embedded extractive summarizer included unless ``compaction.enabled`` is false."""
    from ._warden import Warden

    return Warden(config)


def _problems(result: TransformResult, provider: Provider, window: int) -> list[str]:
    from .formats import to_anthropic, to_openai, validate_anthropic, validate_openai

    msgs = list(result.messages)
    if provider == "anthropic":
        system, converted = to_anthropic(msgs)
        problems = list(validate_anthropic(system, converted))
    else:
        problems = list(validate_openai(to_openai(msgs)))
    if result.tokens_after > window:
        problems.append(f"request is {result.tokens_after} tokens, over the {window}-token window")
    return problems


def _summaries(warden: Warden) -> int:
    """How many summaries the warden's compactor has written so far (its cache's size)."""
    cache = getattr(warden.compactor, "cache", None)
    return len(cache) if cache is not None else 0


def cache_pricing(model: str, pricing: PricingMode | CachePricing = "model") -> CachePricing | None:
    """The cache prices a replay of ``model`` bills at: the registry's for ``"model"``,
    Anthropic's ratios on the model's input price for ``"anthropic"``, or the given
    :class:`CachePricing`. ``None`` when the model's input price is unknown."""
    if isinstance(pricing, CachePricing):
        return pricing
    if pricing == "model":
        return CachePricing.for_model(model)
    if pricing == "anthropic":
        from ._models import model_info

        try:
            price = model_info(model).input_price_per_mtok
        except UnknownModelError:
            return None
        return CachePricing.ratios(price) if price is not None else None
    raise ConfigError(f"pricing must be 'model', 'anthropic' or a CachePricing, got {pricing!r}")


def _epoch_seconds(stamp: Any) -> float | None:
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
            at = _epoch_seconds(message.timestamp)
            if at is not None:
                return at
    return None


def _takes_now(warden: Warden) -> bool:
    """Whether ``warden.transform`` accepts the call's time (``now=``)."""
    try:
        return "now" in inspect.signature(warden.transform).parameters
    except (TypeError, ValueError):
        return False


def _prompt(
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


def _bill(
    previous: PromptRequest | None, current: PromptRequest, pricing: CachePricing
) -> CallBill:
    """The bill of ``current`` after ``previous`` (the cache only remembers the last one)."""
    run = [current] if previous is None else [previous, current]
    return bill_requests(run, pricing)[-1]


def _setup(
    config: WardenConfig | None,
    warden: Warden | None,
    model: str,
    window: int | None,
    purpose: str,
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


def iter_replay(
    messages: Sequence[Message],
    *,
    model: str,
    window: int | None = None,
    config: WardenConfig | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    provider: Provider = "openai",
    warden: Warden | None = None,
    pricing: PricingMode | CachePricing = "model",
) -> Iterator[ReplayCall]:
    """Yield one :class:`ReplayCall` per assistant message of ``messages``, in order (see
    :func:`replay`)."""
    config, warden, budget = _setup(config, warden, model, window, "replay")
    prices = cache_pricing(model, pricing)
    # Token arithmetic needs the cache's rules (TTL, minimum) even without a price.
    rules = prices or CachePricing.ratios(0.0)
    counter = warden.counter_for(model)
    tool_list = list(tools) if tools else None
    prefix_key = json.dumps(tool_list, sort_keys=True, ensure_ascii=False, default=str)
    prefix_tokens = counter.count_messages([], tools=tool_list)
    takes_now = _takes_now(warden)
    previous_without: PromptRequest | None = None
    previous_with: PromptRequest | None = None
    total_without = total_with = 0
    call = 0
    for index, message in enumerate(messages):
        if message.role != "assistant":
            continue
        call += 1
        context = messages[:index]
        at = _call_time(context, message)
        before = _summaries(warden)
        extra: dict[str, Any] = {"now": at} if takes_now and at is not None else {}
        result = warden.transform(context, model=model, window=budget.window, tools=tools, **extra)
        problems = _problems(result, provider, budget.window)
        total_without += result.tokens_before
        total_with += result.tokens_after
        sent_without = _prompt(context, counter, prefix_key, prefix_tokens, at)
        sent_with = _prompt(result.messages, counter, prefix_key, prefix_tokens, at)
        bill_without = _bill(previous_without, sent_without, rules)
        bill_with = _bill(previous_with, sent_with, rules)
        previous_without, previous_with = sent_without, sent_with
        yield ReplayCall(
            call=call,
            message_index=index,
            messages_without=len(context),
            messages_with=len(result.messages),
            tokens_without=result.tokens_before,
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
            billed_cost_without=bill_without.cost if prices is not None else None,
            billed_cost_with=bill_with.cost if prices is not None else None,
            at=at,
        )


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
    from ._models import ModelInfo, model_info

    config, warden, budget = _setup(config, warden, model, window, "replay")
    calls: list[ReplayCall] = []
    for c in iter_replay(
        messages,
        model=model,
        window=budget.window,
        config=config,
        tools=tools,
        provider=provider,
        warden=warden,
        pricing=pricing,
    ):
        calls.append(c)
        if on_call is not None:
            on_call(c)
    try:
        info: ModelInfo | None = model_info(model)
    except KeyError:  # UnknownModelError: a window was given for a model we do not know
        info = None
    without = calls[-1].cumulative_without if calls else 0
    with_ = calls[-1].cumulative_with if calls else 0
    prices = cache_pricing(model, pricing)
    billed_without = billed_with = saved = None
    if prices is not None:
        billed_without = sum(c.billed_cost_without or 0.0 for c in calls)
        billed_with = sum(c.billed_cost_with or 0.0 for c in calls)
        saved = (1 - billed_with / billed_without) if billed_without else 0.0
    sent_without = sum(c.cached_without + c.written_without for c in calls)
    sent_with = sum(c.cached_with + c.written_with for c in calls)
    totals = ReplayTotals(
        calls=len(calls),
        input_tokens_without=without,
        input_tokens_with=with_,
        saved_ratio=(1 - with_ / without) if without else 0.0,
        compactions=sum(c.summaries_written for c in calls),
        compacted_calls=sum(1 for c in calls if c.compacted),
        invalid_requests=sum(1 for c in calls if not c.valid),
        over_window_without=sum(1 for c in calls if c.tokens_without > budget.window),
        over_window_with=sum(1 for c in calls if c.tokens_with > budget.window),
        max_context_without=max((c.tokens_without for c in calls), default=0),
        max_context_with=max((c.tokens_with for c in calls), default=0),
        cost_without=info.cost(without) if info is not None else None,
        cost_with=info.cost(with_) if info is not None else None,
        billed_cost_without=billed_without,
        billed_cost_with=billed_with,
        billed_saved_ratio=saved,
        cache_hit_ratio_without=(
            sum(c.cached_without for c in calls) / sent_without if sent_without else 0.0
        ),
        cache_hit_ratio_with=(sum(c.cached_with for c in calls) / sent_with if sent_with else 0.0),
    )
    return ReplayReport(
        calls=tuple(calls),
        totals=totals,
        model=model,
        window=budget.window,
        limit=budget.limit,
        trigger=budget.trigger,
        provider=provider,
        input_price_per_mtok=info.input_price_per_mtok if info is not None else None,
        pricing=pricing if isinstance(pricing, str) else "custom",
        cache_pricing=prices,
    )


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

    ``force`` compacts even under the trigger (the API trigger of seed 003), with the
    warden's summarizer (the config's ``summarizer:``). ``messages`` is never mutated.
    """
    config, warden, budget = _setup(config, None, model, window, "compaction")
    return warden.transform(
        messages, model=model, window=budget.window, tools=tools, force_compact=force
    )
