"""opencode sessions as ``opencode export <session id>`` writes them (docs/sessions.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._messages import (
    Block,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    assistant,
    freeze,
    user,
)
from ._common import (
    AgentCompaction,
    Loc,
    Transcript,
    dumps_arguments,
    merge_user_runs,
    pair_calls,
    place_marks,
    skipped,
)

__all__ = ["is_opencode", "parse_opencode"]

#: What opencode sends in place of a ``compaction`` part: the question its summary answers.
_COMPACTION_PROMPT = "What did we do so far?"


def is_opencode(value: Any) -> bool:
    """Whether a JSON document looks like an ``opencode export``."""
    if not isinstance(value, dict) or not isinstance(value.get("messages"), list):
        return False
    info, first = value.get("info"), (value["messages"] or [None])[0]
    return (
        isinstance(info, dict)
        and str(info.get("id", "")).startswith("ses_")
        and (first is None or (isinstance(first, dict) and "parts" in first))
    )


def parse_opencode(doc: Any, path: Path, shown: str) -> Transcript:
    """An exported opencode session."""
    loc = Loc(shown)
    doc = loc.check(doc, dict, "document")
    info = loc.get(doc, "info", dict, "")
    meta: dict[str, Any] = {
        k: info[k] for k in ("id", "title", "version", "directory") if k in info
    }
    out: list[Message] = []
    marks: list[tuple[int, tuple[Message, ...]]] = []
    model: str | None = None
    pending: int | None = None  # where a compaction asked for its summary
    for i, raw in enumerate(loc.get(doc, "messages", list, "")):
        at = loc.at(index=i)
        entry = at.check(raw, dict, "")
        head = at.get(entry, "info", dict, "")
        parts = [at.check(p, dict, f"parts[{j}]") for j, p in enumerate(entry.get("parts") or ())]
        role = at.get(head, "role", str, "info")
        ts = (head.get("time") or {}).get("created")
        if role == "user":
            if any(p.get("type") == "compaction" for p in parts):
                pending = len(out)
                continue
            typed = tuple(TextBlock(p["text"]) for p in parts if _sent_text(p))
            for p in parts:
                if p.get("type") not in ("text", "file"):
                    skipped(meta, f"user {p.get('type')!r} part (not sent)")
            if typed:
                out.append(Message("user", typed, id=head.get("id"), timestamp=ts))
            continue
        if role != "assistant":
            at.fail("info.role", f"expected 'user' or 'assistant', got {role!r}")
        model = head.get("modelID") if isinstance(head.get("modelID"), str) else model
        said = freeze({k: head[k] for k in ("modelID", "providerID") if k in head})
        steps = _steps(parts, meta)
        if head.get("summary") is True and pending is not None:
            text = "\n".join(b.text for s in steps for b in s if isinstance(b, TextBlock))
            summary = (user(_COMPACTION_PROMPT), assistant(text))
            marks.append((pending, summary))
            pending = None
            continue
        for k, step in enumerate(steps):
            reply = tuple(b for b in step if not isinstance(b, ToolResultBlock))
            if not any(isinstance(b, (TextBlock, ToolCallBlock)) for b in reply):
                skipped(meta, "step with no text and no tool call")
                continue
            # one reply of opencode's may hold several calls: each gets an id of its own
            rid = head.get("id") if len(steps) == 1 else f"{head.get('id')}/{k}"
            out.append(Message("assistant", reply, id=rid, timestamp=ts, extra=said))
            names = {b.id: b.name for b in reply if isinstance(b, ToolCallBlock)}
            for result in (b for b in step if isinstance(b, ToolResultBlock)):
                tool = freeze({"toolName": names[result.tool_call_id]})
                out.append(Message("tool", (result,), extra=tool))
    messages = merge_user_runs(pair_calls(out, meta))
    positions = place_marks(out, messages, [m[0] for m in marks])
    compactions = tuple(AgentCompaction(p, s) for p, (_, s) in zip(positions, marks, strict=True))
    return Transcript(
        messages, "opencode", str(path), model, (), freeze(meta), compactions=compactions
    )


def _sent_text(part: dict[str, Any]) -> bool:
    return (
        part.get("type") == "text" and isinstance(part.get("text"), str) and not part.get("ignored")
    )


def _steps(parts: list[dict[str, Any]], meta: dict[str, Any]) -> list[list[Block]]:
    """An assistant message's parts as its model calls: the blocks of each, a tool part's
    result right after the calls (as :class:`ToolResultBlock`)."""
    steps: list[list[Block]] = []
    for p in parts:
        kind = p.get("type")
        if kind == "step-start" or not steps:
            steps.append([])
            if kind == "step-start":
                continue
        step = steps[-1]
        if kind == "text" and isinstance(p.get("text"), str) and p["text"]:
            step.append(TextBlock(p["text"]))
        elif kind == "reasoning" and isinstance(p.get("text"), str) and p["text"]:
            step.append(ThinkingBlock(p["text"]))
        elif kind == "tool":
            state: dict[str, Any] = p["state"] if isinstance(p.get("state"), dict) else {}
            call_id, name = str(p.get("callID")), str(p.get("tool"))
            step.append(ToolCallBlock(call_id, name, dumps_arguments(state.get("input") or {})))
            if state.get("status") == "completed":
                step.append(ToolResultBlock(call_id, str(state.get("output") or "")))
            elif state.get("status") == "error":
                step.append(ToolResultBlock(call_id, str(state.get("error") or ""), is_error=True))
        elif kind not in ("text", "reasoning"):
            skipped(meta, f"assistant {kind!r} part (records the session, not sent)")
    return steps
