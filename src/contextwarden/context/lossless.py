"""The lossless edits: mask old tool results and strip old thinking, in batches.

:func:`plan_lossless` plans one mask edit and/or one strip edit reaching as far as the recent
ones allow (:func:`frontiers`), with the tokens they would remove and the first view message
they change; the policy (:class:`.decide.Wager`) says whether to make them now, and
:func:`lossless_edit` commits them to the log.
"""

from __future__ import annotations

import sys
from bisect import bisect_left
from collections import ChainMap
from collections.abc import Callable, Iterator
from dataclasses import replace

from .._events import Event, emit
from .._log import Edit, EditReason, Mask, StripThinking, make_ref
from .._policy import may_pay
from ..layers.base import LayerContext
from ..layers.mask import mask_text
from ..layers.mask_plan import MaskPlan, kept_whole
from .call import Call
from .commit import commit
from .decide import Wager
from .render import fates, masked, strip
from .state import ACTION_BYTES, GAIN_BYTES, Bet, State, Wait

__all__ = ["frontiers", "lossless_edit", "settle"]

#: Calls that may wait without rendering their masks before what they read is counted
#: (:func:`settle`): bounds what is kept for them.
MAX_WAITS = 32


def frontiers(s: State, reason: EditReason = "must") -> tuple[int, int]:
    """How far a mask and a strip may reach now. A mask made only because it pays
    (``reason`` ``pays``) may reach every result the agent has acted on (an assistant message
    came after it): where it starts is the cost model's (:func:`_soon`); any other reaches
    all but the ``keep_recent`` newest tool results. A strip reaches all but the
    ``keep_recent`` newest assistant messages with thinking (and, with ``keep_current_turn``,
    nothing after the last user message)."""
    cfg = s.config
    mask_to = -1
    if cfg.mask.enabled and reason == "pays":
        results, base = s.index.results, s.base
        last = next((i for i in range(len(base) - 1, -1, -1) if base[i].role == "assistant"), -1)
        acted = bisect_left(results, last)  # the results before the newest assistant message
        mask_to = results[acted - 1] if acted else -1
    elif cfg.mask.enabled:
        kept = 0
        for pos in reversed(s.index.results):
            kept += len(s.index.names[pos])
            if kept > cfg.mask.keep_recent:
                mask_to = pos
                break
    strip_to = -1
    if cfg.thinking.enabled and len(s.index.thinking) > cfg.thinking.keep_recent:
        strip_to = s.index.thinking[len(s.index.thinking) - cfg.thinking.keep_recent - 1]
        if cfg.thinking.keep_current_turn:
            strip_to = min(strip_to, s.index.last_user - 1)
    return mask_to, strip_to


