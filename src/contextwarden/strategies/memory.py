"""What a compactor remembers between calls, so that a caller handing it the *whole* history on
every call (the Session, the proxy, a replay) gets the same compacted prefix back instead of a
new compaction.

The warden is stateless: before each model call it transforms the full original history again.
Without memory, every call over the trigger would compact anew, sliding the elided span by one
unit, writing a new summary and changing the prefix the provider caches. With it, a compaction
is recorded once (the stable keys of what it elided, the summary, the reference) and re-applied
on later calls wherever all its elided messages are still there, oldest first, so later
compactions that folded earlier summaries re-apply too. Only when the re-applied history is over
the trigger again does a new compaction run: hysteresis for stateless callers.

Messages are matched by :func:`stable_key`, an identity the lossless layers do not change
(masking an old tool result keeps its call id; stripping thinking keeps an assistant's text and
calls), since an elided message may look different on the next call.

Several processes serving one conversation (the proxy's workers) share what was compacted
through ``store``, any ``MutableMapping[str, str]`` (the proxy's SQLite or Redis summary cache
works): the entries of one conversation, keyed by its system prompt and task, live under one
``cw-memory:`` key as JSON.
"""

from __future__ import annotations

import hashlib
import json
import operator
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Iterable, MutableMapping, Sequence
from dataclasses import asdict, dataclass
from threading import Lock
from typing import Any

from .._messages import Message
from .base import Section, StrategyOutcome, assemble, check_outcome

__all__ = ["MEMORY", "REAPPLIED", "CompactionMemory", "conversation_key", "stable_key"]

#: How many compactions (and their elided spans) one memory keeps, oldest dropped first.
MEMORY = 512
#: The ``strategy`` of a result that only re-applied earlier compactions (no new summary).
REAPPLIED = "reapplied"
#: Entries kept per conversation in a shared store.
STORED_PER_CONVERSATION = 64
STORE_PREFIX = "cw-memory:"


@dataclass(frozen=True)
class _Entry:
    """One compaction made earlier: the stable keys of what it elided and what replaced it."""

    keys: tuple[str, ...]
    summary: str
    ref: str
    strategy: str
    rebuild: bool
    appendix: tuple[Section, ...]

    @classmethod
    def load(cls, data: Any) -> _Entry:
        return cls(
            keys=tuple(str(k) for k in data["keys"]),
            summary=str(data["summary"]),
            ref=str(data["ref"]),
            strategy=str(data["strategy"]),
            rebuild=bool(data["rebuild"]),
            appendix=tuple((str(t), tuple(str(x) for x in lines)) for t, lines in data["appendix"]),
        )


_KEYS: dict[str, str] = {}
_KEYS_MAX = 200_000


def stable_key(message: Message) -> str:
    """An identity of ``message`` that the lossless layers do not change: a tool message is
    its role and result ids, an assistant message its text and calls (not its thinking), any
    other message its fingerprint. Cached by fingerprint."""
    fp = message.fingerprint
    key = _KEYS.get(fp)
    if key is None:
        if len(_KEYS) >= _KEYS_MAX:
            _KEYS.clear()
        key = _KEYS[fp] = _compute_key(message)
    return key


def _compute_key(message: Message) -> str:
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
    """Increasing indices of ``keys`` in ``messages`` (each the first match after the previous
    one), or None when one is missing."""
    if not keys:
        return None
    wanted = set(keys)
    where: dict[str, list[int]] = {}
    for i, m in enumerate(messages):
        k = stable_key(m)
        if k in wanted:
            where.setdefault(k, []).append(i)
    out: list[int] = []
    last = -1
    for k in keys:
        found = where.get(k, [])
        at = bisect_right(found, last)
        if at == len(found):
            return None
        last = found[at]
        out.append(last)
    return tuple(out)


@dataclass(frozen=True)
class _LastReapply:
    """The last :meth:`CompactionMemory.reapply` without a shared store: its input up to the
    last message a compaction changed (``head``), and what that head became (``view_head``)."""

    version: int
    head: tuple[Message, ...]
    view_head: tuple[Message, ...]
    refs: tuple[str, ...]
    used: dict[str, str]


def _remember(
    original: tuple[Message, ...], view: tuple[Message, ...], used: dict[str, str], version: int
) -> _LastReapply | None:
    """What the next call may reuse: the input and output share a tail (the messages after the
    last elided span, the same objects); everything before it is the head."""
    if not used:
        return None
    shared = 0
    limit = min(len(original), len(view))
    while shared < limit and view[-1 - shared] is original[-1 - shared]:
        shared += 1
    cut = len(original) - shared
    return _LastReapply(version, original[:cut], view[: len(view) - shared], tuple(used), dict(used))


