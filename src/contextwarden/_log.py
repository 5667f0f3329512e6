"""A conversation's working context: the agent's history plus an append-only log of edits.

The agent's history is never changed; what the warden decided is written down as :class:`Edit`
records (:class:`Mask`, :class:`StripThinking`, :class:`Compaction`, :class:`WindowCut`,
:class:`Repair`), which reach messages by their history position (a history that does not
extend the log's starts a new log), and the request is a pure function of the two
(:func:`apply`). pi's compaction entries and OpenHands' condensation events are the same idea."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal

from ._codec import message_from_dict, message_to_dict
from ._exceptions import FormatError
from ._messages import Message, blake2b

__all__ = [
    "Compaction",
    "Edit",
    "Mask",
    "Repair",
    "StripThinking",
    "WindowCut",
    "edit_from_dict",
    "make_ref",
    "taken_by",
]

EditKind = Literal["mask", "strip_thinking", "compaction", "window_cut", "repair"]
#: Why an edit was made: over the trigger (``must``), it pays for itself in cache reads
#: (``pays``), the provider's cache had gone cold (``free``), every call (``immediate``: no
#: caching), or asked for (``forced``: a command, the marker, the turn count, an API call).
EditReason = Literal["must", "pays", "free", "immediate", "forced"]
#: Where a view message comes from: a history position, or (edit number, k) for the k-th
#: message an edit inserted.
Source = int | tuple[int, int]

Span = tuple[tuple[int, int], ...]
Placed = tuple[tuple[int, Message], ...]


@dataclass(frozen=True, kw_only=True)
class _Record:
    """What every edit records: why it was made (``reason``), at which call of the conversation
    (``call``), and the request's tokens before and after it."""

    kind: ClassVar[EditKind]
    reason: EditReason = "must"
    call: int = 0
    tokens_before: int = 0
    tokens_after: int = 0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready form (messages in the canonical codec), for stores."""
        out: dict[str, Any] = {"kind": self.kind}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("inserted", "replaced"):
                value = [[a, message_to_dict(m)] for a, m in value]
            elif isinstance(value, tuple):
                value = [list(v) if isinstance(v, tuple) else v for v in value]
            out[f.name] = value
        return out


@dataclass(frozen=True, kw_only=True)
class Mask(_Record):
    """Tool results of messages ``<= upto`` shrink to head and tail lines, except those in
    ``keep`` (ids left whole); the ``superseded`` results, ``(position, result id, id of the
    result that superseded it)`` wherever they are, become a one-line marker. ``start``: the
    results before this history position no earlier mask reached were kept whole only because
    masking them was too large a bet then (a later mask made because it pays may take them)."""

    kind: ClassVar[EditKind] = "mask"
    upto: int = -1
    keep: tuple[str, ...] = ()
    superseded: tuple[tuple[int, str, str], ...] = ()
    start: int = 0


@dataclass(frozen=True, kw_only=True)
class StripThinking(_Record):
    """Thinking blocks of assistant messages ``<= upto`` are removed."""

    kind: ClassVar[EditKind] = "strip_thinking"
    upto: int = -1


@dataclass(frozen=True, kw_only=True)
class Compaction(_Record):
    """The ``removed`` ranges of history positions (half-open) leave the view; each
    ``inserted`` message (the summary) stands before the history position it is anchored to;
    ``replaced`` messages are shown instead of theirs (a hint folded into the system prompt);
    ``dropped`` names earlier compactions whose summaries this one absorbed. ``ref`` is the
    ``cw:`` reference of the originals, ``summary`` its text, written by ``summarizer``
    (``llm:openai:gpt-4o-mini``, ``extractive``...) with ``strategy``."""

    kind: ClassVar[EditKind] = "compaction"
    removed: Span = ()
    inserted: Placed = ()
    replaced: Placed = ()
    dropped: tuple[int, ...] = ()
    ref: str | None = None
    strategy: str | None = None
    summary: str | None = None
    summarizer: str | None = None


@dataclass(frozen=True, kw_only=True)
class WindowCut(_Record):
    """The ``removed`` ranges leave the view with no summary (``ref``: the originals'
    reference); ``dropped`` names earlier edits whose inserted messages left with them."""

    kind: ClassVar[EditKind] = "window_cut"
    removed: Span = ()
    dropped: tuple[int, ...] = ()
    ref: str | None = None


@dataclass(frozen=True, kw_only=True)
class Repair(_Record):
    """Made as a message enters: a tool result without its call leaves the view
    (``removed``); synthetic results close calls left unanswered before the anchor message
    (``inserted``)."""

    kind: ClassVar[EditKind] = "repair"
    removed: Span = ()
    inserted: Placed = ()


#: One decision of the warden for one conversation (a value; see the module docstring).
Edit = Mask | StripThinking | Compaction | WindowCut | Repair

_TYPES: Mapping[str, type[Edit]] = {
    t.kind: t for t in (Mask, StripThinking, Compaction, WindowCut, Repair)
}


def _placed(raw: Any) -> Placed:
    return tuple((int(a), message_from_dict(m)) for a, m in raw)


def _same(raw: Any) -> Any:
    return raw


#: How each field of a stored edit is read back (the others are taken as they are).
_READ: Mapping[str, Callable[[Any], Any]] = {
    "inserted": _placed,
    "replaced": _placed,
    "removed": lambda raw: tuple((int(a), int(b)) for a, b in raw),
    "superseded": lambda raw: tuple((int(p), str(r), str(by)) for p, r, by in raw),
    "keep": lambda raw: tuple(str(k) for k in raw),
    "dropped": lambda raw: tuple(int(n) for n in raw),
    **dict.fromkeys(("upto", "call", "tokens_before", "tokens_after"), int),
}


def edit_from_dict(data: Mapping[str, Any]) -> Edit:
    """The edit ``as_dict`` wrote; :class:`FormatError` naming the field when not."""
    try:
        kind = data["kind"]
        cls = _TYPES.get(kind)
        if cls is None:
            raise FormatError(f"edit kind must be one of {tuple(_TYPES)}, got {kind!r}")
        values = {
            f.name: _READ.get(f.name, _same)(data[f.name]) for f in fields(cls) if f.name in data
        }
        return cls(**values)
    except FormatError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise FormatError(f"not an edit record ({type(exc).__name__}: {exc})") from exc


MessageEdit = Callable[[int, Message], Message]


@dataclass
class _Fold:
    """The edit log folded over ``n`` history positions: ``by[i]`` is the number of the first
    edit that took position ``i`` out (-1: none did); masks and strips reach every position up
    to their ``upto`` and the ``also`` superseded ones."""

    by: list[int]
    mask_upto: int = -1
    strip_upto: int = -1
    also: set[int] = field(default_factory=set)
    inserted: dict[int, list[tuple[Source, Message]]] = field(default_factory=dict)
    replaced: dict[int, Message] = field(default_factory=dict)


def _fold(edits: Sequence[Edit], n: int) -> _Fold:
    out = _Fold([-1] * n)
    gone: set[int] = {k for e in edits if isinstance(e, Compaction | WindowCut) for k in e.dropped}
    for number, e in enumerate(edits):
        if isinstance(e, Mask):
            out.mask_upto = max(out.mask_upto, e.upto)
            out.also.update(p for p, _, _ in e.superseded)
        elif isinstance(e, StripThinking):
            out.strip_upto = max(out.strip_upto, e.upto)
        else:
            for lo, hi in e.removed:
                for i in range(max(lo, 0), min(hi, n)):
                    if out.by[i] < 0:
                        out.by[i] = number
            if number not in gone and not isinstance(e, WindowCut):
                for k, (anchor, m) in enumerate(e.inserted):
                    out.inserted.setdefault(anchor, []).append(((number, k), m))
            if isinstance(e, Compaction):
                out.replaced.update(e.replaced)
    return out


def apply(
    history: Sequence[Message],
    edits: Sequence[Edit],
    *,
    mask: MessageEdit,
    strip: MessageEdit,
    start: int = 0,
) -> tuple[list[Message], list[Source]]:
    """The view of ``history`` under ``edits``: the messages to send and where each comes from.

    ``mask(i, m)`` and ``strip(i, m)`` apply one mask / strip to history message ``i`` (they
    must be pure: same input, same output). ``start`` > 0: only the view from history message
    ``start`` on, without the messages inserted before it (the caller holds the view before
    it). Deterministic; never mutates its inputs. :func:`taken_by` tells which edit took each
    message out or changed it.
    """
    f = _fold(edits, len(history))
    out: list[Message] = []
    sources: list[Source] = []
    for i in range(start, len(history)):
        m = history[i]
        for source, note in f.inserted.get(i, ()) if i > start or not start else ():
            out.append(note)
            sources.append(source)
        if f.by[i] >= 0:
            continue
        if i in f.replaced:
            m = f.replaced[i]
        else:
            if i <= f.mask_upto or i in f.also:
                m = mask(i, m)
            if i <= f.strip_upto:
                m = strip(i, m)
        out.append(m)
        sources.append(i)
    for source, note in f.inserted.get(len(history), ()):
        out.append(note)
        sources.append(source)
    return out, sources


def taken_by(edits: Sequence[Edit], n: int) -> list[int | None]:
    """For each of the first ``n`` history positions, the number (in ``edits``) of the edit
    that took it out of the view (the first :class:`Compaction`, :class:`WindowCut` or
    :class:`Repair` that removed it) or else changed it (the first :class:`Mask` that reached
    it, else the first :class:`StripThinking`); None where :func:`apply` sends it as it is
    (or as a compaction's ``replaced`` message). The same fold as :func:`apply`."""
    f = _fold(edits, n)
    out: list[int | None] = [b if b >= 0 else None for b in f.by]
    reach = {Mask: -1, StripThinking: -1}
    for number, e in enumerate(edits):
        if not isinstance(e, Mask | StripThinking):
            continue
        lo, reach[type(e)] = reach[type(e)] + 1, max(reach[type(e)], e.upto)
        hits = [*range(lo, min(e.upto + 1, n))]
        if isinstance(e, Mask):
            hits += [p for p, _, _ in e.superseded if 0 <= p < n]
        for i in hits:
            strip_only = out[i] is not None and isinstance(edits[out[i]], StripThinking)
            if i not in f.replaced and (out[i] is None or (isinstance(e, Mask) and strip_only)):
                out[i] = number
    return out


def conversation_key(
    messages: Sequence[Message], tools: Iterable[Mapping[str, Any]] | None = None
) -> str:
    """Who a history belongs to: a hash of its leading system messages, its tool definitions
    and its first user message. Two agents with the same system prompt, tools and task share a
    key; the warden then tells them apart by whether one history extends the other."""
    h = blake2b(12)
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


def make_ref(messages: Sequence[Message]) -> str:
    """The stable reference of an elided span: ``cw:`` + a hash of its messages' fingerprints.
    The same span always gets the same reference, on any machine."""
    h = blake2b(8)
    if messages:  # each fingerprint (hex digits) and a NUL, hashed at once
        h.update(("\x00".join([m.fingerprint for m in messages]) + "\x00").encode())
    return "cw:" + h.hexdigest()
