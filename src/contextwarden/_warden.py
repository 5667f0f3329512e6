"""The Warden: the per-call pipeline run on a copy of the history before every LLM call
(seeds 000 and 004; compaction from seeds 001-003 plugs in through :class:`CompactionHook`).

One call of :meth:`Warden.transform`:

1. the lossless layers, every call: truncate oversized tool output, mask old tool results,
   strip old thinking (:mod:`contextwarden.layers`), then any lossless layers you registered;
2. if the request is still over the budget's trigger and a compactor is set, the compactor
   (lossy: summaries); its ``new_messages`` replace the history for this call;
3. your registered guard layers, then the sliding window as the final guard: oldest units are
   dropped until the request fits, never the system prompt, the task, pinned content or the
   newest unit (cut instead, and ``newest_truncated`` says so).

The input is never mutated, the output is deterministic, and transforming the output again
changes nothing. A warm call (same history plus a few appended messages) costs about the new
messages only: the warden remembers the last call (see :mod:`contextwarden.layers.pipeline`).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._budget import Budget
from ._config import WardenConfig
from ._events import CompactResult, Event, emit
from ._messages import Message, TextBlock
from .layers import get_layer, layer_names
from .layers.base import LayerContext, LayerResult, check_messages
from .layers.pipeline import Pipeline
from .layers.window import sliding_window
from .strategies.memory import REAPPLIED

if TYPE_CHECKING:
    from ._tokens import TokenCounter

__all__ = ["CompactionHook", "TransformResult", "Warden"]


@runtime_checkable
class CompactionHook(Protocol):
    """What the warden calls when the lossless layers are not enough (the issue-4
    :class:`~contextwarden._compaction.Compactor` is one). Return ``None`` to decline (the
    sliding window then does the job alone)."""

    def compact(
        self,
        messages: Sequence[Message],
        *,
        budget: Budget,
        counter: TokenCounter,
        tools: Sequence[Mapping[str, Any]] | None,
        focus: str | None,
    ) -> CompactResult | None: ...


@dataclass(frozen=True)
class TransformResult:
    """What one :meth:`Warden.transform` produced.

    ``messages`` is the working copy to send; ``tokens_before``/``tokens_after`` are the whole
    request's tokens (tool definitions included) before and after; ``events`` lists every
    truncation, mask, strip, drop and compaction, in pipeline order; ``compaction`` is set when
    a compactor ran; ``newest_truncated`` is true when the newest unit alone was over the budget
    and had to be cut; ``budget`` is ``None`` when no window was known (lossless layers only).
    """

    messages: tuple[Message, ...]
    tokens_before: int
    tokens_after: int
    events: tuple[Event, ...] = ()
    compaction: CompactResult | None = None
    newest_truncated: bool = False
    budget: Budget | None = None

    @property
    def saved_tokens(self) -> int:
        """``tokens_before - tokens_after``."""
        return self.tokens_before - self.tokens_after

    @property
    def within_budget(self) -> bool:
        """True when no budget is known or the result is at or under its trigger."""
        return self.budget is None or self.tokens_after <= self.budget.trigger


@dataclass
class _Call:
    """One call's state between its stages (see :meth:`Warden._prepare`)."""

    ctx: LayerContext
    tokens_before: int
    user_guard: list[Any]
    done: TransformResult | None = None
    current: tuple[Message, ...] = ()
    events: list[Event] = field(default_factory=list)
    compactor_events: list[Event] = field(default_factory=list)
    needs_compaction: bool = False
    compactor: CompactionHook | None = None
    focus: str | None = None
    force: bool = False


def _check_sequence(messages: object) -> None:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise TypeError(f"messages must be a sequence of Message, got {type(messages).__name__}")


