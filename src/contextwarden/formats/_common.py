"""Shared machinery of the provider adapters: copying, spelling hints, opaque blocks, errors.

Conventions every adapter follows (they are what makes ``to_x(from_x(d)) == d`` hold):

* **Nothing is aliased.** Every mutable value taken from the input is deep-copied once on the
  way in (:func:`deep_copy`, a JSON-shaped copier about 3x faster than :func:`copy.deepcopy`),
  and once more on the way out, so mutating either side never changes the other.
* **Unknown keys ride in ``extra``.** A key the model does not name (``cache_control``,
  ``refusal``, a recorder's ``extra``...) is kept verbatim in the ``extra`` of the message or
  block it sat on. A known key whose value is the model's default (``is_error: false``,
  ``tool_calls: null``, ``content: ""`` on a tool result...) is left in ``extra`` too, so that its
  presence survives. On the way out the canonical fields are written first and ``extra`` only
  fills keys they did not produce.
* **Message spelling goes in ``hints``**: ``format`` (which provider the message came from),
  ``content`` (``str`` / ``list`` / ``null`` / ``absent``) and ``role`` (``developer`` or
  ``function`` when the provider spelled the role that way).
* **Block bookkeeping goes in reserved ``extra`` keys** (:data:`RESERVED`: ``_cw_opaque``,
  ``_cw_format``, ``_cw_field``, ``_cw_legacy``, ``_cw_function``; blocks have no hints). A
  provider block that itself carries one of these keys is rejected with :class:`FormatError`.
* **Opaque blocks.** A provider block the model has no type for (an OpenAI ``input_audio`` or
  ``file`` part, an Anthropic ``document``, ``server_tool_use``, ``web_search_tool_result``...)
  is kept whole under ``extra["_cw_opaque"]``, with ``extra["_cw_format"]`` naming its provider:

  - media (audio, files, documents) become an :class:`ImageBlock` whose ``source`` is the
    block and whose ``token_cost`` is an estimate: opaque to layers, counted by cost;
  - anything else becomes a :class:`TextBlock` whose ``text`` is a rendering of the block
    (its JSON, or the refusal text), so it is counted and summarised like text.

  Written back to its own provider the original block is emitted unchanged, unless a layer
  edited the rendering, in which case the edited text is emitted as a plain text block.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

from .._exceptions import FormatError
from .._messages import EMPTY, Block, ImageBlock, Message, TextBlock

__all__ = [
    "FIELD",
    "FORMAT",
    "FUNCTION_EXTRA",
    "LEGACY",
    "OPAQUE",
    "RESERVED",
    "Provider",
    "deep_copy",
    "fail",
    "fill",
    "frozen",
    "hints_for",
    "is_native",
    "opaque_media",
    "opaque_payload",
    "opaque_text",
    "render_opaque",
    "reserved_check",
    "tname",
]

Provider = Literal["openai", "anthropic"]

#: Reserved block-``extra`` keys (bookkeeping, never emitted).
OPAQUE = "_cw_opaque"  # the original provider block of an opaque block
FORMAT = "_cw_format"  # "openai" / "anthropic": whose block an image or opaque block is
FIELD = "_cw_field"  # OpenAI thinking: the message field it came from (default reasoning_content)
LEGACY = "_cw_legacy"  # OpenAI tool call spelled as the legacy ``function_call``
FUNCTION_EXTRA = "_cw_function"  # OpenAI tool call: unknown keys inside ``function``
RESERVED = frozenset({OPAQUE, FORMAT, FIELD, LEGACY, FUNCTION_EXTRA})

_SCALARS = frozenset({str, int, float, bool, type(None)})


def deep_copy(value: Any) -> Any:
    """A deep copy of a JSON-shaped value (dicts, lists, scalars); anything else goes through
    :func:`copy.deepcopy`. Dict key order is kept."""
    t = type(value)
    if t is dict:
        return {k: deep_copy(v) for k, v in value.items()}
    if t is list:
        return [deep_copy(v) for v in value]
    if t in _SCALARS:
        return value
    if isinstance(value, Mapping):  # a read-only view or another mapping: copy as a dict
        return {k: deep_copy(v) for k, v in value.items()}
    return copy.deepcopy(value)


def frozen(d: dict[str, Any]) -> Mapping[str, Any]:
    """A read-only view of ``d`` (which the caller owns and no longer touches)."""
    return MappingProxyType(d) if d else EMPTY


_HINTS: dict[tuple[str, str, str | None], Mapping[str, Any]] = {}


def hints_for(provider: Provider, content: str, role: str | None = None) -> Mapping[str, Any]:
    """The shared, read-only hints mapping for one spelling (interned: messages share it)."""
    key = (provider, content, role)
    h = _HINTS.get(key)
    if h is None:
        d: dict[str, Any] = {"format": provider, "content": content}
        if role is not None:
            d["role"] = role
        h = _HINTS[key] = MappingProxyType(d)
    return h


def is_native(message: Message, provider: Provider) -> bool:
    """True when ``message`` came from ``provider`` or from no provider at all (built in code):
    then its provider-specific extras are emitted verbatim. Messages from the other provider
    are converted, and their provider-specific extras dropped."""
    fmt = message.hints.get("format")
    return fmt is None or fmt == provider


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
