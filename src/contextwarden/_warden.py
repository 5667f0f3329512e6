"""The Warden: one edit log per conversation, and the request each call sends (DESIGN.md).

A conversation's working context is the agent's history (never mutated) plus the log of
:class:`~contextwarden._log.Edit` records the warden made for it; the request is a pure function
of the two (:func:`~contextwarden._log.apply`). One call of :meth:`Warden.transform`:

1. finds the conversation (an explicit ``conversation=`` id, else its system prompt, tool
   definitions and first user message) and checks that the history extends the one its log was
   built on; a history that does not (edited, branched) starts a new log, never another's;
2. appends the new messages to the view as they are, a huge tool output cut once, when it enters
   (seed 004 L1);
3. asks the policy (:mod:`contextwarden._policy`) whether to add edits: over the trigger it
   must (mask and strip old content, then compaction or a window cut down to the target), else
   a mask/strip batch is made when it pays for itself in cache reads or the cache has gone cold;
4. the final guard: tool calls left unanswered at the very end are removed, and a request still
   over the trigger (the newest message alone too large) is cut for this call only.

Between edits the request for call k+1 begins with the request for call k, byte for byte, so a
provider's prompt cache reads it. A warm call (no new edit) costs about the new messages.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._budget import Budget
from ._config import WardenConfig
from ._events import CompactResult, Event, emit
from ._exceptions import ConfigError
from ._log import Edit, EditReason, Source, apply, conversation_key
from ._messages import Message, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock
from ._policy import CacheRates, edit_pays, rates_for
from .layers.base import Layer, LayerContext, LayerResult, check_messages
from .layers.mask import mask_message
from .layers.pending import drop_open_calls, pending_calls, repair_tail
from .layers.repair import RepairState, repair_appended
from .layers.thinking import strip_message
from .layers.truncate import needs_truncation, truncate_message
from .layers.window import ensure_within, sliding_window

if TYPE_CHECKING:
    from ._tokens import TokenCounter
    from .formats._prefix import PrefixCodec

__all__ = ["CompactionHook", "TransformResult", "Warden"]

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


def _ref(messages: Sequence[Message]) -> str:
    h = hashlib.blake2b(digest_size=8)
    for m in messages:
        h.update(m.fingerprint.encode())
        h.update(b"\x00")
    return "cw:" + h.hexdigest()


class _Conversation:
    """One conversation's state: the history seen, its entry form, the log and the view."""

    def __init__(self, key: str, counter_name: str) -> None:
        self.key = key
        self.counter_name = counter_name
        self.inputs: list[Message] = []  # the agent's messages, as given
        self.base: list[Message] = []  # the same, huge tool output cut on entry
        self.names: list[tuple[str, ...]] = []  # tool names of each message's results
        self.call_names: dict[str, str] = {}
        self.edits: list[Edit] = []
        self.view: list[Message] = []
        self.sources: list[Source] = []
        self.tokens: list[int] = []  # per view message
        self.input_tokens = 0
        self.mask_upto = -1
        self.strip_upto = -1
        self.results: list[int] = []  # history positions holding tool results, in order
        self.thinking: list[int] = []  # history positions of assistant messages with thinking
        self.last_user = -1
        self.masked: dict[int, Message] = {}
        self.stripped: dict[int, Message] = {}
        self.gains: dict[tuple[str, int], int] = {}
        self.positions: dict[int, int] | None = None  # history position -> view position
        self.repair = RepairState()  # what the history so far leaves open (ids, calls)
        self.calls = 0
        self.last_time: float | None = None
        self.lock = threading.Lock()

    def position(self, i: int) -> int | None:
        """Where history message ``i`` stands in the view (None when an edit removed it)."""
        if self.positions is None:
            self.positions = {s: p for p, s in enumerate(self.sources) if isinstance(s, int)}
        return self.positions.get(i)

    def extends(self, messages: Sequence[Message]) -> bool:
        n = len(self.inputs)
        # list equality compares the same objects without calling __eq__: microseconds for an
        # agent's own list; equal messages rebuilt from provider dicts match too
        return len(messages) >= n and list(messages[:n]) == self.inputs


