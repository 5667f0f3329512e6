"""Codex CLI rollout JSONL (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``; docs/sessions.md)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._messages import Message, TextBlock, ThinkingBlock, freeze
from ..formats import from_responses
from ._common import (
    AgentCompaction,
    Loc,
    Record,
    Transcript,
    lead_with_prompt,
    pair_calls,
    place_marks,
    skipped,
)

__all__ = ["RECORD_TYPES", "is_codex", "parse_codex"]

RECORD_TYPES = frozenset(
    {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}
)
#: Item types that become messages (the rest, ``web_search_call``... are kept opaque by the
#: Responses adapter).
_SKIP_ITEMS = frozenset({"ghost_snapshot"})
#: How Codex introduces a summary when it rebuilds a compacted history without recording it.
SUMMARY_PREFIX = "Another language model started to solve this problem and produced a summary of its thinking process:\n"


def is_codex(value: Any) -> bool:
    """Whether one JSONL record looks like a Codex CLI rollout line."""
    return (
        isinstance(value, dict)
        and value.get("type") in RECORD_TYPES
        and isinstance(value.get("payload"), dict)
    )


def _convert(items: list[tuple[int, dict[str, Any]]], loc: Loc) -> tuple[Message, ...]:
    lines = [line for line, _ in items]
    return Loc(loc.path).convert(from_responses, [item for _, item in items], lines, "payload")


def _empty_reasoning(item: dict[str, Any]) -> bool:
    """A reasoning item that carries nothing Codex sends back (no summary text, no
    ``encrypted_content``): newer models record one per step."""
    return (
        item.get("type") == "reasoning"
        and not item.get("encrypted_content")
        and not item.get("content")
        and not any(isinstance(x, dict) and x.get("text") for x in item.get("summary") or ())
    )


def parse_codex(records: Sequence[Record], path: Path, shown: str) -> Transcript:
    """Read a Codex CLI rollout (records already parsed from its lines)."""
    base = Loc(shown)
    meta: dict[str, Any] = {}
    model: str | None = None
    window: int | None = None
    messages: list[Message] = []
    segment: list[tuple[int, dict[str, Any]]] = []
    stamps: list[Any] = []
    marks: list[tuple[int, tuple[Message, ...] | str, int]] = []

    def flush() -> None:
        messages.extend(
            m.replace(timestamp=stamps[0]) if stamps and m.timestamp is None else m
            for m in _convert(segment, base)
        )
        segment.clear()
        stamps.clear()

    for rec in records:
        loc = base.at(line=rec.line)
        line = loc.check(rec.value, dict, "")
        kind = line.get("type")
        payload = loc.get(line, "payload", dict, "") if kind in RECORD_TYPES else {}
        if kind == "session_meta":
            meta["session"] = {k: v for k, v in payload.items() if k != "base_instructions"}
            instructions = payload.get("base_instructions")
            text = instructions.get("text") if isinstance(instructions, dict) else instructions
            if isinstance(text, str) and text and not messages and not segment:
                messages.append(
                    Message("system", (TextBlock(text),), timestamp=line.get("timestamp"))
                )
        elif kind == "turn_context":
            model = payload.get("model") if isinstance(payload.get("model"), str) else model
            window = _window(payload, window)
        elif kind == "response_item":
            if payload.get("type") in _SKIP_ITEMS:
                skipped(meta, f"item type {payload.get('type')!r}")
                continue
            if _empty_reasoning(payload):
                skipped(meta, "reasoning item with no summary and no encrypted content")
                continue
            segment.append((rec.line, payload))
            stamps.append(line.get("timestamp"))
        elif kind == "event_msg":
            if payload.get("type") == "task_started":
                window = _window(payload, window)
            if payload.get("type") != "token_count":
                skipped(meta, f"event {payload.get('type')!r}")
                continue
            info = payload.get("info")
            if not isinstance(info, dict):
                continue
            window = _window(info, window)
            flush()
            usage = info.get("last_token_usage")
            last = next(
                (i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "assistant"),
                None,
            )
            if isinstance(usage, dict) and last is not None and messages[last].usage is None:
                messages[last] = messages[last].replace(usage=usage)
        elif kind == "compacted":
            flush()
            history = payload.get("replacement_history")
            if isinstance(history, list):
                items = [
                    (rec.line, loc.check(x, dict, "payload.replacement_history")) for x in history
                ]
                marks.append((len(messages), _convert(items, loc), rec.line))
            else:
                summary = payload.get("message")
                marks.append((len(messages), summary if isinstance(summary, str) else "", rec.line))
        else:
            skipped(meta, f"record type {kind!r}")
    flush()
    kept = pair_calls(_drop_bare_reasoning(messages, meta), meta)
    kept = lead_with_prompt(kept, meta, f"line {records[0].line}" if records else "its start")
    ats = place_marks(messages, kept, [m[0] for m in marks])
    compactions = tuple(
        AgentCompaction(at, _replacement(kept[:at], what), line)
        for at, (_, what, line) in zip(ats, marks, strict=True)
    )
    return Transcript(kept, "codex", str(path), model, (), freeze(meta), window, compactions)


def _window(holder: dict[str, Any], window: int | None) -> int | None:
    """The window ``holder`` states (``model_context_window``), else ``window``."""
    stated = holder.get("model_context_window")
    return stated if isinstance(stated, int) else window


def _drop_bare_reasoning(messages: list[Message], meta: dict[str, Any]) -> list[Message]:
    """``messages`` without the replies that hold only reasoning and end their turn (a step
    cut short by an incoming message): a chat request has no place for them."""
    out: list[Message] = []
    for i, m in enumerate(messages):
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        if (
            m.role == "assistant"
            and all(isinstance(b, ThinkingBlock) for b in m.content)
            and (nxt is None or nxt.role != "assistant")
        ):
            skipped(meta, "reply holding only reasoning (a step cut short)")
            continue
        out.append(m)
    return out


def _replacement(before: Sequence[Message], what: tuple[Message, ...] | str) -> tuple[Message, ...]:
    """What Codex kept at a compaction: the recorded history, else (older versions) the
    user's own messages followed by the summary."""
    if isinstance(what, tuple):
        return what
    users = tuple(m for m in before if m.role == "user")
    return (*users, Message("user", (TextBlock(SUMMARY_PREFIX + what),)))
