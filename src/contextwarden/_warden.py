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
import json
import marshal
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ._budget import Budget
from ._compaction import Compactor
from ._config import WardenConfig
from ._events import CompactResult, Event, logger
from ._exceptions import ConfigError, FormatError
from ._hooks import takes_keyword
from ._log import Edit, conversation_key
from ._messages import Message, TextBlock
from ._models import apply_model_overrides
from ._policy import CacheRates, rates_for
from ._tokens import TokenCounter, get_counter
from .context.conversation import Call, Conversation, Diverged
from .formats import check_tools
from .formats._prefix import ImagedList, PrefixCodec
from .formats.cache_control import add_cache_breakpoints
from .layers.base import Layer, LayerContext, LayerResult, check_messages
from .layers.pending import drop_open_calls, pending_calls, repair_tail
from .layers.window import ensure_within, sliding_window
from .store.logs import LogStore
from .summarizers.config import build_summarizer

__all__ = ["CompactionHook", "TransformResult", "Warden", "takes_keyword"]

#: Conversations one Warden remembers (least recently used forgotten first).
MAX_CONVERSATIONS = 512
#: Logs kept for histories that share one identity (the same system prompt, tools and task).
MAX_BRANCHES = 64


@runtime_checkable
class CompactionHook(Protocol):
    """What the warden calls when over the trigger after the lossless edits (the built-in
    :class:`~contextwarden._compaction.Compactor` is one). Return ``None`` to decline (a window
    cut then does the job). The messages it returns must keep, as the same objects, every
    message it does not elide; new messages (summaries) are recorded in the edit log."""

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

    ``messages`` is the request to send; ``tokens_before``/``tokens_after`` are the whole
    request's tokens (tool definitions included) without and with the warden; ``events`` lists
    what happened this call (truncations of new messages, the edits made, repairs, cuts);
    ``compaction`` is set when a compaction was made this call; ``newest_truncated`` when the
    newest unit alone was over the budget and was cut; ``budget`` is ``None`` when no window was
    known. ``conversation`` is the id of the conversation's log, ``edits`` the records added this
    call, ``stable_prefix`` how many leading messages the log's pending edits will not rewrite
    (where a cache breakpoint pays), and ``elided`` the originals hidden by this call's edits,
    by ``cw:`` reference.
    """

    messages: tuple[Message, ...]
    tokens_before: int
    tokens_after: int
    events: tuple[Event, ...] = ()
    compaction: CompactResult | None = None
    newest_truncated: bool = False
    budget: Budget | None = None
    conversation: str = ""
    edits: tuple[Edit, ...] = ()
    stable_prefix: int = 0
    elided: Mapping[str, tuple[Message, ...]] = field(default_factory=dict)

    @property
    def saved_tokens(self) -> int:
        """``tokens_before - tokens_after``."""
        return self.tokens_before - self.tokens_after

    @property
    def within_budget(self) -> bool:
        """True when no budget is known or the result is at or under its trigger."""
        return self.budget is None or self.tokens_after <= self.budget.trigger


def split_tail(messages: Sequence[Message]) -> tuple[Sequence[Message], tuple[Message, ...]]:
    """``(history, tail)``: the system messages after the last other message are the request's
    tail (a per-call reminder); a request of system messages only has none."""
    end = len(messages)
    while end > 0 and messages[end - 1].role == "system":
        end -= 1
    if end == 0 or end == len(messages):
        return messages, ()
    return messages[:end], tuple(messages[end:])


class Warden:
    """Keeps a history inside the model's window, cheaply. Configure once, call before every
    LLM call with the agent's whole history.

    ``Warden()`` gives the full defaults: truncation of huge tool output, cache-aware masking of
    old tool results and stripping of old thinking, compaction with the embedded extractive
    summarizer, and the window. ``config`` configures all of it; ``summarizer`` and
    ``strategies`` customise the compaction engine built from ``config.compaction``;
    ``compactor`` replaces that engine with your own :class:`CompactionHook`; ``layers`` are
    extra guard layers run on the request at the end of every call; ``counter`` replaces the
    token counter; ``log_store`` keeps each conversation's log where other processes (or this
    one after a restart) continue it (:mod:`contextwarden.store.logs`). Thread-safe: calls of
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
        compact = getattr(self.compactor, "compact", None)
        #: the options the compaction hook takes (one written before an option is called without)
        self._hook_takes = {k: takes_keyword(compact, k) for k in ("force", "events", "summarizer")}
        self.layers = tuple(layers)
        self.log_store = log_store
        #: the config's ``models:`` section, consulted before the registry
        self.models = apply_model_overrides(self.config)
        self._lock = threading.Lock()  # guards the tables below, never held during a call
        self._counters: dict[str | None, TokenCounter] = {}
        self._budgets: dict[tuple[str | None, int | None], Budget] = {}
        self._rates: dict[str | None, CacheRates] = {}
        self._systems: dict[str, Message] = {}
        self._overheads: dict[tuple[str, str], int] = {}
        self._tool_sets: dict[bytes, tuple[list[Mapping[str, Any]], str]] = {}
        self._codec = PrefixCodec()
        self._conversations: OrderedDict[str, Conversation] = OrderedDict()

    # -- resolution --------------------------------------------------------------------------
    # The tables are small LRUs (a dict keeps its insertion order: a hit moves the entry to the
    # end, the first one goes when full), so a flood of model names, windows or tool sets never
    # pushes out the ones every call uses.
    def _recall(self, table: dict[Any, Any], key: Any) -> Any:
        with self._lock:
            value = table.pop(key, None)
            if value is not None:
                table[key] = value
        return value

    def _remember(self, table: dict[Any, Any], key: Any, value: Any, limit: int = 64) -> None:
        with self._lock:
            table.pop(key, None)
            table[key] = value
            while len(table) > limit:
                del table[next(iter(table))]

    def counter_for(self, model: str | None = None) -> TokenCounter:
        """The counter used for ``model`` (the one given at construction, if any)."""
        if self.counter is not None:
            return self.counter
        model = model or self.config.model
        counter: TokenCounter | None = self._recall(self._counters, model)
        if counter is None:
            counter = get_counter(model, kind=self.config.counter)
            self._remember(self._counters, model, counter)
        return counter

    def budget_for(self, model: str | None = None, window: int | None = None) -> Budget | None:
        """The budget for a call, or ``None`` when no window is known (see the class doc).

        The reserve is ``config.reserve_tokens`` when you set it; left at its default it is
        :meth:`Budget.for_model`'s choice (8,192, but no more than a quarter of the window or the
        model's max output). Raises :class:`~contextwarden.UnknownModelError` for a model the
        registry lacks and :class:`~contextwarden.ConfigError` for a reserve that leaves no room.
        """
        model = model or self.config.model
        if window is None:
            window = self.config.context_window
        if window is None and model is None:
            return None
        budget: Budget | None = self._recall(self._budgets, (model, window))
        if budget is None:
            cfg = self.config
            budget = Budget.for_model(
                model,
                window,
                reserve=cfg.reserve_tokens if "reserve_tokens" in cfg.model_fields_set else None,
                trigger_ratio=cfg.trigger_ratio,
                target_ratio=cfg.target_ratio,
                overrides=self.models,
            )
            self._remember(self._budgets, (model, window), budget)
        return budget

    def rates_for(self, model: str | None = None) -> CacheRates:
        """The cache rates the policy weighs optional edits at for ``model``."""
        model = model or self.config.model
        rates: CacheRates | None = self._recall(self._rates, model)
        if rates is None:
            rates = rates_for(model, self.config.policy, self.models)
            self._remember(self._rates, model, rates)
        return rates

    def _with_system(self, messages: Sequence[Message], system: str | None) -> Sequence[Message]:
        """``messages`` with ``system`` prepended unless they already open with that system
        text. The prepended message is the same object every call (so warm calls stay warm)."""
        if system is None:
            return messages
        if messages and messages[0].role == "system" and messages[0].text == system:
            return messages
        msg: Message | None = self._recall(self._systems, system)
        if msg is None:
            msg = Message("system", (TextBlock(system),))
            self._remember(self._systems, system, msg, limit=32)
        return [msg, *messages]

    def _tools(self, tools: Any) -> tuple[list[Mapping[str, Any]] | None, str]:
        """``check_tools(tools) or None`` and the tools' JSON text (what the overhead is cached
        by). A set seen recently (the same content, by its marshal image) gives back what it gave
        then, a private read-only copy, without being checked and serialised again."""
        if not tools:
            return check_tools(tools) or None, ""
        try:
            image: bytes | None = marshal.dumps(tools, 2)
        except (ValueError, TypeError):  # not plain lists and dicts: checked every time
            image = None
        if image is not None:
            known: tuple[list[Mapping[str, Any]], str] | None = self._recall(self._tool_sets, image)
            if known is not None:
                return known
        checked = check_tools(tools) or None  # raises FormatError naming a bad definition
        if checked is None:
            return None, ""
        key = json.dumps(checked, sort_keys=True, default=str)
        if image is None:
            return checked, key
        own: list[Mapping[str, Any]] = list(marshal.loads(image))
        self._remember(self._tool_sets, image, (own, key))
        return own, key

    def _overhead(self, counter: TokenCounter, tools: Any, key: str | None = None) -> int:
        """Tokens of the tool definitions and reply priming, cached by the tools' JSON text."""
        if key is None:
            key = json.dumps(list(tools), sort_keys=True, default=str) if tools else ""
        cached: int | None = self._recall(self._overheads, (counter.name, key))
        if cached is None:
            cached = counter.count_messages([], tools=list(tools) if tools else None)
            self._remember(self._overheads, (counter.name, key), cached)
        return cached

    # -- the table of conversations ------------------------------------------------------------
    def _find(
        self, key: str, messages: Sequence[Message], counter_name: str, explicit: bool
    ) -> Conversation:
        """The conversation ``messages`` continue, or a new one. Agents that
        share a system prompt, tools and task share a key: each gets a log of its own, ``key``,
        ``key#2``... (at most :data:`MAX_BRANCHES`); the one continued furthest is used. An
        explicit ``conversation=`` id has one log."""
        ids = [key] if explicit else [key, *(f"{key}#{n}" for n in range(2, MAX_BRANCHES + 1))]
        best: Conversation | None = None
        best_at = -1
        free: str | None = None
        with self._lock:
            for cid in ids:
                conv = self._conversations.get(cid)
                if conv is None:
                    if free is None:
                        free = cid
                    if self.log_store is None:
                        break  # branches are taken in order: none further
                    continue
                if conv.counter_name != counter_name:
                    continue
                at = len(conv.inputs) if conv.exact(messages) else conv.continuation(messages)
                if at is not None and at > best_at:
                    best, best_at = conv, at
            if best is None and free is None:  # every branch taken: the least recently used goes
                free = next(cid for cid in self._conversations if cid in set(ids))
        if best is None and self.log_store is not None:
            for cid in ids:  # another process may have written this conversation's log
                record = self.log_store.get_log(cid)
                if record is None:
                    break
                if Conversation.record_continues(record, messages) is not None:
                    best = Conversation(cid, counter_name, self.config)
                    break
        if best is None:
            assert free is not None
            best = Conversation(free, counter_name, self.config)
        with self._lock:
            self._conversations.setdefault(best.key, best)
            self._conversations.move_to_end(best.key)
            while len(self._conversations) > MAX_CONVERSATIONS:
                self._conversations.popitem(last=False)
        return best

    def _enter(self, call: Call) -> None:
        """Under the conversation's lock: make sure ``call.conv`` is the conversation the call
        continues (another thread or process may have moved it on) and as the request spells
        its history."""
        conv, msgs = call.conv, call.messages
        made: Conversation | None = None
        record = self.log_store.get_log(conv.key) if self.log_store is not None else None
        try:
            if record is not None and int(record.get("calls", 0)) > conv.calls:
                at = Conversation.record_continues(record, msgs)
                made = conv.restore(call, record, at) if at is not None else None
                if made is None:
                    made = Conversation(conv.key, conv.counter_name, self.config)
            elif not conv.exact(msgs):
                at = conv.continuation(msgs)
                if at is None:
                    made = Conversation(conv.key, conv.counter_name, self.config)
                else:
                    made = conv.rebuilt(call, at)
        except Diverged:
            made = Conversation(conv.key, conv.counter_name, self.config)
        if made is not None:
            made.lock = conv.lock
            with self._lock:
                self._conversations[conv.key] = made
            call.conv = made

    def edit_log(self, conversation: str) -> tuple[Edit, ...]:
        """The edits recorded for ``conversation`` (a :attr:`TransformResult.conversation`)."""
        with self._lock:
            conv = self._conversations.get(conversation)
        return tuple(conv.edits) if conv is not None else ()

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
        passes one that asks its upstream with the calling client's credentials). Raises
        :class:`~contextwarden.FormatError` naming the index of an item that is not a
        :class:`Message`, :class:`~contextwarden.UnknownModelError` for an unknown model
        without a window.
        """
        call = self._begin(messages, model, window, system, tools, conversation, focus, summarizer)
        with call.conv.lock:
            hook = self._plan(call, now, force_compact, allow_compaction)
            if hook is not None:
                call.conv.record_compaction(
                    call, hook.compact(call.conv.view, **self._hook_options(call)), force_compact
                )
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
    ) -> TransformResult:
        """:meth:`transform` for async code: a compaction awaits the compactor's ``acompact``
        when it has one (else runs ``compact`` in a worker thread)."""
        call = self._begin(messages, model, window, system, tools, conversation, focus, summarizer)
        lock = call.conv.lock
        # a thread waits for the lock, not the event loop (another coroutine may hold it)
        await asyncio.to_thread(lock.acquire)
        try:
            hook = self._plan(call, now, force_compact, allow_compaction)
            if hook is not None:
                options = self._hook_options(call)
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
        """Seed 002's recovery after a context overflow: compact now with the full summary
        (the system prompt gains a summary hint, the original question is kept)."""
        base = self.compactor if isinstance(self.compactor, Compactor) else None
        cfg = self.config.compaction.model_copy(update={"strategy_order": {}, "fallback_order": []})
        rebuilder = Compactor(
            cfg, summarizer=base.summarizer if base is not None else None, hint_system=True
        )
        call = self._begin(messages, model, window, system, tools, conversation, None, None)
        with call.conv.lock:
            self._enter(call)
            call.conv.prepare(call, None)
            budget = call.ctx.budget
            if budget is not None:
                compaction = rebuilder.compact(
                    call.conv.view,
                    budget=budget,
                    counter=call.ctx.counter,
                    tools=call.ctx.tools,
                    focus=None,
                    force=True,
                    events=call.compactor_events,
                )
                call.conv.record_compaction(call, compaction, True)
            return self._finish(call, None)

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
    ) -> Call:
        if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
            raise FormatError(
                f"messages must be a sequence of Message, got {type(messages).__name__}"
            )
        if model is not None and not isinstance(model, str):
            raise ConfigError(f"model must be a model name (str), got {type(model).__name__}")
        if conversation is not None and not isinstance(conversation, str):
            raise ConfigError(f"conversation must be a str id, got {type(conversation).__name__}")
        tools_list, tools_key = self._tools(tools)
        counter = self.counter_for(model)
        budget = self.budget_for(model, window)
        msgs = self._with_system(messages, system)
        check_messages(msgs)
        history, tail = split_tail(msgs)
        key = conversation if conversation is not None else conversation_key(history, tools_list)
        conv = self._find(key, history, counter.name, explicit=conversation is not None)
        return Call(
            history,
            LayerContext(counter, self.config, budget, tools_list),
            conv,
            self._overhead(counter, tools_list, tools_key),
            self.rates_for(model),
            tail=tail,
            tail_tokens=sum(counter.count_message(m) for m in tail),
            focus=focus,
            summarizer=summarizer,
        )

    def _plan(self, call: Call, now: float | None, force: bool, allow: bool) -> Any:
        """Continue the conversation, append and make the lossless edits; the compaction hook
        to run now, if any (else a window cut was made if one was due)."""
        self._enter(call)
        call.conv.prepare(call, now)
        if not (call.must_compact or force) or call.ctx.budget is None:
            return None
        if self.compactor is None or not allow or not self.config.compaction.enabled:
            call.conv.window_cut(call)
            return None
        return self.compactor

    def _hook_options(self, call: Call) -> dict[str, Any]:
        options: dict[str, Any] = dict(
            budget=call.ctx.budget, counter=call.ctx.counter, tools=call.ctx.tools, focus=call.focus
        )
        if self._hook_takes["force"]:
            options["force"] = True  # the warden decided: over the target after the lossless edits
        if self._hook_takes["events"]:
            options["events"] = call.compactor_events
        if call.summarizer is not None and self._hook_takes["summarizer"]:
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
            if budget is not None and total + call.tail_tokens > budget.trigger:
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
            check_messages(result.messages)
            call.events.extend(result.events)
            view = result.messages
            total = ctx.request_tokens(view)
        if call.tail:  # the request's own reminder, last, as it came
            view = [*view, *call.tail]
            total += call.tail_tokens
        conv.calls += 1
        conv.last_time = time.time() if now is None else now
        if self.log_store is not None:
            self.log_store.put_log(conv.key, conv.record())
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
        )
        shared = type(messages) is ImagedList  # see transform_openai
        system_out, out = self._codec.to_anthropic(result.messages, shared=shared)
        if cache_breakpoints:
            leading = sum(1 for m in result.messages if m.role == "system")
            stable = result.stable_prefix - leading
            system_out, out, _ = add_cache_breakpoints(
                system_out,
                out,
                tools=list(tools) if tools else None,
                # to_anthropic may merge messages: past the end means "no stable mark"
                stable_end=(max(stable, 0) or None) if stable < len(out) else None,
            )
        return system_out, out, result
