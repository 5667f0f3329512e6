"""The names index of a summary ("Files and code in play"): the files and code names of what it
replaces, ranked for the agent that will type them again (a name the summary does not carry is
gone until the agent searches again). Pure and deterministic.

:func:`names_index` merges two rankings, deduplicated by name:

- the span's own paths and names (:func:`~contextwarden.analysis.mentions.code_mentions`: what
  the agent wrote in its calls and prose first, later and repeated mentions weighing more);
- the earlier summary's index, which carries every earlier span's ranking in its order: its
  names count from one mention by the agent (the first) down to half a tool result's mention
  (the last, :data:`CARRY_TOP`, :data:`CARRY_LAST`), so what the agent relied on earlier keeps
  its place against what the new span only shows; a name in both adds up (it recurs), and a
  carried name listed under a file the new span works in again counts :data:`TOUCHED` times
  (the agent is back in that file).

Names the request holds beside the summary (``held``) are left out, and so is a file whose
path is the tail of one the summary or the request already writes (:func:`tails`); a path that
ends a longer candidate is folded into it. Each file comes with the names seen in it. Lines are
admitted by worth per character (:func:`density`: the summary's budget is in characters) and
written by worth, the order a later summary reads back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from ..analysis.mentions import WEIGHT_ACTION, WEIGHT_OUTPUT, CodeMentions
from ..analysis.sections import SECTIONS, SummarySections, heading_name

__all__ = ["INDEX_GROUP", "IndexLine", "earlier_index", "earlier_lines", "names_index", "tails"]

#: The heading of the index in a summary (with ``(recall cw:...)`` when the span has a reference).
INDEX_GROUP = "Files and code in play"
#: What a name of the earlier index counts, by its place there: the first as much as one
#: mention in the agent's own call at the start of the span (``WEIGHT_ACTION`` in
#: :mod:`contextwarden.analysis.mentions`), down linearly to half a tool result's mention
#: (``WEIGHT_OUTPUT / 2``) for the last. The top of an earlier index is what the agent typed
#: again and again in earlier spans: it keeps its place against names the new span shows once,
#: and gives way to what the agent writes now; the tail of it gives way to what the span defines.
CARRY_TOP = WEIGHT_ACTION
CARRY_LAST = WEIGHT_OUTPUT / 2
#: A carried name listed under a file the new span reads or edits again counts this many times
#: its carried score: the names of the file the agent is back in are the ones it types next.
TOUCHED = 2.0
#: Names listed under one file, at most.
NAMES_PER_PATH = 8
#: The loose names (not tied to a listed file) are written this many a line.
NAMES_PER_LINE = 12
#: What the index spends on a name beside its own characters: the ", " that separates it.
SEPARATOR = 2

_NOTE = re.compile(r"^(?P<path>\S+?)(?: \((?P<note>[a-z]+)\))?$")


@dataclass(frozen=True)
class IndexLine:
    """One line of the index: a file (``path``, with ``note``, its change, when it was
    written) and the names seen in it, or (``path`` None) a run of other names. ``rank`` is
    the line's place in the ranking by worth per character (0 first): the summary admits
    lines in that order. ``place`` is where the line is written (0 first): by worth alone, so
    that the order a later summary reads back (:data:`CARRY_TOP`) is the ranking of what the
    agent relied on, whatever the lengths of the names."""

    path: str | None
    names: tuple[str, ...]
    rank: int
    note: str | None = None
    place: int = 0

    @property
    def text(self) -> str:
        if self.path is None:
            return "names: " + ", ".join(self.names)
        label = f"{self.path} ({self.note})" if self.note else self.path
        return f"{label}: {', '.join(self.names)}" if self.names else label


def earlier_lines(earlier: SummarySections | None) -> Iterator[tuple[str, str, str]]:
    """``(section, heading, line)`` for each line of an earlier summary, in order: the heading
    it is under (without its reference; "Earlier (X)" read as X), the line with its right spaces
    off. A heading is a line of its own at the start (``Group:``); an indented line (what an
    entry continues with), a fence (`````) and the lines inside one never are."""
    if earlier is None:
        return
    for section in SECTIONS:
        heading, fenced = "", False
        for raw in earlier.get(section).splitlines():
            line, bare = raw.rstrip(), raw.strip()
            if not bare:
                continue
            if bare.startswith("```"):
                fenced = not fenced
            elif (
                not fenced
                and line == bare
                and line.endswith(":")
                and not line.startswith("- ")
                and len(line) < 90
            ):
                heading = heading_name(bare[:-1]).strip()
                if heading.startswith("Earlier (") and heading.endswith(")"):
                    heading = heading[len("Earlier (") : -1]
                continue
            yield section, heading, line


def earlier_index(earlier: SummarySections | None) -> list[tuple[str | None, tuple[str, ...]]]:
    """The index lines of an earlier summary, in its order: ``(path, names)`` for a file line,
    ``(None, names)`` for a line of loose names."""
    out: list[tuple[str | None, tuple[str, ...]]] = []
    for section, heading, line in earlier_lines(earlier):
        if section != "current_state" or heading != INDEX_GROUP or not line.startswith("- "):
            continue
        head, _, rest = line[2:].partition(": ")
        m = _NOTE.match(head)
        if head == "names":
            out.append((None, _split(rest)))
        elif m is not None:
            out.append((m.group("path"), _split(rest)))
    return out


def _split(text: str) -> tuple[str, ...]:
    return tuple(n for n in (x.strip() for x in text.split(",")) if n and " " not in n)


def tails(paths: Iterable[str]) -> set[str]:
    """Every shorter path that ends each of ``paths`` (``sem/a.go`` and ``a.go`` for
    ``/repo/sem/a.go``): a text that writes the long path holds each of them, and names the
    same file (an agent mixes a file's absolute and relative paths)."""
    out: set[str] = set()
    for p in paths:
        parts = p.split("/")
        out.update("/".join(parts[i:]) for i in range(1, len(parts)) if parts[i])
    return out


class _Ranked:
    def __init__(self) -> None:
        self.score: dict[str, float] = {}
        self.files: dict[str, list[str]] = {}  # name -> files it was seen in, latest last

    def add(self, name: str, score: float, files: Iterable[str] = ()) -> None:
        self.score[name] = self.score.get(name, 0.0) + score
        seen = self.files.setdefault(name, [])
        for f in files:
            if f in seen:
                seen.remove(f)
            seen.append(f)

    def value(self, name: str) -> float:
        """What writing ``name`` is worth per character it costs (:func:`density`)."""
        return density(self.score[name], name)

    def best(self) -> list[str]:
        """Best value per character first; a tie keeps the order names came in (the span's
        own ranking first)."""
        return sorted(self.score, key=lambda n: -self.value(n))


def density(score: float, name: str) -> float:
    """``score`` per character the index spends on ``name`` (its text and the ", " after it).
    The index has a budget in characters, so it holds the most expected uses when it admits
    names by their worth per character: one long path costs as much room as five short names,
    and the agent is about as likely to type again each of the five."""
    return score / (len(name) + SEPARATOR)


def names_index(
    code: CodeMentions,
    earlier: SummarySections | None = None,
    *,
    status: Mapping[str, str] | None = None,
    held: frozenset[str] = frozenset(),
    max_paths: int = 40,
    max_names: int = 240,
) -> list[IndexLine]:
    """The index lines, best first (see the module docstring). ``status``: each path's change
    (``modified``, ``created``...) to note beside it; ``held``: names the request holds outside
    the summary; at most ``max_paths`` files and ``max_names`` names."""
    status = status or {}
    paths, names = _Ranked(), _Ranked()
    for m in code.paths:
        paths.add(m.name, m.score)
    for m in code.names:
        names.add(m.name, m.score, m.files)
    touched = {m.name for m in code.paths} | set(status)
    lines = earlier_index(earlier)
    last = max(sum(1 + len(ns) for _, ns in lines) - 1, 1)
    ramp = iter(CARRY_TOP - (CARRY_TOP - CARRY_LAST) * at / last for at in range(last + 1))
    for path, ns in lines:
        if path is not None:
            paths.add(path, next(ramp))
        boost = TOUCHED if path in touched else 1.0
        for n in ns:
            names.add(n, boost * next(ramp), (path,) if path else ())
    _fold_tails(paths, names)
    return _lines(paths, names, status, held, max_paths, max_names)


def _fold_tails(paths: _Ranked, names: _Ranked) -> None:
    """Each path that ends a longer candidate (``src/app.py`` beside ``/repo/src/app.py``)
    folded into it: one file, written once by its longest path, which holds the shorter one;
    its score and the names seen in it go to that path (the best scored, when several end
    with it). Shortest first, so a chain of tails ends in the longest path."""
    longer: dict[str, list[str]] = {}
    for q in paths.score:
        for t in tails([q]):
            longer.setdefault(t, []).append(q)
    into: dict[str, str] = {}
    for p in sorted(paths.score, key=len):
        if p not in longer:
            continue
        q = max(longer[p], key=lambda x: paths.score[x])  # first of the best on a tie
        paths.score[q] += paths.score.pop(p)
        into[p] = q
    for seen in names.files.values() if into else ():
        for i, f in enumerate(seen):
            while f in into:
                seen[i] = f = into[f]


def _lines(
    paths: _Ranked,
    names: _Ranked,
    status: Mapping[str, str],
    held: frozenset[str],
    max_paths: int,
    max_names: int,
) -> list[IndexLine]:
    # a scratch script's name is its file's: listed with the file already
    stems = {p.rsplit("/", 1)[-1].split(".", 1)[0] for p in (*status, *paths.score)}
    # a name of fewer than three letters (``w3_14_2``, ``x_1``) is a generated label, not a name
    # the agent will type again from memory
    wanted = [
        n
        for n in names.best()
        if n not in held and n not in stems and sum(c.isalpha() for c in n) >= 3
    ][:max_names]
    by_file: dict[str, list[str]] = {}
    for n in wanted:
        seen = names.files.get(n)
        if seen:
            by_file.setdefault(seen[-1], []).append(n)
    shown: set[str] = set()
    # paths the summary's file list or the request writes whole: their tails need no line
    written = held | tails([*held, *(p for p, how in status.items() if how != "read")])
    found: list[tuple[float, float, str | None, tuple[str, ...], str | None]] = []
    for path in paths.best():
        if len(found) >= max_paths:
            break
        ns = [n for n in by_file.get(path, ()) if n not in shown][:NAMES_PER_PATH]
        note = status.get(path)
        note = note if note not in (None, "read") else None
        if path in written and not ns:
            continue  # written already, and there is nothing to add to it
        shown.update(ns)
        value = max([paths.value(path), *(names.value(n) for n in ns)])
        score = max([paths.score[path], *(names.score[n] for n in ns)])
        found.append((value, score, path, tuple(ns), note))
    loose = [n for n in wanted if n not in shown]
    for start in range(0, len(loose), NAMES_PER_LINE):
        chunk = tuple(loose[start : start + NAMES_PER_LINE])
        found.append((names.value(chunk[0]), names.score[chunk[0]], None, chunk, None))
    place = {i: at for at, i in enumerate(sorted(range(len(found)), key=lambda i: -found[i][1]))}
    ranked = sorted(range(len(found)), key=lambda i: -found[i][0])  # stable: ties keep order
    return [IndexLine(*found[i][2:4], rank, found[i][4], place[i]) for rank, i in enumerate(ranked)]
