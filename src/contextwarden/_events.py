"""What the warden did, as values: one :class:`Event` per truncation, mask, strip, drop or
compaction (each also logged at warning level on the ``contextwarden`` logger by :func:`emit`),
and :class:`CompactResult` with its :class:`CompactionPlan`, by position."""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ._messages import Message

__all__ = [
    "CompactResult",
    "CompactionPlan",
    "Event",
    "EventKind",
]

logger = logging.getLogger("contextwarden")
logger.addHandler(logging.NullHandler())  # silent unless the application configures logging

EventKind = Literal[
    "truncated",  # a tool result cut to head + tail
    "masked",  # an old tool result reduced to head/tail lines
    "thinking_stripped",  # old thinking removed
    "dropped",  # a unit dropped by the sliding window
    "newest_truncated",  # the newest unit alone was over budget and was cut
    "context_compacted",  # a lossy compaction replaced a span with a summary
    "summary_rejected",  # a summary failed its checks; the next strategy ran
    "summarizer_failed",  # the summarizer raised or returned garbage; fell back
    "compaction_refused",  # the confirmation callback said no
    "warning",  # context nearing the window
    "repaired",  # a structurally invalid history was repaired (orphan result, duplicate id...)
]


@dataclass(frozen=True)
class CompactionPlan:
    """What a compaction does to the ``n`` messages it was given, by position: ``removed`` (sorted
    positions that leave), ``inserted`` (``(p, message)`` stands just before input ``p``, ``n`` for
    the end, in order), ``replaced`` (``(p, message)`` shown instead of input ``p``, e.g. a system
    prompt with a hint folded in). A conversation appends it to its log as it is."""

    removed: tuple[int, ...] = ()
    inserted: tuple[tuple[int, Message], ...] = ()
    replaced: tuple[tuple[int, Message], ...] = ()

    def apply(self, messages: Sequence[Message]) -> tuple[Message, ...]:
        """The messages after the compaction."""
        gone = set(self.removed)
        shown = dict(self.replaced)
        before: defaultdict[int, list[Message]] = defaultdict(list)
        for p, m in self.inserted:
            before[p].append(m)
        out: list[Message] = []
        for p, m in enumerate(messages):
            out.extend(before.get(p, ()))
            if p not in gone:
                out.append(shown.get(p, m))
        out.extend(before.get(len(messages), ()))
        return tuple(out)

    @classmethod
    def between(cls, before: Sequence[Message], after: Sequence[Message]) -> CompactionPlan:
        """The plan of a compaction known only by its output (a compaction hook that returns a
        message list): the messages of ``after`` equal in content to input messages, taken in
        order, are kept; the others are inserted before the next kept one."""
        where: defaultdict[str, list[int]] = defaultdict(list)
        for p, m in enumerate(before):
            where[m.fingerprint].append(p)
        kept: list[int] = []
        inserted: list[tuple[int, Message]] = []
        pending: list[Message] = []
        nxt = 0
        for m in after:
            spots = where.get(m.fingerprint, [])
            k = bisect_left(spots, nxt)
            if k == len(spots):
                pending.append(m)
                continue
            p = spots[k]
            kept.append(p)
            inserted.extend((p, note) for note in pending)
            pending = []
            nxt = p + 1
        inserted.extend((len(before), note) for note in pending)
        kept_set = set(kept)
        removed = tuple(p for p in range(len(before)) if p not in kept_set)
        return cls(removed, tuple(inserted))


@dataclass(frozen=True)
class CompactResult:
    """The outcome of one compaction (plus the strategy that produced it).
    ``plan`` says what it did by position; a result without one (a compaction hook that
    returns only ``new_messages``) gets :meth:`CompactionPlan.between`."""

    new_messages: tuple[Message, ...]
    summary: str
    original_token_count: int
    new_token_count: int
    compacted_count: int
    strategy: str
    refs: tuple[str, ...] = ()
    #: the summarizer(s) that wrote the summary (``llm:openai:gpt-4o-mini``, ``extractive``...),
    #: ``+``-joined when several did; None when the strategies wrote it themselves
    summarizer: str | None = None
    plan: CompactionPlan | None = None

    @property
    def saved_ratio(self) -> float:
        """Share of tokens saved: ``1 - new/original`` (0 when nothing was there)."""
        if self.original_token_count <= 0:
            return 0.0
        return 1.0 - self.new_token_count / self.original_token_count


@dataclass(frozen=True)
class Event:
    """One thing a layer or strategy did to the working copy of the history."""

    kind: EventKind
    layer: str
    index: int | None = None
    tool_name: str | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    chars_before: int | None = None
    chars_after: int | None = None
    detail: str = ""
    compaction: CompactResult | None = field(default=None, repr=False)
    data: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def describe(self) -> str:
        """A one-line human description, as logged."""
        parts = [f"{self.layer}: {self.kind.replace('_', ' ')}"]
        if self.index is not None:
            parts.append(f"message {self.index}")
        if self.tool_name:
            parts.append(f"tool {self.tool_name!r}")
        if self.chars_before is not None and self.chars_after is not None:
            parts.append(f"{self.chars_before} -> {self.chars_after} chars")
        if self.tokens_before is not None and self.tokens_after is not None:
            parts.append(f"{self.tokens_before} -> {self.tokens_after} tokens")
        if self.detail:
            parts.append(self.detail)
        return "contextwarden " + ", ".join(parts)


def emit(events: list[Event], event: Event) -> None:
    """Record ``event`` and log it at warning level."""
    events.append(event)
    if _heard():
        logger.warning(event.describe())


def _heard() -> bool:
    """Whether a warning of the ``contextwarden`` logger reaches a handler that is not a
    :class:`logging.NullHandler` (or a filter): making a record nobody reads (the caller's
    frame looked up, the process and thread named) costs more than the rest of a warm call's
    event. Read on every event, so handlers added later are heard."""
    if not logger.isEnabledFor(logging.WARNING):
        return False
    if logger.filters:
        return True
    found = False
    node: logging.Logger | None = logger
    while node is not None:
        for h in node.handlers:
            if not isinstance(h, logging.NullHandler):
                return True
            found = True
        node = node.parent if node.propagate else None
    return not found and logging.lastResort is not None  # no handler: the last resort
