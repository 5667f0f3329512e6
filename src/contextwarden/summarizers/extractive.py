"""The embedded summarizer: no LLM, deterministic, built from the history itself.

:class:`ExtractiveSummarizer` writes the four sections from the span's facts, most important
first until the cap (``min(max_chars, half the replaced characters)``): the task and focus;
pins; files changed; the last unresolved error; the open plan; diff stat, other errors, the
last command, the working set; commands run and done items; findings and fixed errors; files
only read and what an earlier summary said. The same request gives the same bytes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace

from .._exceptions import SummarizerError
from ..analysis.facts import CommandRun, Facts
from ..analysis.sections import REF_RE, SECTIONS, Entry, SummarySections, clip, fit, with_ref
from ..analysis.working import EditSite
from ._index import INDEX_GROUP, earlier_lines, names_index, tails
from .base import SummaryRequest, effective_cap, request_facts

__all__ = ["MIN_SUMMARY_CHARS", "ExtractiveSummarizer", "facts_entries"]

#: Below this cap there is no room for a useful four-part summary; summarising is refused.
MIN_SUMMARY_CHARS = 200
#: Share of the cap the task may take before it is clipped: the task is kept verbatim in the
#: original first message, which compaction never drops, so its opening is enough here (the
#: room goes to what the agent learnt since).
TASK_SHARE = 0.1
#: the shortest quote of the task, and the whole of it when the request holds the task
TASK_QUOTE_CHARS = 240

_EARLIER_SKIP = {
    "original task",
    "files changed",
    "focus",
    "working set",
    "pinned (verbatim)",
    "user instructions (verbatim, in order)",
    INDEX_GROUP.lower(),
}


def _command_line(run: CommandRun, count: int) -> str:
    cmd = clip(run.key or run.command, 120)
    if run.ok is None:
        status = "no result seen"
    elif run.exit_code is not None:
        status = f"exit {run.exit_code}" + ("" if run.ok else " (failed)")
    else:
        status = "ok" if run.ok else "failed"
    runs = f", {count} runs" if count > 1 else ""
    return f"`{cmd}` -> {status}{runs}"


def facts_entries(
    facts: Facts,
    *,
    task: str | None,
    pinned: tuple[str, ...] = (),
    focus: str | None = None,
    cap: int = 4000,
    ref: str | None = None,
    held: frozenset[str] = frozenset(),
    task_held: bool = False,
) -> Iterator[Entry]:
    """The prioritised entries a summary of ``facts`` is made of (see the module docstring for
    the tiers); the groups drawn from the span name ``ref``, its ``cw:`` reference. Shared
    with the LLM summarizer, which adds the must-keep ones to its output."""
    # remaining: the task, the focus, the open plan --------------------------------------------
    task_text = facts.task or task  # the user's own words (client-injected blocks removed)
    if task_text:
        # the request holds the task's message beside the summary: its opening identifies it
        limit = TASK_QUOTE_CHARS if task_held else max(TASK_QUOTE_CHARS, int(cap * TASK_SHARE))
        text = clip(task_text.strip(), limit)
        yield Entry("remaining", text, 0, (0,), "Original task", 0, False, 160)
    if focus:
        yield Entry(
            "remaining", f"Focus requested: {clip(focus.strip(), 300)}", 0, (1,), bullet=False
        )
    yield from _instruction_entries(facts, cap)
    open_items = [t for t in facts.plan if t.status != "completed"]
    if facts.plan:
        label = (
            "Open todo items"
            if facts.plan_source not in ("", "text")
            else f"Latest plan (message {facts.plan_index})"
        )
        for i, item in enumerate(open_items):
            mark = " (in progress)" if item.status == "in_progress" else ""
            yield Entry("remaining", clip(item.text, 200) + mark, 4, (2, i), label, recency=-i)
    # completed: done items, commands, fixed errors -----------------------------------------
    for i, item in enumerate(t for t in facts.plan if t.status == "completed"):
        yield Entry("completed", clip(item.text, 200), 6, (0, i), "Done", recency=i)
    by_key: dict[str, list[CommandRun]] = {}
    for run in facts.commands:
        if run.read_only or run.key.startswith(("file:", "tool:")) or not run.key:
            continue
        by_key.setdefault(run.key, []).append(run)
    for runs in by_key.values():
        latest = runs[-1]
        yield Entry(
            "completed",
            _command_line(latest, len(runs)),
            6,
            (1, latest.index),
            with_ref("Commands run", ref),
            recency=latest.index,
        )
    reads = sum(1 for r in facts.commands if r.read_only)
    if reads:
        yield Entry(
            "completed",
            f"{reads} read-only commands or file views (searches, listings, reads)",
            8,
            (2,),
            bullet=False,
        )
    # what was done, in the files: each path written, with what happened to it
    status = facts.file_status()
    for i, (touched, how) in enumerate(status.items()):
        if how != "read":
            yield Entry("completed", f"{how} {touched}", 6, (4, i), "Done to files", recency=i)
    viewed = [p for p, a in status.items() if a == "read"]
    if viewed:
        yield Entry("completed", "Read: " + ", ".join(viewed[-READ_PATHS:]), 7, (5,), bullet=False)
    for err in facts.errors:
        if err.fixed:
            yield Entry(
                "completed",
                f"{clip(err.key, 160)} (from {clip(err.source, 80)}; "
                f"fixed by message {err.fixed_at})",
                7,
                (3, err.index),
                "Errors fixed",
                recency=err.index,
            )
    # current state: files, last error, diff stat -------------------------------------------
    files_group = with_ref("Files changed", ref)
    by_action: dict[str, list[str]] = {}
    within = tails(facts.changed_files)  # ``sem/a.go`` beside ``/repo/sem/a.go``: written once
    for i, path in enumerate(facts.changed_files):
        if path in within:
            continue
        if status[path] == "modified":  # one a line: the files the task is about
            yield Entry("current_state", path, 2, (0, i), files_group)
        else:  # scratch scripts and patches pile up: one line per action
            by_action.setdefault(status[path], []).append(path)
    for n, (action, paths) in enumerate(by_action.items()):
        text = f"{action}: {', '.join(paths)}"
        yield Entry("current_state", text, 2, (0, len(status) + n), files_group)
    last = facts.last_unresolved_error
    last_group = with_ref("Last unresolved error", ref)
    if last is not None:
        yield Entry("current_state", last.key, 3, (1, 0), last_group, bullet=False)
        yield Entry(
            "current_state",
            f"(from {clip(last.source, 160)}, message {last.index})",
            3,
            (1, 1),
            last_group,
            bullet=False,
        )
        excerpt = "\n".join("  > " + ln for ln in last.excerpt.splitlines() if ln.strip())
        if excerpt and excerpt.strip("> ") != last.key:
            yield Entry("current_state", excerpt, 6, (1, 2), last_group, bullet=False, min_chars=80)
    yield from _working_entries(facts, ref)
    for i, line in enumerate(facts.diff_stat):
        yield Entry("current_state", line, 5, (2, i), "Latest git diff --stat", recency=-i)
    if facts.commands:
        final = facts.commands[-1]
        yield Entry(
            "current_state", f"Last command: {_command_line(final, 1)}", 5, (3,), bullet=False
        )
    yield from _code_entries(facts, ref, cap, held)
    # notes: pins, other errors, findings, what an earlier summary said -----------------------
    carried = [ln.strip() for _, h, ln in earlier_lines(facts.earlier) if h == "Pinned (verbatim)"]
    pins = list(dict.fromkeys((*pinned, *facts.pins, *carried)))
    for i, pin in enumerate(pins):
        yield Entry("notes", pin, 1, (0, i), "Pinned (verbatim)", bullet=False, min_chars=80)
    others = [e for e in facts.unresolved_errors if e is not last][-4:]
    for err in others:
        yield Entry(
            "notes",
            f"{clip(err.key, 200)} (from {clip(err.source, 80)}, message {err.index})",
            5,
            (1, err.index),
            with_ref("Other unresolved errors", ref),
            recency=err.index,
        )
    for i, memory in enumerate(facts.memories):
        yield Entry("notes", clip(memory, 240), 7, (2, i), "Findings", recency=i)
    earlier_refs = [r for r in _earlier_refs(facts) if r != ref]
    if earlier_refs:
        # the newest spans' references must stay; the older ones give way to what the agent
        # needs next (a long session piles up one reference per compaction)
        older, newer = earlier_refs[:-EARLIER_REFS], earlier_refs[-EARLIER_REFS:]
        yield Entry(
            "notes", "Earlier spans, recallable: " + ", ".join(newer), 1, (3,), bullet=False
        )
        if older:
            yield Entry(
                "notes",
                "Older spans, recallable: " + ", ".join(older),
                8,
                (4,),
                bullet=False,
                min_chars=60,
            )
    yield from _earlier_entries(facts.earlier)


#: The heading the user's later instructions are listed under.
INSTRUCTIONS = "User instructions (verbatim, in order)"
#: A later instruction of the user's is quoted up to this many characters.
INSTRUCTION_CHARS = 1_200
#: The share of the cap the user's later instructions fill verbatim, newest first, ahead of
#: the names index and the working set; older ones beyond it rank with the commands run and
#: are clipped to their opening (:data:`INSTRUCTION_OPENING` characters) where room is short,
#: and are recallable by the span's reference. Without a share, a session where the user pastes logs fills every summary with
#: them and the index of the code in play is crowded out.
INSTRUCTIONS_SHARE = 0.25
INSTRUCTION_OPENING = 120


def _instruction_entries(facts: Facts, cap: int) -> Iterator[Entry]:
    """Every later instruction of the user's (those an earlier summary carried, then the
    span's), in order, verbatim within :data:`INSTRUCTIONS_SHARE` of the cap, newest first;
    a multi-line instruction's lines after the first are indented, so it reads back whole."""
    said = list(dict.fromkeys((*_earlier_instructions(facts.earlier), *facts.instructions)))
    used = 0
    for i in range(len(said) - 1, -1, -1):
        text = clip(said[i], INSTRUCTION_CHARS).replace("\n", "\n  ")
        used += len(text) + 3
        whole = used <= cap * INSTRUCTIONS_SHARE
        yield Entry(
            "remaining",
            text,
            4 if whole else 6,
            (1, i),
            INSTRUCTIONS,
            i,
            True,
            min(len(text), INSTRUCTION_OPENING),
        )


