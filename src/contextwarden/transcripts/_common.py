"""What every transcript reader shares: the :class:`Transcript` value, located errors
(:class:`Loc`: one :class:`~contextwarden.TranscriptError` naming the file, the line or message
index and the field path), and the repairs an agent's log needs to be a valid request.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn, TypeAlias, TypeVar

from .._exceptions import FormatError, TranscriptError
from .._messages import EMPTY, Block, Message, TextBlock, ToolCallBlock, ToolResultBlock
from ..formats._common import tname
from ..formats.anthropic import LEADING_USER_TEXT

__all__ = [
    "FORMATS",
    "AgentCompaction",
    "Loc",
    "Record",
    "Transcript",
    "TranscriptFormat",
    "as_str",
    "combine_turns",
    "dumps_arguments",
    "join_blocks",
    "lead_with_prompt",
    "merge_user_runs",
    "pair_calls",
    "place_marks",
    "unique_call_ids",
]

TranscriptFormat: TypeAlias = Literal[
    "openai",
    "openai-jsonl",
    "anthropic",
    "mini-swe-agent",
    "pi",
    "claude-code",
    "openhands",
    "codex",
    "gemini-cli",
    "cline",
    "aider",
    "swe-agent",
    "opencode",
]

#: Every format :func:`~contextwarden._transcripts.load_transcript` knows, in detection order,
#: with the shape it looks for (quoted in the "unrecognised format" error).
FORMATS: Mapping[TranscriptFormat, str] = {
    "mini-swe-agent": 'JSON object with "info" and "messages"',
    "anthropic": 'JSON object {"system"?, "messages": [Anthropic messages]}',
    "openai": 'JSON list of OpenAI chat messages, or {"messages": [...], "tools"?: [...]}',
    "openai-jsonl": "JSONL, one OpenAI chat message per line",
    "pi": "pi session JSONL (type session/message/model_change/...)",
    "claude-code": "Claude Code session JSONL (type user/assistant with an Anthropic message)",
    "openhands": 'OpenHands output.jsonl (one run per line with "history") or a UI export '
    "(a JSON list of action/observation events)",
    "codex": "Codex CLI rollout JSONL (session_meta/turn_context/response_item records)",
    "gemini-cli": "Gemini CLI chat recording (session-*.json or .jsonl: sessionId, projectHash, "
    'messages of type user/gemini) or checkpoint ({"history": [Gemini contents]} or the bare '
    "list)",
    "cline": "Cline / Roo api_conversation_history.json (a JSON list of Anthropic messages) or "
    "a Cline SDK session (<id>.messages.json: version, sessionId, messages)",
    "aider": "aider .aider.chat.history.md (Markdown: '# aider chat started at', '#### ' turns)",
    "swe-agent": 'SWE-agent .traj (JSON object with "history" and "trajectory")',
    "opencode": 'opencode export (JSON object: "info" of a ses_ session, "messages" with "parts")',
}


@dataclass(frozen=True)
class AgentCompaction:
    """A compaction the agent itself made while recording (Claude Code's ``compact_boundary``,
    a pi ``compaction`` entry, a Codex ``compacted`` record).

    From the call whose context ends at or after message ``at`` on, the agent no longer sent
    ``messages[:at]``: it sent its leading system messages, then ``replacement`` (the summary,
    and whatever the agent kept), then ``messages[at:]``. ``line`` is where the file records it.
    """

    at: int
    replacement: tuple[Message, ...]
    line: int | None = None


@dataclass(frozen=True)
class Transcript:
    """A recorded session, read into canonical messages.

    ``messages``: the full history as the agent would send it next, a valid request (the system
    prompt, when recorded, a leading ``system`` message). ``model``: the model of the last turn,
    when recorded; ``tools``: the tool definitions, when recorded; ``meta``: whatever else the
    recording tells (ids, ``skipped`` counts by reason, ``warnings`` naming their lines).
    ``window``: the context window the recording states; ``compactions``: the agent's own, in
    order; ``run``/``runs``: which run of a file holding several this is (1-based), of how many.
    """

    messages: tuple[Message, ...]
    format: TranscriptFormat
    path: str | None = None
    model: str | None = None
    tools: tuple[Mapping[str, Any], ...] = ()
    meta: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    window: int | None = None
    compactions: tuple[AgentCompaction, ...] = ()
    run: int = 1
    runs: int = 1

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the reader skipped or repaired, one line each (``line 60: ...``)."""
        return tuple(self.meta.get("warnings") or ())

    @property
    def system(self) -> str | None:
        """The text of the leading system message(s), or ``None`` when there is none."""
        parts: list[str] = []
        for m in self.messages:
            if m.role != "system":
                break
            parts.append("\n".join(b.text for b in m.content if isinstance(b, TextBlock)))
        return "\n\n".join(parts) if parts else None