def lossless_edit(s: State, call: Call, reason: EditReason) -> None:
    """Add one mask and/or strip edit when the policy says so (see :mod:`.._policy`)."""
    mask_to, strip_to = frontiers(s, reason)
    # a mask that must make room, or is free, releases the results earlier ones kept whole
    reopen = reason in ("must", "free") and bool(s.undecided(mask_to + 1))
    if mask_to <= s.mask_upto and strip_to <= s.strip_upto and not reopen:
        return
    removed = 0
    first: int | None = None
    strips: dict[int, int] = {}
    for i in reversed(s.index.thinking):
        if i <= s.strip_upto:
            break
        if i > strip_to:
            continue
        p = s.position(i)
        if p is None:
            continue
        gain = _gain(s, call.ctx, i, p)
        if gain > 0:
            removed += gain
            strips[p] = gain
            first = p if first is None else min(first, p)
    mask_edit: Mask | None = None
    wager: Wager | None = None
    if (mask_to > s.mask_upto or reopen) and s.config.mask.enabled:
        mask_edit = _mask_draft(s, call.ctx, reason, mask_to)
        if reason == "pays":
            reach = _reachable(s, mask_edit)
            most, suffix, new = _bounds(s, reach, strips)
            ask = (suffix, new, s.calls, call.rates, s.config.policy)
            wager = Wager(s, call, reason) if may_pay(most, *ask) else None
            if wager is not None:  # the bounds again, tighter (rendering none)
                most = _bounds(s, [_most(s, call.ctx, mask_edit, *r) for r in reach], strips)[0]
            if wager is None or not may_pay(most, *ask, wager.left(sum(b for _, b in most), True)):
                # what it removes is needed only for what waiting reads: counted when the
                # policy first asks (rendering the masks costs more than all the rest)
                raw = s.input_tokens + call.overhead
                bet = Bet(new, s.ledger, raw, s.total, call.rates, s.config.policy)
                s.waits.append(Wait(mask_edit, (removed, first), suffix, bet))
                if len(s.waits) >= MAX_WAITS:
                    settle(s, call.ctx)
                return
        gain, at = _removes(s, call.ctx, mask_edit, memo=True)
        removed += gain
        first = at if first is None or (at is not None and at < first) else first
    settle(s, call.ctx)
    if first is None or removed <= 0:
        return
    wager = wager or Wager(s, call, reason)
    if not wager.pays(removed, first):
        # the batch rewrites too long a suffix: mask the newest results only, from the
        # earliest one where that pays and is a small bet (the older stay whole, cached)
        start, waiting = None, 0
        if reason == "pays" and mask_edit is not None:
            start, waiting = _soon(s, call, wager, mask_to)
        if start is not None:
            mask_edit = _mask_draft(s, call.ctx, reason, mask_to, start)
            removed, at = _removes(s, call.ctx, mask_edit, memo=True)
        if start is None or at is None or not wager.pays(removed, at):
            # this call reads what a mask could have removed: the cost of waiting
            s.idle += waiting * call.rates.read
            return
        first, strip_to = at, s.strip_upto
    before = s.total
    s.idle = 0.0
    new_edits: list[Edit] = []
    if mask_edit is not None:
        new_edits.append(replace(mask_edit, call=s.calls))
    if strip_to > s.strip_upto:
        new_edits.append(StripThinking(reason=reason, upto=strip_to, call=s.calls))
    commit(s, call, new_edits, first)
    originals = {
        make_ref((s.inputs[x],)): (s.inputs[x],)
        for p, x in enumerate(s.sources[first:], first)
        if isinstance(x, int) and s.view[p] is not s.base[x]
    }
    call.out.elided.update(originals)
    kinds = " and ".join("masked" if e.kind == "mask" else "thinking stripped" for e in new_edits)
    emit(
        call.out.events,
        Event(
            "masked" if new_edits[0].kind == "mask" else "thinking_stripped",
            "policy",
            first,
            None,
            before,
            s.total,
            detail=f"{kinds} up to history message {max(mask_to, strip_to)} ({reason}): "
            f"{before - s.total} tokens removed",
            data={"reason": reason, "refs": tuple(originals)},
        ),
    )


def _mask_plan(s: State) -> MaskPlan:
    """The mask plan of the history so far (:class:`~..layers.mask_plan.MaskPlanner`, taking
    in what was appended since the last call), with the superseded results no mask edit has
    reached yet brought up to date (:attr:`State.open_superseded`)."""
    planner = s.planner
    known = len(s.actions)
    plan = planner.plan(s.base)
    s.bytes += ACTION_BYTES * (len(s.actions) - known)
    generation, read = s.superseded_read
    if generation != planner.generation:
        s.open_superseded, read = {}, 0
    for rid in planner.log[read:]:
        if s.fate.get(rid) in (None, "keep"):
            s.open_superseded[rid] = None
    s.superseded_read = (planner.generation, len(planner.log))
    return plan


def _soon(s: State, call: Call, wager: Wager, upto: int) -> tuple[int | None, int]:
    """The earliest history position from which masking the results up to ``upto`` (and
    keeping the older ones whole) pays and is a small bet (``wager``), or None; and the most
    such a mask could remove while a small bet (what waiting reads)."""
    removed, best = 0, None
    for p, i, removed in _small_starts(_candidates(s, call.ctx, upto), upto, wager.small):
        if wager.pays(removed, p):
            best = i
    return best, removed


def _small_starts(
    candidates: list[tuple[int, int, int]], upto: int, small: Callable[[int, int], bool]
) -> Iterator[tuple[int, int, int]]:
    """Each start of a mask of the ``candidates`` up to history position ``upto``, newest first,
    while its bet is ``small``: (view position, history position, tokens removed from there
    on). Moving the start earlier adds the tokens in between to the suffix rewritten and only
    part of them to what is removed, so the loss if the session ends now only grows: the walk
    stops at the first start that is too large a bet."""
    removed = 0
    for p, i, gain in reversed(candidates):
        if i > upto:
            continue
        removed += gain
        if not small(removed, p):
            return
        yield p, i, removed


def _candidates(s: State, ctx: LayerContext, upto: int) -> list[tuple[int, int, int]]:
    """``(view position, history position, tokens removed)`` of each history message up to
    ``upto`` the view holds with a result no mask edit reached yet (or kept whole), that
    masking those results shrinks, in view order. They change only with the log: a call
    that made no edit reads the view from where the previous one stopped (:attr:`State.soon`)."""
    made, done, p, out = s.soon
    if made != len(s.edits) or upto < done:
        p, out = 0, []
    fate, sources = s.fate, s.sources
    count = ctx.counter.count_message
    while p < len(sources):
        i = sources[p]
        if isinstance(i, int):
            if i > upto:  # the view is in history order
                break
            m = s.base[i]
            results = s.index.results_in(i, m)
            if results:
                fates = {r.tool_call_id: fate.get(r.tool_call_id, "keep") for r in results}
                if any(f == "keep" for f in fates.values()):
                    for rid, f in fates.items():
                        if f == "keep":
                            fates[rid] = "mask"
                    after = masked(s, ctx, i, m, fates)
                    if i <= s.strip_upto:
                        after = strip(s, ctx, i, after)
                    gain = s.tokens[p] - count(after)
                    if gain > 0:
                        out.append((p, i, gain))
        p += 1
    s.soon = (len(s.edits), upto, p, out)
    return out


