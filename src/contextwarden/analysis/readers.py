"""Reading the raw material of facts: how a result ended (exit status, the error line), what a
todo tool's arguments list, and what assistant text says (a plan, findings). Which tool a call
is and what its arguments name is :mod:`.actions`.

Pure functions over strings and parsed arguments, shared by :mod:`.facts`. They understand the
shapes of the common agents: mini-swe-agent, OpenHands, pi, Claude Code, Codex-style tools.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .._markers import without_mask_lines
from .sections import clip

__all__ = [
    "CHECKBOX",
    "DIFF_HEADER",
    "DIFF_STAT_LINE",
    "DIFF_SUMMARY",
    "EDITOR_FAILURE",
    "ERROR_EXCERPT_CHARS",
    "ERROR_KEY_CHARS",
    "ERROR_LINE",
    "EXC_LINE",
    "EXIT_LINE",
    "EXIT_PATTERNS",
    "FINDING_WORDS",
    "GIT_STATUS_LONG",
    "GIT_STATUS_SHORT",
    "INTENT",
    "NUMBERED",
    "PLAN_CUE",
    "SEARCH_PROGRAMS",
    "SENTENCE_SPLIT",
    "SUCCESS_TAIL_LINES",
    "TRACEBACK",
    "TodoItem",
    "TodoStatus",
    "error_excerpt",
    "error_key",
    "exit_code",
    "findings",
    "last_lines",
    "output_body",
    "plan_from_text",
    "todo_items",
    "todo_status",
]

TodoStatus = Literal["pending", "in_progress", "completed"]

#: Errors are quoted at most this long in facts (summaries clip further).
ERROR_KEY_CHARS = 200
ERROR_EXCERPT_CHARS = 600


@dataclass(frozen=True)
class TodoItem:
    """One item of a plan or todo list."""

    text: str
    status: TodoStatus


def todo_items(args: Mapping[str, Any]) -> list[TodoItem] | None:
    for value in args.values():
        if (
            not isinstance(value, list)
            or not value
            or not all(isinstance(v, Mapping) for v in value)
        ):
            continue
        items: list[TodoItem] = []
        for v in value:
            text = next(
                (
                    v[k]
                    for k in ("content", "title", "step", "task", "description", "text")
                    if isinstance(v.get(k), str)
                ),
                None,
            )
            if text is None:
                break
            items.append(TodoItem(" ".join(text.split()), todo_status(v)))
        else:
            return items
    return None


def todo_status(item: Mapping[str, Any]) -> TodoStatus:
    raw = item.get("status", item.get("state", item.get("done", item.get("completed"))))
    if raw is True:
        return "completed"
    s = str(raw).lower()
    if s in ("completed", "complete", "done", "finished", "true", "x"):
        return "completed"
    if s in ("in_progress", "in-progress", "active", "doing", "started", "running"):
        return "in_progress"
    return "pending"


# -- results: exit status and errors -------------------------------------------------------------
EXIT_PATTERNS = (
    re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>"),
    re.compile(r"(?i)\bexit(?:ed)? (?:with )?code[:\s]+(-?\d+)"),
    re.compile(r"(?i)\bexit (?:status|code)[:=\s]+(-?\d+)"),
    re.compile(r"(?i)\bprocess exited with (?:code|status) (-?\d+)"),
    re.compile(r"(?i)\breturn ?code[:=\s]+(-?\d+)"),
)
TRACEBACK = "Traceback (most recent call last)"
EXC_LINE = re.compile(
    r"^\s*((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure|Fault)\b"
    r"(?::.*)?)$"
)
ERROR_LINE = re.compile(
    r"^\s*((?:error|fatal|FAILED|FAIL|ERROR|panic|Error)(?:\[\w+\])?[:\s!].*|.*\berror (?:TS|CS|C)\d+:.*"
    r"|.*: error: .*|E\s{2,}\w+Error.*|.*No such file or directory.*|.*command not found.*"
    r"|.*Permission denied.*|.*Segmentation fault.*)$"
)
EDITOR_FAILURE = re.compile(
    r"(?i)^\s*(error\b|no replacement was performed|old_?str(ing)? .*not found|string to replace "
    r"not found|file .*does not exist|invalid `?path|could not find)"
)
EXIT_LINE = re.compile(
    r"(?i)^\s*(<returncode>.*|\[?(the )?command (exited|finished|completed) with .*|exit code.*)$"
)
#: Programs whose exit status 1 means "no match" / "differs" / "false", not failure.
SEARCH_PROGRAMS = frozenset("grep egrep fgrep zgrep rg ag ack test [ diff cmp which git".split())
DIFF_STAT_LINE = re.compile(r"^\s*\S.*\s\|\s+(\d+\s*[+-]*|Bin .*)\s*$")
DIFF_SUMMARY = re.compile(r"^\s*\d+ files? changed\b.*$")
DIFF_HEADER = re.compile(r"(?m)^diff --git a/(\S+) b/(\S+)")
GIT_STATUS_LONG = re.compile(r"(?m)^\s*(modified|new file|deleted|renamed):\s+(\S.*?)\s*$")
GIT_STATUS_SHORT = re.compile(r"(?m)^(?=.?[MADRCU?])([ MADRCU?]{2}) (\S.*?)\s*$")


def exit_code(text: str) -> int | None:
    """The exit status a result states: mini-swe-agent's ``<returncode>`` at the top, else the
    "exit code N" style lines agents append at the bottom (or, for short results, anywhere)."""
    m = EXIT_PATTERNS[0].search(text[:200])
    if m:
        return int(m.group(1))
    regions = (text[-300:], text[:300]) if len(text) > 300 else (text,)
    for region in regions:
        low = region.lower()
        if "exit" not in low and "return" not in low:  # what every other pattern holds
            continue
        codes: list[tuple[int, int]] = []
        for pattern in EXIT_PATTERNS[1:]:
            codes.extend((m.start(), int(m.group(1))) for m in pattern.finditer(region))
        if codes:
            return max(codes)[1]
    return None


def error_key(text: str) -> str | None:
    """The line that names an error in ``text``, or ``None`` when none stands out."""
    text = without_mask_lines(text)
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    if TRACEBACK in text:
        after = text.rsplit(TRACEBACK, 1)[1].splitlines()
        for ln in reversed(after):
            m = EXC_LINE.match(ln)
            if m:
                return m.group(1).strip()
    for ln in reversed(lines):
        m = EXC_LINE.match(ln)
        if m and ":" in m.group(1):
            return m.group(1).strip()
    for i, ln in enumerate(lines):
        if ERROR_LINE.match(ln) and not EXIT_LINE.match(ln):
            line = ln.strip()
            if len(line) < 20 and line.endswith(":") and i + 1 < len(lines):
                line = f"{line} {lines[i + 1].strip()}"  # "ERROR:" alone says nothing
            return line
    return None


#: A successful run's output counts as an error only when its last lines show one (a script
#: that ends printing the exception it reproduced), not when a passing test suite logs an
#: expected exception on the way.
SUCCESS_TAIL_LINES = 6


def last_lines(text: str, lines: int) -> str:
    kept = [ln for ln in text.splitlines() if ln.strip()][-lines:]
    return "\n".join(kept)


def output_body(text: str) -> str:
    """The result text without the status framing (``<returncode>``, ``<output>`` tags)."""
    text = without_mask_lines(text)
    if "<" not in text:
        return text.strip()
    body = _RETURNCODE_TAG.sub("", text[:200]) + text[200:]
    body = _STATUS_TAGS.sub("", body)
    return body.strip()


_RETURNCODE_TAG = re.compile(r"<returncode>.*?</returncode>", re.DOTALL)
_STATUS_TAGS = re.compile(r"</?(returncode|output|warning|exception)[^>]*>")


# -- assistant text: plans and findings -------------------------------------------------------------
NUMBERED = re.compile(r"^\s*(?:\d+[.)]|[-*]\s*\[[ xX]\])\s+(.+?)\s*$")
CHECKBOX = re.compile(r"^\s*[-*]\s*\[([ xX])\]\s+(.+?)\s*$")
FINDING_WORDS = re.compile(
    r"(?i)\b(found|the (issue|problem|bug|cause|error|fix)|root cause|because|works|fixed|"
    r"confirmed|turns out|is caused|i see|notice|succeed|passes|passed|failing|fails|"
    r"the reason|it seems|appears to)\b"
)
INTENT = re.compile(
    r"(?i)^(let me|now let me|let's|i'll|i will|i need to|next,? i|now i'll|"
    r"first,? let me|i'm going to)\b"
)
SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
#: :data:`FINDING_WORDS` for an ASCII text lowered (twice as fast as ignoring case).
_FINDING_LOWER = re.compile(FINDING_WORDS.pattern.removeprefix("(?i)"))


#: A numbered list is a plan only when the text leading into it says so (an analysis written
#: as "1. ... 2. ..." is not); checkbox lists always are.
PLAN_CUE = re.compile(
    r"(?i)\b(plan|steps?|todo|to-do|next|need to|will|approach|going to|"
    r"let me|tasks?|remaining)\b"
)


def plan_from_text(text: str) -> tuple[TodoItem, ...] | None:
    items: list[TodoItem] = []
    lead: str | None = None
    checkbox = False
    lines = text.splitlines()
    for n, line in enumerate(lines):
        cb = CHECKBOX.match(line)
        if cb:
            status: TodoStatus = "completed" if cb.group(1).lower() == "x" else "pending"
            items.append(TodoItem(clip(" ".join(cb.group(2).split()), 200), status))
            checkbox = True
        else:
            m = NUMBERED.match(line)
            if not m:
                continue
            items.append(TodoItem(clip(" ".join(m.group(1).split()), 200), "pending"))
        if lead is None:
            lead = "\n".join(lines[max(0, n - 3) : n])[-300:]
    if len(items) < 2:
        return None
    if not checkbox and not PLAN_CUE.search(lead or ""):
        return None
    return tuple(items)


def findings(text: str) -> tuple[str, ...]:
    out: list[str] = []
    for sentence in SENTENCE_SPLIT.split(text):
        s = " ".join(sentence.split()).strip("#*- ")
        if not 20 <= len(s) <= 300 or INTENT.match(s) or s.startswith(("```", "|")):
            continue
        if _FINDING_LOWER.search(s.lower()) if s.isascii() else FINDING_WORDS.search(s):
            out.append(s)
    return tuple(out)


def error_excerpt(text: str, key: str) -> str:
    body = output_body(text)
    lines = body.splitlines()
    for i, ln in enumerate(lines):
        if key[:60] and key[:60] in " ".join(ln.split()):
            start = max(0, i - 3)
            return clip("\n".join(lines[start : i + 3]).strip(), ERROR_EXCERPT_CHARS)
    return clip(body, ERROR_EXCERPT_CHARS)
