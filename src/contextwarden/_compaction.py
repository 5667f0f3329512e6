"""The compaction engine (issue 4, seeds 001, 002, 003): adaptive strategy selection, summary
validation with fallback, references to what was elided, and the triggers.

:class:`Compactor` is what the :class:`~contextwarden._warden.Warden` calls (through its
``CompactionHook`` protocol) when the lossless layers are not enough. One call:

1. detects the task type (:func:`~contextwarden.strategies.detect_task_type`) and runs the
   strategies in ``config.strategy_order[task_type]``, then the ones of ``config.fallback_order``
   not tried yet, re-measuring the tokens after each and stopping as soon as the history is at or
   under :func:`compaction_target` (``budget.target``, and never above ``target_ratio /
   trigger_ratio`` of ``budget.trigger``): well below the trigger (hysteresis), so the next call
   does not compact again, even when a small window with a large reserve puts ``budget.target``
   on the trigger;
2. falls back to ``full_summary`` of the input when the history is still over the target (it
   replaces what the progressive strategies did when it ends up smaller);
3. validates every summary before using it: a summary that is not clearly smaller than what it
   replaces (:data:`SHRINK_RATIO`), or that lacks a must-keep fact (the task, pinned content,
   modified file paths, the last unresolved error; see
   :func:`~contextwarden.summarizers.base.check_summary`), is rejected (``summary_rejected``
   event) and the next strategy runs;
4. never raises because of a summarizer: one that raises or returns garbage is replaced by the
   embedded :class:`~contextwarden.summarizers.extractive.ExtractiveSummarizer` for that summary
   (``summarizer_failed`` event).

Summaries are cached by :func:`~contextwarden.summarizers.base.summary_cache_key` of what they
replace (in ``cache``: a dict by default; the session store and the proxy pass a persistent
mapping), so a compaction is paid once and the compacted prefix stays byte-identical from one
call to the next (the provider's prompt cache stays warm).

Every elided span gets a reference (``cw:`` + a hash of its messages, see
:func:`~contextwarden.strategies.make_ref`) written in its summary's header and listed in
:attr:`CompactResult.refs`; :meth:`Compactor.elided` returns the spans, verbatim, for the store.
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Generator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from ._config import CompactionConfig, TaskType
from ._events import CompactResult, Event, emit
from ._exceptions import ConfigError
from ._messages import Message
from .strategies.base import (
    Section,
    StrategyContext,
    StrategyOutcome,
    assemble,
    check_outcome,
    compaction_target,
    make_ref,
    summary_request,
)
from .strategies.registry import get_strategy, strategy_names
from .strategies.task_type import detect_task_type
from .summarizers.base import (
    Summarizer,
    SummaryRequest,
    check_summary,
    effective_cap,
    parse_summary,
    summary_cache_key,
)
from .summarizers.extractive import MIN_SUMMARY_CHARS, ExtractiveSummarizer
from .summarizers.facts import extract_facts

if TYPE_CHECKING:
    from ._budget import Budget
    from ._tokens import TokenCounter

__all__ = [
    "SHRINK_RATIO",
    "CompactionReport",
    "CompactResult",
    "Compactor",
    "Trigger",
    "TriggerReason",
    "compaction_target",
    "flatten",
    "must_keep",
    "should_compact",
]

#: A summary message must cost at most this share of the tokens it replaces ("clearly smaller").
SHRINK_RATIO = 0.8
#: A summary longer than this many times its request's ``max_chars`` is garbage, not a summary.
GARBAGE_LENGTH_FACTOR = 2.0
#: How many compactions (and their elided spans) a compactor remembers, to re-apply them and
#: for :meth:`Compactor.elided`.
MEMORY = 512
#: The ``strategy`` of a result that only re-applied earlier compactions (no new summary).
REAPPLIED = "reapplied"
LAST_RESORT = "full_summary"

TriggerReason = Literal["tokens", "turns", "marker", "command", "api"]

_CLIP_MARK = " [...]"  # what summarizers append to a clipped error line
_COMPACT_CMD = re.compile(r"^\s*/compact(?:\s+(?P<focus>\S.*?))?\s*$", re.DOTALL)


def _default_config() -> CompactionConfig:
    # model_validate rather than CompactionConfig(): mypy sees pydantic's required fields
    return CompactionConfig.model_validate({})


def flatten(messages: Sequence[Message]) -> str:
    """The words of ``messages`` (text, tool results, call arguments), whitespace collapsed:
    what :func:`must_keep` facts are looked up in."""
    parts: list[str] = []
    for m in messages:
        parts.append(m.text)
        parts.extend(r.text for r in m.tool_results)
        parts.extend(c.arguments for c in m.tool_calls)
    return " ".join(" ".join(parts).split())


def must_keep(messages: Sequence[Message]) -> tuple[str, ...]:
    """The facts of ``messages`` every compaction of them must still hold somewhere (in a kept
    message or a summary): each modified file path and the signature of the last unresolved
    error (issue 4), as found by :func:`extract_facts`, limited to those spelled out in
    ``messages`` themselves (whitespace collapsed)."""
    facts = extract_facts(messages)
    wanted = list(facts.changed_files)
    error = facts.last_unresolved_error
    if error is not None:
        wanted.append(error.key.removesuffix(_CLIP_MARK).strip())
    flat = flatten(messages)
    out = (" ".join(w.split()) for w in wanted)
    return tuple(dict.fromkeys(w for w in out if w and w in flat))


# -- triggers ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Trigger:
    """Why a compaction should run now (seed 003): ``reason``, and the ``focus`` a ``/compact``
    command asked for."""

    reason: TriggerReason
    focus: str | None = None
    detail: str = ""


def should_compact(
    messages: Sequence[Message],
    *,
    budget: Budget,
    counter: TokenCounter,
    turns: int | None = None,
    config: CompactionConfig | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> Trigger | None:
    """The first trigger that fires, or None. Checked in this order:

    * ``command``: the last message is a user ``/compact [focus]`` command (the focus is
      returned; the caller should not send the command itself to the model);
    * ``marker``: the model wrote ``config.summary_marker`` (``!!!SUMMARY!!!``) in the last
      assistant message, and nothing but that message's tool results follows it;
    * ``turns``: ``turns`` (the caller's count since the last compaction; default: the assistant
      messages in ``messages``) reached ``config.turn_threshold`` (200);
    * ``tokens``: the request costs more than ``budget.trigger``.

    The fifth trigger, an API call, is ``Compactor.compact(..., force=True)``.
    """
    cfg = config or _default_config()
    if messages:
        last = messages[-1]
        if last.role == "user":
            match = _COMPACT_CMD.match(last.text)
            if match is not None:
                return Trigger("command", match.group("focus"), "user command /compact")
        k = len(messages) - 1
        while k > 0 and messages[k].role == "tool":
            k -= 1
        if messages[k].role == "assistant" and cfg.summary_marker in messages[k].text:
            return Trigger("marker", None, f"the model wrote {cfg.summary_marker}")
    n = turns if turns is not None else sum(1 for m in messages if m.role == "assistant")
    if n >= cfg.turn_threshold:
        return Trigger("turns", None, f"{n} turns (threshold {cfg.turn_threshold})")
    tokens = counter.count_messages(messages, tools=tools)
    if tokens > budget.trigger:
        return Trigger("tokens", None, f"{tokens} tokens over the trigger {budget.trigger}")
    return None


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


@dataclass(frozen=True)
class _Entry:
    """A compaction made earlier: the stable keys of what it elided and what replaced it."""

    keys: tuple[str, ...]
    summary: str
    ref: str
    strategy: str
    rebuild: bool
    appendix: tuple[Section, ...]


def stable_key(message: Message) -> str:
    """An identity of ``message`` that the lossless layers do not change: masking a tool
    result keeps its call id, stripping thinking keeps an assistant's text and calls. Used to
    find, in a later call's history, the messages an earlier compaction elided. Cached by the
    message's fingerprint."""
    fp = message.fingerprint
    key = _STABLE_KEYS.get(fp)
    if key is None:
        if len(_STABLE_KEYS) >= _STABLE_KEYS_MAX:
            _STABLE_KEYS.clear()
        key = _STABLE_KEYS[fp] = _stable_key(message)
    return key


