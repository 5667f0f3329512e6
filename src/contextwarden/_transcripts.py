"""Recorded sessions in and out: :func:`load_transcript`, :func:`load_transcripts` and
:func:`save_transcript`.

The format is detected from the content (the shapes tried are
:data:`~contextwarden.transcripts.FORMATS`); each reader lives in
:mod:`contextwarden.transcripts`. A malformed file raises one located
:class:`~contextwarden.TranscriptError` (file, line or message index, field); in an agent's own
log a line that is not valid JSON is skipped with a warning instead (:attr:`Transcript.warnings`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NoReturn, cast

from ._exceptions import TranscriptError
from ._messages import Message, freeze
from .formats import to_anthropic, to_openai
from .transcripts._common import (
    FORMATS,
    Record,
    Transcript,
    TranscriptFormat,
    iter_lines,
    parse_json,
    read_text,
)
from .transcripts.aider import is_aider, parse_aider
from .transcripts.claude_code import is_claude_code, parse_claude_code
from .transcripts.cline import is_cline, parse_cline
from .transcripts.codex import is_codex, parse_codex
from .transcripts.gemini import is_gemini, is_gemini_checkpoint, parse_gemini, parse_gemini_json
from .transcripts.opencode import is_opencode, parse_opencode
from .transcripts.openhands import (
    is_conversation_folder,
    is_openhands,
    is_openhands_events,
    parse_openhands,
    parse_openhands_events,
    read_conversation_folder,
)
from .transcripts.pi import is_pi, parse_pi
from .transcripts.provider import (
    looks_anthropic,
    parse_anthropic,
    parse_mini_swe_agent,
    parse_openai,
    parse_openai_jsonl,
)
from .transcripts.swe_agent import is_swe_agent, parse_swe_agent

# load_transcripts joins this list when the façade (contextwarden/__init__.py) re-exports it.
__all__ = ["Transcript", "TranscriptFormat", "load_transcript", "save_transcript"]

Runs = Transcript | list[Transcript]
_JSON_READERS: dict[str, Callable[[Any, Path, str], Runs]] = {
    "openai": parse_openai,
    "anthropic": parse_anthropic,
    "mini-swe-agent": parse_mini_swe_agent,
    "cline": parse_cline,
    "swe-agent": parse_swe_agent,
    "gemini-cli": parse_gemini_json,
    "opencode": parse_opencode,
    "openhands": lambda doc, p, shown: (
        parse_openhands_events(doc, p, shown)
        if isinstance(doc, list)
        else parse_openhands([Record(1, doc)], p, shown)
    ),
}
_JSONL_READERS: dict[str, Callable[[Sequence[Record], Path, str], Runs]] = {
    "openai-jsonl": parse_openai_jsonl,
    "pi": parse_pi,
    "claude-code": parse_claude_code,
    "openhands": parse_openhands,
    "codex": parse_codex,
    "gemini-cli": parse_gemini,
}
_TEXT_READERS: dict[str, Callable[[str, Path, str], Runs]] = {"aider": parse_aider}
#: Agents' own session logs: a line that is not valid JSON is skipped with a warning.
_TOLERANT = frozenset({"pi", "claude-code", "codex", "gemini-cli"})
#: Message ``extra`` keys the agent-log readers add (what model answered, which tool ran).
#: They describe the recording, not the request, so they are not written to provider files.
_ANNOTATIONS = frozenset(
    {"model", "provider", "api", "stopReason", "errorMessage", "responseId", "toolName"}
)
#: Formats written back as they were read; any other is an agent's own log, written as the
#: request it amounts to.
WRITABLE: frozenset[str] = frozenset({"openai", "openai-jsonl", "anthropic", "mini-swe-agent"})
#: Formats whose requests went to Anthropic's Messages API (the others: OpenAI's).
_ANTHROPIC = frozenset({"anthropic", "pi", "claude-code", "cline"})


def provider_for(fmt: str) -> Literal["openai", "anthropic"]:
    """The provider API a recording's requests went to, by transcript format."""
    return "anthropic" if fmt in _ANTHROPIC else "openai"


