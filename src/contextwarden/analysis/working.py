"""The working set of a span: where the agent edited files, with the lines around each edit.

An edit applies only if the agent quotes the file's lines exactly, so the text a summary most
needs to carry is the file's current text where the agent is working. :func:`edit_sites`
walks a span once: it remembers the latest text each file was read with (Read, ``view``,
``cat``, ``sed -n``, ``nl -ba``: line-number prefixes removed), and for each edit that names
the text it replaces (Claude Code ``Edit``/``MultiEdit``, ``str_replace_editor``
``str_replace``, pi ``edit``, Cline ``replace_in_file`` SEARCH/REPLACE blocks, ``apply_patch``
hunks) it records the new lines with up to ``context`` lines of the read text before and after
them. The remembered text is updated with the edit, so a second edit at the same place is
placed in the edited text. Pure; never raises on odd input.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._messages import Message
from .actions import call_action, first_path, norm_name, norm_path

__all__ = ["EditSite", "edit_sites"]

#: ``cat -n`` / ``nl -ba`` / Read / ``view`` line prefixes: spaces, a number, then a tab, an
#: arrow or a colon-space.
_NUMBERED = re.compile(r"^\s*\d+(?:\t|→|: | {2})")
_OUTPUT = re.compile(r"<output>\n?(.*?)</output>", re.DOTALL)
_PATCH_FILE = re.compile(r"(?m)^\*\*\* (?:Update|Add) File: (.+?)\s*$")
_SEARCH_REPLACE = re.compile(r"-{3,} SEARCH\n(.*?)\n={3,}\n(.*?)\n\+{3,} REPLACE", re.DOTALL)
#: Claude Code appends a reminder to what Read returns; it is not the file's text.
_REMINDER = re.compile(r"\n*<system-reminder>.*?</system-reminder>\n*", re.DOTALL)


@dataclass(frozen=True)
class EditSite:
    """One edit: the file, the message that made it, and the file's lines there afterwards (the
    new text, with the read text around it when the span showed the file)."""

    path: str
    index: int
    lines: tuple[str, ...]


def _file_lines(text: str) -> list[str]:
    """A read's output as the file's lines: the mini-swe-agent ``<output>`` wrapper, Claude
    Code's appended reminder and line-number prefixes taken off."""
    m = _OUTPUT.search(text)
    if m:
        text = m.group(1)
    text = _REMINDER.sub("", text).rstrip("\n")
    lines = text.split("\n")
    numbered = sum(1 for ln in lines if _NUMBERED.match(ln))
    if numbered >= max(1, len(lines) // 2):
        lines = [_NUMBERED.sub("", ln, count=1) for ln in lines]
    return lines


def _pairs(name: str, args: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(old text, new text) of each replacement an edit call makes."""
    n = norm_name(name)
    keys = (("old_string", "new_string"), ("old_str", "new_str"), ("oldText", "newText"))
    for old_key, new_key in keys:
        old, new = args.get(old_key), args.get(new_key)
        if isinstance(old, str) and isinstance(new, str):
            yield old, new
    edits = args.get("edits")
    for edit in edits if isinstance(edits, list | tuple) else ():
        if isinstance(edit, Mapping):
            yield from _pairs(name, edit)
    diff = args.get("diff")
    if isinstance(diff, str):
        yield from _SEARCH_REPLACE.findall(diff)
    patch = args.get("input") or args.get("patch")
    if n in ("apply_patch", "applypatch") and isinstance(patch, str):
        yield from _hunks(patch)


def _hunks(patch: str) -> Iterator[tuple[str, str]]:
    """(old, new) text of each ``@@`` hunk of an ``apply_patch`` envelope."""
    old: list[str] = []
    new: list[str] = []
    for line in [*patch.splitlines(), "@@"]:
        if line.startswith(("@@", "*** ")):
            if old or new:
                yield "\n".join(old), "\n".join(new)
            old, new = [], []
        elif line.startswith("-"):
            old.append(line[1:])
        elif line.startswith("+"):
            new.append(line[1:])
        elif line.startswith(" ") or not line:
            old.append(line[1:])
            new.append(line[1:])


def _find(lines: Sequence[str], block: Sequence[str]) -> int | None:
    """Where ``block`` starts in ``lines`` (compared without surrounding spaces)."""
    want = [ln.strip() for ln in block]
    if not want or not any(want):
        return None
    first = want[0]
    n = len(want)
    for i, ln in enumerate(lines):
        if ln.strip() == first and [x.strip() for x in lines[i : i + n]] == want:
            return i
    return None


def edit_sites(
    messages: Sequence[Message],
    *,
    context: int = 3,
    max_new_lines: int = 16,
) -> list[EditSite]:
    """Every edit of ``messages`` that names the text it replaces, oldest first (see the module
    docstring). ``context``: lines of the read text kept on each side; ``max_new_lines``: the
    new text is cut to this many lines (its head)."""
    files: dict[str, list[str]] = {}
    pending: dict[str, tuple[str, int]] = {}  # read call id -> (path, index)
    sites: list[EditSite] = []
    for i, m in enumerate(messages):
        for r in m.tool_results:
            target = pending.pop(r.tool_call_id, None)
            if target is not None:
                files[target[0]] = _file_lines(r.text)
        for call in m.tool_calls:
            args = call.input if isinstance(call.input, Mapping) else {}
            read = call_action(call, i)
            if read.kind == "read" and read.paths:  # it printed a file's lines
                pending[call.id] = (read.paths[0], i)
                continue
            pairs = list(_pairs(call.name, args))
            if not pairs:
                continue
            path = first_path(args)
            if path is None:
                patch = args.get("input") or args.get("patch")
                found = _PATCH_FILE.search(patch) if isinstance(patch, str) else None
                path = found.group(1) if found else None
            if path is None:
                continue
            key = norm_path(path)
            current = files.get(key)
            for old, new in pairs:
                new_lines = new.split("\n")
                at = _find(current, old.split("\n")) if current is not None else None
                if current is not None and at is not None:
                    end = at + len(old.split("\n"))
                    before = current[max(0, at - context) : at]
                    after = current[end : end + context]
                    current[at:end] = new_lines
                    shown = [*before, *new_lines[:max_new_lines], *after]
                else:
                    shown = new_lines[:max_new_lines]
                if any(ln.strip() for ln in shown):
                    sites.append(EditSite(key, i, tuple(shown)))
    return sites
