"""Shared machinery of the provider adapters: copying, spelling hints, opaque blocks, errors.

How it works: docs/formats.md (`contextwarden.formats._common`).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

from .._exceptions import FormatError
from .._messages import EMPTY, Block, ImageBlock, TextBlock, ThinkingBlock

__all__ = [
    "FIELD",
    "FORMAT",
    "FUNCTION_EXTRA",
    "ITEM",
    "LEGACY",
    "OPAQUE",
    "MAX_DEPTH",
    "RESERVED",
    "Provider",
    "TooDeep",
    "check_depth",
    "check_tools",
    "clean_key",
    "clean_text",
    "deep_copy",
    "deep_error",
    "fail",
    "fill",
    "frozen",
    "hints_for",
    "opaque_media",
    "limit_value",
    "opaque_payload",
    "opaque_text",
    "render_opaque",
    "reply_limit",
    "reserved_check",
    "string_at",
    "thinking_out",
    "tname",
    "too_deep",
]

Provider = Literal["openai", "anthropic"]

#: Reserved block-``extra`` keys (bookkeeping, never emitted).
OPAQUE = "_cw_opaque"  # the original provider block of an opaque block
FORMAT = "_cw_format"  # "openai" / "anthropic": whose block an image or opaque block is
FIELD = "_cw_field"  # OpenAI thinking: the message field it came from (default reasoning_content)
LEGACY = "_cw_legacy"  # OpenAI tool call spelled as the legacy ``function_call``
FUNCTION_EXTRA = "_cw_function"  # OpenAI tool call: unknown keys inside ``function``
ITEM = "_cw_item"  # Responses: the item an assistant-run block came from
RESERVED = frozenset({OPAQUE, FORMAT, FIELD, LEGACY, FUNCTION_EXTRA, ITEM})

_SCALARS = frozenset({str, int, float, bool, type(None)})
_PLAIN = frozenset({int, float, bool, type(None)})

#: The deepest nesting of lists and objects accepted inside one message (a value held directly
#: by the message is at depth 1). Deeper values are refused with :class:`FormatError`: copying
#: or serialising them recursively could exhaust Python's stack, and many JSON parsers refuse
#: them anyway (serde_json, which Rust API servers use, stops at 128 levels for the whole body).
MAX_DEPTH = 100

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` with lone surrogates (half of an emoji cut by a byte-level truncation) replaced
    by U+FFFD; ``text`` itself when it has none (the usual case, checked in C).

    A lone surrogate is not Unicode text: UTF-8 cannot encode it (so a request body, a log line
    or a SQLite row holding it fails to be written), and Anthropic refuses a body carrying one
    escaped ("no low surrogate in string", e.g. anthropics/claude-code#1939). Replacing it, as a
    UTF-8 decoder with ``errors="replace"`` would, keeps every request sendable."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub("\ufffd", text)


def clean_key(key: Any) -> Any:
    """A mapping key through :func:`clean_text` when it is a string (other keys as they are)."""
    return key if type(key) is not str or key.isascii() else clean_text(key)


class TooDeep(FormatError):
    """Raised by :func:`deep_copy`; the readers re-raise it naming the message and field."""

    def __init__(self) -> None:
        super().__init__(f"lists and objects nest more than {MAX_DEPTH} levels deep")


def deep_copy(value: Any, depth: int = 0) -> Any:
    """A deep copy of a JSON-shaped value (dicts, lists, scalars); anything else goes through
    :func:`copy.deepcopy`. Dict key order is kept; strings are :func:`clean_text`-ed. Raises
    :class:`FormatError` when lists and objects nest deeper than :data:`MAX_DEPTH` (counting
    ``depth`` levels above ``value``)."""
    t = type(value)
    if t is dict or (t not in _SCALARS and t is not list and isinstance(value, Mapping)):
        if depth >= MAX_DEPTH:
            raise TooDeep()
        d = depth + 1
        # scalars inline (no call per value): this copy runs over every message
        return {
            clean_key(k): (
                v if type(v) in _PLAIN or (type(v) is str and v.isascii()) else deep_copy(v, d)
            )
            for k, v in value.items()
        }
    if t is list:
        if depth >= MAX_DEPTH:
            raise TooDeep()
        d = depth + 1
        return [
            v if type(v) in _PLAIN or (type(v) is str and v.isascii()) else deep_copy(v, d)
            for v in value
        ]
    if t is str:
        return clean_text(value)
    if t in _SCALARS:
        return value
    return copy.deepcopy(value)


def deep_error(m: Mapping[str, Any], index: int | None, path: str = "") -> FormatError:
    """The :class:`FormatError` for a :func:`deep_copy` of (part of) ``m`` that nested too deep:
    names the first key of ``m`` holding such a value (a slow path, taken only on error)."""
    for k, v in m.items():
        try:
            check_depth(v, index, f"{path}{k}")
        except FormatError as exc:
            return exc
    return too_deep(index, path.rstrip(".") or "content")


def too_deep(index: int | None, field: str) -> FormatError:
    """The error for a value nested deeper than :data:`MAX_DEPTH`."""
    return FormatError(
        f"lists and objects nest more than {MAX_DEPTH} levels deep", index=index, field=field
    )


def check_depth(value: Any, index: int | None, field: str, depth: int = 1) -> None:
    """Raise :func:`too_deep` when ``value`` nests deeper than :data:`MAX_DEPTH` (iterative, so
    any depth is measured safely)."""
    stack: list[tuple[Any, int]] = [(value, depth)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, Mapping):
            children: Any = v.values()
        elif isinstance(v, list | tuple):
            children = v
        else:
            continue
        if d > MAX_DEPTH:
            raise too_deep(index, field)
        stack.extend((c, d + 1) for c in children)


def check_tools(tools: Any, *, field: str = "tools") -> list[Mapping[str, Any]] | None:
    """``tools`` (a request's tool definitions) as a list, after checking its shape: None or a
    list of objects. Raises :class:`FormatError` naming ``tools[i]`` otherwise (``["x"]``,
    ``[null]``, a string...) and for definitions nested deeper than :data:`MAX_DEPTH`."""
    if tools is None:
        return None
    if isinstance(tools, str | bytes) or not isinstance(tools, list | tuple):
        raise fail(None, field, "a list of tool definitions (objects) or null", tools)
    for i, t in enumerate(tools):
        if not isinstance(t, Mapping):
            raise fail(None, f"{field}[{i}]", "a tool definition object", t)
        check_depth(t, None, f"{field}[{i}]")
    return list(tools)


def frozen(d: dict[str, Any]) -> Mapping[str, Any]:
    """A read-only view of ``d`` (which the caller owns and no longer touches)."""
    return MappingProxyType(d) if d else EMPTY


def _hints(provider: str, content: str, role: str | None) -> Mapping[str, Any]:
    d: dict[str, Any] = {"format": provider, "content": content}
    if role is not None:
        d["role"] = role
    return MappingProxyType(d)


#: Every spelling the readers record, made once: the messages of one spelling share its mapping.
_HINTS: Mapping[tuple[str, str, str | None], Mapping[str, Any]] = MappingProxyType(
    {
        (provider, content, role): _hints(provider, content, role)
        for provider in ("openai", "anthropic")
        for content in ("str", "list", "null", "absent")
        for role in (None, "developer", "function", "system")
    }
)


def hints_for(provider: Provider, content: str, role: str | None = None) -> Mapping[str, Any]:
    """The read-only hints mapping for one spelling (shared by the messages of that spelling)."""
    h = _HINTS.get((provider, content, role))
    return h if h is not None else _hints(provider, content, role)


def tname(value: Any) -> str:
    """The JSON name of ``value``'s type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "list"
    return type(value).__name__


def fail(index: int | None, field: str, expected: str, got: Any) -> FormatError:
    """The error for a field of the wrong type: ``expected a string, got int``."""
    return FormatError(f"expected {expected}, got {tname(got)}", index=index, field=field)


def string_at(obj: Mapping[str, Any], key: str, index: int | None, path: str = "") -> str:
    """``obj[key]`` when it is a string, else the :func:`fail` error naming ``path.key``."""
    value = obj.get(key)
    if type(value) is not str:
        raise fail(index, f"{path}.{key}" if path else key, "a string", value)
    return value


def reserved_check(rest: Mapping[str, Any], index: int | None, path: str) -> None:
    """Reject a provider block that carries one of our reserved keys (:data:`RESERVED`)."""
    if not RESERVED.isdisjoint(rest):
        k = min(RESERVED.intersection(rest))
        raise FormatError(
            f"key {k!r} is reserved by contextwarden", index=index, field=f"{path}.{k}"
        )


def fill(out: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Add copies of ``extra``'s entries whose keys ``out`` lacks (reserved keys skipped)."""
    for k, v in extra.items():
        if k not in out and k not in RESERVED:
            out[k] = deep_copy(v)
    return out


def thinking_out(b: ThinkingBlock, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The Anthropic ``thinking`` / ``redacted_thinking`` block for ``b``, then ``extra``'s keys."""
    if b.redacted:
        return fill({"type": "redacted_thinking", "data": b.data or ""}, extra)
    d: dict[str, Any] = {"type": "thinking", "thinking": b.thinking}
    if b.signature is not None:
        d["signature"] = b.signature
    return fill(d, extra)


# -- opaque blocks -------------------------------------------------------------------------------
def render_opaque(block: Mapping[str, Any]) -> str:
    """The text an opaque text-like block stands for (counted and summarised as text)."""
    if block.get("type") == "refusal" and isinstance(block.get("refusal"), str):
        return str(block["refusal"])
    return json.dumps(block, ensure_ascii=False, default=str)


def opaque_text(block: dict[str, Any], provider: Provider) -> TextBlock:
    """An opaque text-like block; ``block`` must already be a private copy."""
    return TextBlock(
        render_opaque(block), extra=MappingProxyType({OPAQUE: block, FORMAT: provider})
    )


def opaque_media(block: dict[str, Any], provider: Provider, token_cost: int) -> ImageBlock:
    """An opaque media block (audio, file, document); ``block`` must be a private copy."""
    return ImageBlock(
        MappingProxyType(block),
        token_cost=token_cost,
        extra=MappingProxyType({OPAQUE: block, FORMAT: provider}),
    )


def opaque_payload(block: Block) -> tuple[str, Mapping[str, Any]] | None:
    """``(provider, original block)`` for an opaque block, else None.

    For an opaque text block whose text a layer has changed, None as well: the block is plain
    text now and is emitted as such.
    """
    extra = block.extra
    if not extra or OPAQUE not in extra:
        return None
    original = extra[OPAQUE]
    if isinstance(block, TextBlock) and block.text != render_opaque(original):
        return None
    return str(extra.get(FORMAT, "")), original


#: Where each API's request gives the reply's output limit, in the order a server reads them.
REPLY_LIMIT_KEYS: dict[str, tuple[str, ...]] = {
    "openai": ("max_completion_tokens", "max_tokens"),
    "anthropic": ("max_tokens",),
    "responses": ("max_output_tokens",),
}


def limit_value(value: Any) -> int | None:
    """``value`` when it is an output limit a provider takes (a whole number above 0), else
    None (the provider answers a bad one itself)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def reply_limit(body: Mapping[str, Any], api: str) -> int | None:
    """The output limit the request ``body`` of ``api`` gives the provider: the first of its
    :data:`REPLY_LIMIT_KEYS` present, if it is a :func:`limit_value`."""
    for key in REPLY_LIMIT_KEYS[api]:
        value = body.get(key)
        if value is not None:
            return limit_value(value)
    return None
