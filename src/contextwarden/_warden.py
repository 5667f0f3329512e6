"""The Warden: a table of conversations and the calls that run them (DESIGN.md).

A conversation's working context is the agent's history (never mutated) plus the log of
:class:`~contextwarden._log.Edit` records the warden made for it; the request is a pure function
of the two. One call of :meth:`Warden.transform`:

1. splits off the request's trailing system messages (a reminder a client appends to each
   request and takes back on the next: sent this call, not kept in the history);
2. finds the conversation (an explicit ``conversation=`` id, else its system prompt, tool
   definitions and the user's task) whose history the request continues, by content: where the
   client put its ``cache_control`` breakpoints and message metadata do not count (see
   :mod:`contextwarden.context.conversation`); a history that rewrote what an edit stands on
   gets a log of its own, never another conversation's. With a log store the log another
   process wrote for it is read first;
3. appends the new messages (a huge tool output cut once, when it enters), and the policy
   (:mod:`contextwarden._policy`) may add edits: over the trigger it must (mask and strip old
   content, then compaction or a window cut down to the target), else a mask/strip batch is made
   when it pays for itself in cache reads or the cache has gone cold;
4. the final guard: tool calls left unanswered at the very end are removed, a request still over
   the trigger (the newest message alone too large) is cut for this call only, and the
   request's per-call tail goes back at the end.

Between edits the request for call k+1 begins with the request for call k, so a provider's
prompt cache reads it. A warm call (no new edit) costs about the new messages.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ._budget import Budget
from ._compaction import Compactor
from ._config import WardenConfig
from ._events import logger
from ._exceptions import ConfigError, FormatError
from ._hooks import takes_keyword
from ._log import Edit, conversation_key
from ._messages import Message
from ._model_overrides import registry_for
from ._models import ModelRegistry
from ._policy import CacheRates
from ._resolve import Resolver
from ._tokens import TokenCounter
from .context.conversation import Call, split_tail
from .context.result import CompactionHook, TransformResult
from .context.table import ConversationTable
from .formats._prefix import ImagedList, PrefixCodec
from .formats.cache_control import add_cache_breakpoints
from .layers.base import Layer, LayerContext, LayerResult, require_messages
from .layers.pending import drop_open_calls, pending_calls, repair_tail
from .layers.window import ensure_within, sliding_window
from .store.logs import LogStore
from .summarizers.build import build_summarizer
from .summarizers.extractive import ExtractiveSummarizer

__all__ = ["CompactionHook", "TransformResult", "Warden", "takes_keyword"]


class Warden:
    """Keeps a history inside the model's window, cheaply. Configure once, call before every
    LLM call with the agent's whole history.

    ``Warden()`` gives the full defaults: truncation of huge tool output, cache-aware masking of
    old tool results and stripping of old thinking, compaction with the embedded extractive
    summarizer, and the window. ``config`` configures all of it; ``summarizer`` and
    ``strategies`` customise the compaction engine built from ``config.compaction``;
    ``compactor`` replaces that engine with your own :class:`CompactionHook`; ``layers`` are
    extra guard layers run on the request at the end of every call; ``counter`` replaces the
    token counter (``counter_cache``: messages each of the warden's own counters remembers);
    ``log_store`` keeps each conversation's log where other processes (or this one after a
    restart) continue it (:mod:`contextwarden.store.logs`); ``codec`` reads and writes provider
    dicts (a bounded :class:`~contextwarden.formats._prefix.PrefixCodec` of its own by default);
    ``models`` is a :class:`~contextwarden.ModelRegistry` of models you registered, to which the
    config's ``models:`` section is added (the warden keeps a copy); ``max_state_bytes``: the
    bytes its conversations may keep alive (:meth:`state_bytes` counts them), the least recently
    used forgotten beyond (default: no bound but the number of conversations). Thread-safe:
    calls of
    different conversations run in parallel, calls of one conversation one at a time. The
    window for a call is ``window=`` if given, else ``config.context_window``, else the model
    registry's figure; with none of them only the lossless edits run.
    """

    def __init__(
        self,
        config: WardenConfig | None = None,
        *,
        counter: TokenCounter | None = None,
        compactor: CompactionHook | None = None,
        summarizer: Any = None,
        strategies: Mapping[str, Any] | None = None,
        layers: Sequence[Layer] = (),
        log_store: LogStore | None = None,
        codec: PrefixCodec | None = None,
        counter_cache: int = 100_000,
        models: ModelRegistry | None = None,
        max_state_bytes: int | None = None,
    ) -> None:
        # model_validate: mypy does not see pydantic's positional Field defaults
        self.config = config if config is not None else WardenConfig.model_validate({})
        if not isinstance(self.config, WardenConfig):
            raise ConfigError(f"config must be a WardenConfig, got {type(self.config).__name__}")
        self.counter = counter
        self.compactor: CompactionHook | None
        if compactor is not None:
            bind = getattr(compactor, "bind", None)
            self.compactor = bind(self.config.compaction) if bind is not None else compactor
        elif self.config.compaction.enabled:
            if summarizer is None and self.config.summarizer.provider != "extractive":
                summarizer = build_summarizer(
                    self.config.summarizer, max_chars=self.config.compaction.summary_max_chars
                )
            self.compactor = Compactor(
                self.config.compaction, summarizer=summarizer, strategies=strategies
            )
        else:
            self.compactor = None
        #: the options the compaction hook takes (one written before an option is called without)
        self._hook_takes = _takes(self.compactor)
        self.layers = tuple(layers)
        self.log_store = log_store
        #: the models this warden knows: ``models``' and the config's ``models:`` section's, then
        #: the built-in tables
        self.models = registry_for(self.config, models)
        self._resolve = Resolver(self.config, counter, self.models, counter_cache)
        self._table = ConversationTable(self.config, log_store, max_state_bytes)
        self._codec = codec if codec is not None else PrefixCodec()

    # -- resolution (see contextwarden._resolve) ---------------------------------------------
    def counter_for(self, model: str | None = None) -> TokenCounter:
        """The counter used for ``model`` (the one given at construction, if any)."""
        return self._resolve.counter_for(model)

    def budget_for(self, model: str | None = None, window: int | None = None) -> Budget | None:
        """The budget for a call, or ``None`` when no window is known (see the class doc and
        :meth:`contextwarden._resolve.Resolver.budget_for`)."""
        return self._resolve.budget_for(model, window)

    def rates_for(self, model: str | None = None) -> CacheRates:
        """The cache rates the policy weighs optional edits at for ``model``."""
        return self._resolve.rates_for(model)

    def edit_log(self, conversation: str) -> tuple[Edit, ...]:
        """The edits recorded for ``conversation`` (a :attr:`TransformResult.conversation`)."""
        return self._table.edit_log(conversation)

    def recall(self, conversation: str, ref: str) -> tuple[Message, ...]:
        """The agent's original messages ``conversation`` keeps under ``ref``, verbatim: a
        masked tool result, stripped reasoning, a span a summary or a window cut replaced (the
        ``cw:`` reference its marker or summary shows). :func:`contextwarden.recall.recall_tool` is
        the tool that lets the model ask for them. Raises :class:`KeyError` naming the
        reference when the conversation (held in memory) keeps nothing under it."""
        found = self._table.recall(conversation, ref)
        if found is None:
            raise KeyError(f"no content under reference {ref!r} in conversation {conversation!r}")
        return found

    def state_bytes(self) -> int:
        """About how many bytes this warden keeps alive: its conversations (their messages,
        the copies edits made, what is remembered of them), its codec's entries and what it
        wrote, its counters' caches and, kept in memory, its summaries. A message kept by two
        of them is counted by each: an estimate from above."""
        cache = getattr(self.compactor, "cache", None)
        summaries = getattr(cache, "kept_bytes", 0)
        return (
            self._table.kept_bytes()
            + self._codec.kept_bytes
            + self._resolve.cache_bytes()
            + (summaries if isinstance(summaries, int) else 0)
        )

    def forget(self, conversation: str) -> None:
        """Drop ``conversation``'s state from memory (its stored log, if any, stays), and the
        messages the codec keeps of the requests read (read again when needed)."""
        self._table.forget(conversation)
        self._codec.clear()

    # -- the call ----------------------------------------------------------------------------
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
        conversation: str | None = None,
        now: float | None = None,
        summarizer: Any = None,
        max_tokens: int | None = None,
    ) -> TransformResult:
        """The request to send now for the history ``messages`` (see the module docstring).

        ``system`` is prepended as a system message unless the history already opens with it;
        ``tools`` (provider tool definitions) count against the budget. ``messages`` is only
        read. ``focus`` is passed to the summarizer (``/compact focus``); ``force_compact``
        compacts even under the trigger (a command, the marker, the turn count, an API call);
        ``allow_compaction=False`` uses a window cut instead of a summary. ``conversation``
        names the conversation explicitly; ``now`` is the call's time in epoch seconds (default:
        the clock), which tells whether the provider's cache has gone cold. ``summarizer``
        writes this call's summary, if it compacts, instead of the configured one (a proxy
        passes one that asks its upstream with the calling client's credentials).
        ``max_tokens``: the output limit the request gives the provider, which refuses a prompt
        that leaves the reply less; it replaces the reserve a default budget fits to the
        conversation's replies (see :meth:`~contextwarden.Budget.for_reply`). Raises
        :class:`~contextwarden.FormatError` naming the index of an item that is not a
        :class:`Message`, :class:`~contextwarden.UnknownModelError` for an unknown model
        without a window.
        """
        call = self._begin(
            messages, model, window, system, tools, conversation, focus, summarizer, max_tokens
        )
        with call.conv.lock:
            return self._run(call, now, force_compact, allow_compaction, self.compactor)

    def _run(
        self, call: Call, now: float | None, force: bool, allow: bool, hook: Any
    ) -> TransformResult:
        hook = self._plan(call, now, force, allow, hook)
        if hook is not None:
            compaction = hook.compact(call.conv.view, **self._hook_options(call, hook))
            call.conv.record_compaction(call, compaction, force)
        return self._finish(call, now)

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
        conversation: str | None = None,
        now: float | None = None,
        summarizer: Any = None,
        max_tokens: int | None = None,
    ) -> TransformResult:
        """:meth:`transform` for async code: a compaction awaits the compactor's ``acompact``
        when it has one (else runs ``compact`` in a worker thread)."""
        call = self._begin(
            messages, model, window, system, tools, conversation, focus, summarizer, max_tokens
        )
        lock = call.conv.lock
        # a thread waits for the lock, not the event loop (another coroutine may hold it)
        await asyncio.to_thread(lock.acquire)
        try:
            hook = self._plan(call, now, force_compact, allow_compaction, self.compactor)
            if hook is not None:
                options = self._hook_options(call, hook)
                acompact = getattr(hook, "acompact", None)
                if acompact is not None and asyncio.iscoroutinefunction(acompact):
                    result = await acompact(call.conv.view, **options)
                else:
                    result = await asyncio.to_thread(hook.compact, call.conv.view, **options)
                call.conv.record_compaction(call, result, force_compact)
            return self._finish(call, now)
        finally:
            lock.release()

    def rebuild(
        self,
        messages: Sequence[Message],
        *,
        model: str | None = None,
        window: int | None = None,
        system: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        conversation: str | None = None,
    ) -> TransformResult:
        """The recovery after a context overflow: compact now with the full summary
        (the system prompt gains a summary hint, the original question is kept)."""
        base = self.compactor if isinstance(self.compactor, Compactor) else None
        cfg = self.config.compaction.model_copy(update={"strategy_order": {}, "fallback_order": []})
        rebuilder = Compactor(
            cfg, summarizer=base.summarizer if base is not None else None, hint_system=True
        )
        call = self._begin(messages, model, window, system, tools, conversation)
        with call.conv.lock:
            return self._run(call, None, True, True, rebuilder)

    # -- stages ------------------------------------------------------------------------------
    def _begin(
        self,
        messages: Sequence[Message],
        model: str | None,
        window: int | None,
        system: str | None,
        tools: Sequence[Mapping[str, Any]] | None,
        conversation: str | None,
        focus: str | None = None,
        summarizer: Any = None,
        max_tokens: int | None = None,
    ) -> Call:
        if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
            raise FormatError(
                f"messages must be a sequence of Message, got {type(messages).__name__}"
            )
        if model is not None and not isinstance(model, str):
            raise ConfigError(f"model must be a model name (str), got {type(model).__name__}")
        if conversation is not None and not isinstance(conversation, str):
            raise ConfigError(f"conversation must be a str id, got {type(conversation).__name__}")
        if max_tokens is not None and (
            isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
        ):
            raise ConfigError(f"max_tokens must be an int >= 1, got {max_tokens!r}")
        resolve = self._resolve
        tools_list, tools_key = resolve.tools(tools)
        counter = resolve.counter_for(model)
        budget = resolve.budget_for(model, window)
        msgs = resolve.with_system(messages, system)
        require_messages(msgs)
        history, tail = split_tail(msgs)
        key = conversation if conversation is not None else conversation_key(history, tools_list)
        conv = self._table.find(key, history, counter.name, explicit=conversation is not None)
        return Call(
            history,
            LayerContext(counter, self.config, budget, tools_list),
            conv,
            resolve.overhead(counter, tools_list, tools_key),
            resolve.rates_for(model),
            tail=tail,
            tail_tokens=sum(counter.count_message(m) for m in tail),
            focus=focus,
            summarizer=summarizer,
            summary_calls=self._summary_calls(summarizer),
            max_tokens=max_tokens,
        )

    def _summary_calls(self, summarizer: Any) -> int:
        """The summarizer calls a compaction now would pay for: one with an LLM summarizer
        (``summarizer`` for this call, else the compactor's), 0 with the embedded extractive
        one or a compaction hook of the caller's."""
        base = self.compactor
        if not isinstance(base, Compactor):
            return 0
        used = summarizer if summarizer is not None else base.summarizer
        return 0 if isinstance(used, ExtractiveSummarizer) else 1

    def _plan(self, call: Call, now: float | None, force: bool, allow: bool, hook: Any) -> Any:
        """Continue the conversation, append and make the lossless edits; ``hook`` when a
        compaction is due now, else None (a window cut was made if one was due)."""
        self._table.enter(call)
        call.conv.prepare(call, now)
        if not (call.must_compact or force) or call.ctx.budget is None:
            return None
        if hook is None or not allow or not self.config.compaction.enabled:
            call.conv.window_cut(call)
            return None
        return hook

    def _hook_options(self, call: Call, hook: Any) -> dict[str, Any]:
        takes = self._hook_takes if hook is self.compactor else _takes(hook)
        options: dict[str, Any] = dict(
            budget=call.ctx.budget, counter=call.ctx.counter, tools=call.ctx.tools, focus=call.focus
        )
        if takes["force"]:
            options["force"] = True  # the warden decided: over the target after the lossless edits
        if takes["events"]:
            options["events"] = call.compactor_events
        if call.summarizer is not None and takes["summarizer"]:
            options["summarizer"] = call.summarizer
        return options

    def _finish(self, call: Call, now: float | None) -> TransformResult:
        """The final guard (see the module docstring), then the result; the log is stored."""
        conv, ctx = call.conv, call.ctx
        view: Sequence[Message] = conv.view
        total = call.total
        newest_truncated = False
        budget = ctx.budget
        if self.config.window.enabled:
            j, pending = pending_calls(view)
            if pending:  # a recording's final state: calls not answered yet, which no API takes
                before = conv.tokens[j]
                view, repaired = repair_tail(view, ctx)
                call.events.extend(repaired)
                after = ctx.counter.count_message(view[j]) if len(view) == len(conv.view) else 0
                total += after - before
            still_open = set(conv.repair.pending) - pending
            if still_open:  # a final turn split over several assistant messages
                view, repaired = drop_open_calls(view, frozenset(still_open), ctx)
                call.events.extend(repaired)
                total = ctx.request_tokens(view)
            # a request the policy let wait over the trigger is left whole within the limit
            if (
                budget is not None
                and total + call.tail_tokens > budget.trigger
                and not (call.deferred and total + call.tail_tokens <= budget.limit)
            ):
                guarded = sliding_window(view, ctx)
                view = guarded.messages
                call.events.extend(guarded.events)
                newest_truncated = guarded.newest_truncated
                total = ctx.request_tokens(view)
        for layer in self.layers:
            result = layer(tuple(view), ctx)
            if not isinstance(result, LayerResult):
                raise TypeError(
                    f"layer {layer!r} returned {type(result).__name__}, not LayerResult"
                )
            require_messages(result.messages)
            call.events.extend(result.events)
            view = result.messages
            total = ctx.request_tokens(view)
        if call.tail:  # the request's own reminder, last, as it came
            view = [*view, *call.tail]
            total += call.tail_tokens
        conv.calls += 1
        conv.last_time = time.time() if now is None else now
        self._table.record(conv)
        self._table.trim(conv.key)
        if budget is not None and self.config.window.enabled:
            ensure_within(view, ctx, total)  # ContextOverflowError: nothing left to cut
        return TransformResult(
            tuple(view),
            call.tokens_before + call.tail_tokens,
            total,
            tuple(call.events),
            call.compaction,
            newest_truncated,
            budget,
            conv.key,
            tuple(call.edits),
            conv.stable_prefix(),
            dict(call.elided),
        )

    # -- hooks and provider dicts ------------------------------------------------------------
    async def transform_context(
        self, messages: Sequence[Message], signal: Any = None
    ) -> list[Message]:
        """A pi-agent-core style ``transformContext(messages, signal) -> messages`` hook for
        the configured model/window. Never raises (pi's contract): on an abort signal or any
        failure the messages come back as they were given."""
        if signal is not None and (
            getattr(signal, "aborted", False) or (hasattr(signal, "is_set") and signal.is_set())
        ):
            return list(messages)
        try:
            result = await self.atransform(messages)
        except Exception:  # the hook must never break the agent's loop
            logger.exception("contextwarden: transform_context failed; history sent unchanged")
            return list(messages)
        return list(result.messages)

    def transform_openai(
        self,
        messages: list[dict[str, Any]],
        *,
        model: str | None = None,
        window: int | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        conversation: str | None = None,
        now: float | None = None,
        summarizer: Any = None,
        max_tokens: int | None = None,
    ) -> tuple[list[dict[str, Any]], TransformResult]:
        """OpenAI Chat Completions messages in, OpenAI messages out (plus the result)."""
        result = self.transform(
            self._codec.from_openai(messages),
            model=model,
            window=window,
            tools=tools,
            conversation=conversation,
            now=now,
            summarizer=summarizer,
            max_tokens=max_tokens,
        )
        # the proxy's reader (an ImagedList) only serialises what it gets: no copies for it
        shared = type(messages) is ImagedList
        return self._codec.to_openai(result.messages, shared=shared), result

    def transform_anthropic(
        self,
        messages: list[dict[str, Any]],
        *,
        system: Any = None,
        model: str | None = None,
        window: int | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        conversation: str | None = None,
        now: float | None = None,
        cache_breakpoints: bool = False,
        summarizer: Any = None,
        max_tokens: int | None = None,
    ) -> tuple[Any, list[dict[str, Any]], TransformResult]:
        """Anthropic Messages in (``system`` as the API takes it: a string or blocks), the
        same out: ``(system, messages, result)``. ``cache_breakpoints`` puts ``cache_control``
        on the end of the stable prefix and on the newest message (at most 4 in all, the
        client's own kept), so the provider caches what the next call will read."""
        result = self.transform(
            self._codec.from_anthropic(messages, system=system),
            model=model,
            window=window,
            tools=tools,
            conversation=conversation,
            now=now,
            summarizer=summarizer,
            max_tokens=max_tokens,
        )
        shared = type(messages) is ImagedList  # see transform_openai
        system_out, out = self._codec.to_anthropic(result.messages, shared=shared)
        if cache_breakpoints:
            # the system prompt: the system messages before the first other one (those in the
            # middle are written in place, inside the messages)
            leading = next(
                (k for k, m in enumerate(result.messages) if m.role != "system"),
                len(result.messages),
            )
            stable = result.stable_prefix - leading
            system_out, out, _ = add_cache_breakpoints(
                system_out,
                out,
                tools=list(tools) if tools else None,
                # to_anthropic may merge messages: past the end means "no stable mark"
                stable_end=(max(stable, 0) or None) if stable < len(out) else None,
            )
        return system_out, out, result


def _takes(hook: Any) -> dict[str, bool]:
    compact = getattr(hook, "compact", None)
    return {k: takes_keyword(compact, k) for k in ("force", "events", "summarizer")}
