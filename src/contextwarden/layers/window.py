"""Layer: the sliding window / context guard.

Runs only when the request is over ``budget.trigger``. It then drops whole units (see
:mod:`contextwarden.layers.units`: an assistant message with all the tool results answering its
calls, or a lone user message), oldest first from the second message on, until the request is at
or under the trigger. System messages, the task (the first user message) and units holding
pinned content are never dropped; neither is the newest unit. When dropping everything droppable
is not enough, the newest unit is cut whatever its shape (:func:`cut_newest`: its largest texts
and tool results to head + marker + tail, then the strings inside tool-call arguments, then a
message of many small parts joined and cut; never thinking, images or pinned content) until the
request fits, and the result says so (``newest_truncated``). When even that leaves the request
over the hard limit (``budget.limit``: the system prompt, tools, task and pinned content alone are
too large), :func:`ensure_within`, the check run after the layer, raises
:class:`~contextwarden.ContextOverflowError` with the ``tokens`` needed and the ``limit``: never a
silent oversize request.

Because a cut only ever falls between units, the output keeps every tool call with its result
(valid for OpenAI and Anthropic) whenever the input did. As the final guard the layer also
removes tool calls left unanswered at the very end of the history (a recording cut right after
the model asked for a tool): both APIs reject a request ending with them.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from itertools import compress
from typing import TYPE_CHECKING, Any

from .._events import Event, emit
from .._exceptions import ContextOverflowError
from .._lazy import lazy_names
from .._messages import Block, Message, TextBlock, ToolCallBlock, ToolResultBlock
from .base import LayerContext, LayerResult, cut_middle, is_protected, require_messages
from .mask import mask_text
from .pending import repair_tail
from .units import HistoryIndex, index_of

if TYPE_CHECKING:
    from .config import WindowConfig

__all__ = ["WindowConfig", "ensure_within", "sliding_window"]

#: the settings, given on first use: importing the warden does not load pydantic
_HOMES = {"WindowConfig": ".config"}
__getattr__ = lazy_names(__name__, _HOMES, globals())

LAYER = "window"

#: A text cut because the newest unit alone is over keeps at least this many characters.
NEWEST_MIN_CHARS = 200
#: Room for the truncation marker (framing plus digits).
_MARKER_ROOM = 64
#: The most tokens cutting a string may save beyond the string's own count (merges where it
#: meets its neighbours).
_CUT_SLACK = 16


# -- planning (shared by the pure layer and the warden's incremental engine) --------------------
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


def _text_at(message: Message, bi: int, pi: int | None) -> str:
    """The text at ``(bi, pi)`` of :func:`_texts_of`."""
    b = message.content[bi]
    if isinstance(b, TextBlock):
        return b.text
    assert isinstance(b, ToolResultBlock)
    if pi is None:
        assert isinstance(b.content, str)
        return b.content
    part = b.content[pi]
    assert isinstance(part, TextBlock)
    return part.text


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


#: Where a string sits inside parsed tool-call arguments: keys and list indices.
_Path = tuple[str | int, ...]


def _string_leaves(value: Any) -> list[tuple[_Path, str]]:
    """Every string inside a parsed JSON value with its path (iterative: any depth)."""
    found: list[tuple[_Path, str]] = []
    stack: list[tuple[_Path, Any]] = [((), value)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, str):
            found.append((path, v))
        elif isinstance(v, dict):
            stack.extend(((*path, k), x) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend(((*path, i), x) for i, x in enumerate(v))
    return found


def _set_leaf(value: Any, path: _Path, text: str) -> Any:
    """A copy of ``value`` with the string at ``path`` replaced (containers on the path copied)."""
    if not path:
        return text
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        out = dict(value)
        out[head] = _set_leaf(value[head], rest, text)
        return out
    items = list(value)
    assert isinstance(head, int)
    items[head] = _set_leaf(items[head], rest, text)
    return items


def _parsed_arguments(arguments: str) -> Any:
    """The arguments' JSON value, or None when they are not JSON (or absurdly deep)."""
    try:
        return json.loads(arguments)
    except (ValueError, RecursionError):
        return None