def _mask_draft(s: State, ctx: LayerContext, reason: EditReason, upto: int, start: int = 0) -> Mask:
    """The mask edit reaching ``upto``, with its plan: the latest reads of the files the agent
    works on kept whole, newest first, within ``mask.protect_ratio`` of the window;
    superseded results reduced to a marker wherever they are. Results before history
    position ``start`` keep their fate (whole ones are kept whole). Costs the results it may
    change, not the history; what it removes is :func:`_removes`'s."""
    cfg = s.config.mask
    plan = _mask_plan(s) if cfg.plan else MaskPlan(frozenset(), {})
    where = s.index.result_at
    budget = ctx.budget
    room = int(cfg.protect_ratio * budget.window) if budget is not None else 0
    if reason == "pays":
        # a mask made only because it pays is optional: it shrinks nothing the agent works
        # from, which is bounded only where the request must shrink (or is written anew)
        room = sys.maxsize
    # what it reads changes only with the log, the plan's actions and how far it reaches: a
    # call that appended no result (an assistant message) plans the edit of the call before
    planner = s.planner
    read = (len(s.edits), planner.generation, len(planner.actions), len(planner.log))
    key = (upto, reason, room, start, *read)
    if s.mask_memo is not None and s.mask_memo[0] == key:
        return s.mask_memo[1]  # stamped with its call when made (lossless_edit)
    # results kept whole before stay so (releasing one rewrites the request from there),
    # unless over the trigger or with the cache cold, where the request is rewritten anyway:
    # newest first there; those held whole only while masking them was too large a bet
    # (:func:`_soon`) go
    kept = [] if reason in ("must", "free") else [r for r in s.kept if r not in s.held]
    whole = plan.protected | plan.current if reason == "pays" else plan.protected
    fresh = sorted(whole - set(kept), key=lambda r: -where.get(r, -1))
    order = [
        rid
        for rid in [*sorted(kept, key=lambda r: -where.get(r, -1)), *fresh]
        if s.fate.get(rid) in (None, "keep")
    ]

    def size(pos: int) -> int | None:
        p = s.position(pos)
        return None if p is None else s.tokens[p]

    keep = kept_whole(order, where, upto, size, room) if order else []
    chosen = set(keep)
    for pos in s.undecided(start) if start else ():
        keep.extend(
            rid
            for rid in s.index.ids[pos]
            if s.fate.get(rid) in (None, "keep") and rid not in chosen
        )
    superseded = tuple(
        sorted(
            (where[rid], rid, plan.superseded[rid])
            for rid in (s.open_superseded if cfg.plan and cfg.supersede else ())
            if rid in where and where[rid] >= start and s.position(where[rid]) is not None
        )
    )
    edit = Mask(
        reason=reason,
        upto=upto,
        call=s.calls,
        keep=tuple(sorted(keep)),
        superseded=superseded,
        start=start,
    )
    s.mask_memo = (key, edit, None)
    return edit


def _removes(
    s: State, ctx: LayerContext, edit: Mask, *, memo: bool = False
) -> tuple[int, int | None]:
    """The tokens mask edit ``edit`` removes and the first view position it changes;
    ``memo``: ``edit`` is the last :func:`_mask_draft` made, and the answer is kept with it."""
    made = s.mask_memo
    if memo and made is not None and made[2] is not None:
        return made[2]
    where = s.index.result_at
    fate = ChainMap(fates(s, edit), s.fate)
    removed = 0
    first: int | None = None
    count = ctx.counter.count_message
    for pos in sorted({where[rid] for rid in fate.maps[0] if rid in where}):
        p = s.position(pos)
        if p is None:
            continue
        now = s.view[p]
        after = masked(s, ctx, pos, s.base[pos], fate)
        if pos <= s.strip_upto:
            after = strip(s, ctx, pos, after)
        gain = s.tokens[p] - count(after) if after is not now else 0
        if gain != 0:
            removed += gain
            first = p if first is None else min(first, p)
    if memo and made is not None:
        s.mask_memo = (made[0], made[1], (removed, first))
    return removed, first


