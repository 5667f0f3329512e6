"""Every recording under the data folder as a plain OpenAI chat list: what the judges'
``measures.py`` replays (``role``, ``content``, ``tool_calls``, ``tool_call_id`` and
``reasoning_content`` only).

The formats contextwarden reads (pi, Claude Code, OpenHands ``output.jsonl``) go through
:func:`contextwarden._transcripts.load_transcript` and :func:`contextwarden.formats.to_openai`.
mini-swe-agent files are OpenAI chat already: their messages are kept as recorded, minus the
final ``exit`` record and the recorder's own fields. The others are converted here:

* Codex rollouts: ``session_meta.base_instructions`` is the system prompt (once: a resumed
  session writes its meta again), custom tool calls (``apply_patch``) are calls whose
  arguments hold their ``input``, developer messages
  become system messages, an assistant message and the ``function_call`` items after it one
  assistant message with tool calls, ``function_call_output`` a tool message (encrypted
  reasoning carries no text and is left out);
* SWE-agent ``.traj``: its ``history`` (no function calling; the demonstration included, as it
  was sent);
* aider chat logs: ``#### `` lines are the user's turns, ``> `` lines the console output the
  user saw (kept in the user's turn), the rest the assistant's replies;
* OpenHands UI exports: a user ``message`` event is a user turn, an action with
  ``tool_call_metadata`` its model response (text and tool calls, once per response), an
  observation with ``tool_call_metadata`` the tool's answer;
* pi-based excerpts: a line that is not valid JSON is skipped with a warning and the entries
  are chained in file order (the excerpt's first parent is not in the file).
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._data import DATA_DIR

__all__ = ["Recording", "load_recording", "recordings"]

Msg = dict[str, Any]
_KEYS = ("role", "content", "tool_calls", "tool_call_id", "reasoning_content")


@dataclass(frozen=True)
class Recording:
    """One recording: ``name`` (file stem), ``source`` (the agent's folder), its ``messages``
    as plain OpenAI chat dicts, and ``times``: each message's time in epoch seconds where the
    agent wrote one (``None`` where not; empty for formats without timestamps)."""

    name: str
    source: str
    messages: tuple[Msg, ...]
    path: Path
    times: tuple[float | None, ...] = ()


def _plain(m: Msg) -> Msg:
    out = {k: m[k] for k in _KEYS if k in m and m[k] is not None}
    if out.get("role") == "assistant" and "content" not in out:
        out["content"] = None
    if out.get("tool_calls"):
        out["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {
                    "name": c["function"]["name"],
                    "arguments": c["function"].get("arguments") or "",
                },
            }
            for c in out["tool_calls"]
        ]
    return out


def _mini_swe_agent(path: Path) -> list[Msg]:
    doc = json.loads(path.read_text())
    return [_plain(m) for m in doc["messages"] if m.get("role") != "exit"]


def _codex(path: Path) -> tuple[list[Msg], list[float | None]]:
    from contextwarden._replay import epoch_seconds

    out: list[Msg] = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        p = rec.get("payload") or {}
        # each message's time is its line's (a call folded into the message before: the newer),
        # kept under "_at" until the end
        at = epoch_seconds(rec.get("timestamp"))
        if rec.get("type") == "session_meta":
            # a resumed session writes its meta again: the instructions are sent once a request
            text = (p.get("base_instructions") or {}).get("text")
            if text and not out:
                out.append({"role": "system", "content": text, "_at": at})
            continue
        if rec.get("type") != "response_item":
            continue
        kind = p.get("type")
        if kind == "message":
            text = "\n".join(
                c.get("text") or "" for c in p.get("content") or [] if isinstance(c, dict)
            )
            role = {"developer": "system"}.get(p.get("role"), p.get("role"))
            out.append({"role": role, "content": text, "_at": at})
        elif kind in ("function_call", "custom_tool_call"):
            arguments = p.get("arguments") or ""
            if kind == "custom_tool_call":  # apply_patch and other free-form tools
                arguments = json.dumps({"input": p.get("input") or ""}, ensure_ascii=False)
            call = {
                "id": p["call_id"],
                "type": "function",
                "function": {"name": p["name"], "arguments": arguments},
            }
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
                last["_at"] = at
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call], "_at": at})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = p.get("output")
            if not isinstance(output, str):
                output = json.dumps(output, ensure_ascii=False)
            out.append({"role": "tool", "tool_call_id": p["call_id"], "content": output, "_at": at})
    times = [m.pop("_at") for m in out]
    return out, times


def _swe_agent(path: Path) -> list[Msg]:
    doc = json.loads(path.read_text())
    return [
        {"role": m["role"], "content": m.get("content") or ""}
        for m in doc["history"]
        if m.get("role") in ("system", "user", "assistant")
    ]


def _aider(path: Path) -> list[Msg]:
    out: list[Msg] = []

    def add(role: str, line: str) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"] += "\n" + line
        else:
            out.append({"role": role, "content": line})

    for line in path.read_text().splitlines():
        if line.startswith("# aider chat started"):
            continue
        if line.startswith("#### "):
            add("user", line[5:].rstrip())
        elif line.startswith("> ") or line == ">":
            add("user", line[2:].rstrip())
        elif line.strip() or (out and out[-1]["role"] == "assistant"):
            add("assistant", line)
    for m in out:
        m["content"] = m["content"].strip()
    return [m for m in out if m["content"]]


def _openhands_ui(path: Path) -> list[Msg]:
    out: list[Msg] = []
    seen_responses: set[str] = set()
    for e in json.loads(path.read_text()):
        meta = e.get("tool_call_metadata")
        if e.get("action") == "message" and e.get("source") == "user":
            out.append({"role": "user", "content": e.get("message") or ""})
        elif e.get("action") == "message" and e.get("source") == "agent":
            out.append({"role": "assistant", "content": e.get("message") or ""})
        elif meta and "action" in e:
            resp = meta.get("model_response") or {}
            if resp.get("id") in seen_responses:
                continue
            seen_responses.add(resp.get("id"))
            msg = resp["choices"][0]["message"]
            out.append(_plain({**msg, "role": "assistant"}))
        elif meta and "observation" in e:
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": meta["tool_call_id"],
                    "content": e.get("content") or e.get("message") or "",
                }
            )
    return out


def _lenient_pi(path: Path) -> list[Msg]:
    from contextwarden.formats import to_openai
    from contextwarden.transcripts._common import Record
    from contextwarden.transcripts.pi import parse_pi

    records: list[Record] = []
    previous: str | None = None
    for n, line in enumerate(path.read_text().split("\n"), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            print(f"{path.name}, line {n}: skipped, invalid JSON ({exc.msg})", file=sys.stderr)
            continue
        if isinstance(entry, dict) and "id" in entry:
            # an excerpt: entries chained in file order (its first parent, and the parent of
            # the entry after a skipped line, are not in the file)
            entry = {**entry, "parentId": previous}
            previous = entry["id"]
        records.append(Record(n, entry))
    tr = parse_pi(records, path, path.name)
    return [_plain(m) for m in to_openai(list(tr.messages))]


def _transcript(path: Path) -> tuple[list[Msg], list[float | None]]:
    from contextwarden._replay import epoch_seconds
    from contextwarden._transcripts import load_transcript
    from contextwarden.formats import to_openai

    out: list[Msg] = []
    times: list[float | None] = []
    for message in load_transcript(path).messages:
        # one message may become several (each tool result its own tool message)
        written = [_plain(m) for m in to_openai([message])]
        out += written
        times += [epoch_seconds(message.timestamp)] * len(written)
    return out, times


def _reader(path: Path) -> Any:
    name = path.name
    if name.endswith(".traj.json"):
        return _mini_swe_agent
    if name.endswith(".traj"):
        return _swe_agent
    if name.endswith(".aider.chat.history.md"):
        return _aider
    head = path.read_text()[:4000]
    if head.startswith('{"timestamp"') and '"session_meta"' in head:
        return _codex
    # the UI export's events carry no "kind" (OpenHands V1 events do: load_transcript's)
    if head.lstrip().startswith("[") and '"observation"' in head and '"kind"' not in head:
        return _openhands_ui
    if path.parent.name == "pi-based":
        return _lenient_pi
    return _transcript


def load_recording(path: Path) -> Recording:
    """The recording at ``path`` as plain OpenAI chat dicts (see the module docstring)."""
    read = _reader(path)(path)
    messages, times = read if isinstance(read, tuple) else (read, [])
    if not any(t is not None for t in times):
        times = []
    return Recording(path.name.split(".")[0], path.parent.name, tuple(messages), path, tuple(times))


#: Files beside the recordings that describe them (where they come from, their licences).
_NOT_DATA = ("readme", "sources")


@functools.cache
def recordings(root: Path = DATA_DIR) -> tuple[Recording, ...]:
    """Every recording under ``root``, sorted by source then file name (empty when absent)."""
    if not root.is_dir():
        return ()
    files = sorted(
        (p for p in root.rglob("*") if p.is_file() and not p.name.lower().startswith(_NOT_DATA)),
        key=lambda p: (p.parent.name, p.name),
    )
    return tuple(load_recording(p) for p in files)


def summary(recs: Sequence[Recording]) -> list[str]:
    """One line per recording: source, name, messages and assistant calls."""
    return [
        f"{r.source}/{r.name}: {len(r.messages)} messages, "
        f"{sum(1 for m in r.messages if m['role'] == 'assistant')} calls"
        for r in recs
    ]
