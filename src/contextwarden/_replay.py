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

**The baseline** ("without contextwarden") is what the agent really sent, not the whole
recorded history on every call: the agent's own compactions (``compactions``: Claude Code's
``compact_boundary``, pi's compaction entries, Codex ``compacted`` records) are applied, so
call *k* is billed for the summary and what followed it. Where the recording has the
provider's usage for a call (Claude Code, pi, Codex, Gemini CLI, Cline, OpenHands), that call's
recorded bill is reported too; when every call has it, the recorded bill is the baseline and
contextwarden's bill is that bill plus the difference it makes to the estimated bill.

A baseline call that does not fit the window could not have been sent as recorded: it is
marked *not payable* and left out of the payable baseline; the saving is stated against the
payable baseline, on the calls it covers. Both sides are held to one rule of fit: the prompt
leaves the reply the room the agent's replies have needed, as the warden's reserve is fitted
(:meth:`~contextwarden.Budget.for_reply`: a quarter more than the longest reply so far, at
least 1,024 tokens, at most the default reserve); the baseline's own reply counts among
them, so a request the warden would cut for want of room is never billed to the baseline.
:attr:`ReplayTotals.baseline` says which baseline a report used.
"""

from __future__ import annotations

import inspect
import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
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
    "iter_replay",
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
    ``estimated_cost_*`` the call's input cost in USD at the replay's cache prices (``None``
    when the model has no price) and ``billed_cost_*`` its bill on the report's baseline: the
    estimate, or, when every call of the recording states its usage, the recorded cost and
    the recorded cost plus the difference contextwarden makes to the estimate (so the calls'
    bills add up to the totals). ``at``: the call's time in epoch seconds, when the
    transcript has timestamps.

    The baseline: ``tokens_without`` is what the agent itself sent (its own compactions
    applied), ``tokens_full`` the whole recorded history before the call; ``payable`` is false
    when the baseline request (by its recorded size when every call has one, else by
    ``tokens_without``) does not leave its reply the room the warden's own requests leave
    (:meth:`~contextwarden.Budget.for_reply`, fitted to the agent's replies up to this call's):
    the provider would have refused it or cut the reply short, so it is not billed;
    ``fits_with`` is the same rule for contextwarden's request. ``limit``:
    the hard limit the warden kept to on this call (the window less the reply's reserve).
    ``recorded_*``: the provider usage the recording states for this call (prompt tokens in
    all, read from the cache, written to it) and its cost at the replay's prices, ``None``
    when the recording has none.
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
    """The whole replay: input tokens summed over calls without and with the warden,
    ``saved_ratio = 1 - with/without``, compactions (summaries written), calls that used a
    compacted history, invalid requests, and the list-price input cost in USD (``None`` when
    the model has no known price).

    What the provider would bill, prompt caching counted, for the whole session:
    ``billed_cost_*`` in USD, the sum of the calls' :attr:`ReplayCall.billed_cost_without` /
    ``_with`` (``None`` without a price), and ``cache_hit_ratio_*``: tokens read from the
    cache over all input tokens.

    The baseline (see the module docstring): ``baseline`` names it; ``agent_compactions``
    counts the agent's own compactions applied; ``not_payable_without`` /
    ``not_payable_with`` the calls whose request does not fit the window with room for the
    reply (:attr:`ReplayCall.payable`, :attr:`ReplayCall.fits_with`);
    ``payable_billed_cost_without`` and ``billed_cost_with_on_payable`` the bills of the
    payable calls alone, ``billed_saved_ratio = 1 - with/without`` on those; ``dearer`` is
    true when contextwarden's bill is above the payable baseline's. ``recorded_calls`` /
    ``recorded_billed_cost``: the calls with provider usage and their bill;
    ``input_tokens_full_history``: the whole recorded history summed over calls (what a
    replay that ignores the agent's compactions would call the baseline).
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


def _problems(
    result: TransformResult, provider: Provider, window: int, validate: bool = True
) -> list[str]:
    if not validate:
        if result.tokens_after > window:
            return [f"request is {result.tokens_after} tokens, over the {window}-token window"]
        return []
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


def _takes_now(warden: Warden) -> bool:
    """Whether ``warden.transform`` accepts the call's time (``now=``)."""
    try:
        return "now" in inspect.signature(warden.transform).parameters
    except (TypeError, ValueError):
        return False


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
    compactions: Sequence[AgentCompaction] = (),
    validate: bool = True,
) -> Iterator[ReplayCall]:
    """Yield one :class:`ReplayCall` per assistant message of ``messages``, in order (see
    :func:`replay`)."""
    config, warden, budget = _setup(config, warden, model, window, "replay")
    prices = cache_pricing(model, pricing, warden.models)
    # Token arithmetic needs the cache's rules (TTL, minimum) even without a price.
    rules = prices or CachePricing.ratios(0.0)
    counter = warden.counter_for(model)
    tool_list = list(tools) if tools else None
    prefix_key = json.dumps(tool_list, sort_keys=True, ensure_ascii=False, default=str)
    prefix_tokens = counter.count_messages([], tools=tool_list)
    takes_now = _takes_now(warden)
    # Sizes as recorded decide what fits when every call has them (the recorded baseline);
    # otherwise our estimates do, so that both sides of the comparison count alike.
    by_record = all(recorded_usage(m.usage) is not None for m in messages if m.role == "assistant")
    longest = 0  # the longest reply so far, this call's included (the baseline's reserve)
    previous_without: PromptRequest | None = None
    previous_with: PromptRequest | None = None
    total_without = total_with = 0
    call = 0
    for index, message in enumerate(messages):
        if message.role != "assistant":
            continue
        call += 1
        longest = max(longest, reply_tokens(counter.count_message(message), message.usage))
        context = messages[:index]
        at = _call_time(context, message)
        before = _summaries(warden)
        extra: dict[str, Any] = {"now": at} if takes_now and at is not None else {}
        result = warden.transform(context, model=model, window=budget.window, tools=tools, **extra)
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
        yield ReplayCall(
            call=call,
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
            payable=_payable(
                tokens_sent, recorded_usage(message.usage) if by_record else None, limit
            ),
            fits_with=result.tokens_after <= limit.limit,
            limit=result.budget.limit if result.budget is not None else budget.limit,
            **recorded,
        )


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
    return [
        *messages[: min(lead, end)],
        *last.replacement,
        *messages[max(last.at, lead) : end],
    ]


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


