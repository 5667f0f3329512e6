"""Claude Code session JSONL (``~/.claude/projects/<project>/<id>.jsonl``; docs/sessions.md)."""

from __future__ import annotations

import copy
import dataclasses
import heapq
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from .._exceptions import FormatError
from .._messages import EMPTY, Message, TextBlock, freeze
from ..formats import from_anthropic
from ._common import (
    AgentCompaction,
    Loc,
    Record,
    Transcript,
    as_str,
    dumps_arguments,
    join_blocks,
    lead_with_prompt,
    merge_user_runs,
    pair_calls,
    place_marks,
    skipped,
    warn,
)

__all__ = ["LINE_TYPES", "is_claude_code", "parse_claude_code"]

#: Line types Claude Code writes; ``user`` / ``assistant`` carry the conversation.
LINE_TYPES = frozenset(
    "user assistant summary system file-history-snapshot queue-operation attachment progress".split()
)
_FIELD_RE = re.compile(r"^content\[(\d+)\](.*)$")


def is_claude_code(value: Any) -> bool:
    """Whether one JSONL record looks like a Claude Code session line."""
    if not isinstance(value, dict) or value.get("type") not in LINE_TYPES:
        return False
    if value["type"] in ("user", "assistant"):
        return isinstance(value.get("message"), dict)
    return "sessionId" in value or "uuid" in value or value["type"] == "summary"


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
    injected: bool = False  # attachments: a message of their own, joined to the turn on writing


def _is_conversation(value: Any, sidechain: bool = False) -> bool:
    return (
        isinstance(value, dict)
        and value.get("type") in ("user", "assistant", "attachment")
        and (value.get("isSidechain") is True) == sidechain
    )


def _sub_agent_file(records: Sequence[Record]) -> bool:
    """Whether every conversation line is a sub-agent's: a file of its own (newer versions
    keep each sub-agent in ``<session>/subagents/agent-*.jsonl``), read as its conversation."""
    lines = [
        r.value
        for r in records
        if isinstance(r.value, dict) and r.value.get("type") in ("user", "assistant")
    ]
    return bool(lines) and all(x.get("isSidechain") is True for x in lines)


def _is_boundary(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and value.get("type") == "system"
        and value.get("subtype") == "compact_boundary"
    )


def _parent(value: dict[str, Any]) -> Any:
    parent = value.get("parentUuid")
    if parent is None and _is_boundary(value):
        return value.get("logicalParentUuid")
    return parent


@dataclass
class _Chain:
    """The lines of the conversation in chain order, and where the walk back from the last
    line stopped (``broken``: the line whose parent is not in the file)."""

    lines: list[Record]
    broken: Record | None = None


def _conversations(records: Sequence[Record], meta: dict[str, Any]) -> list[_Chain]:
    """The file's conversations, each its lines (user, assistant, attachment lines and compact
    boundaries) in chain order; see docs/sessions.md. Every line with a ``uuid`` is a link
    of a chain (``system`` and ``progress`` lines too), so a walk passes through lines that
    carry nothing for the model. A line with no parent starts a conversation (``/clear``
    starts a new one in the same file); each conversation is the chain from its last line."""
    side = _sub_agent_file(records)
    dicts = [r for r in records if isinstance(r.value, dict)]
    for r in dicts:
        if not side and r.value.get("isSidechain") is True:
            skipped(meta, "sub-agent (sidechain) line")
    wanted = [r for r in dicts if _is_conversation(r.value, side) or _is_boundary(r.value)]
    if not any("parentUuid" in r.value for r in wanted):
        return [_Chain(wanted)]
    links = [r for r in dicts if (r.value.get("isSidechain") is True) == side]
    by_uuid = {r.value["uuid"]: i for i, r in enumerate(links) if r.value.get("uuid") is not None}
    bridges: dict[int, str] = {}

    def up(i: int) -> int | None:
        """The line before ``i`` in its chain: its parent or, for a parent Claude Code never
        wrote (a progress line's, a compaction's logical parent), the line written before."""
        parent = _parent(links[i].value)
        j = by_uuid.get(parent)
        if j is None and parent is not None:
            j = next((k for k in range(i - 1, -1, -1) if "uuid" in links[k].value), None)
            if j is not None:
                bridges[i] = (
                    f"line {links[i].line} (type {links[i].value.get('type')}): its parent "
                    f"{parent!r} is not in the file; read on from line {links[j].line}"
                )
        return j

    root: dict[int, int] = {}
    leaves: dict[int, int] = {}  # root -> the conversation's last user or assistant line
    for i, r in enumerate(links):
        if r.value.get("type") not in ("user", "assistant"):
            continue
        path: dict[int, None] = {}  # ordered, and a cycle is seen at once
        node: int | None = i
        while node is not None and node not in root and node not in path:
            path[node] = None
            node = up(node)
        top = root[node] if node is not None and node in root else next(reversed(path))
        root.update(dict.fromkeys(path, top))
        leaves[top] = i
    chains = [_chain(links, by_uuid, leaf, side, up) for leaf in sorted(leaves.values())]
    notes = sorted(bridges.items())
    for _, note in notes[:3]:
        warn(meta, note)
    if len(notes) > 3:
        warn(meta, f"{len(notes) - 3} more lines whose parent is not in the file")
    read = {id(r) for c in chains for r in c.lines}
    for r in links:
        if _is_conversation(r.value, side) and id(r) not in read:
            skipped(meta, "side branch (a line off the conversation's parentUuid chain)")
    return chains or [_Chain([])]


