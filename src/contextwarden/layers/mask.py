"""Layer: mask old tool results.

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

from collections.abc import Callable, Container, Iterator, Sequence
from typing import TYPE_CHECKING

from .._events import Event
from .._lazy import lazy_names
from .._markers import MASK_MARKER_RE, NAMES_LINE_PREFIX, SUPERSEDED_MARKER_RE
from .._messages import Block, Message, ToolResultBlock
from ..analysis.mentions import (
    defined_names,
    joined_words,
    names_of,
    paths_of,
    words_of,
    words_size,
)
from .base import (
    Applied,
    LayerContext,
    LayerResult,
    edit_result_text,
    place_events,
    require_messages,
    shrink_event,
)
from .mask_plan import MaskPlan, MaskPlanner, kept_whole, mask_plan
from .units import index_of

if TYPE_CHECKING:
    from .._memo import Memo
    from ..analysis.mentions import Words
    from .config import MaskConfig

__all__ = [
    "MaskConfig",
    "MaskPlan",
    "mask_plan",
    "mask_text",
    "mask_tool_results",
    "never_masked",
    "superseded_text",
]

#: the settings, given on first use: importing the warden does not load pydantic
_HOMES = {"MaskConfig": ".config"}
__getattr__ = lazy_names(__name__, _HOMES, globals())

LAYER = "mask"

#: Appended to a kept line that was cut at ``line_chars``.
LINE_CUT = " [...]"

#: The key of :attr:`Message.hints` under which a masked message keeps the message it masks.
UNMASKED = "unmasked"

#: The names line holds one name per this many omitted characters (and at most
#: ``MaskConfig.names``): a long output names more than a short listing.
NAMES_PER_CHARS = 400
#: ... and one per this many of a file's lines (a read): the definitions and identifiers an
#: agent comes back to, to call or to edit, are in the files it read.
NAMES_PER_CHARS_READ = 120


def omitted_names(
    omitted: str,
    kept: str = "",
    held: Container[str] = frozenset(),
    limit: int = 12,
    words: Words | None = None,
) -> tuple[str, ...]:
    """The files and code names of ``omitted`` (the lines a mask drops) that the agent is most
    likely to need again, best first, at most ``limit``: what it defines (``def``/``class``),
    the files it names (``grep`` hits, traceback frames, test ids, paths), then the other code
    names, most frequent first. Names in ``kept`` (the lines the mask keeps) or in ``held``
    (what the request holds anyway, such as the call's own arguments) are left out.
    ``words``: :func:`words_of` of ``omitted``, when it was read already."""
    if limit <= 0 or not omitted:
        return ()
    out: list[str] = []
    kept_words: set[str] | None = None
    for n in _ranked(omitted, words):
        if n in out or n in held:
            continue
        if kept and n in kept:  # a word of ``kept`` is written in it
            if kept_words is None:
                kept_paths, kept_names = words_of(kept)
                kept_words = {*kept_paths, *kept_names}
            if n in kept_words:
                continue
        out.append(n)
        if len(out) >= limit:
            break
    return tuple(out)


def _ranked(omitted: str, words: Words | None) -> Iterator[str]:
    """:func:`omitted_names`' candidates, best first, each kind read only when the ones before
    it did not fill the line: definitions, paths, then code names, most frequent first."""
    yield from defined_names(omitted)
    yield from paths_of(omitted) if words is None else words[0]
    names = names_of(omitted) if words is None else words[1]
    counts = {n: omitted.count(n) for n in names}
    yield from sorted(names, key=lambda n: -counts[n])  # stable: first seen first among equals


def mask_text(
    text: str,
    config: MaskConfig | None = None,
    ref: str | None = None,
    held: Container[str] = frozenset(),
    *,
    read: bool = False,
    memo: Memo | None = None,
    names: bool = True,
) -> str:
    """``text`` reduced to head lines + marker + tail lines, or ``text`` itself when it is short
    (``<= min_chars``), already masked, or would not get shorter. ``ref``, the ``cw:``
    reference the original is kept under, is named in the marker; the line after it names the
    files and code names of the omitted lines (:func:`omitted_names`, at most
    ``config.names``, more of them for ``read``, a file's lines; ``held``: names the request
    holds anyway; no line with ``names`` False). ``memo``: the call's, which gets the words
    of the omitted lines and of the whole text (a summary of the same call reads the original's)."""
    cfg = config or __getattr__("MaskConfig")()
    if len(text) <= cfg.min_chars or (
        " characters omitted" in text  # what either marker says: no regex over every text
        and (MASK_MARKER_RE.search(text) or SUPERSEDED_MARKER_RE.search(text))
    ):
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
    found: tuple[str, ...] = ()
    if names and cfg.names and omitted_lines:
        middle = "\n".join(lines[cfg.head_lines : n - cfg.tail_lines])
        per = NAMES_PER_CHARS_READ if read else NAMES_PER_CHARS
        limit = min(cfg.names, 1 + len(middle) // per)
        words = None
        if memo is not None:
            words = memo(words_of, middle, words_size)
            ends = (lines[: cfg.head_lines], lines[n - cfg.tail_lines :] if cfg.tail_lines else [])
            whole = joined_words(
                [words_of("\n".join(ends[0])), words, words_of("\n".join(ends[1]))]
            )
            memo.keep((words_of, text), lambda: whole, words_size)
        found = omitted_names(middle, "\n".join([*head, *tail]), held, limit, words)
    index = [f"{NAMES_LINE_PREFIX}{', '.join(found)}]"] if found else []
    masked = "\n".join([*head, marker, *index, *tail])
    return masked if len(masked) < len(text) else text


def mask_message(
    message: Message,
    decision: tuple[int, tuple[str, ...]],
    ctx: LayerContext,
    ref: str | None = None,
    *,
    plan: MaskPlan | None = None,
    held: Container[str] = frozenset(),
    reads: frozenset[str] = frozenset(),
    output: ToolResultBlock | None = None,
) -> Applied:
    """Mask the first ``decision[0]`` tool results of one tool message (names in decision[1]),
    or ``output``, the user message's text as the command output it is
    (:meth:`~.units.HistoryIndex.results_in`);
    ``ref``, the reference its original is kept under, is named in each marker. With ``plan``
    (:func:`mask_plan` of the history when the mask edit is made), a protected result stays
    whole and a superseded one becomes :func:`superseded_text`'s one-line marker. ``held``:
    names the request holds anyway (the calls' arguments), left out of the names line;
    ``reads``: the ids of the results that print a file's lines (:func:`~contextwarden.analysis.actions.prints_file`)."""
    cfg = ctx.config.mask
    n_old, names = decision
    blocks = []
    masked_names: list[str] = []
    before = after = 0
    k = 0
    for b in message.content if output is None else (output,):
        if isinstance(b, ToolResultBlock):
            name = names[k] if k < len(names) else ""
            old = k < n_old
            k += 1
            if plan is not None and b.tool_call_id in plan.protected:
                old = False
            if old and name not in cfg.exclude_tools:
                by = plan.superseded.get(b.tool_call_id, "") if plan is not None else ""
                nb, b_before, b_after = edit_result_text(
                    b, _masker(cfg, ref, by, held, b.tool_call_id in reads, ctx.memo)
                )
                if nb is not b:
                    before += b_before
                    after += b_after
                    masked_names.append(name)
                    b = nb
        blocks.append(b)
    if not masked_names:
        return message, ()
    # the message as it was before the mask rides along (not sent): a summary of a span
    # holding it is written from what the agent saw, not from the marker
    original = message.hints.get(UNMASKED, message)
    content: tuple[Block, ...] = tuple(blocks)
    text = blocks[0]  # with ``output``: the user message's text, masked
    if output is not None and isinstance(text, ToolResultBlock) and isinstance(text.content, tuple):
        content = text.content
    out = message.replace(content=content, hints={**message.hints, UNMASKED: original})
    event = shrink_event("masked", LAYER, message, out, masked_names, (before, after), ctx)
    return out, (event,)


def _masker(
    cfg: MaskConfig,
    ref: str | None,
    by: str,
    held: Container[str] = frozenset(),
    read: bool = False,
    memo: Memo | None = None,
) -> Callable[[str], str]:
    """The text edit for one old result: the one-line superseded marker when a later result
    (``by``) superseded it, else the head-and-tail mask."""
    if by:
        return lambda text: superseded_text(text, ref, by)
    return lambda text: mask_text(text, cfg, ref, held, read=read, memo=memo)


def never_masked(text: str, config: MaskConfig) -> bool:
    """Whether no mask edit can change ``text``: it is not over ``min_chars`` (:func:`mask_text`
    leaves it) and not longer than the shortest superseded marker (one naming no reference
    and no later result)."""
    return len(text) <= config.min_chars and superseded_text(text) is text


def superseded_text(text: str, ref: str | None = None, by: str | None = None) -> str:
    """The one-line marker that replaces a superseded result: its size, the result that
    superseded it (``by``, a tool call id) and the ``cw:`` reference the original is kept
    under. ``text`` itself when it is already a marker or not longer than the marker."""
    if SUPERSEDED_MARKER_RE.search(text) or MASK_MARKER_RE.search(text):
        return text
    lines = text.count("\n") + 1
    later = f" by {by}" if by else ""
    recall = f"; recall {ref}" if ref else ""
    marker = f"[... superseded{later}: {lines} lines, {len(text)} characters omitted{recall} ...]"
    return marker if len(marker) < len(text) else text


def mask_tool_results(messages: Sequence[Message], ctx: LayerContext) -> LayerResult:
    """Mask old tool results as the warden's mask edits do (see :mod:`.mask`), on a history
    of its own: the ``keep_recent`` newest results (counted as result blocks from the end, not
    by user turns) stay whole; of the older ones, the plan's protected results (the latest
    reads of the files the agent edits) stay whole within ``protect_ratio`` of the window,
    newest first (none without a budget), and the rest longer than ``min_chars`` are masked;
    superseded results, wherever they are, become the one-line superseded marker. The
    planner (:class:`MaskPlanner`) and the rule that keeps results whole (:func:`kept_whole`)
    are the warden's. Pure; one ``masked`` event per message changed."""
    cfg = ctx.config.mask
    require_messages(messages)
    if not cfg.enabled:
        return LayerResult(tuple(messages))
    index = index_of(messages, keep_results=cfg.keep_recent, keep_thinking=0)
    plan = MaskPlanner(quoting=True).plan(messages) if cfg.plan else MaskPlan(frozenset(), {})
    blocks, keep_recent = index.result_blocks, cfg.keep_recent
    upto = len(messages) - 1  # the last message holding an old result
    if keep_recent:
        upto = -1
        if len(blocks) >= keep_recent:
            at, k = blocks[-keep_recent]
            upto = at if k else at - 1
    room = int(cfg.protect_ratio * ctx.budget.window) if ctx.budget is not None else 0
    where = index.result_at
    keep = frozenset(
        kept_whole(
            sorted(plan.protected, key=lambda r: -where.get(r, -1)),
            where,
            upto,
            lambda pos: ctx.counter.count_message(messages[pos]),
            room,
        )
    )
    superseded = plan.superseded if cfg.supersede else {}
    out: list[Message] = []
    events: list[Event] = []
    for i, m in enumerate(messages):
        names = index.names[i]
        if not names or m.is_pinned:
            out.append(m)
            continue
        old = index.old_results(i, len(names))
        results = index.results_in(i, m)
        fates = tuple(
            "by:" + superseded[r.tool_call_id]
            if r.tool_call_id in superseded
            else ("mask" if k < old and r.tool_call_id not in keep else "whole")
            for k, r in enumerate(results)
        )
        if all(f == "whole" for f in fates):
            out.append(m)
            continue
        new, templates = _masked(m, results, (names, fates), ctx)
        out.append(new)
        place_events(templates, i, events)
    return LayerResult(tuple(out), tuple(events))


def _masked(
    message: Message,
    results: tuple[ToolResultBlock, ...],
    decision: tuple[tuple[str, ...], tuple[str, ...]],
    ctx: LayerContext,
) -> Applied:
    """``message`` with each of its ``results`` as its fate says (``mask``, ``whole``,
    ``by:<id>``)."""
    names, fates = decision
    whole = frozenset(r.tool_call_id for r, f in zip(results, fates, strict=True) if f == "whole")
    by = {r.tool_call_id: f[3:] for r, f in zip(results, fates, strict=True) if f[:3] == "by:"}
    output = None if message.tool_results else results[0]
    plan = MaskPlan(whole, by)
    return mask_message(message, (len(names), names), ctx, plan=plan, output=output)
