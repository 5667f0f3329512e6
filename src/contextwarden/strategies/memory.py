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
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from threading import Lock

from .._messages import Message
from .base import Section, StrategyOutcome, assemble, check_outcome

__all__ = ["MEMORY", "REAPPLIED", "CompactionMemory", "stable_key"]

#: How many compactions (and their elided spans) one memory keeps, oldest dropped first.
MEMORY = 512
#: The ``strategy`` of a result that only re-applied earlier compactions (no new summary).
REAPPLIED = "reapplied"


@dataclass(frozen=True)
class _Entry:
    """One compaction made earlier: the stable keys of what it elided and what replaced it."""

    keys: tuple[str, ...]
    summary: str
    ref: str
    strategy: str
    rebuild: bool
    appendix: tuple[Section, ...]


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


class CompactionMemory:
    """Compactions made so far, by reference, in the order they were made (thread-safe)."""

    def __init__(self, size: int = MEMORY) -> None:
        self.size = size
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._spans: OrderedDict[str, tuple[Message, ...]] = OrderedDict()
        self._lock = Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def record(
        self, span: Sequence[Message], outcome: StrategyOutcome, summary: str, ref: str
    ) -> None:
        """Remember that ``span`` (elided by ``outcome``) was replaced by ``summary`` as ``ref``."""
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

    def forget(self, refs: Iterable[str]) -> None:
        """Stop re-applying ``refs`` (their spans stay available to :meth:`spans`)."""
        with self._lock:
            for ref in refs:
                self._entries.pop(ref, None)

    def summary(self, ref: str) -> str:
        """The summary written for ``ref`` (empty when forgotten)."""
        entry = self._entries.get(ref)
        return entry.summary if entry is not None else ""

    def spans(self, refs: Iterable[str]) -> dict[str, tuple[Message, ...]]:
        """The elided spans of ``refs`` still remembered, verbatim."""
        return {ref: self._spans[ref] for ref in refs if ref in self._spans}

    def reapply(self, messages: Sequence[Message]) -> tuple[tuple[Message, ...], tuple[str, ...]]:
        """``messages`` with every remembered compaction whose elided messages are all there
        (whole units, in order) re-applied, oldest first; and the references re-applied. The
        result is what those compactions produced, byte for byte, plus what came after."""
        view = tuple(messages)
        used: list[str] = []
        with self._lock:
            entries = list(self._entries.values())
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
            used.append(entry.ref)
        return view, tuple(used)