def _chain(
    links: list[Record],
    by_uuid: dict[Any, int],
    leaf: int,
    side: bool,
    up: Callable[[int], int | None],
) -> _Chain:
    """The conversation whose last line is ``leaf``, in chain order."""
    chain: set[int] = set()
    node: int | None = leaf
    last = leaf
    while node is not None and node not in chain:
        chain.add(node)
        last = node
        node = up(node)
    broken = links[last] if _parent(links[last].value) is not None else None
    calls: set[str] = set()
    api_ids: set[str] = set()
    for i in chain:
        message = links[i].value.get("message")
        if not isinstance(message, dict):
            continue
        if isinstance(message.get("id"), str):
            api_ids.add(message["id"])
        for block in _blocks(message):
            if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                calls.add(block["id"])
    keep = {
        i for i in chain if _is_conversation(links[i].value, side) or _is_boundary(links[i].value)
    }
    # Off the chain but part of it: the other parts of a streamed reply, the results of
    # parallel calls, and the attachments hanging off such a result (hook output).
    for i, r in enumerate(links):
        if i in chain or not _is_conversation(r.value, side):
            continue
        message = r.value.get("message")
        if r.value.get("type") == "attachment":
            parent = by_uuid.get(_parent(r.value))
            if parent is not None and parent in keep and parent not in chain:
                keep.add(i)
                continue
        elif isinstance(message, dict) and (
            message.get("id") in api_ids
            or any(
                b.get("type") == "tool_result" and b.get("tool_use_id") in calls
                for b in _blocks(message)
            )
        ):
            keep.add(i)
    # Topological order (parent first), file order among lines that are ready together. A
    # line whose parent is a link left out (a system line) hangs from that link's ancestor.
    children: dict[int, list[int]] = {}
    waiting: dict[int, int] = {}
    ready: list[int] = []
    for i in sorted(keep):
        parent = up(i)
        seen: set[int] = set()
        while parent is not None and parent not in keep and parent not in seen:
            seen.add(parent)
            parent = up(parent)
        if parent is not None and parent in keep and parent != i:
            children.setdefault(parent, []).append(i)
            waiting[i] = 1
        else:
            ready.append(i)
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for child in children.get(i, ()):
            waiting[child] -= 1
            if not waiting[child]:
                heapq.heappush(ready, child)
    if len(order) < len(keep):  # a cycle: the rest in file order
        order.extend(sorted(keep - set(order)))
    return _Chain([links[i] for i in order], broken)


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def parse_claude_code(
    records: Sequence[Record], path: Path, shown: str
) -> Transcript | list[Transcript]:
    """Read a Claude Code session (records already parsed from its lines): one transcript, or
    one per conversation when the file holds several (``/clear``)."""
    meta: dict[str, Any] = {}
    for rec in records:
        kind = rec.value.get("type") if isinstance(rec.value, dict) else None
        if kind not in ("user", "assistant", "attachment") and not _is_boundary(rec.value):
            skipped(meta, f"line type {kind!r}")
    chains = _conversations(records, meta)
    answered = [c for c in chains if any(r.value.get("type") == "assistant" for r in c.lines)]
    for c in chains if len(answered) < len(chains) and answered else ():
        if c not in answered:  # a prompt never answered (an edited first prompt): not a run
            for _ in c.lines:
                skipped(meta, "side branch (a line off the conversation's parentUuid chain)")
    runs = [_read(chain, path, shown, meta) for chain in answered or chains[-1:]]
    short = _check_reach(records, runs, [c.broken for c in chains])
    if short is not None:
        runs = [
            dataclasses.replace(t, meta=freeze({**t.meta, "warnings": [*t.warnings, short]}))
            for t in runs
        ]
    if len(runs) == 1:
        return runs[0]
    return [dataclasses.replace(t, run=i, runs=len(runs)) for i, t in enumerate(runs, 1)]