def _earlier_instructions(earlier: SummarySections | None) -> list[str]:
    """The instructions an earlier summary listed, in order (an indented line continues the
    one before it)."""
    out: list[str] = []
    for _, heading, line in earlier_lines(earlier):
        if heading != INSTRUCTIONS:
            continue
        if line.startswith("  ") and out:
            out[-1] += "\n" + line[2:]
        else:
            out.append(line.removeprefix("- ").strip())
    return out


#: The files a summary names as read (the newest).
READ_PATHS = 12

#: The newest earlier spans whose references a summary always carries.
EARLIER_REFS = 4

#: The working set shows at most this many edit sites (newest first), each at most this long.
WORKING_SITES = 2
WORKING_SITE_CHARS = 600


_SITE_HEAD = re.compile(r"^- (?P<path>\S+), around the edit of (?:message \d+|an earlier span):$")
#: An earlier summary's site counts as older than every site of the span.
_EARLIER_SITE = -1


def _earlier_sites(earlier: SummarySections | None) -> list[EditSite]:
    """The working set an earlier summary quoted, in its order: each site's head line and the
    fenced lines under it."""
    out: list[EditSite] = []
    path: str | None = None
    body: list[str] = []
    for _, heading, line in earlier_lines(earlier):
        if heading != "Working set":
            continue
        head = _SITE_HEAD.match(line)
        if head is not None:
            path, body = head["path"], []
        elif line.strip() != "```":
            body.append(line)
        elif body and path is not None:  # the closing fence
            out.append(EditSite(path, _EARLIER_SITE, tuple(body)))
            path = None
    return out


