"""aider's Markdown chat log, ``.aider.chat.history.md`` (docs/sessions.md)."""

from __future__ import annotations

import re
from pathlib import Path

from .._messages import Message, TextBlock, freeze
from ._common import Loc, Transcript, merge_user_runs

__all__ = ["is_aider", "parse_aider"]

_START = re.compile(r"^# aider chat started at (?P<when>.+?)\s*$")
_MODEL = re.compile(r"^> Model: (?P<model>\S+)")
_QUESTION = re.compile(r"\(Y\)es/\(N\)o")
_SENT_COMMANDS = ("/ask ", "/code ", "/architect ")


def is_aider(text: str) -> bool:
    """Whether ``text`` looks like an aider chat history."""
    head = text.lstrip()[:2000]
    return head.startswith("# aider chat started at") or "\n# aider chat started at" in head


def parse_aider(text: str, path: Path, shown: str) -> list[Transcript]:
    """Every run (chat) of the file, in order."""
    runs: list[tuple[str | None, list[tuple[str, list[str]]], str | None]] = []
    turns: list[tuple[str, list[str]]] = []
    model: str | None = None
    when: str | None = None
    started = False
    for raw in text.split("\n"):
        line = raw.rstrip()
        start = _START.match(line)
        if start is not None:
            if started:
                runs.append((when, turns, model))
            turns, when, started = [], start.group("when"), True
            continue
        if not started:
            continue
        if line.startswith("#### ") or line == "####":
            body = line[5:] if line.startswith("#### ") else ""
            if _QUESTION.search(body) or (
                body.startswith("/") and not body.startswith(_SENT_COMMANDS)
            ):
                continue
            for command in _SENT_COMMANDS:
                if body.startswith(command):
                    body = body[len(command) :]
            if turns and turns[-1][0] == "user":
                turns[-1][1].append(body)
            else:
                turns.append(("user", [body]))
            continue
        if line.startswith(">"):
            found = _MODEL.match(line)
            if found is not None:
                model = found.group("model")
            continue
        if not turns:
            continue
        if turns[-1][0] == "assistant":
            turns[-1][1].append(raw.rstrip())
        elif line.strip():
            turns.append(("assistant", [raw.rstrip()]))
    if started:
        runs.append((when, turns, model))
    if not runs:
        Loc(shown).fail(None, "no '# aider chat started at' line: not an aider chat history")
    out: list[Transcript] = []
    for number, (stamp, items, run_model) in enumerate(runs, 1):
        # aider's local time (``2026-04-22 22:40:12``) as ISO 8601 without a zone: no TTL is
        # applied between its calls (the zone is unknown)
        iso = stamp.replace(" ", "T") if stamp else None
        messages = [
            Message(
                "user" if role == "user" else "assistant",
                (TextBlock("\n".join(lines).strip()),),
                timestamp=iso,
            )
            for role, lines in items
            if "\n".join(lines).strip()
        ]
        merged = merge_user_runs(messages)
        meta = freeze({"started": stamp})
        out.append(
            Transcript(merged, "aider", str(path), run_model, meta=meta, run=number, runs=len(runs))
        )
    return out
