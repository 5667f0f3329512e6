"""The final guard of a call: what no API takes is taken out of the request, for this call.

Tool calls left unanswered at the very end (a recording's final state) are removed, calls a
final turn split over several assistant messages left open are dropped, and a request still over
the trigger (the newest message alone too large) is cut by the sliding window, unless the policy
let it wait over the trigger within the hard limit. None of it is written in the log: the next
call starts from the view again.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._messages import Message
from ..layers.base import Layer, LayerResult, require_messages
from ..layers.pending import drop_open_calls, pending_calls, repair_tail
from ..layers.window import sliding_window
from .call import Call
from .state import State

__all__ = ["final_guard", "run_layers"]


def final_guard(s: State, call: Call, deferred: bool) -> tuple[Sequence[Message], int, bool]:
    """``(request, tokens, newest_truncated)``: the view made valid and within the limit for
    this call (see the module docstring); the tokens include the tool definitions, not the
    request's tail."""
    ctx = call.ctx
    view: Sequence[Message] = s.view
    total = s.total
    budget = ctx.budget
    j, pending = pending_calls(view)
    if pending:  # a recording's final state: calls not answered yet, which no API takes
        before = s.tokens[j]
        view, repaired = repair_tail(view, ctx)
        call.out.events.extend(repaired)
        after = ctx.counter.count_message(view[j]) if len(view) == len(s.view) else 0
        total += after - before
    still_open = set(s.repair.pending) - pending
    if still_open:  # a final turn split over several assistant messages
        view, repaired = drop_open_calls(view, frozenset(still_open), ctx)
        call.out.events.extend(repaired)
        total = ctx.request_tokens(view)
    # a request the policy let wait over the trigger is left whole within the limit
    if (
        budget is not None
        and total + call.tail_tokens > budget.trigger
        and not (deferred and total + call.tail_tokens <= budget.limit)
    ):
        guarded = sliding_window(view, ctx)
        call.out.events.extend(guarded.events)
        return guarded.messages, ctx.request_tokens(guarded.messages), guarded.newest_truncated
    return view, total, False


def run_layers(
    layers: Sequence[Layer], view: Sequence[Message], call: Call
) -> tuple[Sequence[Message], int]:
    """``(request, tokens)``: the caller's own guard ``layers`` run on the request in turn,
    their events added to the call's; :class:`TypeError` naming a layer that does not return
    a :class:`~contextwarden.layers.base.LayerResult`."""
    ctx = call.ctx
    for layer in layers:
        result = layer(tuple(view), ctx)
        if not isinstance(result, LayerResult):
            raise TypeError(f"layer {layer!r} returned {type(result).__name__}, not LayerResult")
        require_messages(result.messages)
        call.out.events.extend(result.events)
        view = result.messages
    return view, ctx.request_tokens(view)