@dataclass(frozen=True)
class Loc:
    """Where in a file a value sits: the file, and the 1-based line (JSONL) or the message
    index (JSON). :meth:`fail` raises the one located error."""

    path: str
    line: int | None = None
    index: int | None = None

    def at(self, *, line: int | None = None, index: int | None = None) -> Loc:
        return Loc(self.path, line if line is not None else self.line, index)

    def fail(self, field: str | None, message: str) -> NoReturn:
        raise TranscriptError(
            self.path, message, line=self.line, index=self.index, field=field or None
        )

    def reraise(self, exc: FormatError, prefix: str = "", *, by_line: bool = False) -> NoReturn:
        """Re-raise a provider-format error (from :mod:`contextwarden.formats`) located in this
        file. ``prefix`` is the field path of the provider value inside the record; the error's
        message index is kept unless ``by_line`` (a JSONL record: the line says where)."""
        fld = exc.field
        if prefix:
            fld = f"{prefix}.{fld}" if fld else prefix
        index = self.index if by_line or exc.index is None else exc.index
        raise TranscriptError(
            self.path, exc.reason, line=self.line, index=index, field=fld or None
        ) from exc

    def convert(
        self,
        read: Callable[[list[Any]], Iterable[Message]],
        items: list[Any],
        lines: Sequence[int] | None = None,
        prefix: str = "",
    ) -> tuple[Message, ...]:
        """``read(items)`` (a :mod:`contextwarden.formats` reader), its error located here: with
        ``lines`` (each item's line), at the line of the item it names."""
        try:
            return tuple(read(items))
        except FormatError as exc:
            if lines is not None and exc.index is not None and 0 <= exc.index < len(lines):
                self.at(line=lines[exc.index]).reraise(exc, prefix, by_line=True)
            self.reraise(exc, prefix, by_line=lines is not None)

    # -- typed access ------------------------------------------------------------------------
    def get(self, obj: Mapping[str, Any], key: str, kind: type[T], where: str) -> T:
        """``obj[key]``, which must exist and be a ``kind``; ``where`` is ``obj``'s path."""
        name = f"{where}.{key}" if where else key
        if key not in obj:
            self.fail(name, "missing")
        return self.check(obj[key], kind, name)

    def opt(self, obj: Mapping[str, Any], key: str, kind: type[T], where: str) -> T | None:
        """``obj[key]`` when present and not null (then it must be a ``kind``), else ``None``."""
        value = obj.get(key)
        if value is None:
            return None
        return self.check(value, kind, f"{where}.{key}" if where else key)

    def check(self, value: Any, kind: type[T], name: str) -> T:
        if kind is int and isinstance(value, bool) or not isinstance(value, kind):
            self.fail(name, f"expected {_KIND_NAMES.get(kind, kind.__name__)}, got {_kind(value)}")
        return value


T = TypeVar("T")

_KIND_NAMES: dict[type, str] = {
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "an integer",
    bool: "true or false",
}


def _kind(value: Any) -> str:
    """The JSON type of ``value`` (as the provider adapters name it), with short scalars shown."""
    if isinstance(value, str):
        return "string " + repr(value if len(value) <= 40 else value[:40] + "...")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{tname(value)} {value!r}"
    return tname(value)


@dataclass(frozen=True)
class Record:
    """One JSONL line: its 1-based line number and its parsed value."""

    line: int
    value: Any


def read_text(path: Path, shown: str) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TranscriptError(shown, f"cannot read the file: {exc.strerror or exc}") from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TranscriptError(
            shown, f"not UTF-8 text (byte {exc.start} is {data[exc.start]:#04x})", line=line
        ) from exc