def output_format(read: str, jsonl: bool = False) -> TranscriptFormat:
    """The format a transcript read as ``read`` is written in: the same for a provider file;
    for an agent's log, OpenAI JSONL when ``jsonl``, else its provider's JSON."""
    if read in WRITABLE:
        return cast(TranscriptFormat, read)
    if jsonl:
        return "openai-jsonl"
    return "anthropic" if provider_for(read) == "anthropic" else "openai"


def load_transcripts(
    path: str | os.PathLike[str], *, format: TranscriptFormat | None = None
) -> list[Transcript]:
    """Every run a recorded session file holds, in order (one for most formats; an OpenHands
    ``output.jsonl`` holds one per line, an aider history one per chat).

    ``format`` skips detection and reads the file as that format. Raises
    :class:`~contextwarden.TranscriptError` (one, located) for a file that cannot be read, is
    not valid JSON / JSONL, is in no known format, or holds a malformed record.
    """
    p = Path(path)
    shown = os.fspath(path)
    if p.is_dir() and is_conversation_folder(p):
        return [read_conversation_folder(p, shown)]
    text = read_text(p, shown)
    runs = _read(text, p, shown, format)
    return runs if isinstance(runs, list) else [runs]


def load_transcript(
    path: str | os.PathLike[str], *, format: TranscriptFormat | None = None, run: int | None = None
) -> Transcript:
    """Read a recorded session into a :class:`Transcript`, detecting its format: as
    :func:`load_transcripts` does, then run ``run`` (1-based; default the first, with
    :attr:`Transcript.runs` saying how many there are); a
    :class:`~contextwarden.TranscriptError` too when the file has no run ``run``."""
    runs = load_transcripts(path, format=format)
    if run is None:
        return runs[0]
    if not 1 <= run <= len(runs):
        raise TranscriptError(
            os.fspath(path), f"no run {run}: the file holds {len(runs)} run(s), numbered from 1"
        )
    return runs[run - 1]


def _read(text: str, p: Path, shown: str, format: str | None) -> Runs:
    if format is not None and format not in FORMATS:
        raise TranscriptError(shown, f"unknown format {format!r}; known: {', '.join(FORMATS)}")
    if format in _TEXT_READERS or (format is None and is_aider(text)):
        return _TEXT_READERS[format or "aider"](text, p, shown)
    if format is None and text.lstrip().startswith("**User:**"):
        raise TranscriptError(
            shown,
            "a Cline or Roo Code task exported as Markdown, which does not keep the messages as "
            "they were sent: read the task folder's api_conversation_history.json instead "
            "(docs/sessions.md says where it is)",
        )
    kind, value, bad = _sniff(text, shown)
    if format is None:
        if kind == "json":
            found = next((fmt for fmt, shape in _JSON_SHAPES if shape(value)), None)
            fmt = found or _unrecognised(shown, "a JSON document", value)
            return _JSON_READERS[fmt](value, p, shown)
        return _read_jsonl(_jsonl_format(value, shown), value, bad, p, shown)
    if kind == "json" and format in _JSON_READERS:
        return _JSON_READERS[format](value, p, shown)
    if kind == "jsonl" and format in _JSONL_READERS:
        return _read_jsonl(format, value, bad, p, shown)
    if kind == "json" and format in _JSONL_READERS:
        return _read_jsonl(format, [Record(1, value)], [], p, shown)
    if bad:
        raise bad[0]
    raise TranscriptError(shown, f"format {format!r} is one JSON document; this file is JSON lines")


def _read_jsonl(
    fmt: str, records: list[Record], bad: list[TranscriptError], p: Path, shown: str
) -> Runs:
    if bad and fmt not in _TOLERANT:
        raise bad[0]
    if not records:
        raise TranscriptError(shown, "no records (the file is empty)")
    runs = _JSONL_READERS[fmt](records, p, shown)
    if not bad:
        return runs
    notes = [f"line {e.line}: not valid JSON ({e.reason}); skipped" for e in bad]
    if isinstance(runs, list):
        return [_with_warnings(t, notes) for t in runs]
    return _with_warnings(runs, notes)