def _arguments_of(message: Message, *, raw: bool) -> list[tuple[int, _Path | None, str]]:
    """Cuttable strings of a message's tool-call arguments as ``(block index, path, text)``:
    the string values inside JSON arguments (so that a cut keeps them valid JSON), or the whole
    text when it is not JSON or ``raw``."""
    found: list[tuple[int, _Path | None, str]] = []
    for bi, b in enumerate(message.content):
        if isinstance(b, ToolCallBlock) and len(b.arguments) > NEWEST_MIN_CHARS + _MARKER_ROOM:
            parsed = None if raw else _parsed_arguments(b.arguments)
            if parsed is None:
                found.append((bi, None, b.arguments))
            else:
                found.extend((bi, path, t) for path, t in _string_leaves(parsed))
    return found


def _with_argument(
    message: Message, bi: int, path: _Path | None, text: str, parsed: Any = None
) -> Message:
    """``message`` with the argument string at ``path`` of call block ``bi`` (the whole
    arguments when None) replaced by ``text``; ``parsed``: the call's arguments already parsed
    (they are parsed here when not given)."""
    blocks = list(message.content)
    b = blocks[bi]
    assert isinstance(b, ToolCallBlock)
    if path is None:
        arguments = text
    else:
        if parsed is None:
            parsed = _parsed_arguments(b.arguments)
        arguments = json.dumps(_set_leaf(parsed, path, text), ensure_ascii=False)
    blocks[bi] = replace(b, arguments=arguments)
    return message.replace(content=tuple(blocks))


def _argument_text(message: Message, bi: int, path: _Path | None, parsed: Any = None) -> str:
    b = message.content[bi]
    assert isinstance(b, ToolCallBlock)
    if path is None:
        return b.arguments
    value = _parsed_arguments(b.arguments) if parsed is None else parsed
    for step in path:
        value = value[step]
    return str(value)


def _joined(message: Message) -> tuple[Message, int]:
    """``message`` with its text blocks joined into one (at the first one's place), and the text
    parts of each tool result likewise; returns it and how many blocks were joined (0: none).

    A message of thousands of small parts has no part long enough to cut; joined, it has."""
    texts = [b for b in message.content if type(b) is TextBlock]
    joined = 0
    blocks: list[Block] = []
    placed = False
    for b in message.content:
        if type(b) is TextBlock and len(texts) > 1:
            if not placed:
                blocks.append(TextBlock("\n".join(t.text for t in texts)))
                placed = True
                joined += len(texts)
            continue
        if type(b) is ToolResultBlock and not isinstance(b.content, str):
            parts = [x for x in b.content if type(x) is TextBlock]
            if len(parts) > 1:
                text = "\n".join(x.text for x in parts)
                others = tuple(x for x in b.content if type(x) is not TextBlock)
                b = replace(b, content=(TextBlock(text), *others) if others else text)
                joined += len(parts)
        blocks.append(b)
    if not joined:
        return message, 0
    return message.replace(content=tuple(blocks)), joined


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
    """Cut ``messages[start:]`` (the newest unit) until the request total is at or under
    ``trigger``, whatever its shape. Changes ``messages`` in place (a list the caller owns) and
    returns the new total and the events (already logged).

    In order, each stage only while still over: texts and tool results, largest first (head +
    marker + tail); then the string values inside tool-call arguments (the JSON stays valid;
    arguments that are not JSON are cut as text); then, for a message of many small parts
    (none long enough to cut), its text parts joined into one and cut again; last, arguments
    made of many short strings cut as text (no longer JSON: the Anthropic adapter sends them as
    ``{"_raw": text}``). Thinking, images and protected messages (system, pinned) are never
    cut.

    A cut tool result that the mask layer counts as old is also masked, so that running the
    layers again on the output changes nothing (idempotence)."""
    events: list[Event] = []
    total = _cut_texts(messages, start, ctx, total, trigger, events)
    if total > trigger:
        total = _cut_arguments(messages, start, ctx, total, trigger, events)
    if total > trigger:
        for pos in range(start, len(messages)):
            if is_protected(messages[pos]):
                continue
            joined, n = _joined(messages[pos])
            if n:
                before = ctx.counter.count_message(messages[pos])
                messages[pos] = joined
                after = ctx.counter.count_message(joined)
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
                        detail=f"{n} text parts joined into one so that they can be cut",
                    ),
                )
        total = _cut_texts(messages, start, ctx, total, trigger, events)
    if total > trigger:  # arguments made of many short strings: cut their text as a whole
        total = _cut_arguments(messages, start, ctx, total, trigger, events, raw=True)
    return total, events