def _read(chain: _Chain, path: Path, shown: str, file_meta: dict[str, Any]) -> Transcript:
    """One conversation of the file as a transcript."""
    base = Loc(shown)
    meta: dict[str, Any] = copy.deepcopy(file_meta)
    merged: list[_Merged] = []
    by_api_id: dict[str, _Merged] = {}
    marks: list[tuple[int, Any, int]] = []  # (merged index, summary line, file line)
    pending_boundary: int | None = None
    for rec in chain.lines:
        loc = base.at(line=rec.line)
        line = loc.check(rec.value, dict, "")
        if _is_boundary(line):
            pending_boundary = rec.line
            continue
        kind = line["type"]
        for key in ("sessionId", "cwd", "version", "gitBranch"):
            if key in line and key not in meta:
                meta[key] = line[key]
        injected = kind == "attachment"
        if injected:
            sent = _attachment_blocks(line)
            if not sent:
                skipped(meta, "attachment sending nothing to the model")
                continue
            kind = "user"
            message: dict[str, Any] = {"role": "user", "content": sent}
        else:
            message = loc.get(line, "message", dict, "")
        if message.get("model") == "<synthetic>":  # an error Claude Code showed, never sent
            skipped(meta, "synthetic assistant line (an API error shown to the user)")
            continue
        if line.get("isCompactSummary") is True or (
            pending_boundary is not None and kind == "user" and _continues(message)
        ):
            marks.append((len(merged), line, rec.line))
            pending_boundary = None
            continue
        role = loc.get(message, "role", str, "message")
        if role != kind:
            loc.fail("message.role", f"expected {kind!r} (the line's type), got {role!r}")
        content = message.get("content")
        if isinstance(content, str):
            blocks: list[Any] = [{"type": "text", "text": content}]
        else:
            blocks = list(loc.get(message, "content", list, "message"))
        api_id = as_str(message.get("id"))
        # Attachments stand apart: a line of the conversation goes before the ones at the end
        # (a tool's result before the hook output written ahead of it).
        at = len(merged)
        while not injected and at and merged[at - 1].injected:
            at -= 1
        prev = merged[at - 1] if at else None
        owner = by_api_id.get(api_id) if role == "assistant" and api_id is not None else None
        if owner is not None and _only_results_after(owner, merged):
            target: _Merged | None = owner
        elif prev is not None and prev.role == role == "user" and not injected:
            target = prev
        else:
            target = None
        if target is not None:
            target.parts.append((rec.line, len(target.content)))
            join_blocks(target.content, blocks)
            target.as_string = False
            if role == "assistant":
                target.usage = message.get("usage", target.usage)
            continue
        new = _Merged(role, rec.line, blocks, [(rec.line, 0)], api_id, line.get("uuid"))
        new.timestamp, new.usage = line.get("timestamp"), message.get("usage")
        new.model = as_str(message.get("model"))
        new.as_string, new.injected = isinstance(content, str), injected
        if role == "user" and any(b.get("type") == "tool_result" for b in _blocks(message)):
            merged.insert(at, new)
        else:
            merged.append(new)
        if role == "assistant" and api_id is not None:
            by_api_id[api_id] = new
    api = [
        {"role": m.role, "content": m.content[0]["text"] if m.as_string else m.content}
        for m in merged
    ]
    try:
        converted = from_anthropic(api)
    except FormatError as exc:
        _relocate(exc, merged, base)
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
        # An attachment is written into the turn it follows, not as a turn of its own; so is
        # a reply right after a reply (nothing came between: the API joins the two turns).
        if src.injected or (src.role == "assistant" and out and out[-1].role == "assistant"):
            changes["hints"] = EMPTY
        out.append(msg.replace(**changes))
    apart = {id(m) for m, src in zip(out, merged, strict=True) if src.injected}
    # an interrupted session can end mid-tool
    messages = merge_user_runs(pair_calls(out, meta), apart=apart)
    if chain.lines:
        messages = lead_with_prompt(messages, meta, f"line {chain.lines[0].line}")
    positions = place_marks(out, messages, [m[0] for m in marks])
    compactions = tuple(
        AgentCompaction(at, (_summary(line),), number)
        for at, (_, line, number) in zip(positions, marks, strict=True)
    )
    return Transcript(
        messages, "claude-code", str(path), model, (), freeze(meta), compactions=compactions
    )