class Warden:
    """Keeps a history inside the model's window, cheaply. Configure once, call before every
    LLM call with the agent's whole history.

    ``Warden()`` gives the full defaults: truncation of huge tool output, cache-aware masking of
    old tool results and stripping of old thinking, compaction with the embedded extractive
    summarizer, and the window. ``config`` configures all of it; ``summarizer`` and
    ``strategies`` customise the compaction engine built from ``config.compaction``;
    ``compactor`` replaces that engine with your own :class:`CompactionHook`; ``layers`` are
    extra guard layers run on the request at the end of every call; ``counter`` replaces the
    token counter. Thread-safe: calls of different conversations run in parallel, calls of one
    conversation one at a time. The window for a call is ``window=`` if given, else
    ``config.context_window``, else the model registry's figure; with none of them only the
    lossless edits run.
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
            from ._compaction import Compactor

            if summarizer is None and self.config.summarizer.provider != "extractive":
                from .summarizers.config import build_summarizer

                summarizer = build_summarizer(
                    self.config.summarizer, max_chars=self.config.compaction.summary_max_chars
                )
            self.compactor = Compactor(
                self.config.compaction, summarizer=summarizer, strategies=strategies
            )
        else:
            self.compactor = None
        self.layers = tuple(layers)
        from ._models import apply_model_overrides

        #: the config's ``models:`` section, consulted before the registry
        self.models = apply_model_overrides(self.config)
        self._lock = threading.Lock()  # guards the tables below, never held during a call
        self._counters: dict[str | None, TokenCounter] = {}
        self._budgets: dict[tuple[str | None, int | None], Budget] = {}
        self._rates: dict[str | None, CacheRates] = {}
        self._systems: dict[str, Message] = {}
        self._overheads: dict[tuple[str, str], int] = {}
        self._tool_sets: dict[bytes, tuple[list[Mapping[str, Any]], str]] = {}
        self._prefix_codec: PrefixCodec | None = None  # made on first use (formats imported)
        self._conversations: OrderedDict[str, _Conversation] = OrderedDict()

    # -- resolution --------------------------------------------------------------------------
    def counter_for(self, model: str | None = None) -> TokenCounter:
        """The counter used for ``model`` (the one given at construction, if any)."""
        if self.counter is not None:
            return self.counter
        model = model or self.config.model
        counter: TokenCounter | None = self._recall(self._counters, model)
        if counter is None:
            from ._tokens import get_counter

            counter = get_counter(model, kind=self.config.counter)
            self._remember(self._counters, model, counter)
        return counter

    # The tables below are small LRUs (a dict keeps its insertion order: a hit moves the entry
    # to the end, the first one goes when full), so a flood of model names, windows or tool
    # sets never pushes out the ones every call uses.
    def _recall(self, table: dict[Any, Any], key: Any) -> Any:
        """``table[key]``, now the most recently used, or None."""
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
        key = (model, window)
        budget: Budget | None = self._recall(self._budgets, key)
        if budget is None:
            cfg = self.config
            explicit = "reserve_tokens" in cfg.model_fields_set
            budget = Budget.for_model(
                model,
                window,
                reserve=cfg.reserve_tokens if explicit else None,
                trigger_ratio=cfg.trigger_ratio,
                target_ratio=cfg.target_ratio,
                overrides=self.models,
            )
            self._remember(self._budgets, key, budget)
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

    def _overhead(
        self,
        counter: TokenCounter,
        tools: Sequence[Mapping[str, Any]] | None,
        key: str | None = None,
    ) -> int:
        """Tokens of the tool definitions and reply priming, cached by the tools' content
        (``key``: their JSON text, as :meth:`_tools` gives it)."""
        if key is None:
            key = json.dumps(list(tools), sort_keys=True, default=str) if tools else ""
        cached: int | None = self._recall(self._overheads, (counter.name, key))
        if cached is None:
            cached = counter.count_messages([], tools=list(tools) if tools else None)
            self._remember(self._overheads, (counter.name, key), cached)
        return cached

    def _tools(self, tools: Any) -> tuple[list[Mapping[str, Any]] | None, str]:
        """``check_tools(tools) or None``, and the JSON text of the tools (what the overhead is
        cached by). An agent sends the same tools on every call: a set seen recently (the same
        exact content, by its marshal image) gives back what it gave then, a private read-only
        copy, without being checked and serialised again (half a millisecond for 20 tools)."""
        import marshal

        from .formats import check_tools

        if not tools:
            return check_tools(tools) or None, ""
        try:
            image: bytes | None = marshal.dumps(tools, 2)
        except (ValueError, TypeError):  # not plain lists and dicts: checked every time
            image = None
        table = self._tool_sets
        if image is not None:
            known: tuple[list[Mapping[str, Any]], str] | None = self._recall(table, image)
            if known is not None:
                return known
        checked = check_tools(tools) or None  # raises FormatError naming a bad definition
        if checked is None:
            return None, ""
        key = json.dumps(checked, sort_keys=True, default=str)
        if image is None:
            return checked, key
        own: list[Mapping[str, Any]] = list(marshal.loads(image))
        self._remember(table, image, (own, key))
        return own, key

    def _conversation(
        self, key: str, messages: Sequence[Message], counter_name: str, explicit: bool = False
    ) -> _Conversation:
        """The log ``messages`` extend. Agents that share a system prompt, tools and task (the
        same job run several times, at different points) share a key: each gets a log of its
        own, ``key``, ``key#2``... (at most :data:`MAX_BRANCHES`), the longest one the history
        extends is used. An explicit ``conversation=`` id has one log: a history that does not
        extend it starts it anew."""
        with self._lock:
            best: _Conversation | None = None
            free: str | None = None
            ids = [key] if explicit else [key, *(f"{key}#{n}" for n in range(2, MAX_BRANCHES + 1))]
            for cid in ids:
                conv = self._conversations.get(cid)
                if conv is None:
                    free = free or cid
                elif (
                    conv.counter_name == counter_name
                    and conv.extends(messages)
                    and (best is None or len(conv.inputs) > len(best.inputs))
                ):
                    best = conv
            if best is not None:
                self._conversations.move_to_end(best.key)
                return best
            if free is None:  # every branch taken: the least recently used one starts anew
                taken = set(ids)
                free = next(cid for cid in self._conversations if cid in taken)
            conv = _Conversation(free, counter_name)
            self._conversations[free] = conv
            self._conversations.move_to_end(free)
            while len(self._conversations) > MAX_CONVERSATIONS:
                self._conversations.popitem(last=False)
            return conv

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
            request = self._plan(call, now, force_compact, allow_compaction)
            if request is not None:
                compaction = request[0].compact(call.conv.view, **request[1])
                self._record_compaction(call, compaction, force_compact)
            return self._finish(call, now)

    def _plan(
        self, call: _Call, now: float | None, force: bool, allow: bool
    ) -> tuple[CompactionHook, dict[str, Any]] | None:
        """Append and make the lossless edits; the compaction to run now, if any."""
        self._prepare(call, now)
        if not (call.must_compact or force):
            return None
        return self._compaction_request(call, force, allow)

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
            request = self._plan(call, now, force_compact, allow_compaction)
            if request is not None:
                hook, kwargs = request
                acompact = getattr(hook, "acompact", None)
                if acompact is not None and asyncio.iscoroutinefunction(acompact):
                    compaction = await acompact(call.conv.view, **kwargs)
                else:
                    compaction = await asyncio.to_thread(hook.compact, call.conv.view, **kwargs)
                self._record_compaction(call, compaction, force_compact)
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
        from ._compaction import Compactor

        base = self.compactor if isinstance(self.compactor, Compactor) else None
        cfg = self.config.compaction.model_copy(update={"strategy_order": {}, "fallback_order": []})
        rebuilder = Compactor(
            cfg, summarizer=base.summarizer if base is not None else None, hint_system=True
        )
        saved = self.compactor
        try:
            self.compactor = rebuilder
            return self.transform(
                messages,
                model=model,
                window=window,
                system=system,
                tools=tools,
                force_compact=True,
                conversation=conversation,
            )
        finally:
            self.compactor = saved

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
    ) -> _Call:
        if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
            from ._exceptions import FormatError

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
        key = conversation if conversation is not None else conversation_key(msgs, tools_list)
        conv = self._conversation(key, msgs, counter.name, explicit=conversation is not None)
        ctx = LayerContext(counter, self.config, budget, tools_list)
        overhead = self._overhead(counter, tools_list, tools_key)
        rates = self.rates_for(model)
        return _Call(msgs, ctx, conv, overhead, rates, focus=focus, summarizer=summarizer)

    def _prepare(self, call: _Call, now: float | None) -> None:
        """Append the new messages, then make the policy's lossless edits."""
        conv, ctx = call.conv, call.ctx
        if not conv.extends(call.messages):  # another thread moved it on: start over
            fresh = _Conversation(conv.key, conv.counter_name)
            with self._lock:
                self._conversations[conv.key] = fresh
            fresh.lock = conv.lock
            call.conv = conv = fresh
        start = len(conv.inputs)
        call.new_start = len(conv.view)
        self._append(call, start)
        budget = ctx.budget
        total = call.total
        cold = (
            call.rates.caching
            and call.rates.ttl_s is not None
            and conv.last_time is not None
            and (time.time() if now is None else now) - conv.last_time > call.rates.ttl_s
        )
        must = budget is not None and total > budget.trigger
        reason: EditReason = "must" if must else ("free" if cold else "pays")
        if not call.rates.caching and not must:
            reason = "immediate"
        self._lossless_edit(call, reason)
        if must and budget is not None:
            # over the trigger: cut to the target now, not just under the trigger, so the next
            # calls only append instead of trimming a little on every call
            from .strategies.base import compaction_target

            # (a window cut, which loses what it drops, waits until the lossless edits are not
            # enough: over the trigger)
            summarises = self.compactor is not None and self.config.compaction.enabled
            call.must_compact = call.total > (
                compaction_target(budget) if summarises else budget.trigger
            )

    def _append(self, call: _Call, start: int) -> None:
        conv, ctx = call.conv, call.ctx
        msgs = call.messages
        check_messages(msgs, start)
        count = ctx.counter.count_message
        cfg = self.config.truncate
        for i in range(start, len(msgs)):
            m = msgs[i]
            conv.inputs.append(m)
            conv.input_tokens += count(m)
            names: list[str] = []
            for b in m.content:
                if isinstance(b, ToolCallBlock):
                    conv.call_names[b.id] = b.name
                elif isinstance(b, ToolResultBlock):
                    names.append(conv.call_names.get(b.tool_call_id, ""))
            conv.names.append(tuple(names))
            if names:
                conv.results.append(i)
            if m.role == "user" and not names:
                conv.last_user = i
            if m.role == "assistant" and any(isinstance(b, ThinkingBlock) for b in m.content):
                conv.thinking.append(i)
            entry = self._repair(call, i, m)
            if entry is None:  # a repair took it out: it stays in the history, not the view
                conv.base.append(m)
                continue
            if not entry.is_pinned and needs_truncation(entry, cfg):
                entry, events = truncate_message(entry, tuple(names), ctx)
                for e in events:
                    emit(call.events, _at(e, len(conv.view)))
            conv.base.append(entry)
            if conv.positions is not None:
                conv.positions[i] = len(conv.view)
            conv.view.append(entry)
            conv.sources.append(i)
            conv.tokens.append(count(entry))
        call.total = sum(conv.tokens) + call.overhead
        call.tokens_before = conv.input_tokens + call.overhead

    def _repair(self, call: _Call, i: int, m: Message) -> Message | None:
        """History message ``i`` as it enters the view, repaired (see :mod:`.layers.repair`):
        the same object when nothing is wrong, a fixed copy (ids made unique, an empty user
        message given a placeholder), or None when it is taken out (a result without its call).
        Synthetic results closing calls left unanswered before it are recorded as a ``repair``
        edit and put in the view first. Raises FormatError under ``config.strict``."""
        conv = call.conv
        out, events, _ = repair_appended(
            call.messages, i, conv.repair, strict=self.config.strict, stop=i + 1
        )
        if not events:
            return m
        call.events.extend(events)
        if m.role == "tool" and len(out) <= 1 and all(x.role == "tool" for x in out):
            # a tool message kept as one (or dropped) closes no turn: out is its own repair
            synthetic: list[Message] = []
            entry = out[0] if out else None
        else:  # synthetic results (tool messages) before the message itself, if it stays
            synthetic = [x for x in out if x.role == "tool"]
            rest = [x for x in out if x.role != "tool"]
            entry = rest[0] if rest else None
        if synthetic or entry is None:
            number = len(conv.edits)
            edit = Edit(
                "repair",
                "must",
                removed=((i, i + 1),) if entry is None else (),
                inserted=tuple((i, s) for s in synthetic),
                call=conv.calls,
            )
            conv.edits.append(edit)
            call.edits.append(edit)
            count = call.ctx.counter.count_message
            for k, s in enumerate(synthetic):
                conv.view.append(s)
                conv.sources.append((number, k))
                conv.tokens.append(count(s))
        return entry

    # -- lossless edits: mask and strip, batched ---------------------------------------------
    def _mask(self, call: _Call, i: int, m: Message) -> Message:
        conv = call.conv
        done = conv.masked.get(i)
        if done is None:
            names = conv.names[i]
            if not names or m.is_pinned or not self.config.mask.enabled:
                done = m
            else:
                # the marker names the reference the original is kept under (TransformResult.elided)
                ref = _ref((conv.inputs[i],))
                done = mask_message(m, (len(names), names), call.ctx, ref)[0]
            conv.masked[i] = done
        return done

    def _strip(self, call: _Call, i: int, m: Message) -> Message:
        conv = call.conv
        done = conv.stripped.get(i)
        if done is None:
            if m.role != "assistant" or m.is_pinned or not self.config.thinking.enabled:
                done = m
            else:
                done = strip_message(m, call.ctx)[0]
            conv.stripped[i] = done
        return done

    def _frontiers(self, call: _Call) -> tuple[int, int]:
        """How far a mask and a strip may reach now: all but the ``keep_recent`` newest tool
        results; all but the ``keep_recent`` newest assistant messages with thinking (and, with
        ``keep_current_turn``, nothing after the last user message)."""
        conv, cfg = call.conv, self.config
        keep = cfg.mask.keep_recent
        mask_to = -1
        if cfg.mask.enabled:
            kept = 0
            for pos in reversed(conv.results):
                kept += len(conv.names[pos])
                if kept > keep:
                    mask_to = pos
                    break
        strip_to = -1
        if cfg.thinking.enabled and len(conv.thinking) > cfg.thinking.keep_recent:
            strip_to = conv.thinking[len(conv.thinking) - cfg.thinking.keep_recent - 1]
            if cfg.thinking.keep_current_turn:
                strip_to = min(strip_to, conv.last_user - 1)
        return mask_to, strip_to

    def _gain(self, call: _Call, i: int, p: int, kind: str) -> int:
        """Tokens a mask (or strip) of history message ``i``, at view position ``p``, removes."""
        conv = call.conv
        key = (kind, i)
        gain = conv.gains.get(key)
        if gain is None:
            m = conv.view[p]
            after = self._mask(call, i, m) if kind == "mask" else self._strip(call, i, m)
            gain = conv.tokens[p] - call.ctx.counter.count_message(after) if after is not m else 0
            conv.gains[key] = gain
        return gain

    def _lossless_edit(self, call: _Call, reason: EditReason) -> None:
        """Add one mask and/or strip edit when the policy says so (see :mod:`._policy`)."""
        conv = call.conv
        mask_to, strip_to = self._frontiers(call)
        if mask_to <= conv.mask_upto and strip_to <= conv.strip_upto:
            return
        removed = 0
        first: int | None = None
        for kind, done, upto, positions in (
            ("mask", conv.mask_upto, mask_to, conv.results),
            ("strip", conv.strip_upto, strip_to, conv.thinking),
        ):
            for i in reversed(positions):
                if i <= done:
                    break
                if i > upto:
                    continue
                p = conv.position(i)
                if p is None:
                    continue
                gain = self._gain(call, i, p, kind)
                if gain > 0:
                    removed += gain
                    first = p if first is None else min(first, p)
        if first is None or removed <= 0:
            return
        if reason == "pays":
            rewritten = sum(conv.tokens[first:]) - removed
            new_tokens = sum(conv.tokens[call.new_start :])
            if not edit_pays(
                removed, rewritten, new_tokens, conv.calls, call.rates, self.config.policy
            ):
                return
        elif reason == "immediate" and not edit_pays(
            removed, 0, 0, conv.calls, call.rates, self.config.policy
        ):
            return
        before = call.total
        new_edits: list[Edit] = []
        if mask_to > conv.mask_upto:
            new_edits.append(Edit("mask", reason, upto=mask_to, call=conv.calls))
        if strip_to > conv.strip_upto:
            new_edits.append(Edit("strip_thinking", reason, upto=strip_to, call=conv.calls))
        self._commit(call, new_edits, first)
        for e in new_edits:
            object.__setattr__(e, "tokens_before", before)
            object.__setattr__(e, "tokens_after", call.total)
        originals = {
            _ref((conv.inputs[s],)): (conv.inputs[s],)
            for p, s in enumerate(conv.sources[first:], first)
            if isinstance(s, int) and conv.view[p] is not conv.base[s]
        }
        call.elided.update(originals)
        kinds = " and ".join(
            "masked" if e.kind == "mask" else "thinking stripped" for e in new_edits
        )
        emit(
            call.events,
            Event(
                "masked" if new_edits[0].kind == "mask" else "thinking_stripped",
                "policy",
                first,
                None,
                before,
                call.total,
                detail=f"{kinds} up to history message {max(mask_to, strip_to)} ({reason}): "
                f"{before - call.total} tokens removed",
                data={"reason": reason, "refs": tuple(originals)},
            ),
        )

    def _commit(self, call: _Call, edits: Sequence[Edit], first: int = 0) -> None:
        """Append ``edits`` to the log and rebuild the view from the history and the log
        (token counts are reused before ``first``, the first view position they may change)."""
        conv = call.conv
        conv.edits.extend(edits)
        for e in edits:
            if e.kind == "mask":
                conv.mask_upto = max(conv.mask_upto, e.upto)
            elif e.kind == "strip_thinking":
                conv.strip_upto = max(conv.strip_upto, e.upto)
        call.edits.extend(edits)
        view, sources = apply(
            conv.base,
            conv.edits,
            mask=lambda i, m: self._mask(call, i, m),
            strip=lambda i, m: self._strip(call, i, m),
        )
        count = call.ctx.counter.count_message
        old_view, old_tokens = conv.view, conv.tokens
        same = 0
        limit = min(first, len(view), len(old_view))
        while same < limit and view[same] is old_view[same]:
            same += 1
        known = {id(m): t for m, t in zip(old_view[same:], old_tokens[same:], strict=True)}
        conv.view, conv.sources = view, sources
        conv.tokens = old_tokens[:same] + [
            t if (t := known.get(id(m))) is not None else count(m) for m in view[same:]
        ]
        conv.positions = None
        call.total = sum(conv.tokens) + call.overhead
        call.new_start = len(view)

    # -- compaction and window cuts ------------------------------------------------------------
    def _compaction_request(
        self, call: _Call, force: bool, allow: bool
    ) -> tuple[CompactionHook, dict[str, Any]] | None:
        """The hook and keywords for a compaction now, or None (then a window cut, if over)."""
        budget = call.ctx.budget
        if budget is None:
            return None
        if self.compactor is None or not allow or not self.config.compaction.enabled:
            self._window_cut(call)
            return None
        kwargs: dict[str, Any] = dict(
            budget=budget, counter=call.ctx.counter, tools=call.ctx.tools, focus=call.focus
        )
        if _accepts_force(self.compactor):
            kwargs["force"] = True  # the warden decided: over the target after the lossless edits
        if _accepts_events(self.compactor):
            kwargs["events"] = call.compactor_events
        if call.summarizer is not None and _accepts(self.compactor, "summarizer"):
            kwargs["summarizer"] = call.summarizer
        return self.compactor, kwargs

    def _record_compaction(self, call: _Call, result: CompactResult | None, forced: bool) -> None:
        conv = call.conv
        call.events.extend(call.compactor_events)
        budget = call.ctx.budget
        if result is not None:
            edit = _diff_edit(conv.view, conv.sources, result.new_messages, conv.inputs)
            if edit is not None:
                before = call.total
                edit = Edit(
                    "compaction",
                    "forced" if forced else "must",
                    removed=edit.removed,
                    inserted=edit.inserted,
                    replaced=edit.replaced,
                    dropped=edit.dropped,
                    ref=result.refs[-1] if result.refs else None,
                    strategy=result.strategy,
                    summary=result.summary,
                    summarizer=result.summarizer,
                    call=conv.calls,
                )
                hidden = self._hidden(conv, edit)
                self._commit(call, [edit])
                object.__setattr__(edit, "tokens_before", before)
                object.__setattr__(edit, "tokens_after", call.total)
                call.compaction = result
                if edit.ref is not None:
                    call.elided[edit.ref] = hidden
                    for ref in result.refs[:-1]:
                        call.elided.setdefault(ref, hidden)
                if not any(e.kind == "context_compacted" for e in call.compactor_events):
                    emit(
                        call.events,
                        Event(
                            "context_compacted",
                            "compaction",
                            None,
                            None,
                            before,
                            call.total,
                            detail=f"{result.strategy}: {len(hidden)} messages summarised, "
                            f"{1 - call.total / max(before, 1):.0%} saved",
                            compaction=result,
                        ),
                    )
        if budget is not None and call.total > budget.trigger:
            self._window_cut(call)

    @staticmethod
    def _hidden(conv: _Conversation, edit: Edit) -> tuple[Message, ...]:
        """The agent's original messages an edit takes out of the view."""
        out: list[Message] = []
        for start, end in edit.removed:
            out.extend(conv.inputs[start:end])
        return tuple(out)

    def _window_cut(self, call: _Call) -> None:
        """Seed 000 L3 / 004 L2 as an edit: drop whole oldest units (never the system prompt,
        the task, pinned content or the newest unit) until the request is at the target."""
        from .strategies.base import Layout, compaction_target

        conv, budget = call.conv, call.ctx.budget
        if budget is None or not self.config.window.enabled:
            return
        aim = compaction_target(budget)
        layout = Layout.of(conv.view)
        drop: list[int] = []
        excess = call.total - aim
        for start, end in layout.body():
            if excess <= 0:
                break
            if any(
                isinstance(s := conv.sources[p], tuple) and conv.edits[s[0]].kind == "compaction"
                for p in range(start, end)
            ):
                continue  # an earlier summary stays: it stands for what was cut before
            drop.extend(range(start, end))
            excess -= sum(conv.tokens[start:end])
        if not drop:
            return
        positions = sorted(s for p in drop if isinstance(s := conv.sources[p], int))
        before = call.total
        edit = Edit(
            "window_cut",
            "must",
            removed=_ranges(positions),
            ref=_ref([conv.inputs[i] for i in positions]),
            call=conv.calls,
        )
        hidden = self._hidden(conv, edit)
        self._commit(call, [edit])
        object.__setattr__(edit, "tokens_before", before)
        object.__setattr__(edit, "tokens_after", call.total)
        assert edit.ref is not None
        call.elided[edit.ref] = hidden
        emit(
            call.events,
            Event(
                "dropped",
                "window",
                None,
                None,
                before,
                call.total,
                detail=f"window cut: {len(positions)} oldest messages dropped to the target "
                f"({before} -> {call.total} tokens)",
                data={"ref": edit.ref},
            ),
        )

    # -- the final guard -----------------------------------------------------------------------
    def _finish(self, call: _Call, now: float | None) -> TransformResult:
        conv, ctx = call.conv, call.ctx
        view: Sequence[Message] = conv.view
        total = call.total
        newest_truncated = False
        budget = ctx.budget
        if self.config.window.enabled:
            j, pending = pending_calls(view)
            if pending:  # a recording's final state: calls not answered yet, which no API takes
                before = conv.tokens[j] if conv.view is view else ctx.counter.count_message(view[j])
                view, repaired = repair_tail(view, ctx)
                call.events.extend(repaired)
                after = ctx.counter.count_message(view[j]) if len(view) == len(conv.view) else 0
                total += after - before
            still_open = set(conv.repair.pending) - pending
            if still_open:  # a final turn split over several assistant messages
                view, repaired = drop_open_calls(view, frozenset(still_open), ctx)
                call.events.extend(repaired)
                total = ctx.request_tokens(view)
            if budget is not None and total > budget.trigger:
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
        conv.calls += 1
        conv.last_time = time.time() if now is None else now
        if budget is not None and self.config.window.enabled:
            ensure_within(view, ctx, total)  # ContextOverflowError: nothing left to cut
        return TransformResult(
            tuple(view),
            call.tokens_before,
            total,
            tuple(call.events),
            call.compaction,
            newest_truncated,
            budget,
            conv.key,
            tuple(call.edits),
            self._stable_prefix(conv),
            dict(call.elided),
        )

    @staticmethod
    def _stable_prefix(conv: _Conversation) -> int:
        """View messages before the first one a pending mask or strip would change."""
        frontier = max(conv.mask_upto, conv.strip_upto)
        for p, s in enumerate(conv.sources):
            if isinstance(s, int) and s > frontier and (conv.names[s] or s in conv.thinking):
                return p
        return len(conv.sources)

    # -- hooks and provider dicts ------------------------------------------------------------
    def _codec(self) -> PrefixCodec:
        """This warden's reader and writer of provider dicts: a conversation's known prefix is
        not read again (the same Message objects come back, so its log is found by identity),
        and a message is converted back once (then copied from its image)."""
        codec = self._prefix_codec
        if codec is None:
            from .formats._prefix import PrefixCodec

            with self._lock:
                if self._prefix_codec is None:
                    self._prefix_codec = PrefixCodec()
                codec = self._prefix_codec
        return codec

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
            from ._events import logger

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
        from .formats._prefix import ImagedList

        codec = self._codec()
        result = self.transform(
            codec.from_openai(messages),
            model=model,
            window=window,
            tools=tools,
            conversation=conversation,
            now=now,
            summarizer=summarizer,
        )
        # the proxy's reader (an ImagedList) only serialises what it gets: no copies for it
        shared = type(messages) is ImagedList
        return codec.to_openai(result.messages, shared=shared), result

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
        from .formats._prefix import ImagedList

        codec = self._codec()
        canonical = codec.from_anthropic(messages, system=system)
        result = self.transform(
            canonical,
            model=model,
            window=window,
            tools=tools,
            conversation=conversation,
            now=now,
            summarizer=summarizer,
        )
        shared = type(messages) is ImagedList  # see transform_openai
        system_out, out = codec.to_anthropic(result.messages, shared=shared)
        if cache_breakpoints:
            from .formats.cache_control import add_cache_breakpoints

            leading = sum(1 for m in result.messages if m.role == "system")
            system_out, out, _ = add_cache_breakpoints(
                system_out,
                out,
                tools=list(tools) if tools else None,
                # to_anthropic may merge messages: past the end means "no stable mark"
                stable_end=(max(result.stable_prefix - leading, 0) or None)
                if result.stable_prefix - leading < len(out)
                else None,
            )
        return system_out, out, result


