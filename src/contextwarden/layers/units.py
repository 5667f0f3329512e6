"""The structure of a history, built by appending: units, the task, tool names, and which tool
results and thinking blocks are recent.

Every layer decides by *position from the end*, never by user turns: an agent run is
usually one user message followed by hundreds of tool calls. :class:`HistoryIndex` records what
those decisions need and is extended when messages are appended (a conversation keeps one and
pays only for its new messages), equal to one made at once.

A command's output that an agent sends as a user message (mini-swe-agent's text protocol,
:func:`~contextwarden.analysis.actions.text_output`) counts as that command's tool result,
``"msg:<i>"``, wherever results are counted, kept together with their call and masked; it is
never the user's turn.

A **unit** is what the sliding window drops as a whole: an assistant message together with every
tool message answering its calls (parallel calls stay together), or a lone user message. A tool
message never starts a unit unless it is the very first message, so a cut never lands on a tool
result. When a tool message answers a call made in an earlier unit (out-of-order results), the
units in between are merged, so a call and its result are always kept or dropped together.
A unit is **kept** (never dropped) when it holds a system message, pinned content or the task
(the user's first message of their own, :mod:`contextwarden._task`), or comes no later than the
first user message (a client's opening: Codex's environment, aider's examples).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence

from .._messages import Message, ToolResultBlock
from .._task import LOOKAHEAD, task_index
from ..analysis.actions import output_block, text_output

__all__ = ["CutRule", "HistoryIndex", "index_of"]

#: A rule of where a cut may fall: may the unit ``messages[start:end]`` leave the request?
#: The index's own answer (never a kept unit, never the newest) is intersected with every
#: rule a caller adds (the conversation keeps units holding an earlier summary).
CutRule = Callable[[Sequence[Message], int, int], bool]


def index_of(
    messages: Sequence[Message] = (), *, keep_results: int = 6, keep_thinking: int = 1
) -> HistoryIndex:
    """The index of ``messages`` (see :class:`HistoryIndex`): the one way one is made; a
    conversation makes its own of no messages and extends it as its history grows."""
    index = HistoryIndex(keep_results=keep_results, keep_thinking=keep_thinking)
    index.extend(messages, 0)
    return index


class HistoryIndex:
    """Positional facts about ``messages[:n]``, extended as messages are appended.

    ``keep_results`` is how many of the newest tool results (blocks, newest first) count as
    recent; ``keep_thinking`` how many of the newest assistant messages with thinking keep it.
    Made by :func:`index_of`.
    """

    def __init__(self, *, keep_results: int = 6, keep_thinking: int = 1) -> None:
        self.keep_results = keep_results
        self.keep_thinking = keep_thinking
        self.n = 0
        #: index of the task (:func:`~contextwarden._task.task_index`), or None
        self.task: int | None = None
        #: index of the first user message, or None
        self.first_user: int | None = None
        #: index of the last user message, or -1
        self.last_user = -1
        #: per message: the tool name of each of its tool results ("" when the call is unknown
        #: or the result is a command's output sent as a user message)
        self.names: list[tuple[str, ...]] = []
        self.call_names: dict[str, str] = {}
        #: a tool call's id -> the index of the message making it
        self.call_at: dict[str, int] = {}
        #: a tool result's id -> the index of the (last) message holding it
        self.result_at: dict[str, int] = {}
        #: indices of the messages holding tool results, in order
        self.results: list[int] = []
        #: per message holding results: their ids (:meth:`results_in`'s), in order
        self.ids: dict[int, tuple[str, ...]] = {}
        #: (message index, ordinal among that message's results) of every result, in order
        self.result_blocks: list[tuple[int, int]] = []
        #: indices of the user messages that are a command's output (:meth:`results_in`)
        self.outputs: set[int] = set()
        #: indices of the assistant messages that carry thinking, in order
        self.thinking: list[int] = []
        self.unit_starts: list[int] = []
        #: per unit: never dropped (see the module docstring)
        self.unit_keep: list[bool] = []
        #: per unit: holds a system message or pinned content (kept whatever the task is)
        self._fixed: list[bool] = []

    # -- building ----------------------------------------------------------------------------
    def extend(self, messages: Sequence[Message], start: int, stop: int | None = None) -> None:
        """Index ``messages[start:stop]``; ``messages[:start]`` must be what was indexed."""
        if start != self.n:
            raise ValueError(f"index holds {self.n} messages, cannot extend from {start}")
        stop = len(messages) if stop is None else stop
        call_names, call_at, result_at = self.call_names, self.call_at, self.result_at
        starts, keep, fixed, thinking = self.unit_starts, self.unit_keep, self._fixed, self.thinking
        # bound once: the loop runs over every message of a history (100,000 in one request)
        add_name, add_result, add_block = (
            self.names.append,
            self.results.append,
            self.result_blocks.append,
        )
        for i in range(start, stop):
            m = messages[i]
            role = m.role
            results = m.tool_results
            output = text_output(messages[i - 1], m, i) if i and role == "user" else None
            if output is not None and not results:
                self.outputs.add(i)
                results = (output,)
            names: tuple[str, ...] = ()
            if results:
                names = tuple([call_names.get(b.tool_call_id, "") for b in results])
                add_result(i)
                for k, r in enumerate(results):
                    add_block((i, k))
                    result_at[r.tool_call_id] = i
                self.ids[i] = tuple([r.tool_call_id for r in results])
            if (role == "tool" or i in self.outputs) and starts:
                owners = [call_at[b.tool_call_id] for b in results if b.tool_call_id in call_at]
                if owners and min(owners) < starts[-1]:  # answers an earlier unit's call: merge
                    u = self.unit_of(min(owners))
                    merged = any(keep[u:]), any(fixed[u:])
                    del starts[u + 1 :], keep[u + 1 :], fixed[u + 1 :]
                    keep[u], fixed[u] = merged
            else:  # a message that starts a unit (a history's opening tool message too)
                starts.append(i)
                keep.append(False)
                fixed.append(False)
                if role == "assistant":
                    for c in m.tool_calls:
                        call_names[c.id] = c.name
                        call_at[c.id] = i
                    if m.thinking:
                        thinking.append(i)
                elif role == "user":
                    if self.first_user is None:
                        self.first_user = i
                        keep[:] = [True] * len(keep)
                    if not results:
                        self.last_user = i
            if role == "system" or m.is_pinned:
                keep[-1] = fixed[-1] = True
            add_name(names)
        self.n = stop
        if self.task is None or self.n <= self.task + LOOKAHEAD + 1:
            # the task is settled once a few messages follow it (a client's example run ends)
            task = task_index(messages[: self.n])
            if task != self.task:  # found, or moved (a client's example run ended)
                self.task = task
                self._settle_keep()

    def _settle_keep(self) -> None:
        """Every unit's kept flag again: the opening (up to the first user message), the task's
        unit, system messages and pinned content."""
        opening = -1 if self.first_user is None else self.first_user
        task_unit = None if self.task is None else self.unit_of(self.task)
        for u, start in enumerate(self.unit_starts):
            self.unit_keep[u] = self._fixed[u] or start <= opening or u == task_unit

    # -- questions ---------------------------------------------------------------------------
    def droppable(
        self, messages: Sequence[Message] = (), rules: Sequence[CutRule] = ()
    ) -> list[int]:
        """The units that may leave the request, oldest first: not kept, not the newest (the
        model must see what it answers), and allowed by every one of ``rules`` (which read
        ``messages``, the indexed history)."""
        out: list[int] = []
        for u in range(len(self.unit_starts) - 1):
            if self.unit_keep[u]:
                continue
            if rules:
                start, end = self.unit_span(u)
                if not all(rule(messages, start, end) for rule in rules):
                    continue
            out.append(u)
        return out

    def spans(self) -> list[tuple[int, int]]:
        """Every unit as ``(start, end)`` message indices, in order."""
        return [self.unit_span(u) for u in range(len(self.unit_starts))]

    def unit_of(self, i: int) -> int:
        """The unit holding message ``i``."""
        return bisect_right(self.unit_starts, i) - 1

    def unit_span(self, u: int) -> tuple[int, int]:
        """``(start, end)`` message indices of unit ``u`` (end exclusive)."""
        end = self.unit_starts[u + 1] if u + 1 < len(self.unit_starts) else self.n
        return self.unit_starts[u], end

    def old_results(self, i: int, count: int) -> int:
        """How many of message ``i``'s ``count`` tool results (leading ones) are *not* among the
        ``keep_results`` newest."""
        if self.keep_results == 0:
            return count
        if len(self.result_blocks) < self.keep_results:
            return 0
        b_msg, b_ord = self.result_blocks[-self.keep_results]
        if i < b_msg:
            return count
        if i == b_msg:
            return b_ord
        return 0

    def results_in(self, i: int, m: Message) -> tuple[ToolResultBlock, ...]:
        """History message ``i``'s results (``m``: the message as the view holds it): its tool
        results, or its text when it is a command's output sent as a user message."""
        found = output_block(m, i) if i in self.outputs else None
        return m.tool_results if found is None else (found,)

    def thinking_is_old(self, i: int, *, keep_current_turn: bool) -> bool:
        """True when assistant message ``i``'s thinking may go: it is not among the
        ``keep_thinking`` newest with thinking, and (if ``keep_current_turn``) it comes before the
        last user message, i.e. it is not part of the tool loop in progress."""
        if keep_current_turn and i > self.last_user:
            return False
        keep = self.keep_thinking
        return keep == 0 or i not in self.thinking[-keep:]