def _continues(message: dict[str, Any]) -> bool:
    """Whether a user message is the summary Claude Code writes after a compaction (older
    versions do not flag it)."""
    content = message.get("content")
    if isinstance(content, list) and content and isinstance(content[0], dict):
        content = content[0].get("text")
    return isinstance(content, str) and content.startswith("This session is being continued")


def _only_results_after(owner: _Merged, merged: list[_Merged]) -> bool:
    """Whether ``owner`` is the last assistant message, followed only by tool results."""
    at = len(merged) - 1
    while at >= 0 and merged[at] is not owner:
        m = merged[at]
        if not m.injected and (
            m.role != "user"
            or any(not isinstance(b, dict) or b.get("type") != "tool_result" for b in m.content)
        ):
            return False
        at -= 1
    return at >= 0


def _summary(line: dict[str, Any]) -> Message:
    content = line["message"].get("content")
    if isinstance(content, list):
        text = "\n".join(
            str(b.get("text", "")) for b in content if isinstance(b, dict) and "text" in b
        )
    else:
        text = str(content or "")
    return Message("user", (TextBlock(text),), id=line.get("uuid"), timestamp=line.get("timestamp"))


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


def _check_reach(
    records: Sequence[Record], runs: Sequence[Transcript], broken: Sequence[Record | None]
) -> str | None:
    """A warning when the chains reach far fewer replies than the file holds (a ``parentUuid``
    naming a line that is not there, or most of the file on side branches), else None."""
    side = _sub_agent_file(records)
    replies: set[Any] = set()
    lines = 0
    for r in records:
        v = r.value
        if not _is_conversation(v, side) or v.get("type") != "assistant":
            continue
        message = v.get("message")
        if not isinstance(message, dict) or message.get("model") == "<synthetic>":
            continue
        lines += 1
        replies.add(message.get("id") or v.get("uuid") or r.line)
    got = sum(1 for t in runs for m in t.messages if m.role == "assistant")
    if got >= 0.95 * len(replies):
        return None
    stop = next((b for b in broken if b is not None), None)
    why = (
        f"broken at line {stop.line} (type {stop.value.get('type')}): its parent "
        f"{_parent(stop.value)!r} is not in the file"
        if stop is not None
        else "the rest are on side branches (edited prompts, rewinds)"
    )
    return (
        f"{lines} assistant lines ({len(replies)} replies) but the chain from the last line "
        f"reaches {got}: {why}"
    )


