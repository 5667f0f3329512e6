"""Layer: the sliding window / context guard (seed 000 layer 3, seed 004 L2).

Runs only when the request is over ``budget.trigger``. It then drops whole units (see
:mod:`contextwarden.layers.units`: an assistant message with all the tool results answering its
calls, or a lone user message), oldest first from the second message on, until the request is at
or under the trigger. System messages, the task (the first user message) and units holding
pinned content are never dropped; neither is the newest unit. When dropping everything droppable
is not enough, the newest unit's largest texts (tool results first, then other text; never
thinking, call arguments or pinned content) are cut to head + marker + tail until the request
fits, and the result says so (``newest_truncated``).

Because a cut only ever falls between units, the output keeps every tool call with its result
(valid for OpenAI and Anthropic) whenever the input did. As the final guard the layer also
removes tool calls left unanswered at the very end of the history (a recording cut right after
the model asked for a tool): both APIs reject a request ending with them.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import replace
from itertools import compress

from pydantic import BaseModel, ConfigDict, Field

from .._events import Event, emit
from .._messages import Message, TextBlock, ToolCallBlock, ToolResultBlock
from .base import LayerContext, LayerResult, check_messages, cut_middle
from .mask import mask_text
from .pending import repair_tail
from .pins import is_protected
from .units import HistoryIndex

__all__ = ["WindowConfig", "sliding_window"]

LAYER = "window"

#: A text cut because the newest unit alone is over keeps at least this many characters.
NEWEST_MIN_CHARS = 200
#: Room for the truncation marker (framing plus digits).
_MARKER_ROOM = 64


class WindowConfig(BaseModel):
    """Drop the oldest whole units (assistant message + its tool results) until under budget."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(
        default=True, description="Drop oldest units when over the trigger. Default: true."
    )
    keep_recent_messages: int = Field(
        default=20,
        ge=1,
        description="Messages at the end the window prefers to keep (seed 000); it still drops "
        "into them, oldest first, when the budget demands it. Default: 20.",
    )


# -- planning (shared by the pure layer and the warden's incremental engine) --------------------
def droppable_units(index: HistoryIndex) -> list[int]:
    """Units that may be dropped, oldest first: not kept, and not the newest."""
    keep = index.unit_keep
    return [u for u in range(len(keep) - 1) if not keep[u]]


def cumulative(index: HistoryIndex, units: Sequence[int], prefix: Sequence[int]) -> list[int]:
    """``cum[k]`` = tokens of the first ``k`` of ``units``; ``prefix[i]`` = tokens of
    messages ``[:i]``."""
    cum = [0]
    total = 0
    for u in units:
        start, end = index.unit_span(u)
        total += prefix[end] - prefix[start]
        cum.append(total)
    return cum


def drops_needed(cum: Sequence[int], total: int, trigger: int) -> int:
    """The fewest leading units to drop so that ``total - cum[k] <= trigger`` (all of them when
    even that is not enough)."""
    excess = total - trigger
    if excess <= 0:
        return 0
    return min(bisect_left(cum, excess), len(cum) - 1)


def drop_event(messages: Sequence[Message], start: int, end: int, tokens: int) -> Event:
    """The ``dropped`` event of the unit ``messages[start:end]``."""
    names = dict.fromkeys(
        b.name for m in messages[start:end] for b in m.content if isinstance(b, ToolCallBlock)
    )
    return Event(
        "dropped",
        LAYER,
        start,
        ", ".join(names) or None,
        tokens,
        0,
        sum(m.char_count for m in messages[start:end]),
        0,
        f"{end - start} messages",
    )


def _texts_of(message: Message) -> list[tuple[int, int | None, str]]:
    """Cuttable texts of a message as ``(block index, part index or None, text)``."""
    found: list[tuple[int, int | None, str]] = []
    for bi, b in enumerate(message.content):
        if isinstance(b, TextBlock):
            found.append((bi, None, b.text))
        elif isinstance(b, ToolResultBlock):
            if isinstance(b.content, str):
                found.append((bi, None, b.content))
            else:
                found.extend(
                    (bi, pi, x.text) for pi, x in enumerate(b.content) if isinstance(x, TextBlock)
                )
    return found


