"""Anthropic prompt-cache breakpoints: :func:`add_cache_breakpoints`, :func:`count_cache_breakpoints`.

How it works: docs/formats.md (`contextwarden.formats.cache_control`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._exceptions import FormatError
from ._common import tname

__all__ = [
    "MAX_CACHE_BREAKPOINTS",
    "Continued",
    "add_cache_breakpoints",
    "add_counting",
    "count_cache_breakpoints",
]

#: Anthropic's limit on ``cache_control`` breakpoints in one request.
MAX_CACHE_BREAKPOINTS = 4

# Message content block types that may carry cache_control (thinking may not; empty text may not).
_CACHEABLE = frozenset({"text", "image", "document", "tool_use", "tool_result"})

# A place in the rendered request, ordered as Anthropic builds the prefix: (section, index,
# block, inner), section 0 for tools, 1 for system blocks, 2 for messages; ``inner`` is the index
# of a block inside a tool_result's content, or _WHOLE for the block itself (which ends after
# everything inside it).
_Pos = tuple[int, int, int, int]
_TOOLS, _SYSTEM, _MESSAGES = 0, 1, 2
_WHOLE = 2**31


class Continued(list[dict[str, Any]]):
    """Anthropic messages written by going on from an earlier list of the same writer (see
    :class:`~.anthropic.AnthropicWrite`), whose first ``kept`` dicts it shares; dicts of such
    lists are never changed. ``prior``: the breakpoints of the earlier list's messages, when
    they were looked for (then only the rest of this one is read); ``found``: this one's;
    ``written``: the JSON the last request of the same writer was sent as, per dict (by
    identity, the dict kept with its bytes), which the writer's lists share, so that a body
    writes only the dicts it did not send before (the proxy's ``dump_body``)."""

    kept = 0
    prior: list[tuple[_Pos, Any]] | None = None
    found: list[tuple[_Pos, Any]] | None = None
    written: dict[int, tuple[Any, bytes]] | None = None


def count_cache_breakpoints(
    system: Any,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> int:
    """How many ``cache_control`` breakpoints the request carries: on tool definitions, system
    blocks, message content blocks and the blocks inside a ``tool_result``'s content (a key set
    to ``null`` is no breakpoint). Raises :class:`FormatError` naming the place when the request
    does not have the Messages API's shape."""
    return len(_breakpoints(system, messages, tools))


def add_cache_breakpoints(
    system: Any,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    stable_end: int | None = None,
    max_breakpoints: int = MAX_CACHE_BREAKPOINTS,
) -> tuple[Any, list[dict[str, Any]], list[dict[str, Any]] | None]:
    """The request ``(system, messages, tools)`` with cache breakpoints added; inputs untouched.

    Every breakpoint already in the request is kept as it is. Then, while the total stays at or
    under ``max_breakpoints`` (default and most 4), one ``{"type": "ephemeral"}`` goes, in this
    order of priority:

    1. on the last cacheable block of the newest message that has one: the next call, which
       only appends, reads everything up to here from the cache;
    2. on the last cacheable block of message ``stable_end - 1`` (or the nearest earlier message
       with one): the end of the prefix the caller will not rewrite soon, so the cache survives
       an edit after it. Skipped when ``stable_end`` is ``None`` or 0, or when that block is the
       newest's;
    3. on the last system text block, or on the last tool definition when there is no system
       prompt: the part that never changes.

    A string ``system`` or message content that gets a breakpoint becomes one text block. A
    breakpoint added before a client's one-hour breakpoint takes ``"ttl": "1h"`` too (the API
    wants longer TTLs first). Running it on its own output adds nothing (idempotent).

    The returned lists are new, and so is every dict on the path to an added breakpoint; the
    other messages, blocks and tool definitions are the caller's own objects, shared.
    ``tools`` comes back ``None`` when it was ``None``.

    Raises :class:`FormatError` when a message, its content or a block does not have the Messages
    API's shape, and :class:`ValueError` for a ``max_breakpoints`` outside 0..4 or a
    ``stable_end`` outside ``0..len(messages)``.
    """
    system, out, tools_out, _ = add_counting(system, messages, tools, stable_end, max_breakpoints)
    return system, out, tools_out


def add_counting(
    system: Any,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    stable_end: int | None,
    max_breakpoints: int = MAX_CACHE_BREAKPOINTS,
) -> tuple[Any, list[dict[str, Any]], list[dict[str, Any]] | None, int]:
    """:func:`add_cache_breakpoints`, and how many it added (for the proxy, which reports it
    without scanning the request again)."""
    if not 0 <= max_breakpoints <= MAX_CACHE_BREAKPOINTS:
        raise ValueError(
            f"max_breakpoints must be between 0 and {MAX_CACHE_BREAKPOINTS} (the API's limit), "
            f"got {max_breakpoints}"
        )
    if stable_end is not None and not 0 <= stable_end <= len(messages):
        raise ValueError(
            f"stable_end must be between 0 and the number of messages ({len(messages)}), "
            f"got {stable_end}"
        )
    existing = _breakpoints(system, messages, tools)
    taken = {pos for pos, _ in existing}
    newest = _last_cacheable_message(messages, len(messages) - 1)
    targets: list[_Pos] = []
    if newest is not None:
        targets.append(newest)
    if stable_end:
        stable = _last_cacheable_message(messages, stable_end - 1)
        if stable is not None:
            targets.append(stable)
    prefix = _system_target(system)
    if prefix is None and tools:
        prefix = (_TOOLS, len(tools) - 1, 0, _WHOLE)
    if prefix is not None:
        targets.append(prefix)

    added: dict[_Pos, dict[str, str]] = {}
    count = len(existing)
    for pos in targets:
        if pos in taken or pos in added or count >= max_breakpoints:
            continue
        # Targets come latest first, so every later breakpoint is in `existing` or `added`.
        later_hour = any(p > pos and ttl == "1h" for p, ttl in existing) or any(
            p > pos and c.get("ttl") == "1h" for p, c in added.items()
        )
        added[pos] = {"type": "ephemeral", "ttl": "1h"} if later_hour else {"type": "ephemeral"}
        count += 1
    return (*_apply(system, messages, tools, added), len(added))


# -- reading ----------------------------------------------------------------------------------------
def _breakpoints(
    system: Any, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> list[tuple[_Pos, Any]]:
    """Every breakpoint of the request, in order: its place and its TTL (``None`` for the
    default)."""
    found: list[tuple[_Pos, Any]] = []
    if tools is not None:
        if isinstance(tools, str | bytes) or not isinstance(tools, Sequence):
            raise FormatError(f"tools: expected a list of tool definitions, got {tname(tools)}")
        for i, tool in enumerate(tools):
            if not isinstance(tool, Mapping):
                raise FormatError(f"tools[{i}]: expected an object, got {tname(tool)}")
            _note(found, (_TOOLS, i, 0, _WHOLE), tool)
    if isinstance(system, list):
        for j, block in enumerate(system):
            if not isinstance(block, Mapping):
                raise FormatError(f"system[{j}]: expected a text block, got {tname(block)}")
            _note(found, (_SYSTEM, j, 0, _WHOLE), block)
    elif system is not None and not isinstance(system, str):
        raise FormatError(
            f"system: expected a string or a list of text blocks, got {tname(system)}"
        )
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise FormatError(f"messages: expected a list, got {tname(messages)}")
    # The hot loop of a proxied request (every block of the history): exact-type checks first,
    # the slower Mapping check only for what is not a plain dict.
    start, ahead = 0, len(found)
    if type(messages) is Continued and messages.prior is not None:
        start = messages.kept
        found += [f for f in messages.prior if f[0][1] < start]
    for i in range(start, len(messages)):
        message = messages[i]
        content = _content(message, i)
        if type(content) is str:
            continue
        for j, block in enumerate(content):
            if type(block) is not dict and not isinstance(block, Mapping):
                raise FormatError(
                    f"expected a block object, got {tname(block)}", index=i, field=f"content[{j}]"
                )
            if block.get("type") == "tool_result":
                inner = block.get("content")
                if isinstance(inner, list):
                    for k, sub in enumerate(inner):
                        if type(sub) is not dict and not isinstance(sub, Mapping):
                            raise FormatError(
                                f"expected a block object, got {tname(sub)}",
                                index=i,
                                field=f"content[{j}].content[{k}]",
                            )
                        if "cache_control" in sub:
                            _note(found, (_MESSAGES, i, j, k), sub)
            if "cache_control" in block:
                _note(found, (_MESSAGES, i, j, _WHOLE), block)
    if type(messages) is Continued:
        messages.found = found[ahead:]
    return found


def _note(found: list[tuple[_Pos, Any]], pos: _Pos, block: Mapping[str, Any]) -> None:
    control = block.get("cache_control")
    if control is not None:
        found.append((pos, control.get("ttl") if isinstance(control, Mapping) else None))


def _content(message: Any, i: int) -> str | list[Any]:
    """Message ``i``'s content, a string or a list (its blocks are checked by the caller)."""
    if type(message) is not dict and not isinstance(message, Mapping):
        raise FormatError(f"expected an object, got {tname(message)}", index=i)
    content = message.get("content")
    if type(content) is str or type(content) is list or isinstance(content, str | list):
        return content
    raise FormatError(
        f"content must be a string or a list of blocks, got {tname(content)}",
        index=i,
        field="content",
    )


def _cacheable(block: Mapping[str, Any]) -> bool:
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        return isinstance(text, str) and bool(text)
    return kind in _CACHEABLE


def _last_cacheable_message(messages: Sequence[Mapping[str, Any]], start: int) -> _Pos | None:
    """The last cacheable block of message ``start``, or of the nearest earlier message that
    has one."""
    for i in range(start, -1, -1):
        content = _content(messages[i], i)  # a string is one text block
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for j in range(len(blocks) - 1, -1, -1):
            if _cacheable(blocks[j]):
                return (_MESSAGES, i, j, _WHOLE)
    return None


def _system_target(system: Any) -> _Pos | None:
    if isinstance(system, str):
        return (_SYSTEM, 0, 0, _WHOLE) if system else None
    if isinstance(system, list):
        for j in range(len(system) - 1, -1, -1):
            if system[j].get("type") == "text" and _cacheable(system[j]):
                return (_SYSTEM, j, 0, _WHOLE)
    return None


# -- writing ----------------------------------------------------------------------------------------
def _apply(
    system: Any,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    added: dict[_Pos, dict[str, str]],
) -> tuple[Any, list[dict[str, Any]], list[dict[str, Any]] | None]:
    out_tools = None if tools is None else [t if type(t) is dict else dict(t) for t in tools]
    out_system = list(system) if isinstance(system, list) else system
    out_messages = [m if type(m) is dict else dict(m) for m in messages]
    if type(messages) is Continued:  # its dicts, and those made here, are never changed
        out_messages = Continued(out_messages)
        out_messages.written = messages.written
    for (where, i, j, _), control in added.items():
        if where == _TOOLS:
            assert out_tools is not None
            out_tools[i] = {**out_tools[i], "cache_control": control}
        elif where == _SYSTEM:
            if isinstance(out_system, str):
                out_system = [{"type": "text", "text": out_system, "cache_control": control}]
            else:
                out_system[i] = {**out_system[i], "cache_control": control}
        else:
            message = out_messages[i]
            content = message["content"]
            if isinstance(content, str):
                blocks: list[Any] = [{"type": "text", "text": content, "cache_control": control}]
            else:
                blocks = list(content)
                blocks[j] = {**blocks[j], "cache_control": control}
            out_messages[i] = {**message, "content": blocks}
    return out_system, out_messages, out_tools
