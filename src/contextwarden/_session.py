"""Session: the I/O edge around the pure warden.

A session keeps the *original* history append-only in a :class:`SessionStore` (SQLite, WAL) and
hands the model a *working view* built by the :class:`Warden` before each call. The working view
may be lossy; the originals never are: every span a compaction elided is stored under its
reference, ``session.recall(ref)`` returns it verbatim, and :attr:`Session.recall_tool` lets the
model ask for it.

Triggers: tokens over the trigger ratio (inside the warden), the turn count since the
last compaction (default 200), the model writing ``!!!SUMMARY!!!``, a ``/compact [focus]`` user
command, and :meth:`Session.compact`. Before a lossy compaction an optional confirmation callback
is asked; on refusal the session drops oldest units, starts fresh, or raises, as
configured. :meth:`Session.call` recovers from an overflow: a context-overflow error
from the provider (or our own check) -> compact -> rebuild as system + summary hint + original
question -> retry once.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ._config import WardenConfig
from ._events import CompactResult, Event, emit
from ._exceptions import OVERFLOW_RE, CompactionRefused, ContextOverflowError
from ._messages import Message, ToolCallBlock, ToolResultBlock
from ._warden import Warden
from .formats import from_anthropic, from_openai, to_anthropic, to_openai
from .recall import recall_answer, recall_ref, recall_tool
from .store.logs import SQLiteLogStore
from .store.sqlite import SessionStore
from .strategies.triggers import explicit_trigger

__all__ = ["ConfirmRequest", "Session", "is_context_overflow"]

T = TypeVar("T")


def is_context_overflow(exc: BaseException) -> bool:
    """Whether ``exc`` says the request did not fit the model's context window.

    Recognises our own :class:`ContextOverflowError` and the provider SDKs' 400 errors by their
    code or message (duck-typed: no SDK import).
    """
    if isinstance(exc, ContextOverflowError):
        return True
    code = getattr(exc, "code", None)
    if code == "context_length_exceeded":
        return True
    body = getattr(exc, "body", None)
    text = f"{exc} {json.dumps(body, default=str) if body is not None else ''}"
    return bool(OVERFLOW_RE.search(text))


@dataclass(frozen=True)
class ConfirmRequest:
    """What the confirmation callback is asked about."""

    tokens: int
    window: int
    trigger: int
    reason: str

    def prompt(self) -> str:
        return (
            f"The context is at {self.tokens}/{self.window} tokens ({self.reason}). "
            "Compact the conversation history, keeping the key facts?"
        )


ConfirmCallback = Callable[[ConfirmRequest], bool]


class Session:
    """An agent conversation with its originals kept and its working view managed.

    >>> s = Session(model="gpt-4o", path=":memory:")  # doctest: +SKIP
    >>> s.append(user("Fix the failing test"))          # doctest: +SKIP
    >>> request = s.context().messages                  # what to send this call  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        model: str | None = None,
        window: int | None = None,
        config: WardenConfig | None = None,
        system: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        path: str | Path | None = None,
        store: SessionStore | None = None,
        session_id: str | None = None,
        summarizer: Any = None,
        confirm: ConfirmCallback | None = None,
        warden: Any = None,
    ) -> None:
        self.config = config or WardenConfig()
        self.model = model or self.config.model
        self.window = window or self.config.context_window
        self.system = system
        self.tools: tuple[Mapping[str, Any], ...] = tuple(tools or ())
        self.store = store or SessionStore(path)
        self.id = self.store.create_session(session_id, {"model": self.model})
        self.confirm = confirm
        if warden is None:
            # the log beside the originals: a session reopened continues it as it was
            log = SQLiteLogStore(self.store.path)
            warden = Warden(self.config, summarizer=summarizer, log_store=log)
        self.warden = warden
        self._probe: Warden | None = None
        self._messages: list[Message] = self.store.messages(self.id)
        self._turns_at_compaction = 0
        self.events: list[Event] = []
        self.compactions: list[CompactResult] = []
        #: originals a failed write left to store: no view is given out until they are stored
        self._unsaved: dict[str, list[Message]] = {}

    # -- the original history ----------------------------------------------------------------
    @property
    def messages(self) -> tuple[Message, ...]:
        """The full original history (never lossy)."""
        return tuple(self._messages)

    def append(self, *messages: Message) -> None:
        """Append messages to the original history (persisted before returning)."""
        for i, m in enumerate(messages):
            if not isinstance(m, Message):
                raise TypeError(
                    f"append() argument {i}: expected a Message, got {type(m).__name__}; "
                    "use extend_openai()/extend_anthropic() for provider dicts"
                )
        self.store.append(self.id, messages)
        self._messages.extend(messages)

    def extend_openai(self, messages: Sequence[Mapping[str, Any]]) -> None:
        self.append(*from_openai(list(messages)))

    def extend_anthropic(self, messages: Sequence[Mapping[str, Any]]) -> None:
        self.append(*from_anthropic(list(messages)))

    @property
    def turns(self) -> int:
        """Assistant turns since the last compaction (the turn trigger's counter)."""
        total = sum(1 for m in self._messages if m.role == "assistant")
        return total - self._turns_at_compaction

    # -- the working view --------------------------------------------------------------------
    def context(self, *, focus: str | None = None) -> Any:
        """The working view for the next call: a ``TransformResult`` (``.messages`` to send).

        Checks the explicit triggers first (command, marker, turn count); the token trigger
        lives in the warden. A lossy compaction is confirmed first when a callback is set.
        """
        # the triggers besides tokens, counting turns since the last compaction
        found = explicit_trigger(self._messages, turns=self.turns, config=self.config.compaction)
        force = found is not None
        focus = focus or (found.focus if found is not None else None)
        if self.confirm is not None:
            # a warden of its own, so that asking does not record the window cut in our log
            if self._probe is None:
                self._probe = Warden(self.config, compactor=None)
            probe = self._probe.transform(
                self._messages, allow_compaction=False, **self._call_args()
            )
            # the window had to drop or cut: a compaction would run if allowed
            over = any(e.kind in ("dropped", "newest_truncated") for e in probe.events)
            reason = found.detail if found is not None else "over the trigger"
            if (force or over) and not self._confirmed(probe, reason):
                return self._on_refusal(probe)
        result = self._transform(force_compact=force, focus=focus)
        self._record(result)
        return result

    def _transform(self, **options: Any) -> Any:
        """The warden's request for this session's history, in this session's conversation."""
        return self.warden.transform(self._messages, **self._call_args(), **options)

    def _call_args(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "window": self.window,
            "system": self.system,
            "tools": self.tools or None,
            "conversation": self.id,
        }

    def compact(self, focus: str | None = None) -> CompactResult | None:
        """Compact now (the API trigger); returns what was done, if anything."""
        result = self._transform(force_compact=True, focus=focus)
        self._record(result)
        compaction: CompactResult | None = result.compaction
        return compaction

    def openai_messages(self, *, focus: str | None = None) -> list[dict[str, Any]]:
        """The working view as OpenAI Chat Completions messages."""
        return to_openai(self.context(focus=focus).messages)

    def anthropic_request(self, *, focus: str | None = None) -> tuple[Any, list[dict[str, Any]]]:
        """The working view as Anthropic ``(system, messages)``."""
        return to_anthropic(self.context(focus=focus).messages)

    # -- overflow -> compact -> rebuild -> retry once ------------------------------
    def call(self, fn: Callable[[list[Message]], T]) -> T:
        """Call ``fn(working_view)``; on a context overflow, rebuild and retry once."""
        try:
            return fn(list(self.context().messages))
        except Exception as exc:
            if not is_context_overflow(exc):
                raise
            return fn(self._rebuild(exc))

    async def acall(self, fn: Callable[[list[Message]], Awaitable[T]]) -> T:
        """Async :meth:`call`."""
        try:
            return await fn(list(self.context().messages))
        except Exception as exc:
            if not is_context_overflow(exc):
                raise
            return await fn(self._rebuild(exc))

    def _rebuild(self, exc: BaseException) -> list[Message]:
        result = self.warden.rebuild(self._messages, **self._call_args())
        emit(self.events, Event("warning", "session", detail=f"context overflow, rebuilt: {exc}"))
        self._record(result)
        return list(result.messages)

    # -- recall: nothing is lost -------------------------------------------------------------
    def recall(self, ref: str) -> list[Message]:
        """The messages a compaction of this session elided under ``ref``, verbatim (another
        session's originals are never returned, even when their content matches)."""
        if ref in self._unsaved:
            return list(self._unsaved[ref])
        found = self.store.get_elided(ref, self.id)
        if found is None:
            raise KeyError(f"no elided content under reference {ref!r} in this session")
        return found

    @property
    def recall_tool(self) -> dict[str, Any]:
        """An OpenAI tool definition the model can call to read an elided span back
        (:func:`contextwarden.recall.recall_tool` gives the other APIs' shapes)."""
        return recall_tool("openai")

    def answer_recall(self, call: ToolCallBlock) -> Message:
        """The tool message answering a call of :attr:`recall_tool`."""
        ref = recall_ref(call.input)
        try:
            found: list[Message] | None = self.recall(ref) if ref else None
        except KeyError:
            found = None
        text, error = recall_answer(ref, found)
        return Message("tool", (ToolResultBlock(call.id, text, is_error=error),))

    # -- internals ---------------------------------------------------------------------------
    def _confirmed(self, probe: Any, reason: str) -> bool:
        assert self.confirm is not None
        budget = probe.budget
        ok = bool(
            self.confirm(ConfirmRequest(probe.tokens_before, budget.window, budget.trigger, reason))
        )
        if not ok:
            emit(self.events, Event("compaction_refused", "session", detail=reason))
        return ok

    def _on_refusal(self, probe: Any) -> Any:
        policy = self.config.compaction.on_refusal
        if policy == "raise":
            raise CompactionRefused("the confirmation callback declined the compaction")
        if policy == "new_session":
            first_user = next((m for m in self._messages if m.role == "user"), None)
            fresh = [m for m in self._messages if m.role == "system"]
            if first_user is not None:
                fresh.append(first_user)
            last = self._messages[-1] if self._messages else None
            if last is not None and last is not first_user and last.role == "user":
                fresh.append(last)
            self.id = self.store.create_session(None, {"model": self.model, "previous": self.id})
            self.store.append(self.id, fresh)
            self._messages = fresh
            self._turns_at_compaction = 0
            return self._transform(allow_compaction=False)
        # drop_oldest: the lossless layers and the sliding window only (no summary)
        return probe

    def _save_originals(self) -> None:
        """Store the originals not stored yet. Raises :class:`StoreError` when that fails (a
        full disk), so that a view referring to them is not given out before they are kept;
        they are tried again on the next call."""
        for ref in list(self._unsaved):
            self.store.put_elided(self.id, ref, self._unsaved[ref])
            del self._unsaved[ref]

    def _record(self, result: Any) -> None:
        """Keep the events, and every original the warden's edits hid, under its reference
        (the edit log knows exactly which history messages it hid: nothing is matched)."""
        self.events.extend(result.events)
        for ref, originals in dict(getattr(result, "elided", {}) or {}).items():
            self._unsaved.setdefault(ref, list(originals))
        self._save_originals()
        compaction: CompactResult | None = result.compaction
        if compaction is None:
            return
        self.compactions.append(compaction)
        self._turns_at_compaction = sum(1 for m in self._messages if m.role == "assistant")
        self.store.add_event(
            self.id,
            "context_compacted",
            {
                "strategy": compaction.strategy,
                "original_tokens": compaction.original_token_count,
                "new_tokens": compaction.new_token_count,
                "saved_ratio": compaction.saved_ratio,
                "compacted_count": compaction.compacted_count,
                "refs": list(compaction.refs),
                "summary": compaction.summary,
            },
        )