def parse_json(text: str, shown: str, *, line_offset: int = 0) -> Any:
    """``json.loads`` with a located error (line and column of the bad character)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TranscriptError(
            shown, f"invalid JSON at column {exc.colno}: {exc.msg}", line=exc.lineno + line_offset
        ) from exc
    except RecursionError as exc:  # pathologically deep nesting
        raise TranscriptError(
            shown, "invalid JSON: nested too deeply", line=line_offset + 1
        ) from exc


def iter_lines(text: str) -> Iterator[tuple[int, str]]:
    """Non-blank lines with their 1-based numbers."""
    for number, line in enumerate(text.split("\n"), 1):
        if line.strip():
            yield number, line


def dumps_arguments(value: Any) -> str:
    """Tool-call arguments recorded as an object (pi, Anthropic ``input``), as JSON text.

    Compact separators and real Unicode: the form a model most often writes, so token counts
    of converted calls match what the provider saw as closely as we can tell.
    """
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def warn(meta: dict[str, Any], text: str) -> None:
    """Record a warning (a skipped or repaired line) in ``meta["warnings"]``."""
    meta.setdefault("warnings", []).append(text)


def skipped(meta: dict[str, Any], reason: str) -> None:
    """Count a record the reader left out, by reason, in ``meta["skipped"]``."""
    counts: dict[str, int] = meta.setdefault("skipped", {})
    counts[reason] = counts.get(reason, 0) + 1


def pair_calls(messages: Sequence[Message], meta: dict[str, Any]) -> tuple[Message, ...]:
    """``messages`` with every tool call answered and every result answering a call (a crash
    or an aborted turn leaves either alone; a request must not), by the rule of
    :func:`contextwarden.formats.check_messages`: a result answers a call of the run of assistant
    messages right before its run of ``tool`` messages, once. What is removed is counted in
    ``meta["skipped"]``; text that rode along with removed results stays as a user message.
    Returns the input's own values when it is already valid."""
    out: list[Message] = []
    turn: list[int] = []  # indices in ``out`` of the open turn's assistant messages
    calls: set[str] = set()  # the open turn's call ids
    answered: set[str] = set()
    for m in (*messages, None):
        if m is not None and m.role == "tool":
            keep: list[Block] = []
            for b in m.content:
                if isinstance(b, ToolResultBlock):
                    if b.tool_call_id not in calls or b.tool_call_id in answered:
                        skipped(meta, "tool result answering no open call")
                        continue
                    answered.add(b.tool_call_id)
                keep.append(b)
            if len(keep) == len(m.content):
                out.append(m)
                continue
            if any(isinstance(b, ToolResultBlock) for b in keep):
                out.append(m.replace(content=tuple(keep)))
                continue
            if not keep:
                continue
            m = m.replace(role="user", content=tuple(keep))  # ends the turn, as a user turn
        if m is not None and m.role == "assistant" and turn and turn[-1] == len(out) - 1:
            turn.append(len(out))  # the same turn goes on
            calls.update(b.id for b in m.tool_calls)
            out.append(m)
            continue
        if calls - answered:  # close the open turn
            for at in reversed(turn):
                msg = out[at]
                kept = tuple(
                    b for b in msg.content if not isinstance(b, ToolCallBlock) or b.id in answered
                )
                for _ in range(len(msg.content) - len(kept)):
                    skipped(meta, "tool call never answered")
                if kept:
                    out[at] = msg.replace(content=kept)
                else:
                    del out[at]
        if m is None:
            break
        turn = [len(out)] if m.role == "assistant" else []
        calls = {b.id for b in m.tool_calls} if m.role == "assistant" else set()
        answered = set()
        out.append(m)
    if len(out) == len(messages) and all(a is b for a, b in zip(out, messages, strict=True)):
        return tuple(messages)
    return tuple(out)


def merge_user_runs(
    messages: Sequence[Message], *, apart: Collection[int] = ()
) -> tuple[Message, ...]:
    """``messages`` with each run of consecutive ``user`` messages merged into one (its blocks
    in order), as an agent's request merges a tool-result turn left as text and the prompt
    that follows ("Continue"); messages whose ``id()`` is in ``apart`` stay on their own.
    Returns the input's own values when nothing merges."""
    out: list[Message] = []
    for m in messages:
        if out and m.role == out[-1].role == "user" and {id(m), id(out[-1])}.isdisjoint(apart):
            out[-1] = out[-1].replace(content=(*out[-1].content, *m.content))
        else:
            out.append(m)
    return tuple(out) if len(out) != len(messages) else tuple(messages)


