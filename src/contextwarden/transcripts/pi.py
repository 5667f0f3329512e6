"""pi session JSONL (badlogic/pi-mono ``coding-agent``), one entry a line (docs/sessions.md)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._messages import (
    Block,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    freeze,
)
from ..formats._media import anthropic_image_cost
from ._common import (
    AgentCompaction,
    Loc,
    Record,
    Transcript,
    dumps_arguments,
    pair_calls,
    place_marks,
    skipped,
    warn,
)

__all__ = ["ENTRY_TYPES", "is_pi", "parse_pi"]

#: The entry types that identify a pi session file.
ENTRY_TYPES = frozenset(
    {"session", "message", "model_change", "thinking_level_change", "compaction"}
)
#: How pi introduces a compaction summary in the requests it sends.
SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:\n\n"
)
#: How pi introduces the summary of a branch the conversation came back from.
BRANCH_PREFIX = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
)
_FAILED_STOPS = frozenset({"error", "aborted"})
_ASSISTANT_EXTRA = ("model", "provider", "api", "stopReason", "errorMessage", "responseId")


def is_pi(value: Any) -> bool:
    """Whether one JSONL record looks like a pi session entry."""
    return (
        isinstance(value, dict)
        and value.get("type") in ENTRY_TYPES
        and (value["type"] != "message" or isinstance(value.get("message"), dict))
    )


def parse_pi(records: Sequence[Record], path: Path, shown: str) -> Transcript:
    """Read a pi session (records already parsed from its lines)."""
    base = Loc(shown)
    meta: dict[str, Any] = {}
    model: str | None = None
    messages: list[Message] = []
    failed_calls: set[str] = set()
    entry_at: dict[Any, int] = {}  # entry id -> index in ``messages`` of its message
    marks: list[tuple[int, int, str, int, Any]] = []  # (at, first kept, summary, line, time)
    for rec in _active_branch(records, meta):
        loc = base.at(line=rec.line)
        entry = loc.check(rec.value, dict, "")
        kind = loc.get(entry, "type", str, "")
        if "id" in entry:
            entry_at[entry["id"]] = len(messages)
        if kind == "compaction":
            summary = loc.get(entry, "summary", str, "")
            first = entry_at.get(entry.get("firstKeptEntryId"), len(messages))
            marks.append((len(messages), first, summary, rec.line, entry.get("timestamp")))
        elif kind == "session":
            meta["session"] = {k: v for k, v in entry.items() if k != "type"}
            model = loc.opt(entry, "modelId", str, "") or model
        elif kind == "model_change":
            model = loc.opt(entry, "modelId", str, "") or model
        elif kind == "custom_message":  # an extension's message: pi sends it as a user turn
            messages.append(_user(entry, loc))
        elif kind == "branch_summary" and isinstance(entry.get("summary"), str):
            text = f"{BRANCH_PREFIX}{entry['summary']}\n</summary>"
            messages.append(Message("user", (TextBlock(text),), timestamp=entry.get("timestamp")))
        elif kind == "thinking_level_change":
            meta["thinking_level"] = entry.get("thinkingLevel")
        elif kind == "message":
            raw = loc.get(entry, "message", dict, "")
            role = loc.get(raw, "role", str, "message")
            if role == "assistant" and raw.get("stopReason") in _FAILED_STOPS:
                # pi drops these when it builds the next request; so do we.
                for block in raw.get("content") or ():
                    if isinstance(block, dict) and block.get("type") == "toolCall":
                        failed_calls.add(str(block.get("id")))
                skipped(meta, f"assistant turn with stopReason {raw['stopReason']!r}")
                continue
            if role == "toolResult" and raw.get("toolCallId") in failed_calls:
                skipped(meta, "result of a call in a failed assistant turn")
                continue
            msg = _message(raw, role, loc)
            if msg is None:
                skipped(meta, f"message with role {role!r}")
                continue
            if role == "assistant" and isinstance(raw.get("model"), str):
                model = raw["model"]
            messages.append(msg)
        else:  # compaction, label, custom...: later pi versions' entries
            skipped(meta, f"entry type {kind!r}")
    kept = pair_calls(messages, meta)  # a crash mid-tool leaves a call unanswered
    entries = [r.value for r in records if isinstance(r.value, dict)]
    replies = sum(
        1
        for m in (e.get("message") for e in entries if e.get("type") == "message")
        if isinstance(m, dict)
        and m.get("role") == "assistant"
        and m.get("stopReason") not in _FAILED_STOPS
    )
    got = sum(1 for m in kept if m.role == "assistant")
    if got < 0.95 * replies:
        warn(
            meta,
            f"{replies} replies in the file but the active branch holds {got}: the rest are on "
            "other branches of the session tree (/tree, /fork)",
        )
    ats = place_marks(messages, kept, [m[0] for m in marks])
    firsts = place_marks(messages, kept, [m[1] for m in marks])
    compactions = tuple(
        AgentCompaction(
            at,
            (
                Message("user", (TextBlock(SUMMARY_PREFIX + summary),), timestamp=ts),
                *kept[min(first, at) : at],
            ),
            line,
        )
        for at, first, (_, _, summary, line, ts) in zip(ats, firsts, marks, strict=True)
    )
    return Transcript(kept, "pi", str(path), model, (), freeze(meta), compactions=compactions)


def _active_branch(records: Sequence[Record], meta: dict[str, Any]) -> Sequence[Record]:
    """The records on the path from the last entry to the root, when entries form a tree
    (``id``/``parentId``); all records in order otherwise. Entries outside the tree (the
    session header) stay in front. A parent missing from the file (an excerpt) ends the path
    there, with a warning."""
    tree = [r for r in records if isinstance(r.value, dict) and "parentId" in r.value]
    if not tree:
        return records
    by_id = {r.value.get("id"): r for r in tree}
    position = {id(r): i for i, r in enumerate(tree)}
    chain: list[Record] = []
    node: Record | None = tree[-1]
    while node is not None and len(chain) <= len(tree):  # the bound stops a cycle
        chain.append(node)
        parent = node.value.get("parentId")
        if parent is not None and parent not in by_id:
            at = position[id(node)]
            missing = f"line {node.line}: its parentId {parent!r} is not in the file"
            if at == 0:
                warn(meta, f"{missing}; the session starts at this line")
                break
            node = tree[at - 1]
            warn(meta, f"{missing}; read as following line {node.line}, the entry before it")
            continue
        node = by_id.get(parent) if parent is not None else None
    head = [r for r in records if not (isinstance(r.value, dict) and "parentId" in r.value)]
    return head + chain[::-1]


def _message(raw: dict[str, Any], role: str, loc: Loc) -> Message | None:
    ts = raw.get("timestamp")
    if role in ("user", "custom"):  # custom: an extension's message
        return _user(raw, loc)
    if role == "assistant":
        content = loc.get(raw, "content", list, "message")
        blocks = tuple(
            _assistant_block(b, f"message.content[{i}]", loc) for i, b in enumerate(content)
        )
        usage = loc.opt(raw, "usage", dict, "message")
        extra = {k: raw[k] for k in _ASSISTANT_EXTRA if k in raw}
        return Message("assistant", blocks, timestamp=ts, usage=usage, extra=freeze(extra))
    if role == "toolResult":
        call_id = loc.get(raw, "toolCallId", str, "message")
        content = loc.get(raw, "content", list, "message")
        parts = tuple(_media_block(b, f"message.content[{i}]", loc) for i, b in enumerate(content))
        body: str | tuple[TextBlock | ImageBlock, ...] = parts
        if len(parts) == 1 and isinstance(parts[0], TextBlock):
            body = parts[0].text
        is_error = loc.opt(raw, "isError", bool, "message") or False
        result = ToolResultBlock(call_id, body, is_error=is_error)
        extra = {"toolName": raw["toolName"]} if "toolName" in raw else {}
        return Message("tool", (result,), timestamp=ts, extra=freeze(extra))
    if role == "bashExecution" and not raw.get("excludeFromContext"):  # the user's `!command`
        return Message("user", (TextBlock(_bash_text(raw)),), timestamp=ts)
    return None  # a `!!command` kept out of the context, or a role pi does not send


def _bash_text(raw: dict[str, Any]) -> str:
    """A shell command the user ran in pi, as pi words it for the model."""
    output = raw.get("output")
    text = f"Ran `{raw.get('command')}`\n" + (f"```\n{output}\n```" if output else "(no output)")
    code = raw.get("exitCode")
    if raw.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif isinstance(code, int) and code != 0:
        text += f"\n\nCommand exited with code {code}"
    if raw.get("truncated") and raw.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {raw['fullOutputPath']}]"
    return text


def _user(raw: dict[str, Any], loc: Loc) -> Message:
    """A user turn: its text, or its ``text`` / ``image`` blocks."""
    content = raw.get("content")
    if isinstance(content, str):
        return Message("user", (TextBlock(content),), timestamp=raw.get("timestamp"))
    items = loc.get(raw, "content", list, "message")
    blocks = (_media_block(b, f"message.content[{i}]", loc) for i, b in enumerate(items))
    return Message("user", blocks, timestamp=raw.get("timestamp"))


def _media_block(block: Any, where: str, loc: Loc) -> TextBlock | ImageBlock:
    block = loc.check(block, dict, where)
    kind = loc.get(block, "type", str, where)
    if kind == "text":
        return TextBlock(loc.get(block, "text", str, where))
    if kind == "image":
        data = loc.get(block, "data", str, where)
        mime = loc.get(block, "mimeType", str, where)
        source = {"type": "base64", "media_type": mime, "data": data}
        return ImageBlock(source, token_cost=anthropic_image_cost(source))
    loc.fail(f"{where}.type", f"unknown block type {kind!r} (expected 'text' or 'image')")


def _assistant_block(block: Any, where: str, loc: Loc) -> Block:
    block = loc.check(block, dict, where)
    kind = loc.get(block, "type", str, where)
    if kind == "text":
        return TextBlock(loc.get(block, "text", str, where))
    if kind == "thinking":
        return ThinkingBlock(
            loc.get(block, "thinking", str, where),
            signature=loc.opt(block, "thinkingSignature", str, where),
            redacted=loc.opt(block, "redacted", bool, where) or False,
        )
    if kind == "toolCall":
        args = block.get("arguments")
        return ToolCallBlock(
            loc.get(block, "id", str, where),
            loc.get(block, "name", str, where),
            dumps_arguments(loc.check({} if args is None else args, dict, f"{where}.arguments")),
        )
    loc.fail(
        f"{where}.type", f"unknown block type {kind!r} (expected 'text', 'thinking' or 'toolCall')"
    )
