"""The four-part summary as a value, and a renderer that fits it under a length cap.

A summary is four XML-tagged sections, always in this order::

    <completed>      what was done (one item a line)
    <remaining>      what is left: the original task, open todo items
    <current_state>  files changed, the last unresolved error, environment facts
    <notes>          pinned content, pitfalls met, findings

:func:`parse_summary` reads one (an LLM's reply, or an earlier summary); :func:`fit` renders a
list of prioritised :class:`Entry` values into the four sections, adding the most important
entries first until the character cap is reached. Both are pure and deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .._exceptions import SummarizerError

__all__ = [
    "REF_RE",
    "SECTIONS",
    "Entry",
    "SummarySections",
    "clip",
    "fit",
    "heading_name",
    "looks_like_summary",
    "with_ref",
    "parse_summary",
]

#: The tags, in the order they are written.
SECTIONS: tuple[str, ...] = ("completed", "remaining", "current_state", "notes")

_SECTION_RE = {
    name: re.compile(rf"<{name}>\s*(.*?)\s*</{name}>", re.DOTALL | re.IGNORECASE)
    for name in SECTIONS
}


@dataclass(frozen=True)
class SummarySections:
    """The four sections' bodies (plain text, without tags)."""

    completed: str = ""
    remaining: str = ""
    current_state: str = ""
    notes: str = ""

    def get(self, name: str) -> str:
        return str(getattr(self, name))

    def render(self) -> str:
        """The sections as tagged text, each body on its own lines."""
        bodies = ((name, self.get(name).strip("\n")) for name in SECTIONS)
        return "\n".join(f"<{n}>\n{b}\n</{n}>" if b else f"<{n}>\n</{n}>" for n, b in bodies)


_REF_SUFFIX = re.compile(r"\s*\(recall cw:[0-9a-f]+\)\s*$")
#: A ``cw:`` reference as written in summaries.
REF_RE = re.compile(r"\bcw:[0-9a-f]{6,}\b")


def with_ref(heading: str, ref: str | None) -> str:
    """``heading`` naming the reference its lines can be recalled from."""
    return f"{heading} (recall {ref})" if ref else heading


def heading_name(heading: str) -> str:
    """``heading`` without the reference :func:`with_ref` added."""
    return _REF_SUFFIX.sub("", heading)


def looks_like_summary(text: str) -> bool:
    """Whether ``text`` holds a four-part summary (at least the first and last tags)."""
    lowered = text.lower()
    return "<completed>" in lowered and "</notes>" in lowered


def parse_summary(text: str, *, strict: bool = True) -> SummarySections:
    """Read the four tagged sections from ``text`` (text outside the tags is ignored).

    With ``strict`` (the default), raise :class:`SummarizerError` naming the missing tags when
    any of the four is absent, or when all four are empty. Without it, missing sections are
    empty and nothing is raised.
    """
    found = {name: _SECTION_RE[name].search(text) for name in SECTIONS}
    missing = [f"<{name}>" for name, m in found.items() if m is None]
    sections = SummarySections(**{n: m.group(1).strip() if m else "" for n, m in found.items()})
    if strict:
        if missing:
            excerpt = " ".join(text.split())[:120]
            raise SummarizerError(
                f"summary is missing {', '.join(missing)} (expected the four tagged sections "
                f"completed/remaining/current_state/notes); got {excerpt!r}"
            )
        if not any(sections.get(n).strip() for n in SECTIONS):
            raise SummarizerError("summary has the four tags but every section is empty")
    return sections


def clip(text: str, limit: int, marker: str = " [...]") -> str:
    """``text`` cut to at most ``limit`` characters, ending with ``marker`` when cut."""
    if len(text) <= limit:
        return text
    if limit <= len(marker):
        return text[: max(limit, 0)]
    return text[: limit - len(marker)].rstrip() + marker


@dataclass(frozen=True)
class Entry:
    """One line (or block) of a summary.

    ``section``: which of the four sections it goes to. ``group``: a heading the entry is listed
    under (entries of one group are written together under ``group:``); ``None`` writes the
    text on its own. ``tier``: importance, 0 first; entries are admitted tier by tier, and within
    a tier by descending ``recency`` (larger = more recent). ``order``: where it is written
    inside its section (groups keep the order of their first entry). ``bullet``: prefix with
    ``"- "``. ``min_chars``: when the full text does not fit, it may be clipped down to this many
    characters (0: all or nothing).
    """

    section: str
    text: str
    tier: int
    order: tuple[int, ...]
    group: str | None = None
    recency: int = 0
    bullet: bool = True
    min_chars: int = 0