def _payable(estimated: int, recorded: tuple[int, int, int] | None, budget: Budget) -> bool:
    """Whether the agent's request fits the window with the room its reply needs (``budget``,
    fitted to the replies up to this call's): by its recorded size when given (the provider's
    own count), else by our estimate."""
    return (recorded[0] if recorded is not None else estimated) <= budget.limit


def _recorded(reply: Message, prices: CachePricing | None) -> dict[str, Any]:
    found = recorded_usage(reply.usage)
    if found is None:
        return {}
    total, read, written = found
    cost = None
    if prices is not None:
        cost = prices.cost(read, written, max(0, total - read - written))
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
        compactions=compactions,
        validate=validate,
    ):
        calls.append(c)
        if on_call is not None:
            on_call(c)
    try:
        info: ModelInfo | None = model_info(model, overrides)
    except KeyError:  # UnknownModelError: a window was given for a model we do not know
        info = None
    without = calls[-1].cumulative_without if calls else 0
    with_ = calls[-1].cumulative_with if calls else 0
    prices = cache_pricing(model, pricing, overrides)
    billed_without = billed_with = None
    if prices is not None:
        billed_without = sum(c.billed_cost_without or 0.0 for c in calls)
        billed_with = sum(c.billed_cost_with or 0.0 for c in calls)
    sent_without = sum(c.cached_without + c.written_without for c in calls)
    sent_with = sum(c.cached_with + c.written_with for c in calls)
    base = _baseline(calls, prices, len(compactions))
    totals = ReplayTotals(
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
        **base,
    )
    return ReplayReport(
        calls=tuple(calls),
        totals=totals,
        model=model,
        window=budget.window,
        limit=calls[-1].limit if calls else budget.limit,
        trigger=budget.trigger,
        provider=provider,
        input_price_per_mtok=info.input_price_per_mtok if info is not None else None,
        pricing=pricing if isinstance(pricing, str) else "custom",
        cache_pricing=prices,
    )


def _baseline(
    calls: Sequence[ReplayCall], prices: CachePricing | None, compactions: int
) -> dict[str, Any]:
    """The baseline fields of :class:`ReplayTotals` (see there)."""
    payable = [c for c in calls if c.payable]
    recorded = [c for c in calls if c.recorded_input is not None]
    every = bool(calls) and len(recorded) == len(calls)
    kind: Baseline = (
        "recorded-usage" if every else "agent-compactions" if compactions else "full-history"
    )
    out: dict[str, Any] = {
        "baseline": kind,
        "agent_compactions": compactions,
        "not_payable_without": len(calls) - len(payable),
        "not_payable_with": sum(1 for c in calls if not c.fits_with),
        "recorded_calls": len(recorded),
        "recorded_billed_cost": (
            sum(c.recorded_cost or 0.0 for c in recorded) if recorded and prices else None
        ),
        "payable_billed_cost_without": None,
        "billed_cost_with_on_payable": None,
        "billed_saved_ratio": None,
        "dearer": False,
    }
    if prices is None:
        return out
    without = sum(c.billed_cost_without or 0.0 for c in payable)
    with_ = sum(c.billed_cost_with or 0.0 for c in payable)
    out["payable_billed_cost_without"] = without
    out["billed_cost_with_on_payable"] = with_
    out["billed_saved_ratio"] = (1 - with_ / without) if without else 0.0
    out["dearer"] = with_ > without + 1e-12
    return out


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
        models[key] = ModelOverride(
            provider=info.provider,
            context_window=info.context_window,
            max_output_tokens=info.max_output_tokens,
            encoding=info.encoding,
            input_price_per_mtok=info.input_price_per_mtok,
            output_price_per_mtok=info.output_price_per_mtok,
            cache_read_price_per_mtok=info.cache_read_price_per_mtok,
            cache_write_price_per_mtok=info.cache_write_price_per_mtok,
            cache_ttl_s=info.cache_ttl_s,
            min_cacheable_tokens=info.min_cacheable_tokens,
            caching=info.caching,
        )
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