def conversation_key(messages: Sequence[Message]) -> str | None:
    """The store key of a conversation: its messages up to the task (the first user message),
    by stable key. None without a user message."""
    h = hashlib.blake2b(digest_size=16)
    for m in messages:
        if m.role == "system":
            continue  # the full summary folds a hint into the system prompt
        h.update(stable_key(m).encode())
        if m.role == "user":
            return STORE_PREFIX + h.hexdigest()
    return None


class CompactionMemory:
    """Compactions made so far, by reference, in the order they were made (thread-safe).

    ``store``: a mapping shared with other processes (see the module doc); its failures are
    ignored (the local memory still works)."""

    def __init__(self, size: int = MEMORY, store: MutableMapping[str, str] | None = None) -> None:
        self.size = size
        self.store = store
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._spans: OrderedDict[str, tuple[Message, ...]] = OrderedDict()
        self._lock = Lock()
        self._version = 0  # bumped whenever the remembered compactions change
        self._last: _LastReapply | None = None
        #: Whether the last :meth:`reapply` reused the call before it (same head, appended tail).
        self.continued = False

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def version(self) -> int:
        """Changes whenever a compaction is recorded or forgotten."""
        return self._version

    # -- the shared store -------------------------------------------------------------------------
    def _load(self, key: str | None) -> list[_Entry] | None:
        if self.store is None or key is None:
            return None
        try:
            raw = self.store.get(key)
            return [_Entry.load(d) for d in json.loads(raw)] if raw else None
        except Exception:  # a broken or foreign value: the local memory still works
            return None

    def _save(self, key: str | None, entries: list[_Entry]) -> None:
        if self.store is None or key is None:
            return
        try:
            data = [asdict(e) for e in entries[-STORED_PER_CONVERSATION:]]
            self.store[key] = json.dumps(data, separators=(",", ":"))
        except Exception:
            pass

    # -- recording --------------------------------------------------------------------------------
    def record(
        self,
        span: Sequence[Message],
        outcome: StrategyOutcome,
        summary: str,
        ref: str,
        conversation: str | None = None,
    ) -> None:
        """Remember that ``span`` (elided by ``outcome``) was replaced by ``summary`` as ``ref``
        (in the conversation keyed ``conversation``, for the shared store)."""
        entry = _Entry(
            keys=tuple(stable_key(m) for m in span),
            summary=summary,
            ref=ref,
            strategy=outcome.strategy,
            rebuild=outcome.rebuild,
            appendix=outcome.appendix,
        )
        with self._lock:
            self._entries[ref] = entry
            self._entries.move_to_end(ref)
            self._spans[ref] = tuple(span)
            self._spans.move_to_end(ref)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
            while len(self._spans) > self.size:
                self._spans.popitem(last=False)
            self._version += 1
        stored = self._load(conversation)
        if self.store is not None and conversation is not None:
            self._save(conversation, [e for e in stored or [] if e.ref != ref] + [entry])

    def forget(self, refs: Iterable[str], conversation: str | None = None) -> None:
        """Stop re-applying ``refs`` (their spans stay available to :meth:`spans`)."""
        gone = set(refs)
        with self._lock:
            for ref in gone:
                self._entries.pop(ref, None)
            self._version += 1
        stored = self._load(conversation)
        if stored is not None:
            self._save(conversation, [e for e in stored if e.ref not in gone])

    def summary(self, ref: str) -> str:
        """The summary written for ``ref`` (empty when forgotten)."""
        entry = self._entries.get(ref)
        return entry.summary if entry is not None else ""

    def spans(self, refs: Iterable[str]) -> dict[str, tuple[Message, ...]]:
        """The elided spans of ``refs`` still remembered, verbatim."""
        return {ref: self._spans[ref] for ref in refs if ref in self._spans}

    # -- re-applying ------------------------------------------------------------------------------
    def reapply(
        self, messages: Sequence[Message], conversation: str | None = None
    ) -> tuple[tuple[Message, ...], tuple[str, ...], dict[str, str]]:
        """``messages`` with every remembered compaction whose elided messages are all there
        (whole units, in order) re-applied, oldest first; the references re-applied; and their
        summaries. The result is what those compactions produced, byte for byte, plus what came
        after. With a shared store, the conversation's stored entries come first."""
        view = tuple(messages)
        last = self._last
        if (
            last is not None
            and self.store is None
            and last.version == self._version
            and len(view) >= len(last.head)
            and all(map(operator.is_, last.head, view))
        ):
            # the same messages up to the last one a compaction changed (the agent appended):
            # the same re-applied head, then the new tail, without locating anything again
            self.continued = True
            return last.view_head + view[len(last.head) :], last.refs, dict(last.used)
        self.continued = False
        original = view
        stored = self._load(conversation) or []
        with self._lock:
            local = list(self._entries.values())
        seen = {e.ref for e in stored}
        entries = stored + [e for e in local if e.ref not in seen]
        used: dict[str, str] = {}
        for entry in entries:
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
            used[entry.ref] = entry.summary
        self._last = _remember(original, view, used, self._version) if self.store is None else None
        return view, tuple(used), used
