"""The lossy edits: a compaction's plan recorded in the log, and the window cut.

A compaction is decided and written by the compaction engine; :func:`record_compaction` turns
its plan (view positions) into a ``compaction`` edit (history positions and anchors). When no
summary is made, or the request is still over the trigger after one, :func:`window_cut` drops
whole oldest units down to the target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from .._events import CompactionPlan, CompactResult, Event, emit
from .._log import Compaction, Source, WindowCut, make_ref
from .._messages import Message
from .._task import strip_injected
from ..layers.units import index_of
from .call import Call
from .commit import commit
from .lossless import settle
from .state import State

__all__ = ["record_compaction", "window_cut"]


def record_compaction(s: State, call: Call, result: CompactResult | None, forced: bool) -> None:
    """Record what the compactor returned (None: it declined) as a ``compaction`` edit, then
    cut whole oldest units if the request is still over the trigger."""
    call.out.events.extend(call.out.compactor_events)
    budget = call.ctx.budget
    if result is not None:
        plan = result.plan or CompactionPlan.between(s.view, result.new_messages)
        edit = _plan_edit(plan, s.sources, len(s.inputs))
        if edit is not None:
            before = s.total
            hidden = s.hidden(edit)
            edit = replace(
                edit,
                reason="forced" if forced else "must",
                ref=result.refs[-1] if result.refs else None,
                strategy=result.strategy,
                summary=result.summary,
                summarizer=result.summarizer,
                call=s.calls,
            )
            settle(s, call.ctx)  # the view changes: what the waits read is counted first
            commit(s, call, [edit])
            call.out.compaction = result
            if edit.ref is not None:
                call.out.elided[edit.ref] = hidden
                for ref in result.refs[:-1]:
                    call.out.elided.setdefault(ref, hidden)
            if not any(e.kind == "context_compacted" for e in call.out.compactor_events):
                emit(
                    call.out.events,
                    Event(
                        "context_compacted",
                        "compaction",
                        None,
                        None,
                        before,
                        s.total,
                        detail=f"{result.strategy}: {len(hidden)} messages summarised, "
                        f"{1 - s.total / max(before, 1):.0%} saved",
                        compaction=result,
                    ),
                )
    if budget is not None and s.total > budget.trigger:
        window_cut(s, call)


def window_cut(s: State, call: Call) -> None:
    """The window as an edit: drop whole oldest units (never the system prompt,
    the task, pinned content or the newest unit) until the request is at the target."""
    budget = call.ctx.budget
    if budget is None or not s.config.window.enabled:
        return
    aim = budget.target
    index = index_of(s.view, keep_results=0, keep_thinking=0)

    def no_summary(view: Sequence[Message], start: int, end: int) -> bool:
        # an earlier compaction's summary stays: it stands for what was cut before
        return not any(
            isinstance(x := s.sources[p], tuple) and s.edits[x[0]].kind == "compaction"
            for p in range(start, end)
        )

    drop: list[int] = []
    chosen: set[int] = set()
    excess = s.total - aim
    # the user's own instructions go last: only when dropping everything else is not enough
    for rules in ((no_summary, _no_instruction), (no_summary,)):
        for u in index.droppable(s.view, rules):
            if excess <= 0:
                break
            start, end = index.unit_span(u)
            if start in chosen:
                continue
            chosen.add(start)
            drop.extend(range(start, end))
            excess -= sum(s.tokens[start:end])
    drop.sort()
    if not drop:
        return
    positions = sorted(x for p in drop if isinstance(x := s.sources[p], int))
    # messages an earlier edit inserted into a dropped unit (a repair's synthetic results
    # for the calls dropped with it) leave with it
    inserts = sorted({x[0] for p in drop if isinstance(x := s.sources[p], tuple)})
    before = s.total
    ref = make_ref([s.inputs[i] for i in positions])
    edit = WindowCut(
        removed=_ranges(positions),
        dropped=tuple(inserts),
        ref=ref,
        call=s.calls,
    )
    hidden = s.hidden(edit)
    settle(s, call.ctx)  # the view changes: what the waits read is counted first
    commit(s, call, [edit])
    call.out.elided[ref] = hidden
    emit(
        call.out.events,
        Event(
            "dropped",
            "window",
            None,
            None,
            before,
            s.total,
            detail=f"window cut: {len(positions)} oldest messages dropped to the target "
            f"({before} -> {s.total} tokens)",
            data={"ref": ref},
        ),
    )


def _no_instruction(view: Sequence[Message], start: int, end: int) -> bool:
    """A cut rule: a unit holding words the user wrote (not only what a client injects)."""
    return not any(m.role == "user" and strip_injected(m.text) for m in view[start:end])


def _ranges(positions: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """Sorted positions as half-open ranges."""
    out: list[tuple[int, int]] = []
    for p in positions:
        if out and out[-1][1] == p:
            out[-1] = (out[-1][0], p + 1)
        else:
            out.append((p, p + 1))
    return tuple(out)


def _plan_edit(plan: CompactionPlan, sources: Sequence[Source], history: int) -> Compaction | None:
    """The ``compaction`` edit of ``plan``, made on the view whose message sources are
    ``sources``: removed history messages leave by position, removed summaries of earlier
    edits drop those edits, each inserted message is anchored to the next history message kept
    (or the end of the ``history`` messages). None when the plan changes nothing."""
    gone = set(plan.removed)
    removed = sorted(x for p in plan.removed if isinstance(x := sources[p], int))
    dropped = sorted({x[0] for p in plan.removed if isinstance(x := sources[p], tuple)})
    anchor = [history] * (len(sources) + 1)  # view position -> next kept history position
    for p in range(len(sources) - 1, -1, -1):
        x = sources[p]
        anchor[p] = x if isinstance(x, int) and p not in gone else anchor[p + 1]
    inserted = tuple((anchor[p], m) for p, m in plan.inserted)
    replaced = tuple(
        (x, m) for p, m in plan.replaced if isinstance(x := sources[p], int) and p not in gone
    )
    if not removed and not inserted and not replaced and not dropped:
        return None
    return Compaction(
        removed=_ranges(removed),
        inserted=inserted,
        replaced=replaced,
        dropped=tuple(dropped),
    )
