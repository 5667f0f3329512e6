"""The Warden: a table of conversations and the calls that run them (DESIGN.md).

A conversation's working context is the agent's history (never mutated) plus the log of
:class:`~contextwarden._log.Edit` records made for it; the request is a pure function of the two.
One call of :meth:`Warden.transform`: (1) splits off the request's trailing system messages (a
per-call reminder: sent, not kept); (2) finds the conversation whose history the request
continues, by content (an explicit ``conversation=`` id, else system prompt, tools and task; see
:mod:`contextwarden.context.conversation`; a history that rewrote what an edit stands on gets a log
of its own), reading a log store's log first; (3) appends the new messages (:mod:`.context.append`)
and lets the policy (:mod:`.context.decide`) add edits: over the trigger it must (mask and strip,
then compaction or a window cut down to the target), else a mask/strip batch when it pays for
itself or the cache has gone cold; (4) runs the final guard (:mod:`.context.guard`) and puts the
per-call tail back. Between edits the request for call k+1 begins with the request for call k, so
a provider's prompt cache reads it, and a warm call costs about the new messages.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

import contextwarden.context as context
import contextwarden.formats as formats

from ._events import logger
from ._log import conversation_key
from ._memo import CALL_BYTES, CALL_ENTRIES, Memo
from .context.call import Call, check_arguments
from .context.conversation import Conversation, split_tail
from .context.cuts import window_cut
from .context.guard import final_guard, run_layers
from .context.hook import HookCaller, takes_keyword
from .context.result import CompactionHook, TransformResult
from .layers.base import LayerContext, require_messages
from .layers.window import ensure_within

if TYPE_CHECKING:
    from ._budget import Budget
    from ._config import WardenConfig
    from ._log import Edit
    from ._messages import Message
    from ._models import ModelRegistry
    from ._policy import CacheRates
    from ._tokens import TokenCounter
    from .formats._prefix import PrefixCodec
    from .layers.base import Layer
    from .store.logs import LogStore

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
    calls of different conversations run in parallel, calls of one conversation one at a time.
    The window for a call is ``window=`` if given, else ``config.context_window``, else the
    model registry's figure; with none of them only the lossless edits run.
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
        self.counter, self.layers, self.log_store = counter, tuple(layers), log_store
        #: ``models``: the models this warden knows (``models``' and the config's ``models:``
        #: section's, then the built-in tables)
        self.config, self.compactor, self.models, self._hook, self._resolve, self._table = (
            context.build_parts(
                config,
                counter,
                compactor,
                summarizer,
                strategies,
                log_store,
                counter_cache,
                models,
                max_state_bytes,
            )
        )
        # made at the first provider-dict call: the formats cost a fifth of the import
        self._given_codec = codec

    @property
    def _codec(self) -> PrefixCodec:
        if self._given_codec is None:
            self._given_codec = formats.PrefixCodec()
        return self._given_codec

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
        summaries = getattr(getattr(self.compactor, "cache", None), "kept_bytes", 0)
        return (
            self._table.kept_bytes()
            + (self._given_codec.kept_bytes if self._given_codec is not None else 0)
            + self._resolve.cache_bytes()
            + (summaries if isinstance(summaries, int) else 0)
        )

    def forget(self, conversation: str) -> None:
        """Drop ``conversation``'s state from memory (its stored log, if any, stays), and the
        messages the codec keeps of the requests read (read again when needed)."""
        self._table.forget(conversation)
        if self._given_codec is not None:
            self._given_codec.clear()

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
        conv, call = self._begin(
            messages, model, window, system, tools, conversation, focus, summarizer, max_tokens
        )
        with conv.lock:
            return self._run(conv, call, now, force_compact, allow_compaction, self._hook)

    def _run(
        self,
        conv: Conversation,
        call: Call,
        now: float | None,
        force: bool,
        allow: bool,
        hook: HookCaller | None,
    ) -> TransformResult:
        conv, call, deferred, hook = self._plan(conv, call, now, force, allow, hook)
        if hook is not None:
            hook.run(conv, call, force)
        return self._finish(conv, call, now, deferred)

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
        conv, call = self._begin(
            messages, model, window, system, tools, conversation, focus, summarizer, max_tokens
        )
        import asyncio  # loaded already: the caller's event loop runs (importing it costs 20 ms)

        lock = conv.lock
        # a thread waits for the lock, not the event loop (another coroutine may hold it)
        await asyncio.to_thread(lock.acquire)
        try:
            conv, call, deferred, hook = self._plan(
                conv, call, now, force_compact, allow_compaction, self._hook
            )
            if hook is not None:
                await hook.arun(conv, call, force_compact)
            return self._finish(conv, call, now, deferred)
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
        conv, call = self._begin(messages, model, window, system, tools, conversation)
        with conv.lock:
            return self._run(
                conv, call, None, True, True, context.rebuilder(self.config, self.compactor)
            )

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
    ) -> tuple[Conversation, Call]:
        check_arguments(messages, model, conversation, max_tokens)
        msgs, tools_list, counter, budget, overhead, rates = self._resolve.call(
            messages, model, window, system, tools
        )
        try:  # checked after: only what the conversation does not hold yet needs it
            history, tail = split_tail(msgs)
            key = conversation_key(history, tools_list) if conversation is None else conversation
            conv, known = self._table.find(key, history, counter.name, conversation is not None)
        except Exception:  # an item that is not a Message fails here: the check names it
            require_messages(msgs)
            raise
        require_messages(msgs, known)
        return conv, Call(
            history,
            LayerContext(counter, self.config, budget, tools_list, Memo(CALL_ENTRIES, CALL_BYTES)),
            overhead,
            rates,
            tail=tail,
            tail_tokens=sum(counter.count_message(m) for m in tail),
            focus=focus,
            summarizer=summarizer,
            summary_calls=context.summary_calls(self.compactor, summarizer),
            max_tokens=max_tokens,
        )

    def _plan(
        self,
        conv: Conversation,
        call: Call,
        now: float | None,
        force: bool,
        allow: bool,
        hook: HookCaller | None,
    ) -> tuple[Conversation, Call, bool, HookCaller | None]:
        """Continue the conversation, append and make the lossless edits: the conversation, the
        call (with its reply reserve), whether the request was let wait over the trigger, and
        ``hook`` when a compaction is due now, else None (a window cut was made if one was
        due)."""
        conv = self._table.enter(conv, call)
        call, due = conv.prepare(call, now)
        if (due.compact or force) and call.ctx.budget is not None:
            if hook is not None and allow and self.config.compaction.enabled:
                return conv, call, due.deferred, hook
            window_cut(conv, call)
        return conv, call, due.deferred, None

    def _finish(
        self, conv: Conversation, call: Call, now: float | None, deferred: bool
    ) -> TransformResult:
        """The final guard (see the module docstring), then the result; the log is stored."""
        ctx, budget = call.ctx, call.ctx.budget
        view: Sequence[Message] = conv.view
        total, newest_truncated = conv.total, False
        if self.config.window.enabled:
            view, total, newest_truncated = final_guard(conv, call, deferred)
        if self.layers:
            view, total = run_layers(self.layers, view, call)
        if call.tail:  # the request's own reminder, last, as it came
            view = [*view, *call.tail]
            total += call.tail_tokens
        conv.calls += 1
        conv.last_time = time.time() if now is None else now
        self._table.close(conv, ctx)
        if budget is not None and self.config.window.enabled:
            ensure_within(view, ctx, total)  # ContextOverflowError: nothing left to cut
        return TransformResult(
            tuple(view),
            conv.input_tokens + call.overhead + call.tail_tokens,
            total,
            tuple(call.out.events),
            call.out.compaction,
            newest_truncated,
            budget,
            conv.key,
            tuple(call.out.edits),
            conv.stable_prefix(),
            dict(call.out.elided),
        )

    # -- hooks and provider dicts ------------------------------------------------------------
    async def transform_context(
        self, messages: Sequence[Message], signal: Any = None
    ) -> list[Message]:
        """A pi-agent-core style ``transformContext(messages, signal) -> messages`` hook for
        the configured model/window. Never raises (pi's contract): on an abort signal or any
        failure the messages come back as they were given."""
        if getattr(signal, "aborted", False) or getattr(signal, "is_set", bool)():
            return list(messages)  # an AbortSignal, or an Event, that is set
        try:
            result = await self.atransform(messages)
        except Exception:  # the hook must never break the agent's loop
            logger.exception("contextwarden: transform_context failed; history sent unchanged")
            return list(messages)
        return list(result.messages)

    def transform_openai(
        self, messages: list[dict[str, Any]], **options: Unpack[CallOptions]
    ) -> tuple[list[dict[str, Any]], TransformResult]:
        """OpenAI Chat Completions messages in, OpenAI messages out (plus the result);
        ``options`` as :meth:`transform` takes them."""
        result = self.transform(self._codec.from_openai(messages), **options)
        # the proxy's reader only serialises: no copies
        shared = type(messages) is formats.ImagedList
        return self._codec.to_openai(result.messages, shared=shared), result

    def transform_anthropic(
        self,
        messages: list[dict[str, Any]],
        *,
        system: Any = None,
        cache_breakpoints: bool = False,
        **options: Unpack[CallOptions],
    ) -> tuple[Any, list[dict[str, Any]], TransformResult]:
        """Anthropic Messages in (``system`` a string or blocks), the same out: ``(system,
        messages, result)``. ``cache_breakpoints`` puts ``cache_control`` on the end of the
        stable prefix and on the newest message (at most 4 in all, the client's own kept). The
        messages before the last server ``compaction`` block go back as they came, neither
        counted nor reduced: the provider reads the history from that block on."""
        shared = type(messages) is formats.ImagedList  # see transform_openai
        at = formats.compaction_block_at(messages) or 0
        read = self._codec.from_anthropic(messages[at:] if at else messages, system=system)
        result = self.transform(read, **options)
        system_out, out = self._codec.to_anthropic(result.messages, shared=shared)
        if cache_breakpoints:
            tools = options.get("tools")
            end = result.stable_end(len(out))
            system_out, out, _ = formats.add_cache_breakpoints(
                system_out, out, tools=list(tools) if tools else None, stable_end=end
            )
        return system_out, [*messages[:at], *out] if at else out, result

    def transform_responses(
        self,
        items: list[dict[str, Any]],
        *,
        instructions: Any = None,
        **options: Unpack[CallOptions],
    ) -> tuple[Any, list[dict[str, Any]], TransformResult]:
        """OpenAI Responses ``input`` items in, the same out: ``(instructions, items, result)``.
        The items before the last ``compaction`` item go back as they came, neither counted nor
        reduced (the item carries them); a trailing ``compaction_trigger`` stays last, and the
        call makes no compaction of its own (the provider is asked to make one)."""
        at = formats.compaction_item_at(items) or 0
        trigger = items[-1:] if formats.compaction_trigger(items) else []
        stop = len(items) - len(trigger)
        read = formats.from_responses(items[at:stop], instructions=instructions)
        result = self.transform(read, allow_compaction=not trigger, **options)
        instructions_out, out = formats.to_responses(list(result.messages))
        return instructions_out, [*items[:at], *out, *trigger], result


class CallOptions(TypedDict, total=False):
    """The options the provider-dict entry points pass to :meth:`Warden.transform`."""

    model: str | None
    window: int | None
    tools: Sequence[Mapping[str, Any]] | None
    conversation: str | None
    now: float | None
    summarizer: Any
    max_tokens: int | None