def _with_text(message: Message, bi: int, pi: int | None, text: str) -> Message:
    blocks = list(message.content)
    b = blocks[bi]
    if isinstance(b, TextBlock):
        blocks[bi] = replace(b, text=text)
    elif isinstance(b, ToolResultBlock):
        if pi is None:
            blocks[bi] = replace(b, content=text)
        else:
            assert not isinstance(b.content, str)
            parts = list(b.content)
            part = parts[pi]
            assert isinstance(part, TextBlock)
            parts[pi] = replace(part, text=text)
            blocks[bi] = replace(b, content=tuple(parts))
    return message.replace(content=tuple(blocks))


def _old_result_blocks(
    messages: Sequence[Message], start: int, ctx: LayerContext
) -> set[tuple[int, int]]:
    """``(position, block index)`` of the tool results in ``messages[start:]`` that the mask
    layer treats as old (not among its ``keep_recent`` newest, tool not excluded)."""
    cfg = ctx.config.mask
    if not cfg.enabled:
        return set()
    names = {
        b.id: b.name for m in messages[start:] for b in m.content if isinstance(b, ToolCallBlock)
    }
    old: set[tuple[int, int]] = set()
    seen = 0
    for pos in range(len(messages) - 1, start - 1, -1):
        blocks = messages[pos].content
        for bi in range(len(blocks) - 1, -1, -1):
            b = blocks[bi]
            if isinstance(b, ToolResultBlock):
                seen += 1
                if seen > cfg.keep_recent and names.get(b.tool_call_id) not in cfg.exclude_tools:
                    old.add((pos, bi))
    return old