def _accepts(compactor: object, name: str) -> bool:
    """Whether ``compactor.compact`` takes the keyword ``name`` (the issue-4 Compactor takes
    ``events=`` (its events then join the result's) and ``force=``; a user's hook may not).
    Asked on every compacting call, so answered once per class (an object whose ``compact``
    is its own attribute, not its class's, is inspected each time)."""
    kind = type(compactor)
    if not hasattr(kind, "compact"):
        return name in _keywords(getattr(compactor, "compact", None))
    keywords = _KEYWORDS.get(kind)
    if keywords is None:
        keywords = _KEYWORDS[kind] = _keywords(kind.compact)
    return name in keywords


_KEYWORDS: dict[type, frozenset[str]] = {}  # compactor class -> the keywords its compact takes


def _keywords(function: object) -> frozenset[str]:
    """The keywords ``function`` accepts (``events`` and ``force`` stand in for ``**kwargs``)."""
    try:
        params = inspect.signature(function).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return frozenset()
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return frozenset({"events", "force"})
    return frozenset(params)


class Warden:
    """Keeps a history inside the model's window. Configure once, call before every LLM call.

    ``config`` defaults to :class:`WardenConfig()` (the seeds' defaults); ``counter`` defaults
    to ``get_counter(model, kind=config.counter)`` for each model used; ``compactor`` is
    optional (without it, the sliding window is the only lossy step). Thread-safe: calls are
    serialised. The window for a call is ``window=`` if given, else ``config.context_window``,
    else the model registry's figure for ``model=`` / ``config.model``; with none of them only the
    lossless layers run.
    """

    def __init__(
        self,
        config: WardenConfig | None = None,
        *,
        counter: TokenCounter | None = None,
        compactor: CompactionHook | None = None,
    ) -> None:
        # model_validate: mypy does not see pydantic's positional Field defaults
        self.config = config if config is not None else WardenConfig.model_validate({})
        if not isinstance(self.config, WardenConfig):
            raise TypeError(f"config must be a WardenConfig, got {type(self.config).__name__}")
        self.counter = counter
        self.compactor = compactor
        self._pipeline = Pipeline()
        self._lock = threading.Lock()
        self._counters: dict[str | None, TokenCounter] = {}
        self._budgets: dict[tuple[str | None, int | None], Budget] = {}
        self._systems: dict[str, Message] = {}
        self._overheads: dict[tuple[str, str], int] = {}
        self._last_tools: tuple[object, str, int] | None = None

    # -- resolution --------------------------------------------------------------------------
    def counter_for(self, model: str | None = None) -> TokenCounter:
        """The counter used for ``model`` (the one given at construction, if any)."""
        if self.counter is not None:
            return self.counter
        model = model or self.config.model
        counter = self._counters.get(model)
        if counter is None:
            from ._tokens import get_counter

            counter = self._counters[model] = get_counter(model, kind=self.config.counter)
        return counter

    def budget_for(self, model: str | None = None, window: int | None = None) -> Budget | None:
        """The budget for a call, or ``None`` when no window is known (see the class doc).

        The reserve is ``config.reserve_tokens`` when you set it; left at its default it is
        :meth:`Budget.for_model`'s choice (8,192, but no more than a quarter of the window or the
        model's max output), so an 8k window still has room for a request. Raises
        :class:`~contextwarden.UnknownModelError` for a model the registry lacks and
        :class:`~contextwarden.ConfigError` for a reserve that leaves no room.
        """
        model = model or self.config.model
        if window is None:
            window = self.config.context_window
        if window is None and model is None:
            return None
        key = (model, window)
        budget = self._budgets.get(key)
        if budget is None:
            cfg = self.config
            explicit = "reserve_tokens" in cfg.model_fields_set
            budget = Budget.for_model(
                model,
                window,
                reserve=cfg.reserve_tokens if explicit else None,
                trigger_ratio=cfg.trigger_ratio,
                target_ratio=cfg.target_ratio,
            )
            if len(self._budgets) > 64:
                self._budgets.clear()
            self._budgets[key] = budget
        return budget

    def _with_system(self, messages: Sequence[Message], system: str | None) -> Sequence[Message]:
        """``messages`` with ``system`` prepended unless they already open with that system
        text. The prepended message is the same object every call (so warm calls stay warm)."""
        if system is None:
            return messages
        if messages and messages[0].role == "system" and messages[0].text == system:
            return messages
        msg = self._systems.get(system)
        if msg is None:
            if len(self._systems) > 32:
                self._systems.clear()
            msg = self._systems[system] = Message("system", (TextBlock(system),))
        return [msg, *messages]

    def _overhead(self, counter: TokenCounter, tools: Sequence[Mapping[str, Any]] | None) -> int:
        """Tokens of the tool definitions and reply priming, cached by the tools' content."""
        last = self._last_tools
        if last is not None and last[0] is tools and last[1] == counter.name:
            return last[2]
        key = json.dumps(list(tools), sort_keys=True, default=str) if tools else ""
        cached = self._overheads.get((counter.name, key))
        if cached is None:
            if len(self._overheads) > 64:
                self._overheads.clear()
            cached = counter.count_messages([], tools=list(tools) if tools else None)
            self._overheads[(counter.name, key)] = cached
        self._last_tools = (tools, counter.name, cached)
        return cached

    # -- the pipeline ------------------------------------------------------------------------
    def transform(
        self,
        messages: Sequence[Message],
        *,
        model: str | None = None,
        window: int | None = None,
        system: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        focus: str | None = None,
        force_compact: bool = False,
        allow_compaction: bool = True,
    ) -> TransformResult:
        """The working copy of ``messages`` to send now (see the module docstring).

        ``system`` is prepended as a system message unless the history already opens with it;
        ``tools`` (provider tool definitions) count against the budget. ``messages`` is only
        read. ``focus`` is passed to the summarizer (``/compact focus``); ``force_compact`` runs
        the compactor even under the trigger (the explicit triggers: a command, the marker, the
        turn count, an API call); ``allow_compaction=False`` skips it (lossless layers and the
        window only). Raises :class:`~contextwarden.FormatError` naming the index of an item
        that is not a :class:`Message`, :class:`~contextwarden.UnknownModelError` for an unknown
        model without a window.
        """
        compactor = self.compactor if allow_compaction else None
        return self._run_sync(messages, model, window, system, tools, compactor, focus, force_compact)

    def _run_sync(
        self,
        messages: Sequence[Message],
        model: str | None,
        window: int | None,
        system: str | None,
        tools: Sequence[Mapping[str, Any]] | None,
        compactor: CompactionHook | None,
        focus: str | None,
        force: bool,
    ) -> TransformResult:
        call = self._begin(messages, model, window, system, tools, compactor, focus, force)
        if call.done is not None:
            return call.done
        compaction = self._compact_sync(call) if call.needs_compaction else None
        return self._finish(call, compaction)

    def _begin(
        self,
        messages: Sequence[Message],
        model: str | None,
        window: int | None,
        system: str | None,
        tools: Sequence[Mapping[str, Any]] | None,
        compactor: CompactionHook | None,
        focus: str | None,
        force: bool,
    ) -> _Call:
        """Check the input, then run the stages up to compaction under the lock."""
        _check_sequence(messages)
        with self._lock:
            return self._prepare(messages, model, window, system, tools, compactor, focus, force)

    def rebuild(
        self,
        messages: Sequence[Message],
        *,
        model: str | None = None,
        window: int | None = None,
        system: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> TransformResult:
        """Seed 002's recovery after a context overflow: the history is rebuilt as the system
        prompt with a summary hint, plus the original question (the full-summary strategy,
        forced, with this warden's summarizer and cache). Without a compactor of ours, the
        lossless layers and the sliding window do what they can."""
        from ._compaction import Compactor

        base = self.compactor if isinstance(self.compactor, Compactor) else None
        cfg = self.config.compaction.model_copy(update={"strategy_order": {}, "fallback_order": []})
        rebuilder = Compactor(
            cfg,
            summarizer=base.summarizer if base is not None else None,
            cache=base.cache if base is not None else None,
        )
        return self._run_sync(messages, model, window, system, tools, rebuilder, None, True)

    def elided(self, result: CompactResult) -> dict[str, tuple[Message, ...]]:
        """The spans ``result`` elided, by reference, as the compactor saw them (after the
        lossless layers); empty when the compactor does not remember them."""
        spans = getattr(self.compactor, "elided", None)
        return dict(spans(result)) if spans is not None else {}

    async def atransform(
        self,
        messages: Sequence[Message],
        *,
        model: str | None = None,
        window: int | None = None,
        system: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        focus: str | None = None,
        force_compact: bool = False,
        allow_compaction: bool = True,
    ) -> TransformResult:
        """:meth:`transform` for async code. The layers are CPU-only and short, so they run
        inline; a compaction awaits the compactor's ``acompact`` when it has one (else runs its
        ``compact`` in a worker thread)."""
        compactor = self.compactor if allow_compaction else None
        call = self._begin(messages, model, window, system, tools, compactor, focus, force_compact)
        if call.done is not None:
            return call.done
        compaction = None
        if call.needs_compaction:
            acompact = getattr(call.compactor, "acompact", None)
            if acompact is not None and asyncio.iscoroutinefunction(acompact):
                compaction = await acompact(call.current, **self._compact_kwargs(call))
            else:
                compaction = await asyncio.to_thread(self._compact_sync, call)
        return self._finish(call, compaction)

    def _prepare(
        self,
        messages: Sequence[Message],
        model: str | None,
        window: int | None,
        system: str | None,
        tools: Sequence[Mapping[str, Any]] | None,
        compactor: CompactionHook | None = None,
        focus: str | None = None,
        force: bool = False,
    ) -> _Call:
        """Everything up to compaction: the lossless layers (and, when nothing else is
        needed, the window: then ``done`` is the result)."""
        counter = self.counter_for(model)
        budget = self.budget_for(model, window)
        msgs = self._with_system(messages, system)
        tools_list = list(tools) if tools else None
        ctx = LayerContext(
            counter, self.config, budget, tools_list, memo=self._pipeline.memo(counter.name)
        )
        overhead = self._overhead(counter, tools)
        view = self._pipeline.lossless(msgs, ctx)
        tokens_before = view.input_tokens + overhead
        user_lossless = [get_layer(n).function for n in layer_names("lossless", builtin=False)]
        user_guard = [get_layer(n).function for n in layer_names("guard", builtin=False)]
        over = budget is not None and view.output_tokens + overhead > budget.trigger
        if not self.config.compaction.enabled:
            compactor = None
        call = _Call(ctx, tokens_before, user_guard, compactor=compactor, focus=focus, force=force)
        wants_compaction = compactor is not None and budget is not None and (over or force)

        if not user_lossless and not user_guard and not wants_compaction:
            result, tokens_after = self._pipeline.window(view, ctx, overhead)
            call.done = TransformResult(
                result.messages,
                tokens_before,
                tokens_after,
                result.events,
                None,
                result.newest_truncated,
                budget,
            )
            return call

        # the general path: your layers and/or compaction, then the window on whole lists
        call.events = [e for layer_events in view.events for e in layer_events]
        call.current = tuple(view.outputs)
        for layer in user_lossless:
            call.current = self._run_user_layer(layer, call.current, ctx, call.events)
        call.needs_compaction = (
            budget is not None
            and compactor is not None
            and (force or ctx.request_tokens(call.current) > budget.trigger)
        )
        return call

    def _compact_kwargs(self, call: _Call) -> dict[str, Any]:
        assert call.ctx.budget is not None
        kwargs: dict[str, Any] = dict(
            budget=call.ctx.budget, counter=call.ctx.counter, tools=call.ctx.tools, focus=call.focus
        )
        if _accepts(call.compactor, "events"):
            kwargs["events"] = call.compactor_events
        if call.force and _accepts(call.compactor, "force"):
            kwargs["force"] = True
        return kwargs

    def _compact_sync(self, call: _Call) -> CompactResult | None:
        assert call.compactor is not None
        return call.compactor.compact(call.current, **self._compact_kwargs(call))

    def _finish(self, call: _Call, compaction: CompactResult | None) -> TransformResult:
        """Compaction's output (if any), your guard layers, then the sliding window."""
        ctx, events = call.ctx, call.events
        events.extend(call.compactor_events)
        current = call.current
        if compaction is not None:
            current = tuple(compaction.new_messages)
            check_messages(current)
            reapplied = compaction.strategy == REAPPLIED  # an earlier compaction, not a new one
            if not reapplied and not any(
                e.kind == "context_compacted" for e in call.compactor_events
            ):
                emit(
                    events,
                    Event(
                        "context_compacted",
                        "compaction",
                        None,
                        None,
                        compaction.original_token_count,
                        compaction.new_token_count,
                        detail=f"{compaction.strategy}: {compaction.compacted_count} messages "
                        f"summarised, {compaction.saved_ratio:.0%} saved",
                        compaction=compaction,
                    ),
                )
        for layer in call.user_guard:
            current = self._run_user_layer(layer, current, ctx, events)
        final = sliding_window(current, ctx)
        events.extend(final.events)
        return TransformResult(
            final.messages,
            call.tokens_before,
            ctx.request_tokens(final.messages),
            tuple(events),
            compaction,
            final.newest_truncated,
            ctx.budget,
        )

    @staticmethod
    def _run_user_layer(
        layer: Any, messages: tuple[Message, ...], ctx: LayerContext, events: list[Event]
    ) -> tuple[Message, ...]:
        result = layer(messages, ctx)
        if not isinstance(result, LayerResult):
            raise TypeError(f"layer {layer!r} returned {type(result).__name__}, not LayerResult")
        check_messages(result.messages)
        events.extend(result.events)
        return tuple(result.messages)

    async def transform_context(
        self, messages: Sequence[Message], signal: Any = None
    ) -> list[Message]:
        """A pi-agent-core style ``transformContext(messages, signal) -> messages`` hook: the
        working copy for the configured model/window. ``signal`` may be an abort signal (an
        object with a true ``aborted`` attribute, or a set ``asyncio.Event`` /
        ``threading.Event``): the call is then cancelled before any work."""
        if signal is not None and (
            getattr(signal, "aborted", False) or (hasattr(signal, "is_set") and signal.is_set())
        ):
            raise asyncio.CancelledError("transform_context aborted by its signal")
        result = await self.atransform(messages)
        return list(result.messages)

    # -- provider dicts ----------------------------------------------------------------------
    def transform_openai(
        self,
        messages: list[dict[str, Any]],
        *,
        model: str | None = None,
        window: int | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> tuple[list[dict[str, Any]], TransformResult]:
        """OpenAI Chat Completions messages in, OpenAI messages out (plus the result)."""
        from .formats import from_openai, to_openai

        result = self.transform(from_openai(messages), model=model, window=window, tools=tools)
        return to_openai(list(result.messages)), result

    def transform_anthropic(
        self,
        messages: list[dict[str, Any]],
        *,
        system: Any = None,
        model: str | None = None,
        window: int | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> tuple[Any, list[dict[str, Any]], TransformResult]:
        """Anthropic Messages in (``system`` as the API takes it: a string or blocks), the
        same out: ``(system, messages, result)``."""
        from .formats import from_anthropic, to_anthropic

        canonical = from_anthropic(messages, system=system)
        result = self.transform(canonical, model=model, window=window, tools=tools)
        system_out, out = to_anthropic(list(result.messages))
        return system_out, out, result
