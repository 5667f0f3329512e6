"""Claude Code session JSONL (``~/.claude/projects/<project>/<session>.jsonl``).

Lines of type ``user`` and ``assistant`` hold an Anthropic Messages API ``message``; every
other line type (``summary``, ``system``, ``file-history-snapshot``, ``queue-operation``...)
is bookkeeping and skipped. Sub-agent lines (``isSidechain: true``) belong to another
conversation, and assistant lines Claude Code made up itself (``model: "<synthetic>"``, an API
error shown to the user) were never sent: both are skipped too. Lines are read in file order
(not along ``parentUuid``: the results of parallel tool calls hang off different parents), and
a ``compact_boundary`` does not cut the history: a compacted session reads as its full
original history.

Claude Code writes one line per content block as a response streams in, so consecutive
assistant lines sharing one ``message.id`` are parts of one API message: their content blocks
are merged in order (the last part's ``usage`` is kept: it is the most complete). Consecutive
user lines (the results of parallel tool calls, a hook's feedback) are merged the same way, as
the API request Claude Code sends merges them. The merged messages go through
:func:`contextwarden.formats.from_anthropic`; each canonical message then gets the line's
``uuid`` (user) or the API message ``id`` (assistant) as :attr:`Message.id`, the line's
``timestamp``, and for assistants the real provider ``usage`` and ``model`` (in ``extra``).
A call an interrupted session never answered is removed
(:func:`~contextwarden.transcripts._common.pair_calls`). Every skip is counted in
``meta["skipped"]``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from .._exceptions import FormatError
from .._messages import Message, freeze
from ..formats import from_anthropic
from ._common import Loc, Record, Transcript, pair_calls, skipped

__all__ = ["LINE_TYPES", "is_claude_code", "parse_claude_code"]

#: Line types Claude Code writes; ``user`` / ``assistant`` carry the conversation.
LINE_TYPES = frozenset(
    {"user", "assistant", "summary", "system", "file-history-snapshot", "queue-operation"}
)
_FIELD_RE = re.compile(r"^content\[(\d+)\](.*)$")


def is_claude_code(value: Any) -> bool:
    """Whether one JSONL record looks like a Claude Code session line."""
    if not isinstance(value, dict) or value.get("type") not in LINE_TYPES:
        return False
    if value["type"] in ("user", "assistant"):
        return isinstance(value.get("message"), dict)
    return True


@dataclass
class _Merged:
    """One API message assembled from one or more lines."""

    role: str
    first_line: int
    content: list[Any]
    parts: list[tuple[int, int]] = field(default_factory=list)  # (line, offset in content)
    api_id: str | None = None
    uuid: str | None = None
    timestamp: Any = None
    usage: Any = None
    model: str | None = None
    as_string: bool = False  # the single line's content was a plain string


def parse_claude_code(records: Sequence[Record], path: Path, shown: str) -> Transcript:
    """Read a Claude Code session (records already parsed from its lines)."""
    base = Loc(shown)
    meta: dict[str, Any] = {}
    merged: list[_Merged] = []
    for rec in records:
        loc = base.at(line=rec.line)
        line = loc.check(rec.value, dict, "")
        kind = line.get("type")
        if kind not in ("user", "assistant"):
            skipped(meta, f"line type {kind!r}")
            continue
        if line.get("isSidechain") is True:
            skipped(meta, "sub-agent (sidechain) line")
            continue
        for key in ("sessionId", "cwd", "version", "gitBranch"):
            if key in line and key not in meta:
                meta[key] = line[key]
        message = loc.get(line, "message", dict, "")
        if message.get("model") == "<synthetic>":  # an error Claude Code showed, never sent
            skipped(meta, "synthetic assistant line (an API error shown to the user)")
            continue
        role = loc.get(message, "role", str, "message")
        if role != kind:
            loc.fail("message.role", f"expected {kind!r} (the line's type), got {role!r}")
        content = message.get("content")
        if isinstance(content, str):
            blocks: list[Any] = [{"type": "text", "text": content}]
        else:
            blocks = list(loc.get(message, "content", list, "message"))
        api_id = message.get("id") if isinstance(message.get("id"), str) else None
        prev = merged[-1] if merged else None
        same = prev is not None and prev.role == role
        if same and role == "assistant":
            same = prev is not None and prev.api_id == api_id and api_id is not None
        if prev is not None and same:
            prev.parts.append((rec.line, len(prev.content)))
            prev.content.extend(blocks)
            prev.as_string = False
            if role == "assistant":
                prev.usage = message.get("usage", prev.usage)
        else:
            merged.append(
                _Merged(
                    role,
                    rec.line,
                    blocks,
                    [(rec.line, 0)],
                    api_id,
                    line.get("uuid"),
                    line.get("timestamp"),
                    message.get("usage"),
                    message.get("model") if isinstance(message.get("model"), str) else None,
                    isinstance(content, str),
                )
            )
    api = [
        {"role": m.role, "content": m.content[0]["text"] if m.as_string else m.content}
        for m in merged
    ]
    try:
        converted = from_anthropic(api)
    except FormatError as exc:
        _relocate(exc, merged, base)
    if len(converted) != len(merged):  # the adapter's contract: one message per API message
        raise AssertionError("from_anthropic changed the number of messages")
    out: list[Message] = []
    model: str | None = None
    for msg, src in zip(converted, merged, strict=True):
        changes: dict[str, Any] = {
            "id": src.api_id if src.role == "assistant" else src.uuid,
            "timestamp": src.timestamp,
        }
        if src.role == "assistant":
            if isinstance(src.usage, dict):
                changes["usage"] = src.usage
            if src.model is not None:
                model = src.model
                changes["extra"] = freeze({**msg.extra, "model": src.model})
        out.append(msg.replace(**changes))
    messages = pair_calls(out, meta)  # an interrupted session can end mid-tool
    return Transcript(messages, "claude-code", str(path), model, (), freeze(meta))


def _relocate(exc: FormatError, merged: list[_Merged], base: Loc) -> NoReturn:
    """Raise ``exc`` (about a merged API message) at the line and block it came from."""
    index = exc.index if exc.index is not None and 0 <= exc.index < len(merged) else None
    if index is None:
        base.reraise(exc, "message", by_line=True)
    src = merged[index]
    line, fld = src.first_line, exc.field or ""
    match = _FIELD_RE.match(fld)
    if match and not src.as_string:
        k = int(match.group(1))
        for part_line, offset in src.parts:
            if offset <= k:
                line, local = part_line, k - offset
        fld = f"content[{local}]{match.group(2)}"
    elif match:
        fld = f"content{match.group(2)}"
    base.at(line=line).reraise(FormatError(exc.reason, field=fld or None), "message", by_line=True)
