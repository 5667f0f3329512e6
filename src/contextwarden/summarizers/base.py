"""The summarizer contract: a :class:`SummaryRequest` in, the four-part text out (``<completed>``,
``<remaining>``, ``<current_state>``, ``<notes>``), judged by :func:`check_summary` before it
replaces anything (clearly smaller; the task, pins, modified paths and last unresolved error
kept) and cached under :func:`summary_cache_key`."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from .._memo import Memo
from .._messages import Message
from ..analysis.facts import Facts, extract_facts
from ..analysis.sections import SECTIONS, SummarySections, parse_summary

__all__ = [
    "MAX_SUMMARY_RATIO",
    "SECTIONS",
    "Summarizer",
    "SummaryRequest",
    "SummarySections",
    "check_summary",
    "effective_cap",
    "parse_summary",
    "replaced_chars",
    "request_facts",
    "summary_cache_key",
    "task_key",
]

#: A summary longer than this share of the characters it replaces is "not clearly smaller" and
#: is rejected. Summarizers aim at :data:`TARGET_SUMMARY_RATIO` to stay well clear.
MAX_SUMMARY_RATIO = 0.6
TARGET_SUMMARY_RATIO = 0.5
#: How much of the task's opening a summary must quote: enough to identify it, short enough
#: that a long task (an issue text plus instructions) can be clipped.
TASK_KEY_CHARS = 120


@dataclass(frozen=True)
class SummaryRequest:
    """What to summarise: ``messages`` (the span replaced); ``task`` (the original task; ``None``: the
    span's first user message); ``previous_summary`` (an earlier compaction's, to update);
    ``focus`` (what ``/compact focus`` asked to keep); ``max_chars`` (the cap, default 4000);
    ``pinned`` (texts kept verbatim); ``ref`` (the ``cw:`` reference of the originals, which the
    summary names); ``memo`` (where :func:`request_facts` keeps the facts; no part of equality);
    ``held`` (paths and names the request holds beside the summary, which its names index need not
    repeat); ``task_held`` (the task's message is kept beside it: quote only its opening)."""

    messages: tuple[Message, ...]
    task: str | None = None
    previous_summary: str | None = None
    focus: str | None = None
    max_chars: int = 4000
    pinned: tuple[str, ...] = ()
    ref: str | None = None
    memo: Memo | None = field(default=None, compare=False, repr=False)
    held: frozenset[str] = frozenset()
    task_held: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.messages, tuple):
            object.__setattr__(self, "messages", tuple(self.messages))
        if not isinstance(self.pinned, tuple):
            object.__setattr__(self, "pinned", tuple(self.pinned))
        if not isinstance(self.held, frozenset):
            object.__setattr__(self, "held", frozenset(self.held))
        if self.max_chars <= 0:
            raise ValueError(f"SummaryRequest.max_chars must be positive, got {self.max_chars}")


@runtime_checkable
class Summarizer(Protocol):
    """Turns a :class:`SummaryRequest` into a four-part summary.

    Implementations raise :class:`~contextwarden.SummarizerError` when they cannot produce one
    (the engine then falls back to the extractive summarizer and emits an event); they never
    return an empty or untagged text. ``name`` identifies the summarizer in events and cache
    keys.
    """

    name: str

    def summarize(self, request: SummaryRequest) -> str: ...

    async def asummarize(self, request: SummaryRequest) -> str: ...


def replaced_chars(request: SummaryRequest) -> int:
    """Characters of what the summary replaces: the span (text, thinking, tool calls and
    results) and the earlier summary it updates, which it stands in for as well."""
    return sum(m.char_count for m in request.messages) + len(request.previous_summary or "")


def effective_cap(request: SummaryRequest) -> int:
    """The length a summary may have: ``max_chars``, and at most half of what it replaces (so
    it is clearly smaller; :func:`check_summary` rejects above 60%)."""
    return min(request.max_chars, int(replaced_chars(request) * TARGET_SUMMARY_RATIO))


def request_facts(request: SummaryRequest) -> Facts:
    """:func:`~contextwarden.analysis.facts.extract_facts` for a request; kept in the
    request's ``memo`` (when it has one) by the content of its messages, task and previous
    summary: a compaction reads them for the summary and again for :func:`check_summary`.
    :class:`Facts` values are immutable, so sharing them is safe."""
    memo = request.memo
    if memo is None:
        return extract_facts(
            request.messages, task=request.task, previous_summary=request.previous_summary
        )
    key = (
        "facts",
        request.task or "",
        request.previous_summary or "",
        tuple([m.fingerprint for m in request.messages]),
    )
    return memo.keep(
        key,
        lambda: extract_facts(
            request.messages,
            task=request.task,
            previous_summary=request.previous_summary,
            memo=memo,
        ),
        facts_size,
    )