_STABLE_KEYS: dict[str, str] = {}
_STABLE_KEYS_MAX = 200_000


def _stable_key(message: Message) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(message.role.encode())
    if message.role == "tool" and message.tool_results:
        for r in message.tool_results:
            h.update(f"\x00{r.tool_call_id}\x00{r.is_error}".encode("utf-8", "surrogatepass"))
    elif message.role == "assistant":
        h.update(message.text.encode("utf-8", "surrogatepass"))
        for c in message.tool_calls:
            h.update(f"\x00{c.id}\x00{c.name}\x00{c.arguments}".encode("utf-8", "surrogatepass"))
    else:
        h.update(message.fingerprint.encode())
    return h.hexdigest()


def _locate(messages: Sequence[Message], keys: Sequence[str]) -> tuple[int, ...] | None:
    """Increasing indices of ``keys`` in ``messages`` (first match after the previous one), or
    None when one is missing."""
    if not keys:
        return None
    where: dict[str, list[int]] = {}
    wanted = set(keys)
    for i, m in enumerate(messages):
        k = stable_key(m)
        if k in wanted:
            where.setdefault(k, []).append(i)
    if keys[0] not in where:
        return None
    out: list[int] = []
    last = -1
    for k in keys:
        found = where.get(k)
        if not found:
            return None
        nxt = found[bisect_right(found, last)] if bisect_right(found, last) < len(found) else None
        if nxt is None:
            return None
        out.append(nxt)
        last = nxt
    return tuple(out)


