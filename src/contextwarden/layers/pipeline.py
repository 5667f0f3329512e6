"""The built-in layers composed, incrementally: what makes a warm call cheap.

:class:`Pipeline` gives exactly the output of running :func:`truncate_tool_output`,
:func:`mask_tool_results`, :func:`strip_thinking` and then :func:`sliding_window` one after the
other (the tests check this on generated and real histories), but it remembers the last call:

* when the new input starts with the same messages as the last input (an agent loop appends
  to its history; the same objects, or equal ones rebuilt from provider dicts), only the appended messages and the few older ones whose decisions
  can change (the results that just left the "newest 6", the thinking that just stopped being
  the newest, the turn that just ended) are recomputed; everything else (outputs, token counts,
  events, the window's per-unit sums) is reused;
* otherwise it starts over, still helped by the per-message memo (same content and decision,
  same output object, already counted).

The three lossless layers never add, drop or reorder messages, so the combined lossless output
is a per-message map, which is why a prefix of it can be reused as is.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field

from .._events import Event, emit
from .._messages import Message
from .base import LayerContext, LayerMemo, LayerResult, apply_memoized, check_messages, place_events
from .mask import mask_decision, mask_message
from .pending import pending_calls, repair_message
from .thinking import strip_decision, strip_message
from .truncate import needs_truncation, truncate_message
from .units import HistoryIndex
from .window import (
    cumulative,
    drop_event,
    drops_needed,
    finish_window,
    sliding_window,
)

__all__ = ["LosslessView", "Pipeline"]


@dataclass
class LosslessView:
    """The lossless layers' output for one call, plus what the window needs."""

    inputs: list[Message]
    outputs: list[Message]
    index: HistoryIndex
    #: tokens of the inputs (messages only)
    input_tokens: int
    #: prefix sums of the outputs' tokens: ``prefix[i]`` = tokens of ``outputs[:i]``
    prefix: list[int]
    #: lossless events per layer (truncate, mask, thinking), each in message order;
    #: ``event_pos[k][i]`` = where message i's events start in ``events[k]``
    events: tuple[list[Event], list[Event], list[Event]]
    event_pos: tuple[list[int], list[int], list[int]]
    counter_name: str
    #: window cache: droppable units (oldest first), cumulative tokens, their drop events
    drop_units: list[int] = field(default_factory=list)
    drop_cum: list[int] = field(default_factory=lambda: [0])
    drop_events: list[Event] = field(default_factory=list)
    #: first unit whose window data must be recomputed
    stale_unit: int = 0
    warned_at: int = -1

    @property
    def output_tokens(self) -> int:
        return self.prefix[-1]


