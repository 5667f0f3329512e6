"""A conversation's working context: the agent's history plus an append-only log of edits.

The agent owns its history and never sees it changed. What the warden decided for a
conversation is written down as :class:`Edit` records, and the request sent is a pure,
deterministic function of the two (:func:`apply`). Nothing is rediscovered: the next call
appends its new messages to the view and the log says what was already done.

An edit reaches history messages by their *position* in the conversation's history, which is
stable because a history that does not extend the one the log was built on starts a new log
(:class:`~contextwarden._warden.Warden` checks this on every call).

=================  ==========================================================================
kind               effect on the view
=================  ==========================================================================
``mask``           tool results of messages ``<= upto`` shrink to head and tail lines, except
                   those in ``keep`` (the latest reads of the files the agent works on, left
                   whole); the ``superseded`` results (a file read again, a command run again,
                   a duplicate), wherever they are, become a one-line marker. Once masked, a
                   result stays masked: a later mask edit only adds to it
``strip_thinking`` thinking blocks of assistant messages ``<= upto`` are removed
``compaction``     the ``removed`` ranges leave the view; ``inserted`` messages (the summary)
                   stand before the history message they are anchored to; ``dropped`` names
                   earlier compactions whose summaries this one absorbed
``window_cut``     the ``removed`` ranges leave the view, with no summary
``repair``         made as a message enters: a tool result without its call leaves the view
                   (``removed``); synthetic results close calls left unanswered before the
                   anchor message (``inserted``). Fixes that keep a message in place (ids made
                   unique, an empty user message's placeholder) are made on entry, like the cut
                   of a huge tool output
=================  ==========================================================================

(pi writes a compaction as a session entry naming its first kept entry; OpenHands appends a
condensation event and derives its view from the event log. This is the same idea.)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ._codec import message_from_dict, message_to_dict
from ._exceptions import FormatError
from ._messages import Message

__all__ = ["Edit"]

EditKind = Literal["mask", "strip_thinking", "compaction", "window_cut", "repair"]
#: Why an edit was made: over the trigger (``must``), it pays for itself in cache reads
#: (``pays``), the provider's cache had gone cold (``free``), every call (``immediate``: no
#: caching), or asked for (``forced``: a command, the marker, the turn count, an API call).
EditReason = Literal["must", "pays", "free", "immediate", "forced"]
#: Where a view message comes from: a history position, or (edit number, k) for the k-th
#: message an edit inserted.
Source = int | tuple[int, int]

_KINDS: tuple[str, ...] = ("mask", "strip_thinking", "compaction", "window_cut", "repair")


@dataclass(frozen=True)
class Edit:
    """One decision of the warden for one conversation (a value; see the module docstring).

    ``upto``: the last history position a mask or strip reaches (inclusive). ``removed``:
    half-open ranges of history positions taken out of the view. ``inserted``: ``(anchor,
    message)`` pairs, each message placed just before history position ``anchor``.
    ``replaced``: ``(position, message)`` pairs shown instead of the history message (a hint
    folded into the system prompt). ``dropped``: log numbers of earlier compactions whose
    inserted messages leave the view. ``ref`` is the ``cw:`` reference of the originals hidden;
    ``summary`` the summary text and ``summarizer`` who wrote it (``llm:openai:gpt-4o-mini``,
    ``extractive``...); ``tokens_before``/``tokens_after`` the request's size around the edit.
    A mask edit's plan: ``keep``, the ids of results at or before ``upto`` it leaves whole;
    ``superseded``, ``(position, result id, id of the result that superseded it)`` triples of
    results it reduces to a one-line marker (at any position).
    """

    kind: EditKind
    reason: EditReason = "must"
    upto: int = -1
    removed: tuple[tuple[int, int], ...] = ()
    inserted: tuple[tuple[int, Message], ...] = ()
    replaced: tuple[tuple[int, Message], ...] = ()
    dropped: tuple[int, ...] = ()
    ref: str | None = None
    strategy: str | None = None
    summary: str | None = None
    summarizer: str | None = None
    tokens_before: int = 0
    tokens_after: int = 0
    call: int = 0
    keep: tuple[str, ...] = ()
    superseded: tuple[tuple[int, str, str], ...] = ()
    data: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready form (messages in the canonical codec), for stores."""
        return {
            "kind": self.kind,
            "reason": self.reason,
            "upto": self.upto,
            "removed": [list(r) for r in self.removed],
            "inserted": [[a, message_to_dict(m)] for a, m in self.inserted],
            "replaced": [[p, message_to_dict(m)] for p, m in self.replaced],
            "dropped": list(self.dropped),
            "ref": self.ref,
            "strategy": self.strategy,
            "summary": self.summary,
            "summarizer": self.summarizer,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "call": self.call,
            "keep": list(self.keep),
            "superseded": [list(t) for t in self.superseded],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Edit:
        """The edit :meth:`as_dict` wrote; :class:`FormatError` naming the field when not."""
        try:
            kind = data["kind"]
            if kind not in _KINDS:
                raise FormatError(f"edit kind must be one of {_KINDS}, got {kind!r}")
            return cls(
                kind=kind,
                reason=data.get("reason", "must"),
                upto=int(data.get("upto", -1)),
                removed=tuple((int(a), int(b)) for a, b in data.get("removed", ())),
                inserted=tuple((int(a), message_from_dict(m)) for a, m in data.get("inserted", ())),
                replaced=tuple((int(p), message_from_dict(m)) for p, m in data.get("replaced", ())),
                dropped=tuple(int(n) for n in data.get("dropped", ())),
                ref=data.get("ref"),
                strategy=data.get("strategy"),
                summary=data.get("summary"),
                summarizer=data.get("summarizer"),
                tokens_before=int(data.get("tokens_before", 0)),
                tokens_after=int(data.get("tokens_after", 0)),
                call=int(data.get("call", 0)),
                keep=tuple(str(k) for k in data.get("keep", ())),
                superseded=tuple(
                    (int(p), str(r), str(by)) for p, r, by in data.get("superseded", ())
                ),
            )
        except FormatError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise FormatError(f"not an edit record ({type(exc).__name__}: {exc})") from exc


MessageEdit = Callable[[int, Message], Message]


def apply(
    history: Sequence[Message],
    edits: Sequence[Edit],
    *,
    mask: MessageEdit,
    strip: MessageEdit,
) -> tuple[list[Message], list[Source]]:
    """The view of ``history`` under ``edits``: the messages to send and where each comes from.

    ``mask(i, m)`` and ``strip(i, m)`` apply one mask / strip to history message ``i`` (they
    must be pure: same input, same output). Deterministic; never mutates its inputs.
    """
    mask_upto = strip_upto = -1
    also: set[int] = set()  # positions after mask_upto holding superseded results
    removed: list[bool] = [False] * len(history)
    inserted: dict[int, list[tuple[Source, Message]]] = {}
    replaced: dict[int, Message] = {}
    gone: set[int] = {n for e in edits for n in e.dropped}
    for number, e in enumerate(edits):
        if e.kind == "mask":
            mask_upto = max(mask_upto, e.upto)
            also.update(p for p, _, _ in e.superseded)
        elif e.kind == "strip_thinking":
            strip_upto = max(strip_upto, e.upto)
        else:
            for start, end in e.removed:
                for i in range(max(start, 0), min(end, len(history))):
                    removed[i] = True
            if number not in gone:
                for k, (anchor, m) in enumerate(e.inserted):
                    inserted.setdefault(anchor, []).append(((number, k), m))
            replaced.update(e.replaced)
    out: list[Message] = []
    sources: list[Source] = []
    for i, m in enumerate(history):
        for source, note in inserted.get(i, ()):
            out.append(note)
            sources.append(source)
        if removed[i]:
            continue
        if i in replaced:
            m = replaced[i]
        else:
            if i <= mask_upto or i in also:
                m = mask(i, m)
            if i <= strip_upto:
                m = strip(i, m)
        out.append(m)
        sources.append(i)
    for source, note in inserted.get(len(history), ()):
        out.append(note)
        sources.append(source)
    return out, sources


def conversation_key(
    messages: Sequence[Message], tools: Iterable[Mapping[str, Any]] | None = None
) -> str:
    """Who a history belongs to: a hash of its leading system messages, its tool definitions
    and its first user message. Two agents with the same system prompt, tools and task share a
    key; the warden then tells them apart by whether one history extends the other."""
    h = hashlib.blake2b(digest_size=12)
    for m in messages:
        if m.role == "system":
            h.update(b"s" + m.fingerprint.encode())
            continue
        if m.role == "user":
            h.update(b"u" + m.fingerprint.encode())
            break
    if tools:
        h.update(json.dumps(list(tools), sort_keys=True, default=str).encode())
    return h.hexdigest()
