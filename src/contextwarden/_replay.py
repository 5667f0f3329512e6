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
and fits the window. Pure computation: no network, no file I/O (the CLI does that).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from ._config import WardenConfig
from ._exceptions import ConfigError
from ._messages import Message

if TYPE_CHECKING:
    from ._budget import Budget
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

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["problems"] = list(self.problems)
        data["events"] = dict(self.events)
        return data


@dataclass(frozen=True)
class ReplayTotals:
    """The whole replay: input tokens summed over calls without and with the warden,
    ``saved_ratio = 1 - with/without``, compactions (summaries written), calls that used a
    compacted history, invalid requests, calls over the window without and with the warden, and the list-price input cost in
    USD (``None`` when the model has no known price)."""

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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ReplayReport:
    """A replay: every call, the totals, and what it ran against."""

    calls: tuple[ReplayCall, ...]
    totals: ReplayTotals
    model: str
    window: int
    limit: int
    trigger: int
    provider: Provider
    input_price_per_mtok: float | None

    def as_dict(self) -> dict[str, Any]:
        """The JSON form: ``{"calls": [...], "totals": {...}, ...}``."""
        return {
            "model": self.model,
            "window": self.window,
            "limit": self.limit,
            "trigger": self.trigger,
            "provider": self.provider,
            "input_price_per_mtok": self.input_price_per_mtok,
            "calls": [c.as_dict() for c in self.calls],
            "totals": self.totals.as_dict(),
        }


def make_warden(config: WardenConfig) -> Warden:
    """The warden an agent would build from ``config``: with the compaction engine (embedded
    extractive summarizer) unless ``compaction.enabled`` is false."""
    from ._warden import Warden

    if not config.compaction.enabled:
        return Warden(config)
    from ._compaction import Compactor

    return Warden(config, compactor=Compactor(config.compaction))


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
) -> Iterator[ReplayCall]:
    """Yield one :class:`ReplayCall` per assistant message of ``messages``, in order (see
    :func:`replay`)."""
    config, warden, budget = _setup(config, warden, model, window, "replay")
    total_without = total_with = 0
    call = 0
    for index, message in enumerate(messages):
        if message.role != "assistant":
            continue
        call += 1
        context = messages[:index]
        before = _summaries(warden)
        result = warden.transform(context, model=model, window=budget.window, tools=tools)
        problems = _problems(result, provider, budget.window)
        total_without += result.tokens_before
        total_with += result.tokens_after
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
) -> ReplayReport:
    """Replay ``messages`` (a recorded history) call by call; see the module docstring.

    ``model`` picks the tokenizer and the list price; ``window`` overrides the model's context
    window (else ``config.context_window``, else the registry's). ``config`` configures the
    warden (default: the seeds' defaults, compaction with the embedded summarizer); pass
    ``warden`` to replay with one of your own. ``provider`` is the API whose validator checks
    each request. ``on_call`` is called after each call (for a progress bar).

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
    embedded summarizer, before the warden runs. ``messages`` is never mutated.
    """
    config, warden, budget = _setup(config, None, model, window, "compaction")
    if force:
        from ._compaction import Compactor

        compactor = Compactor(config.compaction)
        done = compactor.compact(
            messages,
            budget=budget,
            counter=warden.counter_for(model),
            tools=tools,
            force=True,
        )
        if done is not None:
            before = warden.counter_for(model).count_messages(messages, tools=tools)
            result = warden.transform(
                done.new_messages, model=model, window=budget.window, tools=tools
            )
            return replace(result, tokens_before=before, compaction=result.compaction or done)
    return warden.transform(messages, model=model, window=budget.window, tools=tools)