def _line(entry: Entry, text: str) -> str:
    return f"- {text}\n" if entry.bullet else f"{text}\n"


#: Entries of tiers up to this one are the must-keep facts: a clippable one among them is
#: clipped only after every whole must-keep entry has had its chance to fit.
MUST_KEEP_TIER = 3


def fit(entries: Iterable[Entry], cap: int) -> str:
    """Render ``entries`` into the four sections, admitting the most important first, so the
    result has at most ``cap`` characters.

    Admission is greedy and deterministic: entries sorted by (tier, -recency, order); each is
    added whole if it fits, else skipped (a smaller entry after it may still fit). An entry
    that allows clipping (``min_chars``) and does not fit whole is clipped to the room left once
    the entries of its tier have been placed (for the must-keep tiers 0-3: once all of them
    have), so one long pinned text cannot crowd out the file list. The empty scaffold of four
    tag pairs always counts; when ``cap`` is smaller than it, the scaffold alone is returned.
    """
    items = list(entries)
    for e in items:
        if e.section not in SECTIONS:
            raise ValueError(f"unknown section {e.section!r}; expected one of {SECTIONS}")
    used = sum(len(f"<{n}>\n</{n}>\n") for n in SECTIONS) - 1  # no newline after the last
    admitted: dict[int, str] = {}
    open_groups: set[tuple[str, str]] = set()
    deferred: list[int] = []

    def overhead(e: Entry) -> int:
        # "group:\n" when the entry opens its group
        return len(e.group) + 2 if e.group and (e.section, e.group) not in open_groups else 0

    def admit(i: int, text: str) -> None:
        nonlocal used
        e = items[i]
        used += overhead(e) + len(_line(e, text))
        admitted[i] = text
        if e.group:
            open_groups.add((e.section, e.group))

    def flush(up_to_tier: int | None) -> None:
        nonlocal deferred
        due = [
            d
            for d in deferred
            if up_to_tier is None or max(items[d].tier, MUST_KEEP_TIER) < up_to_tier
        ]
        taken = set(due)
        deferred = [d for d in deferred if d not in taken]
        for i in due:
            e = items[i]
            room = cap - used - overhead(e) - len(_line(e, ""))
            if room >= e.min_chars:
                admit(i, clip(e.text, room))

    ranked = sorted(
        range(len(items)), key=lambda i: (items[i].tier, -items[i].recency, items[i].order, i)
    )
    tier: int | None = None
    for i in ranked:
        e = items[i]
        # entries come in tier order, and a flush at a tier leaves only those it cannot take
        # yet: a second flush at the same tier would find nothing to place
        if e.tier != tier:
            tier = e.tier
            flush(tier)
        if used + overhead(e) + len(_line(e, e.text)) <= cap:
            admit(i, e.text)
        elif e.min_chars:
            deferred.append(i)
    flush(None)
    return _render(items, admitted)


def _render(items: Sequence[Entry], admitted: dict[int, str]) -> str:
    bodies: dict[str, list[str]] = {n: [] for n in SECTIONS}
    for name in SECTIONS:
        chosen = sorted(
            (i for i in admitted if items[i].section == name), key=lambda i: (items[i].order, i)
        )
        # Entries of one group are written together, at the place of the group's first entry.
        first_of_group: dict[str, tuple[int, ...]] = {}
        for i in chosen:
            g = items[i].group
            if g and g not in first_of_group:
                first_of_group[g] = items[i].order
        chosen.sort(
            key=lambda i: (
                first_of_group.get(items[i].group or "", items[i].order),
                items[i].group or "",
                items[i].order,
                i,
            )
        )
        current: str | None = None
        for i in chosen:
            e = items[i]
            if e.group != current:
                current = e.group
                if e.group:
                    bodies[name].append(f"{e.group}:\n")
            bodies[name].append(_line(e, admitted[i]))
    return "\n".join(f"<{name}>\n{''.join(bodies[name])}</{name}>" for name in SECTIONS)