def _with_warnings(t: Transcript, notes: list[str]) -> Transcript:
    meta = dict(t.meta)
    meta["warnings"] = [*notes, *(meta.get("warnings") or ())]
    return dataclasses.replace(t, meta=freeze(meta))


def _records(text: str, shown: str) -> tuple[list[Record], list[TranscriptError]]:
    """Every non-blank line parsed; the lines that are not valid JSON as located errors."""
    records: list[Record] = []
    bad: list[TranscriptError] = []
    for n, line in iter_lines(text):
        try:
            records.append(Record(n, parse_json(line, shown, line_offset=n - 1)))
        except TranscriptError as exc:
            bad.append(exc)
    return records, bad


def _sniff(text: str, shown: str) -> tuple[str, Any, list[TranscriptError]]:
    """``("json", document, [])`` or ``("jsonl", records, bad lines)``.

    A file whose first non-blank line is a complete JSON object on its own is JSONL (unless it
    is the only line and holds a message list); anything else is one JSON document.
    """
    lines = iter_lines(text)
    first = next(lines, None)
    if first is None:
        raise TranscriptError(shown, "the file is empty")
    number, line = first
    if line.lstrip().startswith("{"):
        try:
            head = json.loads(line)
        except (ValueError, RecursionError):
            head = None
        if isinstance(head, dict):
            records, bad = _records(text, shown)
            if len(records) + len(bad) > 1 or not isinstance(head.get("messages"), list):
                return "jsonl", records, bad
            return "json", head, []
        if head is None:  # a damaged first line of a JSONL log: the next lines tell
            records, bad = _records(text, shown)
            if records and all(isinstance(r.value, dict) for r in records):
                try:
                    json.loads(text)
                except (ValueError, RecursionError):
                    return "jsonl", records, bad
    return "json", parse_json(text, shown), []


def _messages(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("messages"), list)


#: How a JSON document shows its format, tried in order.
_JSON_SHAPES: tuple[tuple[str, Callable[[Any], bool]], ...] = (
    ("gemini-cli", lambda d: is_gemini(d) or is_gemini_checkpoint(d)),
    ("opencode", is_opencode),
    ("swe-agent", is_swe_agent),
    ("openhands", lambda d: is_openhands_events(d) if isinstance(d, list) else is_openhands(d)),
    ("cline", is_cline),
    ("mini-swe-agent", lambda d: _messages(d) and "info" in d),
    ("anthropic", lambda d: _messages(d) and looks_anthropic(d)),
    ("openai", lambda d: isinstance(d, list) or _messages(d)),
)
#: How a JSONL record shows its format, tried in order on each record until one answers
#: (a Gemini CLI recording is known by its first line).
_RECORD_SHAPES: tuple[tuple[str, Callable[[Any], bool]], ...] = (
    ("codex", is_codex),
    ("pi", is_pi),
    ("claude-code", is_claude_code),
    ("openhands", is_openhands),
    ("openai-jsonl", lambda v: isinstance(v, dict) and "role" in v),
)


def _jsonl_format(records: list[Record], shown: str) -> str:
    if records and is_gemini(records[0].value):
        return "gemini-cli"
    for rec in records:
        found = next((fmt for fmt, shape in _RECORD_SHAPES if shape(rec.value)), None)
        if found is not None:
            return found
    what = "JSON lines" if len(records) > 1 else "a one-line JSON document"
    _unrecognised(shown, what, records[0].value if records else None)


def _unrecognised(shown: str, what: str, sample: Any) -> NoReturn:
    if isinstance(sample, dict):
        got = f"an object with keys {sorted(sample)[:8]}"
    else:
        got = type(sample).__name__
    tried = "; ".join(f"{name} ({shape})" for name, shape in FORMATS.items())
    raise TranscriptError(shown, f"unrecognised transcript format ({what}, {got}); tried: {tried}")


