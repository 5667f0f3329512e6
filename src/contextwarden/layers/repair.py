"""Repair a structurally invalid history: the validity guard for what arrives, not what we cut.

Agents and recorders hand over histories that no provider accepts: a tool result whose call is
gone (the agent trimmed its own history), the same tool-call id used twice (a model or a framework
reusing ``call_0``), a call left unanswered when the user spoke next (an interrupted tool run),
an empty user message. The rules, applied message by message in order:

* **A tool result with no open call is dropped**: no call of the current assistant turn (an
  assistant message, or consecutive ones, and the tool messages that follow it) has its id, or
  that call was answered already. A tool message left with nothing but those results goes; one
  with text or images riding along keeps them as a ``user`` message (so does one read from
  Anthropic, holding :data:`DROPPED_RESULTS_TEXT`: it is a user turn there, and removing it
  would put two assistant turns side by side). Such a ``user`` message ends the turn: calls
  still open are closed before it, as below.
* **A duplicate tool-call id is made unique**: a call whose id an earlier call already used is
  renamed ``<id>-2`` (``-3``... the first suffix no earlier call used; the characters stay
  within Anthropic's ``[a-zA-Z0-9_-]`` when the id was), and the results of its turn that name
  the id are renamed with it, in order (the first result answers the first open call).
* **A call left unanswered mid-history is closed**: when a message other than a tool result ends
  the turn (a user or system message, or an assistant message after the tool results) while calls
  are still open, a ``tool`` message per open call is inserted before it, its result saying no
  result was recorded (:data:`NO_RESULT_TEXT`, marked as an error).
* **Empty messages**: a user message with no content gets the placeholder
  :data:`EMPTY_USER_TEXT` (dropping it could remove the task, or put two assistant turns side by
  side, which Anthropic refuses; both APIs refuse empty user content); an empty system, assistant
  or tool message is dropped (it says nothing; an empty final assistant message, a prefill, is
  dropped too: an empty prefill is the same as none, and keeping it would leave an empty message
  mid-history once the agent appends more).
* **Misplaced blocks are dropped**: a tool call outside an assistant message, a tool result
  outside a tool message.

Calls still open at the very end are *not* a repair case: the tools may be running (the
sliding window's :func:`~contextwarden.layers.pending.drop_pending_calls` removes them from a
request). Anthropic's role alternation is the adapters' job (:func:`~contextwarden.formats.
to_anthropic` merges neighbours of one role).

Each repair is one ``repaired`` event (layer ``repair``) whose ``index`` is the position of the
message in the input and whose detail says what was done; ``strict=True`` raises
:class:`~contextwarden.FormatError` naming the first problem's message index instead.

It works incrementally: :class:`RepairState` remembers what the messages so far left open (the
ids used, the calls of the current turn still unanswered), so :func:`repair_appended` costs
O(new messages) per call. Messages needing no repair come back as the same objects; the input is
never mutated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from .._events import Event, emit
from .._exceptions import FormatError
from .._messages import (
    Block,
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from .base import require_messages

__all__ = [
    "DROPPED_RESULTS_TEXT",
    "EMPTY_USER_TEXT",
    "NO_RESULT_TEXT",
    "RepairState",
    "repair_appended",
    "repair_history",
    "unchanged_next",
]

LAYER = "repair"

#: The result given to a tool call left unanswered mid-history.
NO_RESULT_TEXT = "(no result was recorded for this tool call)"
#: The text given to a user message that arrived empty.
EMPTY_USER_TEXT = "(empty message)"
#: What stays of an Anthropic user turn whose tool results were all dropped.
DROPPED_RESULTS_TEXT = "(tool results without a matching tool call were left out)"


@dataclass
class _Open:
    """A call of the current turn that no result has answered yet."""

    out_id: str
    name: str
    index: int  # the assistant message's input index
    seq: int  # the call's position in that message


@dataclass
class RepairState:
    """What the messages repaired so far leave open; advanced in place by
    :func:`repair_appended` (like :class:`~contextwarden.layers.units.HistoryIndex`).

    ``n`` is how many input messages it has seen; ``used`` every tool-call id the output holds;
    ``open`` the calls of the current turn not answered yet, by their id in the input, in call
    order.
    """

    n: int = 0
    used: set[str] = field(default_factory=set)
    open: dict[str, list[_Open]] = field(default_factory=dict)
    prev_role: Role | None = None

    @property
    def pending(self) -> tuple[str, ...]:
        """The output ids of the calls still open, in call order."""
        calls = sorted((o.index, n, o.out_id) for v in self.open.values() for n, o in enumerate(v))
        return tuple(c[2] for c in calls)


def repair_history(
    messages: Sequence[Message], *, strict: bool = False
) -> tuple[tuple[Message, ...], tuple[Event, ...]]:
    """The repaired history and one ``repaired`` event per repair (see the module docstring).
    Raises :class:`~contextwarden.FormatError` naming the first problem under ``strict``, or the
    index of an item that is not a :class:`Message`."""
    fixed, events, _ = repair_appended(messages, 0, RepairState(), strict=strict)
    return tuple(fixed), events


def repair_appended(
    messages: Sequence[Message],
    start: int,
    state: RepairState,
    *,
    strict: bool = False,
    stop: int | None = None,
) -> tuple[list[Message], tuple[Event, ...], RepairState]:
    """Repair ``messages[start:stop]`` given ``state``, the state after ``messages[:start]``
    (``stop`` defaults to the end; with it, the caller has checked that those are Messages).

    Returns the repaired messages standing for ``messages[start:]`` (same objects where nothing
    was wrong; synthetic results inserted, broken messages replaced or left out), the events, and
    ``state`` advanced to ``len(messages)`` (the same object, updated in place). Raises
    ``ValueError`` when ``start`` is not ``state.n``, :class:`~contextwarden.FormatError` for an
    item that is not a :class:`Message` or, under ``strict``, naming the first problem (then
    ``state`` is left as it was).
    """
    if start != state.n:
        raise ValueError(f"the repair state has seen {state.n} messages, cannot go on from {start}")
    end = len(messages) if stop is None else stop
    if stop is None:
        require_messages(messages, start)
    out: list[Message] = []
    events: list[Event] = []

    def problem(index: int, detail: str, tool: str | None = None) -> None:
        if strict:
            raise FormatError(detail, index=index)
        emit(events, Event("repaired", LAYER, index, tool, detail=detail))

    # under strict a problem raises half way: what the loop changed is undone (the open calls
    # are few; the ids added are remembered), so the state stays usable at no O(history) cost
    saved = ({k: list(v) for k, v in state.open.items()}, state.prev_role) if strict else None
    added: list[str] = []
    try:
        for i in range(start, end):
            m = messages[i]
            role = m.role
            if role != "tool" and not (role == "assistant" == state.prev_role):
                _close_turn(state, i, out, problem)
            state.prev_role = role
            if role == "assistant":
                new = _assistant(state, i, m, problem, added if strict else None)
            elif role == "tool":
                new = _tool(state, i, m, problem)
                if new is not None and new.role != "tool":
                    # all its results dropped, what is left is a user turn: it ends the turn
                    # like any other, so the calls still open are closed before it
                    _close_turn(state, i, out, problem)
                    state.prev_role = new.role
            else:
                new = _other(i, m, problem)
            if new is not None:
                out.append(new)
    except FormatError:
        if saved is not None:
            state.open, state.prev_role = saved
            state.used.difference_update(added)
        raise
    state.n = end
    return out, tuple(events), state


def unchanged_next(state: RepairState, m: Message) -> bool:
    """When message ``state.n`` (``m``) needs no repair and changes nothing of ``state`` but
    its role and count (a user, system or assistant message with content and no tool block,
    which ends no turn holding open calls): advance ``state`` past it and return True, as
    :func:`repair_appended` would, at a fraction of its cost; else False, ``state`` untouched."""
    role = m.role
    if role == "tool" or (state.open and not (role == "assistant" == state.prev_role)):
        return False
    for b in m.content:
        if type(b) is ToolCallBlock or type(b) is ToolResultBlock:
            return False
    if not _has_content(m.content):
        return False
    state.prev_role = role
    state.n += 1
    return True


class _Problem(Protocol):
    def __call__(self, index: int, detail: str, tool: str | None = None) -> None: ...


def _close_turn(state: RepairState, i: int, out: list[Message], problem: _Problem) -> None:
    """End the current turn before message ``i``: a synthetic result for every open call."""
    if state.open:
        for o in sorted(
            (o for v in state.open.values() for o in v), key=lambda o: (o.index, o.seq)
        ):
            problem(
                o.index,
                f"tool call {o.out_id!r} was not answered before message {i}: closed with a "
                "synthetic result saying no result was recorded",
                o.name,
            )
            out.append(Message("tool", (ToolResultBlock(o.out_id, NO_RESULT_TEXT, is_error=True),)))
        state.open = {}


def _has_content(blocks: Sequence[Block]) -> bool:
    for b in blocks:
        if type(b) is TextBlock:
            if b.text:
                return True
        elif type(b) is ThinkingBlock:
            if b.thinking or b.data:
                return True
        else:
            return True
    return False


def _assistant(
    state: RepairState, i: int, m: Message, problem: _Problem, added: list[str] | None
) -> Message | None:
    blocks: list[Block] | None = None  # a changed copy of m.content, made on the first change
    for j, b in enumerate(m.content):
        new: Block | None = b
        if type(b) is ToolCallBlock:
            out_id = b.id
            if out_id in state.used:
                k = 2
                while f"{b.id}-{k}" in state.used:
                    k += 1
                out_id = f"{b.id}-{k}"
                problem(
                    i,
                    f"tool call id {b.id!r} was already used: renamed {out_id!r} (its results "
                    "are renamed with it)",
                    b.name,
                )
                new = replace(b, id=out_id)
            state.used.add(out_id)
            if added is not None:
                added.append(out_id)
            state.open.setdefault(b.id, []).append(_Open(out_id, b.name, i, j))
        elif type(b) is ToolResultBlock:
            problem(i, f"tool result {b.tool_call_id!r} in an assistant message: dropped")
            new = None
        if new is not b and blocks is None:
            blocks = list(m.content[:j])
        if blocks is not None and new is not None:
            blocks.append(new)
    content = m.content if blocks is None else tuple(blocks)
    if not _has_content(content):
        problem(i, "empty assistant message: dropped")
        return None
    return m if blocks is None else m.replace(content=content)


def _tool(state: RepairState, i: int, m: Message, problem: _Problem) -> Message | None:
    blocks: list[Block] | None = None
    results = 0
    for j, b in enumerate(m.content):
        new: Block | None = b
        if type(b) is ToolResultBlock:
            cid = b.tool_call_id
            waiting = state.open.get(cid)
            if waiting:
                o = waiting.pop(0)
                if not waiting:
                    del state.open[cid]
                if o.out_id != cid:
                    problem(i, f"tool result {cid!r} renamed {o.out_id!r} with its call", o.name)
                    new = replace(b, tool_call_id=o.out_id)
                results += 1
            else:
                why = (
                    "its call was answered already or its turn had ended"
                    if cid in state.used
                    else "no tool call before it has that id"
                )
                problem(i, f"tool result {cid!r} dropped: {why}")
                new = None
        elif type(b) is ToolCallBlock:
            problem(i, f"tool call {b.id!r} outside an assistant message: dropped", b.name)
            new = None
        if new is not b and blocks is None:
            blocks = list(m.content[:j])
        if blocks is not None and new is not None:
            blocks.append(new)
    if blocks is None:
        if not m.content:
            problem(i, "empty tool message: dropped")
            return None
        return m
    content = tuple(blocks)
    if results:
        return m.replace(content=content)
    if _has_content(content):  # what rode along with the dropped results stays, as the user's
        return m.replace(role="user", content=content)
    if m.hints.get("format") == "anthropic":
        # an Anthropic user turn: removing it would put two assistant turns side by side, which
        # the adapter keeps apart for messages read from Anthropic
        return m.replace(role="user", content=(TextBlock(DROPPED_RESULTS_TEXT),))
    return None


def _other(i: int, m: Message, problem: _Problem) -> Message | None:
    """A user or system message: no tool blocks, not empty."""
    content = m.content
    misplaced = False
    for b in content:
        if type(b) is ToolCallBlock:
            problem(i, f"tool call {b.id!r} in a {m.role} message: dropped", b.name)
            misplaced = True
        elif type(b) is ToolResultBlock:
            problem(i, f"tool result {b.tool_call_id!r} in a {m.role} message: dropped")
            misplaced = True
    if misplaced:
        content = tuple(
            b for b in content if type(b) is not ToolCallBlock and type(b) is not ToolResultBlock
        )
    if _has_content(content):
        return m if not misplaced else m.replace(content=content)
    if m.role == "system":
        problem(i, "empty system message: dropped")
        return None
    problem(i, f"empty user message: given the placeholder {EMPTY_USER_TEXT!r}")
    kept = tuple(b for b in content if not (type(b) is TextBlock and not b.text))
    return m.replace(content=(*kept, TextBlock(EMPTY_USER_TEXT)))
