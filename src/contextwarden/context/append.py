"""New messages entering a conversation: indexed, repaired, a huge output cut once, counted.

A message enters the history as the agent sent it and the view as it will be sent: repaired
when it breaks the API's rules (:mod:`..layers.repair`; a synthetic result or a message taken
out is a ``repair`` edit in the log), without results whose calls an edit already took out, and
cut when it is a huge tool output or a client's oversized block (seed 004's first layer).
"""

from __future__ import annotations

from dataclasses import replace

from .._budget import reply_tokens
from .._events import Event, emit
from .._log import Repair
from .._messages import (
    Message,
    TextBlock,
    ToolResultBlock,
    held_bytes,
)
from .._task import strip_injected
from ..layers.repair import repair_appended, unchanged_next
from ..layers.truncate import needs_truncation, truncate_message
from .call import Call
from .commit import note
from .state import SLOT_BYTES, State

__all__ = ["append"]


def append(s: State, call: Call, start: int, stop: int) -> None:
    """Append ``call.messages[start:stop]`` to the history and the view."""
    ctx = call.ctx
    msgs = call.messages
    count = ctx.counter.count_message
    cfg = s.config.truncate
    index = s.index
    index.extend(msgs, start, stop)
    for i in range(start, stop):
        m = msgs[i]
        s.inputs.append(m)
        s.bytes += held_bytes(m) + SLOT_BYTES
        tokens = count(m)
        s.input_tokens += tokens
        names = index.names[i]
        if m.role == "assistant":
            s.longest_reply = max(s.longest_reply, reply_tokens(tokens, m.usage))
        entry = m if unchanged_next(s.repair, m) else _repair(s, call, i, m)
        if entry is not None and entry.role == "tool":
            entry = _answered(s, call, i, entry)
        if entry is None:  # a repair took it out: it stays in the history, not the view
            s.base.append(m)
            continue
        if (
            needs_truncation(entry, cfg) or _oversized_client_block(entry, cfg.max_chars)
        ) and not entry.is_pinned:
            entry, events = truncate_message(entry, names, ctx)
            for e in events:
                emit(call.out.events, replace(e, index=len(s.view)))
        if entry is not m:  # a copy (repaired, cut): kept beside the agent's message
            s.bytes += held_bytes(entry)
            for c in entry.tool_calls:  # an id the repair made unique
                index.call_at.setdefault(c.id, i)
        s.base.append(entry)
        if s.positions is not None:
            s.positions[i] = len(s.view)
        s.view.append(entry)
        s.sources.append(i)
        s.tokens.append(tokens if entry is m else count(entry))
    s.total = sum(s.tokens) + call.overhead


def _repair(s: State, call: Call, i: int, m: Message) -> Message | None:
    """History message ``i`` as it enters the view, repaired (see :mod:`..layers.repair`):
    the same object when nothing is wrong, a fixed copy (ids made unique, an empty user
    message given a placeholder), or None when it is taken out (a result without its call).
    Synthetic results closing calls left unanswered before it are recorded as a ``repair``
    edit and put in the view first. Raises FormatError under ``config.strict``."""
    out, events, _ = repair_appended(call.messages, i, s.repair, strict=s.config.strict, stop=i + 1)
    if not events:
        return m
    call.out.events.extend(events)
    if m.role == "tool" and len(out) <= 1 and all(x.role == "tool" for x in out):
        # a tool message kept as one (or dropped) closes no turn: out is its own repair
        synthetic: list[Message] = []
        entry = out[0] if out else None
    else:  # synthetic results (tool messages) before the message itself, if it stays
        # a call an edit already took out of the view (a window cut) needs no result
        synthetic = [
            x
            for x in out
            if x.role == "tool" and all(_in_view(s, r.tool_call_id, i) for r in x.tool_results)
        ]
        rest = [x for x in out if x.role != "tool"]
        entry = rest[0] if rest else None
    if synthetic or entry is None:
        number = len(s.edits)
        edit = Repair(
            removed=((i, i + 1),) if entry is None else (),
            inserted=tuple((i, x) for x in synthetic),
            call=s.calls,
        )
        note(s, edit)
        call.out.edits.append(edit)
        count = call.ctx.counter.count_message
        for k, x in enumerate(synthetic):
            s.view.append(x)
            s.sources.append((number, k))
            s.tokens.append(count(x))
    return entry


def _answered(s: State, call: Call, i: int, entry: Message) -> Message | None:
    """Tool message ``entry`` (history ``i``) without the results for calls an edit already
    took out of the view (a compaction or window cut made while they were pending): a
    result needs its call in the same request. What else it carries stays, as a user turn;
    with nothing left it leaves the view (a ``repair`` edit)."""
    gone = [
        b
        for b in entry.content
        if isinstance(b, ToolResultBlock) and not _in_view(s, b.tool_call_id, i)
    ]
    if not gone:
        return entry
    rest = tuple(b for b in entry.content if b not in gone)
    emit(
        call.out.events,
        Event(
            "repaired",
            "repair",
            i,
            None,
            detail=f"{len(gone)} tool result(s) dropped: their calls were compacted or cut "
            "before the results arrived",
        ),
    )
    if any(isinstance(b, ToolResultBlock) for b in rest):
        return entry.replace(content=rest)
    if rest:
        return entry.replace(role="user", content=rest)
    edit = Repair(removed=((i, i + 1),), call=s.calls)
    note(s, edit)
    call.out.edits.append(edit)
    return None


def _in_view(s: State, call_id: str, i: int) -> bool:
    """Whether the call ``call_id`` answered at history position ``i`` is in the view (a call
    of the same id made later, which a repair renames, does not count)."""
    at = s.index.call_at.get(call_id)
    return at is None or at >= i or s.position(at) is not None


def _oversized_client_block(message: Message, limit: int) -> bool:
    """A user message over ``limit`` characters that holds no word of the user's, only what
    the client put there (aider's files in the chat, a repository map): it is cut as it enters,
    like a huge tool output, instead of making every request that carries it a compaction."""
    return (
        message.role == "user"
        and any(isinstance(b, TextBlock) and len(b.text) > limit for b in message.content)
        and not strip_injected(message.text)
    )