@dataclass
class _Call:
    """One call's working state."""

    messages: Sequence[Message]
    ctx: LayerContext
    conv: _Conversation
    overhead: int
    rates: CacheRates
    total: int = 0
    tokens_before: int = 0
    new_start: int = 0
    must_compact: bool = False
    focus: str | None = None
    summarizer: Any = None
    events: list[Event] = field(default_factory=list)
    compactor_events: list[Event] = field(default_factory=list)
    edits: list[Edit] = field(default_factory=list)
    elided: dict[str, tuple[Message, ...]] = field(default_factory=dict)
    compaction: CompactResult | None = None


def _at(e: Event, index: int) -> Event:
    from dataclasses import replace

    return replace(e, index=index)


def _ranges(positions: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """Sorted positions as half-open ranges."""
    out: list[tuple[int, int]] = []
    for p in positions:
        if out and out[-1][1] == p:
            out[-1] = (out[-1][0], p + 1)
        else:
            out.append((p, p + 1))
    return tuple(out)


def _diff_edit(
    view: Sequence[Message],
    sources: Sequence[Source],
    new: Sequence[Message],
    history: Sequence[Message],
) -> Edit | None:
    """The compaction edit that turns ``view`` into ``new``: kept messages are the same objects;
    the others are removed, new ones inserted before the next kept history message (a new
    system message replaces the system message it stands for). None when nothing changed."""
    where = {id(m): p for p, m in enumerate(view)}
    kept = {where[id(m)] for m in new if id(m) in where}
    removed_pos = [p for p in range(len(view)) if p not in kept]
    removed_hist = [s for p in removed_pos if isinstance(s := sources[p], int)]
    dropped = sorted({s[0] for p in removed_pos if isinstance(s := sources[p], tuple)})
    inserted: list[tuple[int, Message]] = []
    replaced: list[tuple[int, Message]] = []
    systems = [s for s in removed_hist if view[sources.index(s)].role == "system"]
    pending: list[Message] = []
    for m in new:
        if id(m) in where:
            source = sources[where[id(m)]]
            if isinstance(source, int):
                inserted.extend((source, note) for note in pending)
                pending = []
            continue
        if m.role == "system" and systems:
            replaced.append((systems.pop(0), m))
        else:
            pending.append(m)
    inserted.extend((len(history), note) for note in pending)
    restored = {p for p, _ in replaced}
    removed_hist = [s for s in removed_hist if s not in restored]
    if not removed_hist and not inserted and not replaced and not dropped:
        return None
    return Edit(
        "compaction",
        removed=_ranges(sorted(removed_hist)),
        inserted=tuple(inserted),
        replaced=tuple(replaced),
        dropped=tuple(dropped),
    )


def takes_keyword(fn: object, name: str) -> bool:
    """Whether ``fn`` can be called with the keyword ``name`` (it names it or takes
    ``**kwargs``): how the warden, and the proxy, pass newer options to hooks written before."""
    import inspect

    try:
        params = inspect.signature(fn).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _accepts(hook: object, name: str) -> bool:
    return takes_keyword(getattr(hook, "compact", None), name)


def _accepts_force(hook: object) -> bool:
    return _accepts(hook, "force")


def _accepts_events(hook: object) -> bool:
    return _accepts(hook, "events")