def facts_size(facts: Facts) -> int:
    """About how many characters ``facts`` holds (what a memo counts it as)."""
    n = sum(len(c.command) + len(c.key) + 64 for c in facts.commands)
    n += sum(len(t.path) + 48 for t in (*facts.files, *facts.earlier_files))
    n += sum(len(e.key) + len(e.excerpt) + 64 for e in facts.errors)
    n += sum(len(t.text) + 32 for t in facts.plan)
    n += sum(len(x) for x in (*facts.pins, *facts.memories, *facts.diff_stat))
    if facts.earlier is not None:
        n += sum(len(facts.earlier.get(s)) for s in SECTIONS)
    n += sum(len(m.name) + 64 for m in (*facts.code.paths, *facts.code.names))
    n += sum(sum(len(x) for x in w.lines) + 48 for w in facts.working)
    return n


def _norm(text: str) -> str:
    return " ".join(text.split())


def task_key(task: str) -> str:
    """The opening of ``task`` (whitespace collapsed) that a summary must contain."""
    return _norm(task)[:TASK_KEY_CHARS].rstrip()


def check_summary(
    summary: str,
    request: SummaryRequest,
    facts: Facts | None = None,
    *,
    max_ratio: float = MAX_SUMMARY_RATIO,
) -> list[str]:
    """Problems that make ``summary`` unfit to replace ``request.messages`` (empty when fit): empty or
    not four sections; over ``request.max_chars`` or over ``max_ratio`` (0.6) of what it replaces;
    missing (whitespace aside) the task's opening (:func:`task_key`), a pinned text, a file path
    written in the span or the last unresolved error's signature. ``facts``: default
    :func:`request_facts`."""
    problems: list[str] = []
    if not summary.strip():
        return ["summary is empty"]
    facts = facts if facts is not None else request_facts(request)
    try:
        parse_summary(summary)
    except Exception as exc:  # the parse error names the missing tags
        problems.append(str(exc))
    size, replaced = len(summary), replaced_chars(request)
    if size > request.max_chars:
        problems.append(f"summary has {size} chars, over max_chars={request.max_chars}")
    if size > max_ratio * replaced:
        problems.append(
            f"summary has {size} chars, not clearly smaller than the {replaced} chars it "
            f"replaces (limit {max_ratio:.0%} = {int(max_ratio * replaced)})"
        )
    flat = _norm(summary)
    task = facts.task or request.task  # the user's words, without the client's blocks
    if task and task_key(task) not in flat:
        problems.append(f"missing the original task (its opening {task_key(task)[:60]!r}...)")
    pins = dict.fromkeys((*request.pinned, *facts.pins))
    problems += [f"missing pinned text {_norm(p)[:60]!r}" for p in pins if _norm(p) not in flat]
    problems += [
        f"missing modified file path {p!r}" for p in facts.changed_files if p not in summary
    ]
    error = facts.last_unresolved_error
    if error is not None and _norm(error.key) not in flat:
        problems.append(f"missing the last unresolved error {error.key[:80]!r}")
    return problems


def summary_cache_key(request: SummaryRequest, summarizer: Summarizer | str | None = None) -> str:
    """A hex digest identifying this summary: the replaced messages' fingerprints, the previous
    summary, task, focus, cap, pins and reference, and the summarizer (its ``config_id`` when it has one,
    else its ``name``; or a string). Equal keys mean the same summary can be reused."""
    if summarizer is None:
        ident = ""
    elif isinstance(summarizer, str):
        ident = summarizer
    else:
        ident = str(getattr(summarizer, "config_id", None) or summarizer.name)
    h = hashlib.blake2b(digest_size=20)
    for part in (
        "contextwarden-summary-v1",
        ident,
        request.task or "",
        request.previous_summary or "",
        request.focus or "",
        str(request.max_chars),
        *request.pinned,
        *((f"ref={request.ref}",) if request.ref else ()),
        *((f"held={chr(31).join(sorted(request.held))}",) if request.held else ()),
        *(("task_held",) if request.task_held else ()),
    ):
        h.update(part.encode("utf-8", "surrogatepass") + b"\x00")
    h.update(b"\x01")
    if request.messages:  # each fingerprint (hex digits) and a NUL, hashed at once
        h.update(("\x00".join([m.fingerprint for m in request.messages]) + "\x00").encode())
    return h.hexdigest()
