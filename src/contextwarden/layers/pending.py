"""Drop tool calls left unanswered at the end of the history: the sliding window's validity
guard (it runs whether or not the window is over budget).

A recording cut right after the model asked for a tool (a mini-swe-agent run's final
``submit``, an interrupted session) ends with tool calls no result answers; OpenAI and
Anthropic both reject such a request. This layer removes those calls from the working copy:
the assistant message keeps its other content (text, and its thinking with it), or goes
entirely when nothing but thinking would remain. It only looks at the tail: in a live agent
loop (where tools have run before the next call) it never acts.
Calls answered by a result are never touched, nor is anything earlier in the history.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._events import Event, emit
from .._messages import Message, ThinkingBlock, ToolCallBlock
from .base import LayerContext, LayerResult, require_messages

__all__ = ["drop_open_calls", "drop_pending_calls", "pending_calls", "repair_tail"]

LAYER = "pending"


def pending_calls(messages: Sequence[Message]) -> tuple[int, frozenset[str]]:
    """The last assistant message's index and its calls no tool message after it answers."""
    j = len(messages) - 1
    while j >= 0 and messages[j].role == "tool":
        j -= 1
    if j < 0 or messages[j].role != "assistant":
        return j, frozenset()
    calls = [b.id for b in messages[j].content if isinstance(b, ToolCallBlock)]
    answered = {r.tool_call_id for t in messages[j + 1 :] for r in t.tool_results}
    return j, frozenset(c for c in calls if c not in answered)


def _without_calls(
    message: Message, index: int, pending: frozenset[str], ctx: LayerContext, events: list[Event]
) -> Message:
    """``message`` (at ``index``) without the ``pending`` calls, or with empty content when
    nothing but thinking would remain (the caller then removes it); its event put in ``events``."""
    kept = tuple(
        b for b in message.content if not (isinstance(b, ToolCallBlock) and b.id in pending)
    )
    names = dict.fromkeys(
        b.name for b in message.content if isinstance(b, ToolCallBlock) and b.id in pending
    )
    if any(not isinstance(b, ThinkingBlock) for b in kept):
        out = message.replace(content=kept)
        after = ctx.counter.count_message(out)
    else:
        out = message.replace(content=())
        after = 0
    detail = (
        f"{len(pending)} unanswered tool call(s) at the end of the history: a request ending "
        "with them is invalid"
    )
    before = ctx.counter.count_message(message)
    emit(
        events,
        Event("dropped", LAYER, index, ", ".join(names) or None, before, after, detail=detail),
    )
    return out


def repair_tail(
    messages: Sequence[Message], ctx: LayerContext
) -> tuple[Sequence[Message], tuple[Event, ...]]:
    """:func:`drop_pending_calls` without the input check: ``messages`` itself (no copy) when
    the tail is fine, which is the usual case. Items that are not messages are left for the
    caller's input check to report."""
    try:
        j, pending = pending_calls(messages)
    except AttributeError:
        return messages, ()
    if not pending:
        return messages, ()
    events: list[Event] = []
    new = _without_calls(messages[j], j, pending, ctx, events)
    out = list(messages)
    if new.content:
        out[j] = new
    else:
        del out[j]
    return out, tuple(events)


def drop_open_calls(
    messages: Sequence[Message], ids: frozenset[str], ctx: LayerContext
) -> tuple[list[Message], tuple[Event, ...]]:
    """``messages`` without the calls ``ids`` in the assistant messages of the final turn (the
    assistant and tool messages after the last other one): what :func:`repair_tail` does for a
    final turn split over several assistant messages. An assistant message left with nothing
    but thinking goes; one event per message changed."""
    out = list(messages)
    events: list[Event] = []
    j = len(out) - 1
    while j >= 0 and out[j].role in ("assistant", "tool"):
        m = out[j]
        if m.role == "assistant" and any(
            isinstance(b, ToolCallBlock) and b.id in ids for b in m.content
        ):
            new = _without_calls(m, j, ids, ctx, events)
            if new.content:
                out[j] = new
            else:
                del out[j]
        j -= 1
    return out, tuple(events)


def drop_pending_calls(messages: Sequence[Message], ctx: LayerContext) -> LayerResult:
    """Remove the tool calls at the end of the history that no result answers (see the module
    docstring). Pure; one ``dropped`` event when it acts."""
    require_messages(messages)
    repaired, events = repair_tail(messages, ctx)
    return LayerResult(tuple(repaired), events)