def place_marks(
    before: Sequence[Message], after: Sequence[Message], marks: Sequence[int]
) -> list[int]:
    """Where positions in ``before`` land in ``after`` (a repaired copy of it): each mark moves
    to the first message at or after it that survived (by identity), else to the end."""
    where = {id(m): i for i, m in enumerate(after)}
    out: list[int] = []
    for mark in marks:
        at = len(after)
        for m in before[mark:]:
            if id(m) in where:
                at = where[id(m)]
                break
        out.append(at)
    return out


def _is_result(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("type") == "tool_result"


def join_blocks(content: list[Any], blocks: Sequence[Any]) -> None:
    """Append ``blocks`` (Anthropic content blocks) to the user turn ``content``, their tool
    results before the text already there: the API wants a turn's results first."""
    at = next((i for i, b in enumerate(content) if not _is_result(b)), len(content))
    content[at:at] = [b for b in blocks if _is_result(b)]
    content.extend(b for b in blocks if not _is_result(b))


def combine_turns(api: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[int]]:
    """Anthropic messages with each run of consecutive messages of one role joined into one
    turn, as the Messages API combines them (an agent's log may hold a tool's results and a
    resumed task's prompt as two user messages); and, for each joined message, the index of
    the first message it holds. Messages are copied, never changed."""
    out: list[dict[str, Any]] = []
    first: list[int] = []
    joined: set[int] = set()
    for i, m in enumerate(api):
        role = m.get("role")
        if out and role == out[-1].get("role") and role in ("user", "assistant"):
            prev = out[-1]
            if len(out) not in joined:  # a list of our own from here on: the input stays
                joined.add(len(out))
                prev["content"] = _as_blocks(prev.get("content"))
            if role == "user":
                join_blocks(prev["content"], _as_blocks(m.get("content")))
            else:
                prev["content"].extend(_as_blocks(m.get("content")))
            continue
        out.append(dict(m))
        first.append(i)
    return out, first


def _as_blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content) if isinstance(content, list) else [content]


def unique_call_ids(messages: Sequence[Message], meta: dict[str, Any]) -> list[Message]:
    """``messages`` with a tool call id used again by a later call (a replayed recording
    reuses them; the API refuses a request holding one id twice) renamed ``<id>~<n>``, in the
    call and in the results that answer it before the next assistant message."""
    seen: set[str] = set()
    renamed: dict[str, str] = {}
    out: list[Message] = []
    for m in messages:
        if m.role == "assistant":
            renamed = {}
            blocks: list[Block] = []
            for b in m.content:
                if isinstance(b, ToolCallBlock) and b.id in seen:
                    n = 2
                    while f"{b.id}~{n}" in seen:
                        n += 1
                    renamed[b.id] = f"{b.id}~{n}"
                    b = dataclasses.replace(b, id=renamed[b.id])
                    skipped(meta, "tool call id used again (renamed)")
                if isinstance(b, ToolCallBlock):
                    seen.add(b.id)
                blocks.append(b)
            out.append(m.replace(content=tuple(blocks)) if renamed else m)
        elif m.role == "tool" and any(b.tool_call_id in renamed for b in m.tool_results):
            content = [
                dataclasses.replace(b, tool_call_id=renamed[b.tool_call_id])
                if isinstance(b, ToolResultBlock) and b.tool_call_id in renamed
                else b
                for b in m.content
            ]
            out.append(m.replace(content=tuple(content)))
        else:
            out.append(m)
    return out


def lead_with_prompt(
    messages: Sequence[Message], meta: dict[str, Any], where: str
) -> tuple[Message, ...]:
    """``messages``, and when they start with a reply (an excerpt that starts mid-way, at
    ``where``) a placeholder prompt before it, so that every reply's request is a valid one;
    with a warning saying so."""
    at = next((i for i, m in enumerate(messages) if m.role != "system"), None)
    if at is None or messages[at].role == "user":
        return tuple(messages)
    warn(
        meta,
        f"the conversation starts mid-way at {where}: a placeholder prompt "
        f"{LEADING_USER_TEXT!r} stands for what came before",
    )
    prompt = Message("user", (TextBlock(LEADING_USER_TEXT),))
    return (*messages[:at], prompt, *messages[at:])