#: Attachment types Claude Code sends nothing for (bookkeeping, UI-only, suppressed hooks).
_SILENT = frozenset(
    (
        "command_permissions hook_system_message hook_non_blocking_error hook_cancelled "
        "hook_error_during_execution hook_permission_decision hook_deferred_tool structured_output "
        "max_turns_reached dynamic_skill already_read_file edited_image_file goal_status "
        "teammate_shutdown_batch context_efficiency autocheckpointing background_task_status todo "
        "task_progress compaction_reminder current_session_memory thinking_reminder prompt_snapshot "
        "environment model"
    ).split()
)
#: Hook events whose ``hook_success`` output goes to the model (the others are shown only).
_SENT_HOOKS = frozenset({"SessionStart", "UserPromptSubmit", "UserPromptExpansion"})
#: How an attachment's fields read in the request, where the line does not record it
#: (``rendered``). The wording around the fields is ours, short: the fields are what count.
_TEMPLATES: dict[str, str] = {
    "hook_success": "{hookName} hook success: {content}",
    "hook_additional_context": "{hookName} hook additional context: {content}",
    "hook_blocking_error": "{hookName} hook blocking error: {blockingError}",
    "hook_stopped_continuation": "{hookName} hook stopped continuation: {message}",
    "async_hook_response": "{hookName}: {content}",
    "skill_listing": "Skills available to the Skill tool:\n\n{content}",
    "edited_text_file": "Note: {filename} was modified by the user or a linter:\n{snippet}",
    "date_change": "The date has changed. Today's date is now {newDate}.",
    "nested_memory": "Contents of {path}:\n\n{content}",
    "deferred_tools_delta": "Deferred tools now available:\n{addedLines}",
    "agent_listing_delta": "Agent types for the Agent tool:\n{addedLines}",
    "mcp_instructions_delta": "# MCP Server Instructions\n\n{addedBlocks}",
    "task_reminder": "The task tools have not been used recently. The task list:\n{content}",
    "todo_reminder": "The TodoWrite tool has not been used recently. The list:\n{content}",
    "diagnostics": "<new-diagnostics>{files}</new-diagnostics>",
    "opened_file_in_ide": "The user opened the file {filename} in the IDE.",
    "selected_lines_in_ide": "The user selected lines {lineStart} to {lineEnd} of {filename}:"
    "\n{content}",
    "plan_file_reference": "A plan file exists at {planFilePath}:\n{planContent}",
    "compact_file_reference": "Note: {filename} was read before the conversation was summarized.",
}
#: Fields an attachment of another type carries its text in, in order of preference.
_TEXT_FIELDS = ("content", "text", "prompt", "snippet", "message", "stdout")


def _field_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        return "\n".join(value)
    return "" if value is None else dumps_arguments(value)


def _attachment_blocks(line: dict[str, Any]) -> list[dict[str, Any]]:
    """The Anthropic content blocks an ``attachment`` line adds to the next request: the text
    Claude Code recorded it rendered (``rendered``), else the attachment's own fields in a
    ``<system-reminder>``; a queued prompt as the user typed it; nothing for the types Claude
    Code does not send."""
    a = line.get("attachment")
    if not isinstance(a, dict):
        return []
    rendered = line.get("rendered")
    if isinstance(rendered, list) and rendered:
        texts = [_field_text(r.get("content")) for r in rendered if isinstance(r, dict)]
        return [{"type": "text", "text": t} for t in texts if t]
    kind = a.get("type")
    if kind in _SILENT or (kind == "hook_success" and a.get("hookEvent") not in _SENT_HOOKS):
        return []
    if kind == "queued_command":
        prompt = a.get("prompt")
        if isinstance(prompt, list):
            return [b for b in prompt if isinstance(b, dict)]
        return [{"type": "text", "text": prompt}] if isinstance(prompt, str) and prompt else []
    template = _TEMPLATES.get(str(kind))
    if template is not None:
        fields = defaultdict(str, {k: _field_text(v) for k, v in a.items()})
        said = [k for k in re.findall(r"{(\w+)}", template) if k != "hookName"]
        if not any(fields.get(k) for k in said):
            return []  # nothing of its own to say
        text = template.format_map(fields)
    else:
        text = next((t for t in (_field_text(a.get(k)) for k in _TEXT_FIELDS) if t), "")
    if not text:
        return []
    return [{"type": "text", "text": f"<system-reminder>\n{text}\n</system-reminder>"}]