class Pipeline:
    """Lossless layers then the sliding window, remembering the last call (see module doc)."""

    def __init__(self) -> None:
        self._view: LosslessView | None = None
        self._memos: dict[str, LayerMemo] = {}

    def memo(self, counter_name: str) -> LayerMemo:
        """The memo for one counter (event token counts depend on it)."""
        memo = self._memos.get(counter_name)
        if memo is None:
            memo = self._memos[counter_name] = LayerMemo()
        return memo

    def reset(self) -> None:
        """Forget the last call (the memo stays)."""
        self._view = None

    # -- lossless stage ----------------------------------------------------------------------
    def lossless(self, messages: Sequence[Message], ctx: LayerContext) -> LosslessView:
        """Run truncate, mask and strip-thinking over ``messages``, reusing the last call's work
        for an unchanged prefix. ``ctx.memo`` should be :meth:`memo` of the counter."""
        cfg = ctx.config
        counter = ctx.counter
        view = self._view
        if not isinstance(messages, list):
            messages = list(messages)
        n = len(messages)
        start = 0
        # list equality compares element by element in C, identical objects without calling
        # __eq__: an agent's growing list costs microseconds; an equal message rebuilt from
        # provider dicts also matches (same content, same output)
        if (
            view is not None
            and view.counter_name == counter.name
            and n >= len(view.inputs)
            and view.inputs == messages[: len(view.inputs)]
        ):
            start = len(view.inputs)
        else:
            view = LosslessView(
                inputs=[],
                outputs=[],
                index=HistoryIndex(
                    keep_results=cfg.mask.keep_recent, keep_thinking=cfg.thinking.keep_recent
                ),
                input_tokens=0,
                prefix=[0],
                events=([], [], []),
                event_pos=([0], [0], [0]),
                counter_name=counter.name,
            )
        check_messages(messages, start)
        appended = messages[start:]
        view.inputs.extend(appended)
        dirty, first_unit = view.index.extend(view.inputs, start)
        count = counter.count_message
        view.input_tokens += sum(count(m) for m in appended)

        # recompute outputs from `dirty` on
        del view.outputs[dirty:]
        del view.prefix[dirty + 1 :]
        for layer_events, pos in zip(view.events, view.event_pos, strict=True):
            del layer_events[pos[dirty] :]
            del pos[dirty + 1 :]
        index = view.index
        memo = ctx.memo
        tcfg, mcfg, kcfg = cfg.truncate, cfg.mask, cfg.thinking
        outputs, prefix = view.outputs, view.prefix
        (t_events, m_events, k_events), (t_pos, m_pos, k_pos) = view.events, view.event_pos
        inputs = view.inputs
        running = prefix[-1]
        for i in range(dirty, n):
            m = inputs[i]
            if not m.is_pinned:
                if tcfg.enabled and needs_truncation(m, tcfg):
                    (m, templates), fresh = apply_memoized(
                        "truncate",
                        m,
                        index.names[i],
                        lambda msg, d: truncate_message(msg, d, ctx),
                        memo,
                    )
                    place_events(templates, i, t_events, log=fresh)
                if mcfg.enabled:
                    d = mask_decision(m, i, index)
                    if d is not None:
                        (m, templates), fresh = apply_memoized(
                            "mask", m, d, lambda msg, dec: mask_message(msg, dec, ctx), memo
                        )
                        place_events(templates, i, m_events, log=fresh)
                if kcfg.enabled and strip_decision(m, i, index, kcfg.keep_current_turn):
                    (m, templates), fresh = apply_memoized(
                        "thinking", m, True, lambda msg, _d: strip_message(msg, ctx), memo
                    )
                    place_events(templates, i, k_events, log=fresh)
            outputs.append(m)
            running += count(m)
            prefix.append(running)
            t_pos.append(len(t_events))
            m_pos.append(len(m_events))
            k_pos.append(len(k_events))
        unit = index.unit_of(dirty) if dirty < n else first_unit
        view.stale_unit = min(view.stale_unit, first_unit, max(unit, 0))
        self._view = view
        return view

    # -- window stage ------------------------------------------------------------------------
    def window(
        self, view: LosslessView, ctx: LayerContext, overhead: int
    ) -> tuple[LayerResult, int]:
        """The sliding window over ``view.outputs`` using the cached per-unit sums. Returns the
        result (lossless events included, layer by layer as if the layers ran one after the other)
        and the request's final tokens."""
        total = view.output_tokens + overhead
        budget = ctx.budget
        t_events, m_events, k_events = view.events
        lossless_events = (*t_events, *m_events, *k_events)
        if not ctx.config.window.enabled:
            return LayerResult(tuple(view.outputs), lossless_events), total
        index = view.index
        outputs: Sequence[Message] = view.outputs
        repaired: tuple[Event, ...] = ()
        newest_start: int | None = None
        droppable_below = len(index.unit_starts) - 1  # units from here on are not droppable
        j, pending = pending_calls(outputs)
        if pending:
            # a recording's final state: the last assistant message's calls have no results.
            # Repair it as the window layer does, reusing everything else.
            if j != index.unit_starts[-1] or len(index.unit_starts) < 2:
                result = sliding_window(outputs, ctx)
                final = ctx.request_tokens(result.messages)
                return LayerResult(
                    result.messages, lossless_events + result.events, result.newest_truncated
                ), final
            new, repaired = repair_message(outputs, j, pending, ctx)
            before = ctx.counter.count_message(outputs[j])
            fixed = list(outputs)
            if new.content:
                fixed[j] = new
                total += ctx.counter.count_message(new) - before
            elif j == len(outputs) - 1:
                del fixed[j]
                total -= before
                newest_start = index.unit_starts[-2]
                droppable_below -= 1
            else:
                result = sliding_window(outputs, ctx)
                final = ctx.request_tokens(result.messages)
                return LayerResult(
                    result.messages, lossless_events + result.events, result.newest_truncated
                ), final
            outputs = fixed
        if budget is None or total <= budget.trigger:
            return LayerResult(tuple(outputs), lossless_events + repaired), total
        self._refresh_units(view)
        limit = bisect_left(view.drop_units, droppable_below)
        k = drops_needed(view.drop_cum[: limit + 1], total, budget.trigger)
        while len(view.drop_events) < k:  # drop events are made (and logged) once per unit
            u = view.drop_units[len(view.drop_events)]
            start, end = index.unit_span(u)
            e = drop_event(view.outputs, start, end, view.prefix[end] - view.prefix[start])
            emit(view.drop_events, e)
        warn_key = index.unit_span(view.drop_units[k - 1])[1] if k else -1
        result, final = finish_window(
            outputs,
            index,
            view.drop_units[:k],
            view.prefix,
            total - view.drop_cum[k],
            ctx,
            log=False,
            drop_events=view.drop_events[:k],
            log_warning=warn_key != view.warned_at,
            newest_start=newest_start,
        )
        view.warned_at = warn_key
        events = lossless_events + repaired + result.events
        return LayerResult(result.messages, events, result.newest_truncated), final

    def _refresh_units(self, view: LosslessView) -> None:
        """Recompute droppable units and their cumulative tokens from ``view.stale_unit`` on."""
        index = view.index
        u0 = view.stale_unit
        j = bisect_left(view.drop_units, u0)
        del view.drop_units[j:]
        del view.drop_cum[j + 1 :]
        del view.drop_events[j:]
        keep = index.unit_keep
        new_units = [u for u in range(u0, len(keep) - 1) if not keep[u]]
        cum = cumulative(index, new_units, view.prefix)
        base = view.drop_cum[-1]
        view.drop_units.extend(new_units)
        view.drop_cum.extend(base + c for c in cum[1:])
        view.stale_unit = max(len(keep) - 1, 0)
