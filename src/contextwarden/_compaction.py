"""The compaction engine: adaptive strategy selection, summary validation with fallback,
references to what was elided.

:meth:`Compactor.compact` is what the :class:`~contextwarden._warden.Warden` calls when the
cost model plans a compaction. It detects the task type, tries the strategies of
``config.strategy_order[task_type]``, then those of ``fallback_order``, then ``full_summary``,
until one lands (one summary per compaction, aiming at the budget's target; what is
still over is the window's to cut). A later compaction updates the earlier summary. Every
summary is checked before use (clearly smaller than what it replaces, :data:`SHRINK_RATIO`;
the must-keep facts of :func:`~contextwarden.summarizers.base.check_summary`) and a rejected
one lets the next strategy run (``summary_rejected``). A summarizer that raises or returns
garbage is replaced by the embedded extractive one for that summary (``summarizer_failed``):
the compactor never raises because of a summarizer.

The result carries a :class:`~contextwarden._events.CompactionPlan` (positions removed,
summaries inserted, messages replaced), which the warden appends to the conversation's log.
Summaries are cached by :func:`~contextwarden.summarizers.base.summary_cache_key` of what they
replace, and every elided span gets a ``cw:`` reference (:func:`make_ref`) named in its
summary and listed in :attr:`CompactResult.refs`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Coroutine, Generator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Required, TypedDict, Unpack

from ._config import CompactionConfig, TaskType
from ._events import CompactionPlan, CompactResult, Event, emit
from ._exceptions import ConfigError
from ._memo import CALL_BYTES, CALL_ENTRIES, Memo
from ._messages import Message
from .strategies import BUILTIN_STRATEGIES
from .strategies.base import (
    Strategy,
    StrategyContext,
    StrategyOutcome,
    assemble,
    check_outcome,
    make_ref,
    summary_request,
)
from .strategies.checks import held_facts, must_keep
from .strategies.task_type import detect_task_type
from .strategies.triggers import Trigger, TriggerReason, should_compact
from .summarizers.base import (
    Summarizer,
    SummaryRequest,
    check_summary,
    effective_cap,
    parse_summary,
    summary_cache_key,
)
from .summarizers.extractive import MIN_SUMMARY_CHARS, ExtractiveSummarizer

if TYPE_CHECKING:
    from ._budget import Budget
    from ._tokens import TokenCounter

__all__ = [
    "CompactOptions",
    "CompactResult",
    "CompactionReport",
    "Compactor",
    "Trigger",
    "TriggerReason",
    "should_compact",
]

#: A summary message must cost at most this share of the tokens it replaces ("clearly smaller").
SHRINK_RATIO = 0.8
#: A summary longer than this many times its request's ``max_chars`` is garbage, not a summary.
GARBAGE_LENGTH_FACTOR = 2.0
LAST_RESORT = "full_summary"


# -- the engine --------------------------------------------------------------------------------
@dataclass(frozen=True)
class CompactionReport:
    """Everything one compaction did: the result (None when nothing could be done), the events
    (``summary_rejected``, ``summarizer_failed``, ``context_compacted``...), the detected task
    type, the strategies applied in order, the elided spans by reference, and whether the
    caller should reset its turn counter (a full summary ran)."""

    result: CompactResult | None
    events: tuple[Event, ...]
    task_type: TaskType
    applied: tuple[str, ...] = ()
    elided: Mapping[str, tuple[Message, ...]] = field(default_factory=dict)
    reset_turns: bool = False


class CompactOptions(TypedDict, total=False):
    """The keywords of :meth:`Compactor.compact` and its siblings: the ``budget`` and
    ``counter`` (required), the ``tools`` sent, the ``focus`` to keep, ``force`` (compact even
    at or under the trigger), a ``summarizer`` for this call only, the caller's ``memo``
    of what it read from the texts already (a warden's call passes its own), and
    ``unsummarized``: what window cuts took out of ``messages`` since its last summary (in
    order), which the next summary covers with its span."""

    budget: Required[Budget]
    counter: Required[TokenCounter]
    tools: Sequence[Mapping[str, Any]] | None
    focus: str | None
    force: bool
    summarizer: Summarizer | None
    memo: Memo | None
    unsummarized: Sequence[Message]


@dataclass(frozen=True)
class _Ask:
    """A summary the plan needs, and the summarizers to ask for it, in order."""

    request: SummaryRequest
    summarizers: tuple[Summarizer, ...]


@dataclass(frozen=True)
class _Summary:
    """One summarizer answer: the text (None when even the fallback failed) and why the
    configured summarizer was not used (None when it was)."""

    text: str | None
    failure: str | None = None
    by: str | None = None  # the name of the summarizer that wrote ``text``


@dataclass
class _Run:
    """One compaction: its input and tokens, the strategies' context, the must-keep facts, the
    events so far, and the calls of the configured summarizer left (one per compaction; a
    strategy that chains several summaries gets the embedded one for the rest)."""

    messages: tuple[Message, ...]
    tokens: int
    ctx: StrategyContext
    keep: Sequence[str]
    events: list[Event]
    allowance: int = 1


@dataclass(frozen=True)
class _Step:
    """One applied strategy: the new history, its cost, and what was elided under ``ref``."""

    messages: tuple[Message, ...]
    tokens: int
    outcome: StrategyOutcome
    summary: str
    ref: str
    span: tuple[Message, ...]
    by: str | None = None


def _plan_of(current: Sequence[Message], step: _Step) -> tuple[CompactionPlan, int]:
    """The plan that turns ``current`` into ``step.messages``, and how many messages it keeps.
    :func:`assemble` keeps every message not elided, in order, puts the summary where the first
    elided one was (before the next kept message, or at the end), and may show a message of its
    own (the rebuild hint folded in) instead of one it keeps."""
    elided, first, new = set(step.outcome.elided), step.outcome.elided[0], step.messages
    kept = [i for i in range(len(current)) if i not in elided]
    anchor = next((i for i in kept if i > first), len(current))
    shown = zip(kept, (*new[:first], *new[first + 1 :]), strict=True)
    plan = CompactionPlan(
        removed=step.outcome.elided,
        inserted=((anchor, new[first]),),
        replaced=tuple((i, m) for i, m in shown if m is not current[i]),
    )
    return plan, len(kept)


class Compactor:
    """The adaptive compaction engine (see the module docstring).

    ``config``: the knobs (default :class:`CompactionConfig`); ``summarizer``: writes summaries
    (default: the embedded :class:`ExtractiveSummarizer`); ``cache``: summaries by request key
    (default: a new dict; a persistent mapping pays each summary once across processes);
    ``strategies``: your own strategies by name, beside the built-ins (a name in the config
    that neither holds raises :class:`ConfigError`). ``hint_system``: the full summary also
    folds the rebuild hint into the system prompt (the overflow recovery does; an ordinary
    compaction leaves the cached system prompt as it is). What one compaction reads from the
    messages is kept for that compaction only, in a :class:`~contextwarden._memo.Memo` of its
    own, or in the caller's (``memo=``: a warden's call, whose masks read the same texts).
    """

    def __init__(
        self,
        config: CompactionConfig | None = None,
        *,
        summarizer: Summarizer | None = None,
        cache: MutableMapping[str, str] | None = None,
        strategies: Mapping[str, Strategy] | None = None,
        hint_system: bool = False,
    ) -> None:
        self._explicit_config = config is not None
        self.hint_system = hint_system
        self.config = config or CompactionConfig.model_validate({})
        self.fallback: Summarizer = ExtractiveSummarizer()
        self.summarizer: Summarizer = summarizer if summarizer is not None else self.fallback
        self.cache: MutableMapping[str, str] = cache if cache is not None else {}
        self.strategies: dict[str, Strategy] = {**BUILTIN_STRATEGIES, **(strategies or {})}
        for name, fn in self.strategies.items():
            if not callable(fn):
                raise ConfigError(f"strategy {name!r} must be callable, got {type(fn).__name__}")
        named = {
            f"strategy_order.{t}": names for t, names in self.config.strategy_order.items()
        } | {"fallback_order": self.config.fallback_order}
        for where, names in named.items():
            for name in names:
                if name not in self.strategies:
                    raise ConfigError(
                        f"compaction.{where}: unknown strategy {name!r}; "
                        f"known: {', '.join(sorted(self.strategies))} (pass your own with "
                        "Warden(strategies={...}) or Compactor(strategies={...}))"
                    )

    def bind(self, config: CompactionConfig) -> Compactor:
        """This compactor under a warden configured with ``config``: itself when it was built
        with a config of its own, else a copy that uses ``config`` (same summarizer, cache and
        strategies), so ``Warden(load_config(...), compactor=Compactor())`` honours the file."""
        if self._explicit_config:
            return self
        return Compactor(
            config,
            summarizer=self.summarizer,
            cache=self.cache,
            strategies=self.strategies,
            hint_system=self.hint_system,
        )

    # -- public API ----------------------------------------------------------------------------
    def compact(
        self,
        messages: Sequence[Message],
        *,
        events: list[Event] | None = None,
        **options: Unpack[CompactOptions],
    ) -> CompactResult | None:
        """Compact ``messages`` under the budget's target; None when nothing was needed (at
        or under ``budget.trigger`` and not ``force``) or nothing could be done. Events are
        appended to ``events`` when given; ``summarizer`` replaces the configured one for this
        call (a proxy's, with the calling client's credentials). Never mutates ``messages``;
        never raises because of a summarizer."""
        return _reported(self.run(messages, **options), events)

    async def acompact(
        self,
        messages: Sequence[Message],
        *,
        events: list[Event] | None = None,
        **options: Unpack[CompactOptions],
    ) -> CompactResult | None:
        """:meth:`compact`, awaiting the summarizer's ``asummarize``."""
        return _reported(await self.arun(messages, **options), events)

    def run(
        self, messages: Sequence[Message], **options: Unpack[CompactOptions]
    ) -> CompactionReport:
        """:meth:`compact` (its keywords but ``events``) with the whole
        :class:`CompactionReport`."""
        report: CompactionReport = _drive(self._answer(self._plan(messages, **options), sync=True))
        return report

    async def arun(
        self, messages: Sequence[Message], **options: Unpack[CompactOptions]
    ) -> CompactionReport:
        """:meth:`run`, awaiting the summarizer's ``asummarize``."""
        return await self._answer(self._plan(messages, **options), sync=False)

    async def _answer(
        self, plan: Generator[_Ask, _Summary, CompactionReport], *, sync: bool
    ) -> CompactionReport:
        """Run ``plan``, answering each summary it asks for (``sync``: calling the summarizers'
        ``summarize``, so nothing is awaited)."""
        try:
            ask = next(plan)
            while True:
                ask = plan.send(await self._asummarize(ask, sync=sync))
        except StopIteration as done:
            report: CompactionReport = done.value
        return report

    # -- the plan: a generator that yields summary requests and gets answers back ---------------
    def _plan(
        self,
        messages: Sequence[Message],
        budget: Budget,
        counter: TokenCounter,
        tools: Sequence[Mapping[str, Any]] | None = None,
        focus: str | None = None,
        force: bool = False,
        summarizer: Summarizer | None = None,
        memo: Memo | None = None,
        unsummarized: Sequence[Message] = (),
    ) -> Generator[_Ask, _Summary, CompactionReport]:
        events: list[Event] = []
        original = tuple(messages)
        task_type = detect_task_type(original)
        before = counter.count_messages(original, tools=tools)
        if not force and before <= budget.trigger:
            return CompactionReport(None, (), task_type)
        aim = budget.target
        if memo is None:  # this compaction's (see the class docstring)
            memo = Memo(CALL_ENTRIES, CALL_BYTES)
        keep = must_keep(original, memo=memo)
        ctx = StrategyContext(
            budget=budget,
            counter=counter,
            summarizer=summarizer if summarizer is not None else self.summarizer,
            config=self.config,
            tools=tools,
            focus=focus,
            cache=self.cache,
            task_type=task_type,
            memo=memo,
            unsummarized=tuple(unsummarized),
        )
        first = [*self.config.strategy_order.get(task_type, []), *self.config.fallback_order]
        order = [*(n for n in dict.fromkeys(first) if n != LAST_RESORT), LAST_RESORT]
        run = _Run(original, before, ctx, keep, events)
        step: _Step | None = None
        for name in order:
            # one summary per compaction: the first strategy that lands is kept; what is still
            # over the target is cut by the window, not summarised again
            step = yield from self._step(name, run)
            if step is not None:
                break
        if step is None:
            return CompactionReport(None, tuple(events), task_type)
        plan, kept = _plan_of(original, step)
        tokens, compacted, applied = step.tokens, len(step.outcome.elided), (step.outcome.strategy,)
        refs = {step.ref: step.span}
        reset_turns = step.outcome.reset_turns
        result = CompactResult(
            new_messages=step.messages,
            summary=step.summary,
            original_token_count=before,
            new_token_count=tokens,
            compacted_count=compacted,
            strategy=step.outcome.strategy,
            refs=(step.ref,),
            summarizer=step.by,
            plan=plan,
        )
        over = "" if tokens <= aim else f"; still over the target {aim}"
        emit(
            events,
            Event(
                "context_compacted",
                "compaction",
                tokens_before=before,
                tokens_after=tokens,
                detail=f"{result.strategy} ({task_type} task), {compacted} messages "
                f"summarised, {kept} kept verbatim, saved {result.saved_ratio:.0%}{over}"
                + (f"; summary by {result.summarizer}" if result.summarizer else ""),
                compaction=result,
                data={
                    "task_type": task_type,
                    "applied": applied,
                    "refs": tuple(refs),
                    "elided": dict(refs),
                    "reset_turns": reset_turns,
                    "summarizer": result.summarizer,
                    "kept": kept,
                },
            ),
        )
        return CompactionReport(result, tuple(events), task_type, applied, refs, reset_turns)

    def _step(self, name: str, run: _Run) -> Generator[_Ask, _Summary, _Step | None]:
        """Run one strategy; the new history and its cost, or None when it did nothing useful.

        The last resort gets a second chance: when the configured summarizer's summary is
        rejected there, the extractive one is tried before giving up."""
        current, ctx, events = run.messages, run.ctx, run.events
        try:
            outcome = self.strategies[name](current, ctx)
        except Exception as exc:  # a user's strategy must not break the agent
            emit(events, Event("warning", "compaction", detail=f"strategy {name} raised {exc!r}"))
            return None
        if outcome is None:
            return None
        problem = check_outcome(current, outcome)
        if problem is not None:
            emit(events, Event("warning", "compaction", detail=f"strategy {name}: {problem}"))
            return None
        if outcome.summary is None and any(
            effective_cap(r) < MIN_SUMMARY_CHARS for r in outcome.requests
        ):
            return None  # a span this small has no room for a useful summary: nothing to gain
        primary = ctx.summarizer
        tries = [False, True] if name == LAST_RESORT and primary is not self.fallback else [False]
        span = tuple(current[i] for i in outcome.elided)
        ref = make_ref(span)
        for fallback_only in tries:
            summary, by = outcome.summary, None
            if summary is None:
                alone = fallback_only or primary is self.fallback
                chain = (self.fallback,) if alone else (primary, self.fallback)
                summary, by = yield from self._write(name, outcome, chain, ref, run)
            if summary is None:
                return None
            step = self._judge(name, run, outcome, (span, ref), summary)
            if step is not None:
                return replace(step, by=by)
            if outcome.summary is not None:
                return None
        return None

    def _write(
        self,
        name: str,
        outcome: StrategyOutcome,
        chain: tuple[Summarizer, ...],
        ref: str,
        run: _Run,
    ) -> Generator[_Ask, _Summary, tuple[str | None, str | None]]:
        """The outcome's summary and who wrote it: its requests in order, each after the first
        updating the previous result (``previous_summary``), each naming ``ref``, under which
        the originals of the span are kept, so the summary can point back to them."""
        previous: str | None = None
        writers: list[str] = []
        for request in outcome.requests:
            if previous is not None:
                joined = "\n\n".join(p for p in (previous, request.previous_summary) if p)
                request = replace(request, previous_summary=joined)
            if request.ref is None:
                request = replace(request, ref=ref)
            asked = chain
            if chain[0] is not self.fallback:
                if run.allowance <= 0:
                    asked = (self.fallback,)
                else:
                    run.allowance -= 1
            answer = yield _Ask(request, asked)
            if answer.failure is not None:
                used = "used the extractive summary" if answer.text else "no summary written"
                detail = f"{name}: {answer.failure}; {used}"
                emit(run.events, Event("summarizer_failed", "compaction", detail=detail))
            if answer.text is None:
                return None, None
            previous = answer.text
            if answer.by is not None and answer.by not in writers:
                writers.append(answer.by)
        return previous, "+".join(writers) or None

    def _judge(
        self,
        name: str,
        run: _Run,
        outcome: StrategyOutcome,
        elided: tuple[tuple[Message, ...], str],
        summary: str,
    ) -> _Step | None:
        """The new history when ``summary`` passes the checks; else None and an event.
        ``elided``: the messages the summary replaces and their reference.

        Two checks: :func:`check_summary` of the summary against what it replaces, and
        :func:`must_keep` of the whole input against the whole new history (a fact an earlier
        summary carried must survive the next summary too)."""
        span, ref = elided
        current, ctx, tokens, keep = run.messages, run.ctx, run.tokens, run.keep
        if outcome.rebuild and not self.hint_system:
            outcome = replace(outcome, rebuild=False)
        new = assemble(current, outcome, summary, ref)
        note = new[outcome.elided[0]]  # the summary sits where the first elided message was
        problems = check_summary(summary, summary_request(current, outcome.elided, ctx))
        replaced = sum(ctx.counter.count_message(m) for m in span)
        cost = ctx.counter.count_message(note)
        if cost > replaced * SHRINK_RATIO:
            problems.append(
                f"not clearly smaller than what it replaces ({cost} tokens for {replaced})"
            )
        held = held_facts(new, keep) if keep else ()
        problems.extend(f"loses {fact!r} from the history" for fact in keep if fact not in held)
        new_tokens = ctx.counter.count_messages(new, tools=ctx.tools)
        if new_tokens >= tokens:
            problems.append(f"the history does not shrink ({tokens} -> {new_tokens} tokens)")
        if problems:
            emit(
                run.events,
                Event(
                    "summary_rejected",
                    "compaction",
                    tokens_before=tokens,
                    tokens_after=new_tokens,
                    detail=f"{name}: " + "; ".join(problems),
                    data={"strategy": name, "problems": tuple(problems)},
                ),
            )
            return None
        return _Step(new, new_tokens, outcome, summary, ref, span)

    # -- summarizing, sync and async, cached, with fallback ------------------------------------
    @staticmethod
    def _garbage(text: object, request: SummaryRequest) -> str | None:
        """Why ``text`` is not a summary at all (None when it is one)."""
        if not isinstance(text, str):
            return f"returned {type(text).__name__}, not text"
        if not text.strip():
            return "returned an empty summary"
        if len(text) > request.max_chars * GARBAGE_LENGTH_FACTOR:
            return f"returned {len(text)} characters for a cap of {request.max_chars}"
        try:
            parse_summary(text)
        except Exception as exc:
            return f"returned no four-part summary ({exc})"
        return None

    async def _asummarize(self, ask: _Ask, *, sync: bool = False) -> _Summary:
        failure: str | None = None
        for summarizer in ask.summarizers:
            key = summary_cache_key(ask.request, summarizer)
            hit = None
            with contextlib.suppress(Exception):  # a cache that fails is a miss, not an outage
                hit = self.cache.get(key)
            if hit is not None:
                return _Summary(hit, failure, summarizer.name)
            try:
                if sync:
                    text: object = summarizer.summarize(ask.request)
                else:
                    text = await summarizer.asummarize(ask.request)
                problem = self._garbage(text, ask.request)
            except Exception as exc:  # never let a summarizer break the agent
                problem = f"raised {type(exc).__name__}: {exc}"
            if problem is None and isinstance(text, str):
                with contextlib.suppress(Exception):
                    self.cache[key] = text
                return _Summary(text, failure, summarizer.name)
            failure = failure or f"{summarizer.name} {problem}"
        return _Summary(None, failure)


def _reported(report: CompactionReport, events: list[Event] | None) -> CompactResult | None:
    if events is not None:
        events.extend(report.events)
    return report.result


def _drive(step: Coroutine[Any, Any, Any]) -> Any:
    """The result of a coroutine that never awaits (the sync path of :meth:`Compactor._answer`),
    from its first step."""
    try:
        step.send(None)
    except StopIteration as done:
        return done.value
    step.close()
    raise RuntimeError("a synchronous summary awaited")