def _fit(ctx: LayerContext, length: int, target: int, cut: Callable[[int], Message]) -> Message:
    """``cut(keep)`` keeping the most characters (at least :data:`NEWEST_MIN_CHARS`, fewer than
    ``length``) whose count is at most ``target`` (the shortest cut when none is)."""
    counter = ctx.counter
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
    return best


def _cut_event(pos: int, before: int, after: int, chars: tuple[int, int], what: str) -> Event:
    return Event(
        "newest_truncated",
        LAYER,
        pos,
        None,
        before,
        after,
        chars[0],
        chars[1],
        f"the newest unit alone was over the budget{what}",
    )


def _cut_texts(
    messages: list[Message],
    start: int,
    ctx: LayerContext,
    total: int,
    trigger: int,
    events: list[Event],
) -> int:
    counter = ctx.counter
    old_blocks = _old_result_blocks(messages, start, ctx)
    candidates = [
        (len(text), pos, bi, pi)
        for pos in range(start, len(messages))
        if not is_protected(messages[pos])
        for bi, pi, text in _texts_of(messages[pos])
    ]
    # largest first; ties broken by position so the choice is deterministic
    candidates.sort(key=lambda c: (-c[0], c[1], c[2], -1 if c[3] is None else c[3]))
    held = _Held(total)
    for length, pos, bi, pi in candidates:
        if length <= NEWEST_MIN_CHARS + _MARKER_ROOM:
            break
        original = messages[pos]
        text = _text_at(original, bi, pi)
        cut = partial(_text_cut, ctx, original, text, bi, pi, (pos, bi) in old_blocks)
        if held.beyond(counter.count_text(text), trigger):
            shortest = cut(NEWEST_MIN_CHARS)
            held.hold(ctx, pos, original, length, len(_text_at(shortest, bi, pi)))
            messages[pos] = shortest
            continue
        total = held.settle(messages, ctx, events, "")
        excess = total - trigger
        if excess <= 0:
            break
        before = counter.count_message(original)
        best = _fit(ctx, length, before - excess, cut)
        after = counter.count_message(best)
        messages[pos] = best
        total = held.total = total + after - before
        emit(events, _cut_event(pos, before, after, (length, len(_text_at(best, bi, pi))), ""))
    return held.settle(messages, ctx, events, "")


def _text_cut(
    ctx: LayerContext, message: Message, text: str, bi: int, pi: int | None, masked: bool, keep: int
) -> Message:
    """``message`` with its text at ``(bi, pi)`` cut to ``keep`` characters (and masked)."""
    new = _kept(text, keep)
    return _with_text(message, bi, pi, mask_text(new, ctx.config.mask) if masked else new)


def _argument_cut(
    message: Message, text: str, bi: int, path: _Path | None, parsed: Any, keep: int
) -> Message:
    return _with_argument(message, bi, path, _kept(text, keep), parsed)