def _working_entries(facts: Facts, ref: str | None) -> Iterator[Entry]:
    """The file's lines around the latest edits, verbatim in a fenced block: the text the next
    edit there must quote. The span's sites come first, newest first, then those the earlier
    summary quoted in files the span did not edit (the agent comes back to them after a span
    of tests or reading); a site whose lines an already listed site holds is skipped."""
    group = with_ref("Working set", ref)
    shown: dict[str, set[str]] = {}
    edited = {site.path for site in facts.working}
    # a file the span edited again has fresher lines than what an earlier summary quoted
    earlier = [s for s in _earlier_sites(facts.earlier) if s.path not in edited]
    n = 0
    for site in [*reversed(facts.working), *earlier]:
        if n >= WORKING_SITES:
            break
        lines = list(site.lines)
        seen = shown.setdefault(site.path, set())
        if all(ln.strip() in seen for ln in lines if ln.strip()):
            continue
        at = f"message {site.index}" if site.index >= 0 else "an earlier span"
        head = f"- {site.path}, around the edit of {at}:"
        kept: list[str] = []
        size = len(head) + 10
        for ln in lines:
            if size + len(ln) + 1 > WORKING_SITE_CHARS:
                break
            kept.append(ln)
            size += len(ln) + 1
        if not kept:
            continue
        seen.update(ln.strip() for ln in kept)
        body = "\n".join(kept)
        yield Entry(
            "current_state",
            f"{head}\n```\n{body}\n```",
            4 if n == 0 else 5,  # the newest site goes with the names index, ahead of it
            (1, 10 + n),
            group,
            recency=site.index,
            bullet=False,
        )
        n += 1


#: The share of the cap the names index may fill ranking with the open plan (tier 4): a name
#: costs a summary a dozen characters and is what the agent types again (paths, functions,
#: tests, variables), so names go before the detail of past commands and findings; the rest of
#: the index ranks after the commands run (tier 7).
INDEX_SHARE = 0.65