@dataclass(frozen=True)
class _Ask:
    """A summary the plan needs; ``fallback_only`` skips the configured summarizer."""

    request: SummaryRequest
    fallback_only: bool = False


@dataclass(frozen=True)
class _Summary:
    """One summarizer answer: the text (None when even the fallback failed) and why the
    configured summarizer was not used (None when it was)."""

    text: str | None
    failure: str | None = None


@dataclass(frozen=True)
class _Step:
    """One applied strategy: the new history, its cost, and what was elided under ``ref``."""

    messages: tuple[Message, ...]
    tokens: int
    outcome: StrategyOutcome
    summary: str
    ref: str
    span: tuple[Message, ...]


class Compactor:
    """The adaptive compaction engine. See the module docstring for what one call does.

    ``config``: the knobs (default :class:`CompactionConfig`); ``summarizer``: writes summaries
    (default: the embedded :class:`ExtractiveSummarizer`, no LLM); ``cache``: summaries by
    request key (default: a new dict; pass a persistent mapping to pay each summary once across
    processes). Strategy names in the config must be registered (:class:`ConfigError` if not).
    """

    def __init__(
        self,
        config: CompactionConfig | None = None,
        *,
        summarizer: Summarizer | None = None,
        cache: MutableMapping[str, str] | None = None,
    ) -> None:
        self.config = config or _default_config()
        self.fallback: Summarizer = ExtractiveSummarizer()
        self.summarizer: Summarizer = summarizer if summarizer is not None else self.fallback
        self.cache: MutableMapping[str, str] = cache if cache is not None else {}
        self._elided: OrderedDict[str, tuple[Message, ...]] = OrderedDict()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        known = set(strategy_names())
        named = {
            f"strategy_order.{t}": names for t, names in self.config.strategy_order.items()
        } | {"fallback_order": self.config.fallback_order}
        for where, names in named.items():
            for name in names:
                if name not in known:
                    raise ConfigError(
                        f"compaction.{where}: unknown strategy {name!r}; "
                        f"registered: {', '.join(sorted(known))}"
                    )

    # -- public API ----------------------------------------------------------------------------
    def compact(
        self,
        messages: Sequence[Message],
        *,
        budget: Budget,
        counter: TokenCounter,
        tools: Sequence[Mapping[str, Any]] | None = None,
        focus: str | None = None,
        force: bool = False,
        events: list[Event] | None = None,
    ) -> CompactResult | None:
        """Compact ``messages`` under :func:`compaction_target`; None when nothing was needed (at or under
        ``budget.trigger`` and not ``force``) or nothing could be done. Events are appended to
        ``events`` when given. Never mutates ``messages``; never raises because of a summarizer."""
        report = self.run(
            messages, budget=budget, counter=counter, tools=tools, focus=focus, force=force
        )
        if events is not None:
            events.extend(report.events)
        return report.result

    async def acompact(
        self,
        messages: Sequence[Message],
        *,
        budget: Budget,
        counter: TokenCounter,
        tools: Sequence[Mapping[str, Any]] | None = None,
        focus: str | None = None,
        force: bool = False,
        events: list[Event] | None = None,
    ) -> CompactResult | None:
        """:meth:`compact`, awaiting the summarizer's ``asummarize``."""
        report = await self.arun(
            messages, budget=budget, counter=counter, tools=tools, focus=focus, force=force
        )
        if events is not None:
            events.extend(report.events)
        return report.result

    def run(
        self,
        messages: Sequence[Message],
        *,
        budget: Budget,
        counter: TokenCounter,
        tools: Sequence[Mapping[str, Any]] | None = None,
        focus: str | None = None,
        force: bool = False,
    ) -> CompactionReport:
        """:meth:`compact` with the whole :class:`CompactionReport`."""
        plan = self._plan(messages, budget, counter, tools, focus, force)
        try:
            ask = next(plan)
            while True:
                ask = plan.send(self._summarize(ask))
        except StopIteration as done:
            report: CompactionReport = done.value
        return report

    async def arun(
        self,
        messages: Sequence[Message],
        *,
        budget: Budget,
        counter: TokenCounter,
        tools: Sequence[Mapping[str, Any]] | None = None,
        focus: str | None = None,
        force: bool = False,
    ) -> CompactionReport:
        """:meth:`run`, awaiting the summarizer's ``asummarize``."""
        plan = self._plan(messages, budget, counter, tools, focus, force)
        try:
            ask = next(plan)
            while True:
                ask = plan.send(await self._asummarize(ask))
        except StopIteration as done:
            report: CompactionReport = done.value
        return report

    def elided(self, result: CompactResult) -> dict[str, tuple[Message, ...]]:
        """The spans ``result`` elided, verbatim, by reference (those this compactor still
        remembers: the last :data:`MEMORY`)."""
        return {ref: self._elided[ref] for ref in result.refs if ref in self._elided}

    # -- the plan: a generator that yields summary requests and gets answers back ---------------
    def _plan(
        self,
        messages: Sequence[Message],
        budget: Budget,
        counter: TokenCounter,
        tools: Sequence[Mapping[str, Any]] | None,
        focus: str | None,
        force: bool,
    ) -> Generator[_Ask, _Summary, CompactionReport]:
        events: list[Event] = []
        original = tuple(messages)
        task_type = detect_task_type(original)
        before = counter.count_messages(original, tools=tools)
        if not force and before <= budget.trigger:
            return CompactionReport(None, (), task_type)

        # an earlier compaction of this history, re-applied: the same summaries in the same
        # places, so the prefix stays byte-identical and nothing is summarized twice
        view, reused = self._reapply(original)
        tokens = counter.count_messages(view, tools=tools) if reused else before
        if reused and not force and tokens <= budget.trigger:
            return self._reapplied(view, reused, before, tokens, task_type)

        aim = compaction_target(budget)
        keep = must_keep(original)
        ctx = StrategyContext(
            budget=budget,
            counter=counter,
            summarizer=self.summarizer,
            config=self.config,
            tools=tools,
            focus=focus,
            cache=self.cache,
            task_type=task_type,
        )
        order: list[str] = list(
            dict.fromkeys(
                [*self.config.strategy_order.get(task_type, []), *self.config.fallback_order]
            )
        )
        if LAST_RESORT in order:
            order.remove(LAST_RESORT)
        order.append(LAST_RESORT)

        current = view
        steps: list[_Step] = []
        created: set[int] = set()  # ids of summary messages written by this call
        compacted = 0
        for name in order:
            if steps and tokens <= aim:
                break
            if name == LAST_RESORT:
                # the full summary reads the input itself, not a summary of summaries; it
                # replaces what the progressive strategies did only when it ends up smaller
                step = yield from self._step(name, original, ctx, before, tools, events, keep)
                if step is None or step.tokens >= tokens:
                    continue
                steps, created, compacted = [], set(), 0
                for ref in reused:  # superseded: the full summary covers what they elided
                    self._entries.pop(ref, None)
                reused = ()
            else:
                step = yield from self._step(name, current, ctx, tokens, tools, events, keep)
            if step is None:
                continue
            compacted += sum(1 for m in step.span if id(m) not in created)
            created.add(id(step.messages[step.outcome.elided[0]]))
            current, tokens = step.messages, step.tokens
            steps.append(step)
        if not steps:
            if reused:  # nothing new could be done; the earlier compactions still help
                return self._reapplied(view, reused, before, tokens, task_type, events)
            return CompactionReport(None, tuple(events), task_type)
        applied = [step.outcome.strategy for step in steps]
        refs = {step.ref: step.span for step in steps}
        reset_turns = any(step.outcome.reset_turns for step in steps)
        for step in steps:
            self._record(step)
        result = CompactResult(
            new_messages=current,
            summary=steps[-1].summary,
            original_token_count=before,
            new_token_count=tokens,
            compacted_count=compacted,
            strategy="+".join(applied),
            refs=tuple(refs),
        )
        over = "" if tokens <= aim else f"; still over the target {aim}"
        emit(
            events,
            Event(
                "context_compacted",
                "compaction",
                tokens_before=before,
                tokens_after=tokens,
                detail=f"{result.strategy} ({task_type} task), {compacted} messages, "
                f"saved {result.saved_ratio:.0%}{over}",
                compaction=result,
                data={
                    "task_type": task_type,
                    "applied": tuple(applied),
                    "refs": tuple(refs),
                    "elided": dict(refs),
                    "reset_turns": reset_turns,
                },
            ),
        )
        return CompactionReport(
            result, tuple(events), task_type, tuple(applied), dict(refs), reset_turns
        )

    def _reapplied(
        self,
        view: tuple[Message, ...],
        reused: tuple[str, ...],
        before: int,
        tokens: int,
        task_type: TaskType,
        events: Sequence[Event] = (),
    ) -> CompactionReport:
        """The report of a call that only re-applied earlier compactions: no new summary, so
        ``compacted_count`` is 0, ``strategy`` is :data:`REAPPLIED` and no event is emitted."""
        result = CompactResult(
            new_messages=view,
            summary=getattr(self._entries.get(reused[-1]), "summary", ""),
            original_token_count=before,
            new_token_count=tokens,
            compacted_count=0,
            strategy=REAPPLIED,
            refs=reused,
        )
        elided = {ref: self._elided[ref] for ref in reused if ref in self._elided}
        return CompactionReport(result, tuple(events), task_type, (REAPPLIED,), elided)

    def _step(
        self,
        name: str,
        current: tuple[Message, ...],
        ctx: StrategyContext,
        tokens: int,
        tools: Sequence[Mapping[str, Any]] | None,
        events: list[Event],
        keep: Sequence[str],
    ) -> Generator[_Ask, _Summary, _Step | None]:
        """Run one strategy; the new history and its cost, or None when it did nothing useful.

        The last resort gets a second chance: when the configured summarizer's summary is
        rejected there, the extractive one is tried before giving up."""
        try:
            outcome = get_strategy(name)(current, ctx)
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
        tries = (
            [False, True]
            if name == LAST_RESORT and self._summarizers()[0] is not self.fallback
            else [False]
        )
        for fallback_only in tries:
            summary = outcome.summary
            if summary is None:
                summary = yield from self._write(name, outcome, fallback_only, events)
            if summary is None:
                return None
            step = self._judge(name, current, ctx, tokens, tools, outcome, summary, events, keep)
            if step is not None:
                return step
            if outcome.summary is not None:
                return None
        return None

    def _write(
        self, name: str, outcome: StrategyOutcome, fallback_only: bool, events: list[Event]
    ) -> Generator[_Ask, _Summary, str | None]:
        """The outcome's summary: its requests in order, each after the first updating the
        previous result (``previous_summary``)."""
        previous: str | None = None
        for request in outcome.requests:
            if previous is not None:
                joined = "\n\n".join(p for p in (previous, request.previous_summary) if p)
                request = replace(request, previous_summary=joined)
            answer = yield _Ask(request, fallback_only)
            if answer.failure is not None:
                used = "used the extractive summary" if answer.text else "no summary written"
                emit(
                    events,
                    Event(
                        "summarizer_failed",
                        "compaction",
                        detail=f"{name}: {answer.failure}; {used}",
                    ),
                )
            if answer.text is None:
                return None
            previous = answer.text
        return previous

    def _judge(
        self,
        name: str,
        current: tuple[Message, ...],
        ctx: StrategyContext,
        tokens: int,
        tools: Sequence[Mapping[str, Any]] | None,
        outcome: StrategyOutcome,
        summary: str,
        events: list[Event],
        keep: Sequence[str],
    ) -> _Step | None:
        """The new history when ``summary`` passes the checks; else None and an event.

        Two checks: :func:`check_summary` of the summary against what it replaces, and
        :func:`must_keep` of the whole input against the whole new history (a fact an earlier
        summary carried must survive the next summary too)."""
        span = tuple(current[i] for i in outcome.elided)
        ref = make_ref(span)
        new = assemble(current, outcome, summary, ref)
        note = new[outcome.elided[0]]  # the summary sits where the first elided message was
        problems = check_summary(summary, summary_request(current, outcome.elided, ctx))
        replaced = sum(ctx.counter.count_message(m) for m in span)
        cost = ctx.counter.count_message(note)
        if cost > replaced * SHRINK_RATIO:
            problems.append(
                f"not clearly smaller than what it replaces ({cost} tokens for {replaced})"
            )
        if keep:
            flat = flatten(new)
            problems.extend(f"loses {fact!r} from the history" for fact in keep if fact not in flat)
        new_tokens = ctx.counter.count_messages(new, tools=tools)
        if new_tokens >= tokens:
            problems.append(f"the history does not shrink ({tokens} -> {new_tokens} tokens)")
        if problems:
            emit(
                events,
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
    def _cached(self, key: str) -> str | None:
        try:
            return self.cache.get(key)
        except Exception:  # a persistent cache that fails is a miss, not an outage
            return None

    def _store(self, key: str, text: str) -> None:
        try:
            self.cache[key] = text
        except Exception:
            pass

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

    def _summarizers(self, fallback_only: bool = False) -> tuple[Summarizer, ...]:
        if fallback_only or self.summarizer is self.fallback:
            return (self.fallback,)
        return (self.summarizer, self.fallback)

    def _summarize(self, ask: _Ask) -> _Summary:
        failure: str | None = None
        for summarizer in self._summarizers(ask.fallback_only):
            key = summary_cache_key(ask.request, summarizer)
            hit = self._cached(key)
            if hit is not None:
                return _Summary(hit, failure)
            try:
                text: object = summarizer.summarize(ask.request)
                problem = self._garbage(text, ask.request)
            except Exception as exc:  # never let a summarizer break the agent
                problem = f"raised {type(exc).__name__}: {exc}"
            if problem is None and isinstance(text, str):
                self._store(key, text)
                return _Summary(text, failure)
            failure = failure or f"{summarizer.name} {problem}"
        return _Summary(None, failure)

    async def _asummarize(self, ask: _Ask) -> _Summary:
        failure: str | None = None
        for summarizer in self._summarizers(ask.fallback_only):
            key = summary_cache_key(ask.request, summarizer)
            hit = self._cached(key)
            if hit is not None:
                return _Summary(hit, failure)
            try:
                text: object = await summarizer.asummarize(ask.request)
                problem = self._garbage(text, ask.request)
            except Exception as exc:  # never let a summarizer break the agent
                problem = f"raised {type(exc).__name__}: {exc}"
            if problem is None and isinstance(text, str):
                self._store(key, text)
                return _Summary(text, failure)
            failure = failure or f"{summarizer.name} {problem}"
        return _Summary(None, failure)

    # -- memory: compactions already made, re-applied to the same history ----------------------
    def _record(self, step: _Step) -> None:
        """Remember ``step`` so a later call on the same history re-applies it."""
        outcome = step.outcome
        self._entries[step.ref] = _Entry(
            keys=tuple(stable_key(m) for m in step.span),
            summary=step.summary,
            ref=step.ref,
            strategy=outcome.strategy,
            rebuild=outcome.rebuild,
            appendix=outcome.appendix,
        )
        self._entries.move_to_end(step.ref)
        self._elided[step.ref] = step.span
        self._elided.move_to_end(step.ref)
        while len(self._entries) > MEMORY:
            self._entries.popitem(last=False)
        while len(self._elided) > MEMORY:
            self._elided.popitem(last=False)

    def _reapply(
        self, messages: tuple[Message, ...]
    ) -> tuple[tuple[Message, ...], tuple[str, ...]]:
        """``messages`` with every remembered compaction whose elided messages are all there (as
        whole units, in order) re-applied, oldest first; and the references re-applied."""
        view = messages
        used: list[str] = []
        for entry in list(self._entries.values()):  # a snapshot: another call may record
            where = _locate(view, entry.keys)
            if where is None:
                continue
            outcome = StrategyOutcome(
                entry.strategy,
                where,
                summary=entry.summary,
                rebuild=entry.rebuild,
                appendix=entry.appendix,
            )
            if check_outcome(view, outcome) is not None:
                continue
            view = assemble(view, outcome, entry.summary, entry.ref)
            used.append(entry.ref)
        return view, tuple(used)