def _reachable(s: State, edit: Mask) -> list[tuple[int, int]]:
    """The view positions whose results a mask reaching as far as ``edit`` may change (by
    ``edit`` or from a later start, :func:`_soon`), newest first, each with the most a mask of
    it can remove: the results up to ``edit.upto`` no mask edit reached yet or kept whole,
    and ``edit``'s superseded ones. A message's tokens, or for a message of one result whose
    mask :func:`_candidates` counted already, what that removes (it is masked or kept whole).
    They change only with the log, the reach and what was counted: a call that appended no
    result reads them again."""
    made, _, scanned, found = s.soon
    key = (len(s.edits), edit.upto, edit.superseded, made, scanned, len(found))
    if s.reach_memo is not None and s.reach_memo[0] == key:
        return s.reach_memo[1]
    known = {p: gain for p, _, gain in found}
    if made != len(s.edits):  # counted under another log
        scanned = 0
    ids = s.index.ids
    out = {
        p: max(known.get(p, 0), 0) if p < scanned and len(ids[pos]) == 1 else s.tokens[p]
        for pos, p in s.reachable(edit.upto)
    }
    for pos, _, _ in edit.superseded:  # a marker in place of a result: anything
        p = s.position(pos)
        if p is not None:
            out[p] = s.tokens[p]
    most = sorted(out.items(), reverse=True)
    s.reach_memo = (key, most)
    return most


def _most(s: State, ctx: LayerContext, edit: Mask, p: int, bound: int) -> tuple[int, int]:
    """View position ``p`` with ``bound`` (:func:`_reachable`'s), tighter where that is its
    tokens and ``edit`` does not supersede it: for one text result, less those of its text
    masked without the names line (which only adds to them); kept by history position."""
    i = s.sources[p]
    if bound < s.tokens[p] or not isinstance(i, int) or any(i == x for x, *_ in edit.superseded):
        return p, bound
    most = s.most.get(i)
    if most is None:
        m, most = s.base[i], bound
        text = m.tool_results[0].content if len(m.tool_results) == 1 else None
        if isinstance(text, str) and m is s.view[p]:
            stub = mask_text(text, s.config.mask, make_ref((s.inputs[i],)), names=False)
            most = max(most - ctx.counter.count_text(stub), 0) if stub is not text else 0
        s.most[i] = most
        s.bytes += GAIN_BYTES
    return p, most


def _bounds(
    s: State, reachable: list[tuple[int, int]], strips: dict[int, int]
) -> tuple[list[tuple[int, int]], dict[int, int], int]:
    """What :func:`~.._policy.may_pay` asks of this call's batches (the full one, a mask and
    the thinking ``strips`` removes, or a mask from a later start, :func:`_soon`), each
    changing only ``reachable`` messages: the most they remove by view position, newest
    first; the view's tokens from each on (summed from the end, only as far back as the
    oldest); the call's new tokens. When every bound fails, no mask needs rendering."""
    most = reachable
    if strips:
        merged = dict(reachable)
        for p, gain in strips.items():
            merged[p] = merged.get(p, 0) + gain
        most = sorted(merged.items(), reverse=True)
    tokens, suffix, total, at = s.tokens, {}, 0, len(s.tokens)
    new = min(s.new_start, at)
    for p in sorted({new, *(p for p, _ in most)}, reverse=True):
        total += sum(tokens[p:at])
        suffix[p], at = total, p
    return most, suffix, suffix[new]


def settle(s: State, ctx: LayerContext) -> None:
    """Add to :attr:`State.idle` what the calls that waited without rendering their masks
    (:class:`.decide.Wait`) read on tokens a mask could have removed, as :func:`_soon` counts
    it; the view has not changed since (no edit was made), so their masks render now as they
    would have then."""
    waits, s.waits = s.waits, []
    if not waits:
        return
    candidates = _candidates(s, ctx, waits[-1].edit.upto)
    for w in waits:
        removed, first = w.strip
        gain, at = _removes(s, ctx, w.edit)
        removed += gain
        first = at if first is None or (at is not None and at < first) else first
        if first is None or removed <= 0:
            continue  # nothing to wait for
        small = _small_starts(candidates, w.edit.upto, w.small)
        s.idle += max((taken for *_, taken in small), default=0) * w.bet.rates.read


def _gain(s: State, ctx: LayerContext, i: int, p: int) -> int:
    """Tokens a strip of history message ``i``, at view position ``p``, removes."""
    gain = s.gains.get(i)
    if gain is None:
        m = s.view[p]
        after = strip(s, ctx, i, m)
        gain = s.tokens[p] - ctx.counter.count_message(after) if after is not m else 0
        s.gains[i] = gain
        s.bytes += GAIN_BYTES
    return gain