def _code_entries(
    facts: Facts, ref: str | None, cap: int, held: frozenset[str] = frozenset()
) -> Iterator[Entry]:
    """The names index (:func:`~._index.names_index`): each file in play with the functions,
    classes and tests seen in it, then the other names the agent used, best first, carried over
    from the earlier summary, without what the request holds beside the summary."""
    group = with_ref(INDEX_GROUP, ref)
    lines = names_index(facts.code, facts.earlier, status=facts.file_status(), held=held)
    listed: set[str] = set()
    used = 0
    for line in lines:
        if line.path is not None:
            listed.add(line.path)
            if line.note is not None and not line.names:
                continue  # already under "Files changed", and nothing to add to it
        text = line.text
        used += len(text) + 3
        yield Entry(
            "current_state",
            text,
            4 if used <= cap * INDEX_SHARE else 7,
            (4, line.place),
            group,
            recency=-line.rank,
            min_chars=40 if line.path is None else len(line.path) + 8,
        )
    within = listed | held | tails(listed)  # a file the index writes by a longer path
    rest = [p for p in facts.read_files if p not in within]
    for i, path in enumerate(rest):
        yield Entry("current_state", path, 8, (5, i), group, recency=-len(lines) - i)


def _earlier_refs(facts: Facts) -> list[str]:
    """The ``cw:`` references an earlier summary in the span named, oldest first."""
    if facts.earlier is None:
        return []
    text = "\n".join(facts.earlier.get(n) for n in SECTIONS)
    return list(dict.fromkeys(REF_RE.findall(text)))


def _earlier_entries(earlier: SummarySections | None) -> Iterator[Entry]:
    for i, (name, heading, line) in enumerate(earlier_lines(earlier)):
        text = line.strip().removeprefix("- ")
        if heading.lower() in _EARLIER_SKIP or text.startswith("```"):
            continue  # the task, files, pins, instructions and edit sites have their own entries
        if text.startswith(("Earlier spans, recallable:", "Older spans, recallable:")):
            continue  # carried by its own entry, with the references this summary adds
        group = f"Earlier ({heading})" if heading not in ("", "Earlier") else "Earlier"
        yield Entry(name, clip(text, 240), 8, (5, i), group, recency=-1 - i)


class ExtractiveSummarizer:
    """The embedded, deterministic summarizer (no LLM). See the module docstring.

    ``max_chars``, when given, caps every summary below the request's own ``max_chars``.
    Raises :class:`~contextwarden.SummarizerError` when the span is empty or too small to
    summarise (cap under :data:`MIN_SUMMARY_CHARS`).
    """

    name = "extractive"

    def __init__(self, *, max_chars: int | None = None) -> None:
        if max_chars is not None and max_chars < MIN_SUMMARY_CHARS:
            raise ValueError(
                f"ExtractiveSummarizer max_chars must be at least {MIN_SUMMARY_CHARS}, "
                f"got {max_chars}"
            )
        self.max_chars = max_chars

    @property
    def config_id(self) -> str:
        """Identifies this summarizer and its settings in cache keys."""
        return f"extractive:v1:max_chars={self.max_chars}"

    def summarize(self, request: SummaryRequest) -> str:
        """The four-part summary of ``request.messages``."""
        if not request.messages:
            raise SummarizerError("nothing to summarise: the request has no messages")
        cap = effective_cap(request)
        if self.max_chars is not None:
            cap = min(cap, self.max_chars)
        if cap < MIN_SUMMARY_CHARS:
            raise SummarizerError(
                f"span too small to summarise: {cap} chars allowed (max_chars="
                f"{request.max_chars}, half of the replaced text), need {MIN_SUMMARY_CHARS}"
            )
        facts = request_facts(request)
        focus = (request.focus or "").lower()
        words = frozenset(w for w in re.findall(r"[\w./-]+", focus) if len(w) >= 4)
        entries = facts_entries(
            facts,
            task=request.task,
            pinned=request.pinned,
            focus=request.focus,
            cap=cap,
            ref=request.ref,
            held=request.held,
            task_held=request.task_held,
        )
        # what the user asked to keep moves up two tiers (never above the must-keep ones)
        return fit(
            (
                replace(e, tier=max(2, e.tier - 2))
                if words and e.tier > 2 and any(w in e.text.lower() for w in words)
                else e
                for e in entries
            ),
            cap,
        )

    async def asummarize(self, request: SummaryRequest) -> str:
        """Same as :meth:`summarize` (CPU only, fast: no thread hop)."""
        return self.summarize(request)

    def __repr__(self) -> str:
        return f"ExtractiveSummarizer(max_chars={self.max_chars!r})"
