"""A canonical JSON form of :class:`Message`, lossless, for stores and caches.

Provider formats are for talking to providers; this form is for keeping our own values: every
field of every block survives ``message_from_dict(message_to_dict(m)) == m``, hints included.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._exceptions import FormatError
from ._messages import (
    Block,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    freeze,
)

__all__ = ["message_from_dict", "message_to_dict"]


def _block_to_dict(b: Block) -> dict[str, Any]:
    out: dict[str, Any]
    if isinstance(b, TextBlock):
        out = {"type": "text", "text": b.text}
    elif isinstance(b, ThinkingBlock):
        out = {
            "type": "thinking",
            "thinking": b.thinking,
            "signature": b.signature,
            "redacted": b.redacted,
            "data": b.data,
        }
    elif isinstance(b, ToolCallBlock):
        out = {"type": "tool_call", "id": b.id, "name": b.name, "arguments": b.arguments}
    elif isinstance(b, ToolResultBlock):
        content: Any = (
            b.content if isinstance(b.content, str) else [_block_to_dict(x) for x in b.content]
        )
        out = {
            "type": "tool_result",
            "tool_call_id": b.tool_call_id,
            "content": content,
            "is_error": b.is_error,
        }
    else:
        out = {"type": "image", "source": dict(b.source), "token_cost": b.token_cost}
    if b.extra:
        out["extra"] = dict(b.extra)
    return out


def _block_from_dict(d: Mapping[str, Any], where: str) -> Block:
    kind = d.get("type")
    extra = freeze(d.get("extra"))
    try:
        if kind == "text":
            return TextBlock(d["text"], extra=extra)
        if kind == "thinking":
            return ThinkingBlock(
                d["thinking"],
                d.get("signature"),
                bool(d.get("redacted")),
                d.get("data"),
                extra=extra,
            )
        if kind == "tool_call":
            return ToolCallBlock(d["id"], d["name"], d["arguments"], extra=extra)
        if kind == "tool_result":
            raw = d["content"]
            content: Any = (
                raw
                if isinstance(raw, str)
                else tuple(_block_from_dict(x, f"{where}.content[{i}]") for i, x in enumerate(raw))
            )
            return ToolResultBlock(d["tool_call_id"], content, bool(d.get("is_error")), extra=extra)
        if kind == "image":
            return ImageBlock(freeze(d["source"]), int(d.get("token_cost", 765)), extra=extra)
    except KeyError as exc:
        raise FormatError(f"missing key {exc.args[0]!r}", field=where) from exc
    raise FormatError(f"unknown block type {kind!r}", field=f"{where}.type")


def message_to_dict(m: Message) -> dict[str, Any]:
    """The canonical JSON-ready dict of ``m`` (keys with default values are left out)."""
    out: dict[str, Any] = {"role": m.role, "content": [_block_to_dict(b) for b in m.content]}
    if m.name is not None:
        out["name"] = m.name
    if m.pinned:
        out["pinned"] = True
    if m.id is not None:
        out["id"] = m.id
    if m.timestamp is not None:
        out["timestamp"] = m.timestamp
    if m.usage is not None:
        out["usage"] = dict(m.usage)
    if m.extra:
        out["extra"] = dict(m.extra)
    if m.hints:
        out["hints"] = dict(m.hints)
    return out


def message_from_dict(d: Mapping[str, Any], *, index: int | None = None) -> Message:
    """Inverse of :func:`message_to_dict`; raises :class:`FormatError` naming the field."""
    if not isinstance(d, Mapping):
        raise FormatError(f"expected an object, got {type(d).__name__}", index=index)
    content = d.get("content", [])
    if not isinstance(content, list):
        raise FormatError("expected a list", index=index, field="content")
    try:
        return Message(
            d["role"],
            tuple(_block_from_dict(b, f"content[{i}]") for i, b in enumerate(content)),
            name=d.get("name"),
            pinned=bool(d.get("pinned", False)),
            id=d.get("id"),
            timestamp=d.get("timestamp"),
            usage=freeze(d["usage"]) if d.get("usage") is not None else None,
            extra=freeze(d.get("extra")),
            hints=freeze(d.get("hints")),
        )
    except FormatError as exc:
        raise FormatError(exc.reason, index=index, field=exc.field) from exc
    except KeyError as exc:
        raise FormatError(f"missing key {exc.args[0]!r}", index=index) from exc
    except ValueError as exc:
        raise FormatError(str(exc), index=index, field="role") from exc