def _kept(text: str, keep: int) -> str:
    """``text`` cut to ``keep`` characters, half from each end, and the marker."""
    return cut_middle(text, keep // 2, keep - keep // 2)


def _cut_arguments(
    messages: list[Message],
    start: int,
    ctx: LayerContext,
    total: int,
    trigger: int,
    events: list[Event],
    *,
    raw: bool = False,
) -> int:
    counter = ctx.counter
    candidates = [
        (len(text), pos, bi, path, text)
        for pos in range(start, len(messages))
        if messages[pos].role == "assistant" and not is_protected(messages[pos])
        for bi, path, text in _arguments_of(messages[pos], raw=raw)
    ]
    candidates.sort(key=lambda c: (-c[0], c[1], c[2], repr(c[3])))
    held = _Held(total)
    trees: dict[tuple[int, int], Any] = {}  # arguments cut while held, serialised when counted
    what = " (tool-call arguments)"
    for length, pos, bi, path, text in candidates:
        if length <= NEWEST_MIN_CHARS + _MARKER_ROOM:
            break
        original = messages[pos]
        quoted = text if path is None else json.dumps(text, ensure_ascii=False)
        if held.beyond(counter.count_text(quoted), trigger):
            shortest = _kept(text, NEWEST_MIN_CHARS)  # what _argument_cut keeps at the least
            held.hold(ctx, pos, original, length, len(shortest))
            if path is None:
                messages[pos] = _with_argument(original, bi, None, shortest)
            else:
                tree = trees.get((pos, bi))
                if tree is None:
                    block = original.content[bi]
                    assert isinstance(block, ToolCallBlock)
                    tree = _parsed_arguments(block.arguments)
                trees[(pos, bi)] = _set_leaf(tree, path, shortest)
            continue
        _serialise(messages, trees)
        total = held.settle(messages, ctx, events, what)
        excess = total - trigger
        if excess <= 0:
            break
        original = messages[pos]
        block = original.content[bi]
        assert isinstance(block, ToolCallBlock)
        # parsed once per candidate, not on every step of the search for the longest cut
        parsed = None if path is None else _parsed_arguments(block.arguments)
        before = counter.count_message(original)
        cut = partial(_argument_cut, original, text, bi, path, parsed)
        best = _fit(ctx, length, before - excess, cut)
        after = counter.count_message(best)
        messages[pos] = best
        total = held.total = total + after - before
        kept = len(_argument_text(best, bi, path))
        emit(events, _cut_event(pos, before, after, (length, kept), what))
    _serialise(messages, trees)
    return held.settle(messages, ctx, events, what)


def _serialise(messages: list[Message], trees: dict[tuple[int, int], Any]) -> None:
    """Write the held cuts' argument trees back into their messages."""
    for (pos, bi), tree in trees.items():
        messages[pos] = _with_argument(
            messages[pos], bi, None, json.dumps(tree, ensure_ascii=False)
        )
    trees.clear()


class _Held:
    """Cuts made without counting the message after each: a string whose own tokens (plus
    :data:`_CUT_SLACK`) are fewer than what the request is still over by cannot bring it under,
    so its shortest cut is what the search would choose, and the count waits. Against a
    message of thousands of strings this counts it a few times instead of once per string."""

    def __init__(self, total: int) -> None:
        self.total = total  #: exact, as of the last count
        self.unsure = 0  #: the most the held cuts may have saved
        self.held: dict[int, list[int]] = {}  # position: tokens before, chars before and kept

    def beyond(self, tokens: int, trigger: int) -> bool:
        """Whether cutting a string of ``tokens`` cannot bring the request under ``trigger``
        (then it is held: what it may save counts from now)."""
        most = tokens + _CUT_SLACK
        if self.total - self.unsure - trigger <= most:
            return False
        self.unsure += most
        return True

    def hold(self, ctx: LayerContext, pos: int, message: Message, chars: int, kept: int) -> None:
        entry = self.held.get(pos)
        if entry is None:
            entry = self.held[pos] = [ctx.counter.count_message(message), 0, 0]
        entry[1] += chars
        entry[2] += kept

    def settle(
        self, messages: Sequence[Message], ctx: LayerContext, events: list[Event], what: str
    ) -> int:
        """Count the messages cut while held: the exact total, one event per message."""
        for pos, (before, chars, kept) in self.held.items():
            after = ctx.counter.count_message(messages[pos])
            self.total += after - before
            emit(events, _cut_event(pos, before, after, (chars, kept), what))
        self.held.clear()
        self.unsure = 0
        return self.total


def ensure_within(messages: Sequence[Message], ctx: LayerContext, tokens: int | None = None) -> int:
    """The request's tokens (``tokens`` when the caller already knows them), after checking
    that they are within the hard limit ``ctx.budget.limit``: the final guard after
    :func:`sliding_window`, which cuts whatever it may and otherwise leaves the request as it
    is. Raises :class:`~contextwarden.ContextOverflowError` (with ``tokens`` and ``limit``)
    when it is over: what is never cut (system prompt, tool definitions, task, pinned content)
    and what is left of the newest message do not fit. No budget: no limit, never raises."""
    total = ctx.request_tokens(messages) if tokens is None else tokens
    budget = ctx.budget
    if budget is not None and total > budget.limit:
        raise ContextOverflowError(
            "the request needs "
            f"{total:,} tokens, over the limit of {budget.limit:,} (window {budget.window:,} - "
            f"reserve {budget.reserve:,}) even with every droppable message gone and the newest "
            "one cut: the system prompt, tool definitions, task and pinned content are never cut",
            tokens=total,
            limit=budget.limit,
        )
    return total


def sliding_window(messages: Sequence[Message], ctx: LayerContext) -> LayerResult:
    """When the request is over ``ctx.budget.trigger``, drop the
    oldest droppable units until it is not, then cut the newest unit if still needed (see the
    module docstring). As the final guard it also removes tool calls left unanswered at the very
    end (:func:`~contextwarden.layers.pending.drop_pending_calls`; a no-op when that layer ran). Leaves the messages alone when disabled; without a budget
    only that repair runs. Pure; one ``dropped`` event per unit dropped, ``newest_truncated``
    events for cuts."""
    require_messages(messages)
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
    index = index_of(messages, keep_results=0, keep_thinking=0)
    units = index.droppable()
    cum = cumulative(index, units, prefix)
    # the fewest leading units whose drop brings the request to the trigger (all: not enough)
    k = min(bisect_left(cum, total - trigger), len(cum) - 1)
    total -= cum[k]
    events = list(repaired)
    for u in units[:k]:
        start, end = index.unit_span(u)
        emit(events, drop_event(messages, start, end, prefix[end] - prefix[start]))
    out = list(messages)
    if k:
        # the first k droppable units are gone, so before the last of them only kept units remain
        last = units[k - 1]
        cut_at = index.unit_span(last)[1]
        out = []
        for u in compress(range(last), index.unit_keep):  # the kept units before the cut
            start, end = index.unit_span(u)
            out.extend(messages[start:end])
        out.extend(messages[cut_at:])
        recent = cfg.keep_recent_messages
        if cut_at > len(messages) - recent:
            detail = (
                f"dropped into the {recent} most recent messages the window prefers to keep; "
                "consider compaction or a larger window"
            )
            emit(events, Event("warning", LAYER, cut_at, detail=detail))
    cut_events: list[Event] = []
    if total > trigger:
        # everything droppable is gone: cut the newest unit (it is never dropped)
        newest_start = index.unit_starts[-1] if index.unit_starts else 0
        newest_at = len(out) - (len(messages) - newest_start)
        _, cut_events = cut_newest(out, newest_at, ctx, total, trigger)
        events.extend(cut_events)
    return LayerResult(tuple(out), tuple(events), bool(cut_events))
