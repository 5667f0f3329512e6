"""Layer: mask old tool results (seed 000, layer 1).

The ``keep_recent`` newest tool results (counted as result blocks, newest first, whatever the
message layout) stay whole. An older result whose text is longer than ``min_chars`` becomes its
first ``head_lines`` lines and last ``tail_lines`` lines around one marker line::

    [... 120 lines, 8345 characters omitted ...]

or, when the caller keeps the original under a ``cw:`` reference (the warden does), one that
names it so that ``recall`` (or the agent's recall tool) can bring the whole output back::

    [... 120 lines, 8345 characters omitted; recall cw:3f2a9c0d11e4b7a6 ...]

Kept lines longer than ``line_chars`` are cut too (a one-line 20 KB JSON blob would otherwise
survive masking whole), and the marker's counts include those characters. A result is masked
only when that makes it shorter, and a result that already carries the marker is left alone, so
masking twice changes nothing. Tool call arguments are never touched; results of tools named in
``exclude_tools`` (the name comes from the matching call) and pinned messages stay whole.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from .._events import Event
from .._messages import Message, ToolResultBlock
from .base import (
    Applied,
    LayerContext,
    LayerResult,
    apply_memoized,
    check_messages,
    edit_result_text,
    place_events,
    shrink_event,
)
from .units import HistoryIndex

__all__ = ["MaskConfig", "mask_text", "mask_tool_results"]

LAYER = "mask"

#: A line produced by :func:`mask_text`; its presence means "already masked".
MASK_MARKER_RE = re.compile(
    r"^\[\.\.\. \d+ lines, \d+ characters omitted(?:; recall cw:[0-9a-f]+)? \.\.\.\]$",
    re.MULTILINE,
)

#: Appended to a kept line that was cut at ``line_chars``.
LINE_CUT = " [...]"


class MaskConfig(BaseModel):
    """Observation masking: old, long tool results shrink to head and tail lines (seed 000 L1)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(default=True, description="Mask old tool results. Default: true.")
    keep_recent: int = Field(
        default=6, ge=0, description="The most recent tool results kept whole. Default: 6."
    )
    min_chars: int = Field(
        default=500,
        ge=0,
        description="Only results longer than this many characters are masked. Default: 500.",
    )
    head_lines: int = Field(default=3, ge=0, description="Lines kept from the start. Default: 3.")
    tail_lines: int = Field(default=2, ge=0, description="Lines kept from the end. Default: 2.")
    line_chars: int = Field(
        default=200,
        ge=20,
        description="A kept line longer than this keeps its first line_chars characters (and a "
        "' [...]' mark). Default: 200.",
    )
    exclude_tools: tuple[str, ...] = Field(
        default=(), description="Tool names whose results are never masked. Default: none."
    )


def mask_text(text: str, config: MaskConfig | None = None, ref: str | None = None) -> str:
    """``text`` reduced to head lines + marker + tail lines, or ``text`` itself when it is short
    (``<= min_chars``), already masked, or would not get shorter. ``ref``, the ``cw:``
    reference the original is kept under, is named in the marker."""
    cfg = config or MaskConfig()
    if len(text) <= cfg.min_chars or MASK_MARKER_RE.search(text):
        return text
    lines = text.split("\n")
    n = len(lines)
    if n > cfg.head_lines + cfg.tail_lines:
        head = lines[: cfg.head_lines]
        tail = lines[n - cfg.tail_lines :] if cfg.tail_lines else []
        omitted_lines = n - cfg.head_lines - cfg.tail_lines
    else:  # few, long lines: nothing to drop whole, only lines to shorten
        head, tail, omitted_lines = lines, [], 0
    cap = cfg.line_chars
    kept = len(head) + len(tail)
    kept_chars = sum(min(len(ln), cap) for ln in head) + sum(min(len(ln), cap) for ln in tail)
    # the newlines between kept lines survive too; everything else is omitted
    omitted_chars = len(text) - kept_chars - max(kept - 1, 0)
    head = [ln if len(ln) <= cap else ln[:cap] + LINE_CUT for ln in head]
    tail = [ln if len(ln) <= cap else ln[:cap] + LINE_CUT for ln in tail]
    recall = f"; recall {ref}" if ref else ""
    marker = f"[... {omitted_lines} lines, {max(omitted_chars, 0)} characters omitted{recall} ...]"
    masked = "\n".join([*head, marker, *tail])
    return masked if len(masked) < len(text) else text


def mask_message(
    message: Message,
    decision: tuple[int, tuple[str, ...]],
    ctx: LayerContext,
    ref: str | None = None,
) -> Applied:
    """Mask the first ``decision[0]`` tool results of one tool message (names in decision[1]);
    ``ref``, the reference its original is kept under, is named in each marker."""
    cfg = ctx.config.mask
    n_old, names = decision
    blocks = []
    masked_names: list[str] = []
    before = after = 0
    k = 0
    for b in message.content:
        if isinstance(b, ToolResultBlock):
            name = names[k] if k < len(names) else ""
            old = k < n_old
            k += 1
            if old and name not in cfg.exclude_tools:
                nb, b_before, b_after = edit_result_text(b, lambda t: mask_text(t, cfg, ref))
                if nb is not b:
                    before += b_before
                    after += b_after
                    masked_names.append(name)
                    b = nb
        blocks.append(b)
    if not masked_names:
        return message, ()
    out = message.replace(content=tuple(blocks))
    event = shrink_event("masked", LAYER, message, out, masked_names, (before, after), ctx)
    return out, (event,)


def mask_decision(
    message: Message, i: int, index: HistoryIndex
) -> tuple[int, tuple[str, ...]] | None:
    """What masking message ``i`` depends on besides its content, or None when it is untouched."""
    names = index.names[i]
    if not names or message.is_pinned:
        return None
    n_old = index.old_results(i, len(names))
    if n_old == 0:
        return None
    return n_old, names[:n_old]


def mask_tool_results(messages: Sequence[Message], ctx: LayerContext) -> LayerResult:
    """Seed 000 L1: keep the ``keep_recent`` newest tool results whole and mask older ones
    longer than ``min_chars`` (see the module docstring). Position-based: it counts results
    from the end, not user turns. Pure; one ``masked`` event per message changed."""
    cfg = ctx.config.mask
    check_messages(messages)
    if not cfg.enabled:
        return LayerResult(tuple(messages))
    index = HistoryIndex(keep_results=cfg.keep_recent, keep_thinking=0)
    index.extend(messages, 0)
    out: list[Message] = []
    events: list[Event] = []
    for i, m in enumerate(messages):
        d = mask_decision(m, i, index)
        if d is None:
            out.append(m)
            continue
        (new, templates), fresh = apply_memoized(
            LAYER, m, d, lambda msg, dec: mask_message(msg, dec, ctx), ctx.memo
        )
        out.append(new)
        place_events(templates, i, events, log=fresh)
    return LayerResult(tuple(out), tuple(events))