def cut_newest(
    messages: list[Message], start: int, ctx: LayerContext, total: int, trigger: int
) -> tuple[int, list[Event]]:
    """Cut texts of ``messages[start:]`` (the newest unit), largest first, until the request
    total is at or under ``trigger``. Changes ``messages`` in place (a list the caller owns) and
    returns the new total and the events (already logged).

    A cut tool result that the mask layer counts as old is also masked, so that running the
    layers again on the output changes nothing (idempotence)."""
    counter = ctx.counter
    events: list[Event] = []
    old_blocks = _old_result_blocks(messages, start, ctx)
    candidates = [
        (len(text), pos, bi, pi)
        for pos in range(start, len(messages))
        if not is_protected(messages[pos])
        for bi, pi, text in _texts_of(messages[pos])
    ]
    # largest first; ties broken by position so the choice is deterministic
    candidates.sort(key=lambda c: (-c[0], c[1], c[2], -1 if c[3] is None else c[3]))
    for length, pos, bi, pi in candidates:
        excess = total - trigger
        if excess <= 0 or length <= NEWEST_MIN_CHARS + _MARKER_ROOM:
            break
        original = messages[pos]
        text = next(t for b, p, t in _texts_of(original) if b == bi and p == pi)
        before = counter.count_message(original)
        target = before - excess
        masked = (pos, bi) in old_blocks

        def cut(
            keep: int,
            _o: Message = original,
            _t: str = text,
            _b: int = bi,
            _p: int | None = pi,
            _m: bool = masked,
        ) -> Message:
            new = cut_middle(_t, keep // 2, keep - keep // 2)
            if _m:
                new = mask_text(new, ctx.config.mask)
            return _with_text(_o, _b, _p, new)

        lo, hi = NEWEST_MIN_CHARS, length - _MARKER_ROOM
        best = cut(lo)
        if counter.count_message(best) <= target:
            while lo < hi:  # the longest keep that fits
                mid = (lo + hi + 1) // 2
                candidate = cut(mid)
                if counter.count_message(candidate) <= target:
                    lo, best = mid, candidate
                else:
                    hi = mid - 1
        after = counter.count_message(best)
        messages[pos] = best
        total += after - before
        emit(
            events,
            Event(
                "newest_truncated",
                LAYER,
                pos,
                None,
                before,
                after,
                length,
                len(next(t for b, p, t in _texts_of(best) if b == bi and p == pi)),
                "the newest unit alone was over the budget",
            ),
        )
    return total, events


def sliding_window(messages: Sequence[Message], ctx: LayerContext) -> LayerResult:
    """Seed 000 L3 / seed 004 L2: when the request is over ``ctx.budget.trigger``, drop the
    oldest droppable units until it is not, then cut the newest unit if still needed (see the
    module docstring). As the final guard it also removes tool calls left unanswered at the very
    end (:func:`~contextwarden.layers.pending.drop_pending_calls`; a no-op when that layer ran). Leaves the messages alone when disabled; without a budget
    only that repair runs. Pure; one ``dropped`` event per unit dropped, ``newest_truncated``
    events for cuts."""
    check_messages(messages)
    cfg = ctx.config.window
    if not cfg.enabled or not messages:
        return LayerResult(tuple(messages))
    messages, repaired = repair_tail(messages, ctx)
    if ctx.budget is None:
        return LayerResult(tuple(messages), repaired)
    trigger = ctx.budget.trigger
    counter = ctx.counter
    prefix = [0]
    for m in messages:
        prefix.append(prefix[-1] + counter.count_message(m))
    total = prefix[-1] + ctx.overhead_tokens()
    if total <= trigger:
        return LayerResult(tuple(messages), repaired)
    index = HistoryIndex(keep_results=0, keep_thinking=0)
    index.extend(messages, 0)
    units = droppable_units(index)
    cum = cumulative(index, units, prefix)
    k = drops_needed(cum, total, trigger)
    result, _ = finish_window(messages, index, units[:k], prefix, total - cum[k], ctx, log=True)
    if repaired:
        return LayerResult(result.messages, repaired + result.events, result.newest_truncated)
    return result


def finish_window(
    messages: Sequence[Message],
    index: HistoryIndex,
    dropped: Sequence[int],
    prefix: Sequence[int],
    total: int,
    ctx: LayerContext,
    *,
    log: bool,
    drop_events: Sequence[Event] | None = None,
    log_warning: bool | None = None,
    newest_start: int | None = None,
) -> tuple[LayerResult, int]:
    """Assemble the output once the units to drop are chosen (``dropped`` must be the first
    ``k`` of :func:`droppable_units`): everything but them, then :func:`cut_newest` when still
    over. ``total`` is the request's tokens after the drops. ``drop_events`` may carry ready-made
    events for the dropped units (the warden caches them); otherwise they are made, and logged if
    ``log``. ``newest_start`` overrides where the newest unit starts (when ``messages`` is the
    indexed history less its last unit). Returns the result and the request's final tokens."""
    assert ctx.budget is not None
    events: list[Event] = []
    if drop_events is not None:
        events.extend(drop_events)
    else:
        for u in dropped:
            start, end = index.unit_span(u)
            e = drop_event(messages, start, end, prefix[end] - prefix[start])
            if log:
                emit(events, e)
            else:
                events.append(e)
    if dropped:
        # the first k droppable units are gone, so before the last of them only kept units remain
        last = dropped[-1]
        cut_at = index.unit_span(last)[1]
        out: list[Message] = []
        for u in compress(range(last), index.unit_keep):  # the kept units before the cut
            start, end = index.unit_span(u)
            out.extend(messages[start:end])
        out.extend(messages[cut_at:])
        recent = ctx.config.window.keep_recent_messages
        if cut_at > len(messages) - recent:
            warning = Event(
                "warning",
                LAYER,
                cut_at,
                detail=f"dropped into the {recent} most recent messages the window prefers to "
                "keep; consider compaction or a larger window",
            )
            if log if log_warning is None else log_warning:
                emit(events, warning)
            else:
                events.append(warning)
    else:
        out = list(messages)
    newest_truncated = False
    trigger = ctx.budget.trigger
    if total > trigger:
        # everything droppable is gone: cut the newest unit (it is never dropped)
        if newest_start is None:
            newest_start = index.unit_starts[-1] if index.unit_starts else 0
        newest_at = len(out) - (len(messages) - newest_start)
        total, cut_events = cut_newest(out, newest_at, ctx, total, trigger)
        events.extend(cut_events)
        newest_truncated = bool(cut_events)
    return LayerResult(tuple(out), tuple(events), newest_truncated), total
