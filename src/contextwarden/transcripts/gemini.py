"""Gemini CLI chat recordings (``~/.gemini/tmp/<hash>/chats/session-*``) and ``/chat save``
checkpoints (``~/.gemini/tmp/<hash>/checkpoint-<tag>.json``; docs/sessions.md)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._messages import Block, Message, TextBlock, ToolCallBlock, ToolResultBlock, freeze
from ..formats.gemini import from_gemini
from ._common import Loc, Record, Transcript, dumps_arguments, pair_calls, skipped

__all__ = ["is_gemini", "is_gemini_checkpoint", "parse_gemini", "parse_gemini_json"]


def is_gemini(value: Any) -> bool:
    """Whether a JSON document or the first JSONL record looks like a Gemini CLI recording."""
    return isinstance(value, dict) and "sessionId" in value and "projectHash" in value


def is_gemini_checkpoint(value: Any) -> bool:
    """Whether a JSON document is a ``/chat save`` checkpoint: ``{"history": [...]}`` or, from
    older versions, the bare list, of Gemini API contents (``parts`` lists; ``model`` replies)."""
    history = value.get("history") if isinstance(value, dict) else value
    return (
        isinstance(history, list)
        and all(isinstance(c, dict) and isinstance(c.get("parts"), list) for c in history)
        and any(c.get("role") == "model" for c in history)
    )


def parse_gemini_json(doc: Any, path: Path, shown: str) -> Transcript:
    """An older, single-document recording, or a checkpoint: the history Gemini CLI sends."""
    loc = Loc(shown)
    if is_gemini_checkpoint(doc):
        history = doc["history"] if isinstance(doc, dict) else doc
        meta: dict[str, Any] = {"container": "checkpoint"}
        kept = pair_calls(loc.convert(from_gemini, history), meta)
        return Transcript(kept, "gemini-cli", str(path), None, (), freeze(meta))
    doc = loc.check(doc, dict, "document")
    raw = loc.get(doc, "messages", list, "")
    records: list[tuple[int | None, int | None, dict[str, Any]]] = [
        (None, i, loc.check(m, dict, f"messages[{i}]")) for i, m in enumerate(raw)
    ]
    return _build(records, doc, path, shown)


def parse_gemini(records: Sequence[Record], path: Path, shown: str) -> Transcript:
    """A JSONL recording (records already parsed from its lines)."""
    base = Loc(shown)
    header: dict[str, Any] = {}
    history: dict[str, tuple[int | None, int | None, dict[str, Any]]] = {}
    for rec in records:
        loc = base.at(line=rec.line)
        value = loc.check(rec.value, dict, "")
        if "$rewindTo" in value:
            target = value["$rewindTo"]
            keys = list(history)
            cut = keys.index(target) if target in history else 0
            for key in keys[cut:]:
                del history[key]
        elif "$set" in value:
            update = loc.get(value, "$set", dict, "")
            if isinstance(update.get("messages"), list):
                history.clear()
                for i, m in enumerate(update["messages"]):
                    m = loc.check(m, dict, f"$set.messages[{i}]")
                    history[str(m.get("id"))] = (rec.line, None, m)
            header.update({k: v for k, v in update.items() if k != "messages"})
        elif isinstance(value.get("id"), str) and "type" in value:
            history[value["id"]] = (rec.line, None, value)
        elif is_gemini(value):
            header.update({k: v for k, v in value.items() if k != "messages"})
            for i, m in enumerate(value.get("messages") or ()):
                m = loc.check(m, dict, f"messages[{i}]")
                history[str(m.get("id"))] = (rec.line, i, m)
        else:
            loc.fail(None, "expected a message record, a $set or a $rewindTo record")
    return _build(list(history.values()), header, path, shown)


def _build(
    records: list[tuple[int | None, int | None, dict[str, Any]]],
    header: dict[str, Any],
    path: Path,
    shown: str,
) -> Transcript:
    keys = ("sessionId", "projectHash", "startTime", "lastUpdated")
    meta: dict[str, Any] = {k: header[k] for k in keys if k in header}
    model: str | None = None
    messages: list[Message] = []
    for line, index, rec in records:
        loc = Loc(shown, line=line, index=index)
        kind = loc.get(rec, "type", str, "")
        ts = rec.get("timestamp")
        if kind == "user":
            messages.append(
                Message("user", _parts(rec.get("content"), loc, "content"), timestamp=ts)
            )
        elif kind == "gemini":
            blocks: list[Block] = list(_parts(rec.get("content"), loc, "content"))
            results: list[Message] = []
            for i, call in enumerate(loc.opt(rec, "toolCalls", list, "") or ()):
                where = f"toolCalls[{i}]"
                call = loc.check(call, dict, where)
                call_id = loc.get(call, "id", str, where)
                name = loc.get(call, "name", str, where)
                args = call.get("args") if call.get("args") is not None else {}
                blocks.append(ToolCallBlock(call_id, name, dumps_arguments(args)))
                if call.get("result") is not None:
                    error = call.get("status") in ("error", "cancelled")
                    result = ToolResultBlock(call_id, _result_text(call["result"]), is_error=error)
                    extra = freeze({"toolName": name})
                    results.append(
                        Message("tool", (result,), timestamp=call.get("timestamp"), extra=extra)
                    )
            if rec.get("thoughts"):
                skipped(meta, "thought summaries (shown, never sent back)")
            tokens = rec.get("tokens") if isinstance(rec.get("tokens"), dict) else None
            said = {"model": rec["model"]} if isinstance(rec.get("model"), str) else {}
            model = said.get("model", model)
            if blocks:
                reply = Message("assistant", blocks, id=rec.get("id"), timestamp=ts, usage=tokens)
                messages += [reply.replace(extra=freeze(said)), *results]
            else:
                skipped(meta, "empty gemini message")
        else:
            skipped(meta, f"message type {kind!r} (shown to the user, not sent)")
    kept = pair_calls(messages, meta)
    return Transcript(kept, "gemini-cli", str(path), model, (), freeze(meta))


def _parts(content: Any, loc: Loc, where: str) -> tuple[Block, ...]:
    """A Gemini ``PartListUnion`` as text blocks (inline data counted by its description)."""
    if content is None:
        return ()
    if isinstance(content, str):
        return (TextBlock(content),) if content else ()
    if isinstance(content, dict):
        content = [content]
    items = loc.check(content, list, where)
    out: list[Block] = []
    for i, part in enumerate(items):
        if isinstance(part, str):
            out.append(TextBlock(part))
            continue
        part = loc.check(part, dict, f"{where}[{i}]")
        if isinstance(part.get("text"), str):
            if not part.get("thought"):
                out.append(TextBlock(part["text"]))
        elif "functionCall" in part or "functionResponse" in part:
            continue  # recorded in toolCalls
        else:
            out.append(TextBlock(json.dumps(part, ensure_ascii=False)))
    return tuple(out)


def _result_text(result: Any) -> str:
    """A tool result as the text sent back: the ``functionResponse.response`` of its parts."""
    parts = result if isinstance(result, list) else [result]
    texts: list[str] = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
            response = part["functionResponse"].get("response")
            if isinstance(response, dict) and set(response) <= {"output", "error"}:
                texts.append(str(response.get("output", response.get("error", ""))))
            else:
                texts.append(json.dumps(response, ensure_ascii=False))
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        else:
            texts.append(json.dumps(part, ensure_ascii=False))
    return "\n".join(texts)
