"""Layer: truncate oversized tool output, head + tail (L1).

A tool result whose text is longer than ``max_chars`` keeps its first ``head_chars`` and last
``tail_chars`` characters, joined by ``\\n\\n... [N characters truncated] ...\\n\\n`` where N is
the number of characters left out. A text of exactly ``max_chars`` is left alone; one of
``max_chars + 1`` is cut. Results made of blocks are cut block by block (images are kept).
Only tool results are touched; calls, their arguments, and pinned messages never are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from .._events import Event
from .._lazy import lazy_names
from .._messages import Message, TextBlock, ToolResultBlock
from .base import (
    Applied,
    LayerContext,
    LayerResult,
    cut_middle,
    edit_result_text,
    place_events,
    require_messages,
    shrink_event,
)
from .units import index_of

if TYPE_CHECKING:
    from .config import TruncateConfig

__all__ = ["TruncateConfig", "truncate_text", "truncate_tool_output"]

#: the settings, given on first use: importing the warden does not load pydantic
_HOMES = {"TruncateConfig": ".config"}
__getattr__ = lazy_names(__name__, _HOMES, globals())

LAYER = "truncate"


def truncate_text(text: str, config: TruncateConfig | None = None) -> str:
    """``text`` cut to head + marker + tail when longer than ``config.max_chars``, else itself."""
    cfg = config or __getattr__("TruncateConfig")()
    if len(text) <= cfg.max_chars:
        return text
    return cut_middle(text, cfg.head_chars, cfg.tail_chars)


def needs_truncation(message: Message, cfg: TruncateConfig) -> bool:
    """True when some tool result text of ``message`` is over the limit (cheap: lengths only)."""
    if message.role != "tool" or not cfg.enabled:
        return False
    limit = cfg.max_chars
    for b in message.content:
        if isinstance(b, ToolResultBlock):
            if isinstance(b.content, str):
                if len(b.content) > limit:
                    return True
            elif any(isinstance(x, TextBlock) and len(x.text) > limit for x in b.content):
                return True
        elif isinstance(b, TextBlock) and len(b.text) > limit:
            return True
    return False


def truncate_message(message: Message, names: tuple[str, ...], ctx: LayerContext) -> Applied:
    """Truncate every oversized tool result (and riding text) of one tool message."""
    cfg = ctx.config.truncate
    blocks = []
    cut_names: list[str] = []
    before = after = 0
    k = 0
    for b in message.content:
        if isinstance(b, ToolResultBlock):
            name = names[k] if k < len(names) else ""
            k += 1
            nb, b_before, b_after = edit_result_text(b, lambda t: truncate_text(t, cfg))
            if nb is not b:
                before += b_before
                after += b_after
                cut_names.append(name)
                b = nb
        elif isinstance(b, TextBlock):
            new = truncate_text(b.text, cfg)
            if new is not b.text:
                before += len(b.text)
                after += len(new)
                b = replace(b, text=new)
        blocks.append(b)
    out = message.replace(content=tuple(blocks))
    event = shrink_event("truncated", LAYER, message, out, cut_names, (before, after), ctx)
    return out, (event,)


def truncate_tool_output(messages: Sequence[Message], ctx: LayerContext) -> LayerResult:
    """Cut every tool result text longer than ``ctx.config.truncate.max_chars`` to
    head + marker + tail. Pure: returns new messages (unchanged ones are the same objects) and
    one ``truncated`` event per message changed; the input is never mutated."""
    cfg = ctx.config.truncate
    require_messages(messages)
    if not cfg.enabled:
        return LayerResult(tuple(messages))
    index = index_of(messages, keep_results=0, keep_thinking=0)
    out: list[Message] = []
    events: list[Event] = []
    for i, m in enumerate(messages):
        if m.is_pinned or not needs_truncation(m, cfg):
            out.append(m)
            continue
        new, templates = truncate_message(m, index.names[i], ctx)
        out.append(new)
        place_events(templates, i, events)
    return LayerResult(tuple(out), tuple(events))
