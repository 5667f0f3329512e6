"""A warden's table of conversations: which conversation a request continues, in memory or in
a log store, and the conversation a call runs on (see :mod:`.conversation`).

Bounded: at most :data:`MAX_CONVERSATIONS` conversations and, with ``max_bytes``, at most that
many bytes kept alive by them (each conversation's :attr:`~.conversation.Conversation.bytes`),
the least recently used forgotten first (never the one a call just ran on). A conversation
forgotten starts anew on its next request (its stored log, if any, is read again)."""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._events import logger
from .._exceptions import StoreError
from .._log import Edit
from .._messages import Message
from .call import Call
from .conversation import RECORD_VERSION, Conversation, Diverged
from .lossless import settle

if TYPE_CHECKING:
    from .._config import WardenConfig
    from ..layers.base import LayerContext
    from ..store.logs import LogStore, Written

__all__ = ["ConversationTable"]

#: Conversations one table remembers (least recently used forgotten first).
MAX_CONVERSATIONS = 512
#: Logs kept for histories that share one identity (the same system prompt, tools and task).
MAX_BRANCHES = 64


class ConversationTable:
    """Conversations by key, bounded (see the module docstring); with a ``log_store``, each
    conversation's record is read before a call and written after it."""

    def __init__(
        self, config: WardenConfig, log_store: LogStore | None = None, max_bytes: int | None = None
    ) -> None:
        self.config = config
        self.log_store = log_store
        self.max_bytes = max_bytes
        self.evicted = 0
        self._lock = threading.Lock()  # guards the table, never held during a call
        self._conversations: OrderedDict[str, Conversation] = OrderedDict()
        #: what the log store holds of each conversation this table wrote (appends go on from it)
        self._written: dict[str, tuple[weakref.ref[Conversation], Written]] = {}

    def find(
        self, key: str, messages: Sequence[Message], counter_name: str, explicit: bool
    ) -> tuple[Conversation, int]:
        """The conversation ``messages`` continue (or a new one) and how many leading messages
        it holds (equal to its own: Messages). Agents that share a system prompt, tools and task
        share a key: each gets a log of its own, ``key``, ``key#2``... (at most
        :data:`MAX_BRANCHES`); the one continued furthest is used. An explicit id has one log."""
        ids = _branches(key, 1 if explicit else MAX_BRANCHES)
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
                taken = set(_branches(key, MAX_BRANCHES))
                free = next(cid for cid in self._conversations if cid in taken)
        if best is None and self.log_store is not None:
            # another process may have written this conversation's log
            for cid in _branches(key, 1 if explicit else MAX_BRANCHES):
                record = self._read(cid)
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
        return best, max(best_at, 0)

    def enter(self, conv: Conversation, call: Call) -> Conversation:
        """Under the conversation's lock: the conversation ``call`` continues, ``conv`` or
        made again (another thread or process may have moved it on, the request spells its
        history otherwise)."""
        msgs = call.messages
        made: Conversation | None = None
        header = self._read(conv.key, whole=False)
        record = None
        if header is not None and int(header.get("calls", 0)) > conv.calls:
            record = self._read(conv.key)
        try:
            if record is not None:
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
                if record is not None and made.calls == record.get("calls"):
                    # restored whole from the stored record: its next save appends to it
                    assert self.log_store is not None  # the record was read from it
                    self._written[conv.key] = (weakref.ref(made), self.log_store.restored(record))
            return made
        return conv

    def edit_log(self, conversation: str) -> tuple[Edit, ...]:
        """The edits recorded for ``conversation`` (a :attr:`TransformResult.conversation`)."""
        with self._lock:
            conv = self._conversations.get(conversation)
        return tuple(conv.edits) if conv is not None else ()

    def recall(self, conversation: str, ref: str) -> tuple[Message, ...] | None:
        """The originals ``conversation`` keeps under ``ref`` (see :meth:`Conversation.recall`)."""
        with self._lock:
            conv = self._conversations.get(conversation)
        if conv is None:
            return None
        with conv.lock:
            return conv.recall(ref)

    def forget(self, key: str) -> None:
        with self._lock:
            self._conversations.pop(key, None)

    def kept_bytes(self) -> int:
        """About how many bytes the conversations keep alive."""
        with self._lock:
            conversations = list(self._conversations.values())
        return sum(c.bytes for c in conversations)

    def close(self, conv: Conversation, ctx: LayerContext) -> None:
        """After a call (made with ``ctx``): store ``conv``'s log and keep the table within
        its bytes."""
        if self.log_store is not None:
            settle(conv, ctx)  # the record holds the reads waited, counted
        self.record(conv)
        self.trim(conv.key)

    def trim(self, keep: str) -> None:
        """Forget the least recently used conversations but ``keep`` while the table keeps
        more than ``max_bytes`` alive."""
        if self.max_bytes is None:
            return
        with self._lock:
            total = sum(c.bytes for c in self._conversations.values())
            while total > self.max_bytes and len(self._conversations) > 1:
                key = next(k for k in self._conversations if k != keep)
                total -= self._conversations.pop(key).bytes
                self.evicted += 1

    def record(self, conv: Conversation) -> None:
        """Write ``conv``'s record to the log store, if any (after a call)."""
        if self.log_store is None:
            return
        prior = self._written.get(conv.key)
        since = prior[1] if prior is not None and prior[0]() is conv else None
        try:
            written = self.log_store.save(conv.key, conv.record(), since)
        except StoreError as exc:  # the next call here still has the log in memory
            logger.warning("contextwarden: the conversation log was not stored: %s", exc)
            return
        with self._lock:
            if len(self._written) > 2 * MAX_CONVERSATIONS:  # forget the conversations gone
                self._written = {k: v for k, v in self._written.items() if v[0]() is not None}
            self._written[conv.key] = (weakref.ref(conv), written)

    def _read(self, key: str, *, whole: bool = True) -> Mapping[str, Any] | None:
        """The stored record of ``key``; None when there is none, or the store cannot be read
        (the conversation then goes on from what this process knows)."""
        if self.log_store is None:
            return None
        try:
            record = self.log_store.get_log(key, whole=whole)
        except StoreError as exc:
            logger.warning("contextwarden: the conversation log could not be read: %s", exc)
            return None
        # a record of another layout is a conversation to start anew
        return record if record is not None and record.get("v") == RECORD_VERSION else None


def _branches(key: str, count: int) -> Iterator[str]:
    """The ids of the logs ``key`` may have, in the order they are taken: ``key``, ``key#2``..."""
    yield key
    for n in range(2, count + 1):
        yield f"{key}#{n}"