# -- writing -----------------------------------------------------------------------------------
def save_transcript(
    transcript: Transcript | Sequence[Message],
    path: str | os.PathLike[str],
    *,
    format: TranscriptFormat | None = None,
) -> Path:
    """Write messages to ``path`` in a provider format; returns the path.

    ``format``: ``"openai"`` (a JSON list, or ``{..., "messages", "tools"}`` when there are tool
    definitions or the file read was an object), ``"openai-jsonl"`` (one message per line; tool
    definitions are not written), ``"anthropic"`` (``{"system", "messages", "tools"?}``) or
    ``"mini-swe-agent"`` (``{"info", "messages", ...}`` with the original ``info`` and ``exit``
    record when the transcript came from such a file). Default: the format the transcript was
    read from, Anthropic for pi and Claude Code sessions, OpenAI for OpenHands runs and for a
    bare message list. Messages read from agent logs lose the reader's annotations (``model``,
    ``toolName``... in ``extra``) on the way out: the written messages are a valid request.
    """
    if not isinstance(transcript, Transcript):
        transcript = Transcript(tuple(transcript), "openai")
    fmt = format or output_format(transcript.format)
    doc = _render(transcript, fmt)
    out = Path(path)
    if fmt == "openai-jsonl":
        text = "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in doc)
    else:
        text = json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
    out.write_text(text, encoding="utf-8")
    return out


def _render(t: Transcript, fmt: str) -> Any:
    messages: Sequence[Message] = t.messages
    if t.format not in WRITABLE:
        messages = [_plain(m) for m in messages]
    fields: dict[str, Any] = dict(t.meta.get("fields") or {})
    same = t.format == fmt
    if not same:  # request options of another format do not carry over
        fields = {k: v for k, v in fields.items() if k == "model"}
    if t.model is not None and fmt == "anthropic" and not same:
        fields.setdefault("model", t.model)
    if fmt in ("openai", "openai-jsonl"):
        body = to_openai(messages)
        if fmt == "openai-jsonl" or not (t.tools or fields or t.meta.get("container") == "object"):
            return body
        doc = {**fields, "messages": body}
        if t.tools:
            doc["tools"] = [_openai_tool(x) for x in t.tools]
        return doc
    if fmt == "anthropic":
        system, body = to_anthropic(messages)
        doc = {**({"system": system} if system is not None else {}), **fields, "messages": body}
        if t.tools:
            doc["tools"] = [_anthropic_tool(x) for x in t.tools]
        return doc
    if fmt == "mini-swe-agent":
        body = to_openai(messages)
        exit_record = t.meta.get("exit")
        if exit_record is not None:
            body = [*body, exit_record]
        extra = dict(t.meta.get("fields") or {}) if same else {}
        return {"info": t.meta.get("info") or {}, "messages": body, **extra}
    raise TranscriptError(
        str(t.path),
        f"cannot write format {fmt!r}; writable: openai, openai-jsonl, anthropic, mini-swe-agent",
    )


def _plain(m: Message) -> Message:
    if not any(k in _ANNOTATIONS for k in m.extra):
        return m
    return m.replace(extra=freeze({k: v for k, v in m.extra.items() if k not in _ANNOTATIONS}))


def _openai_tool(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    """A tool definition in OpenAI's form (Anthropic's ``input_schema`` form converted)."""
    if "input_schema" not in tool:
        return tool
    fn = {"name": tool.get("name"), "parameters": tool["input_schema"]}
    if "description" in tool:
        fn = {"name": tool.get("name"), "description": tool["description"], **fn}
    return {"type": "function", "function": fn}


def _anthropic_tool(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    """A tool definition in Anthropic's form (OpenAI's ``function`` form converted)."""
    fn = tool.get("function")
    if not isinstance(fn, Mapping):
        return tool
    out: dict[str, Any] = {"name": fn.get("name")}
    if "description" in fn:
        out["description"] = fn["description"]
    out["input_schema"] = fn.get("parameters") or {"type": "object", "properties": {}}
    return out
