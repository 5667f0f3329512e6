"""What one conversation holds.

:class:`State` is the data of a conversation (its history, its log of edits, the view they give
and what is remembered of them); the modules beside this one are the steps that change it
(:mod:`.append`, :mod:`.commit`, :mod:`.lossless`, :mod:`.cuts`) and
:class:`~.conversation.Conversation` is the one object that runs them.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from .._log import Compaction, Edit, Mask, Repair, Source, WindowCut
from .._messages import Message
from .._policy import CacheRates, Ledger, bet_ok
from ..analysis.actions import ActionMemo
from ..layers.mask_plan import MaskPlanner
from ..layers.repair import RepairState
from ..layers.units import index_of

if TYPE_CHECKING:
    from .._budget import Budget
    from .._config import WardenConfig
    from .._sections import PolicyConfig

__all__ = ["Bet", "State", "Wait"]

#: What a conversation keeps per history message besides the message: its slots in the lists
#: and maps of :class:`State` (inputs, base, view, sources, tokens, names, positions...).
SLOT_BYTES = 240
#: What one remembered gain (of a mask or strip) costs.
GAIN_BYTES = 120
#: What one remembered tool action (of a mask plan) costs.
ACTION_BYTES = 200


@dataclass(frozen=True)
class Bet:
    """Whether an optional edit is a small enough bet (:func:`~contextwarden._policy.bet_ok`)
    as one call stood: the tokens it writes anyway, the bill before it, its whole history and
    its request (``raw``, ``total`` tokens), its prices."""

    new_tokens: int
    before: Ledger
    raw: int
    total: int
    rates: CacheRates
    policy: PolicyConfig

    @cached_property
    def ledger(self) -> Ledger:
        """The bill so far, this call included as it stands: settled when first asked (a
        call whose batch cannot pay never asks)."""
        return self.before.settle(self.raw, self.total, self.rates)

    def small(self, removed: int, suffix: int) -> bool:
        """Whether removing ``removed`` tokens from a view position with ``suffix`` tokens
        from there on is a small enough bet."""
        rates = self.rates
        loss = max(suffix - removed - self.new_tokens, 0) * rates.rewrite - removed * rates.read
        return not rates.caching or bet_ok(loss, self.ledger, self.policy)


@dataclass(frozen=True)
class Wait:
    """A call whose batch could not pay whatever its masks remove, kept until what it read
    while waiting is first needed (:func:`.lossless.settle`): its mask edit, what its strip
    removed (tokens, first view position), its suffix sums where a mask may start, its bet."""

    edit: Mask
    strip: tuple[int, int | None]
    suffix: dict[int, int]
    bet: Bet

    def small(self, removed: int, first: int) -> bool:
        """Whether removing ``removed`` tokens from view position ``first`` on was a small
        enough bet then."""
        return self.bet.small(removed, self.suffix[first])


class State:
    """The data of one conversation (see the module docstring). ``key`` names it in its
    warden's table (and store); ``counter_name`` is the token counter its counts were made
    with."""

    def __init__(self, key: str, counter_name: str, config: WardenConfig) -> None:
        self.key = key
        self.counter_name = counter_name
        self.config = config
        self.inputs: list[Message] = []  # the agent's messages, as given
        self.base: list[Message] = []  # the same, huge tool output cut on entry
        #: the history's index: tool names, calls and results, thinking, the last user message
        self.index = index_of((), keep_results=0, keep_thinking=0)
        # the paths and code names written outside tool results (the agent's text and calls,
        # the user's and system messages), each with the history position it was first in,
        # read up to ``typed_upto`` (see :func:`.render.masked`)
        self.typed: dict[str, int] = {}
        self.typed_upto = 0
        self.edits: list[Edit] = []
        self.view: list[Message] = []
        self.sources: list[Source] = []
        self.tokens: list[int] = []  # per view message
        self.input_tokens = 0
        self.mask_upto = -1
        self.strip_upto = -1
        self.touched = -1  # the last history position an edit changed or removed
        self.anchored = -1  # the last position an edit's inserted message stands before
        self.longest_reply = 0  # the room the longest assistant message took (reply_tokens)
        self.masked: dict[tuple[int, tuple[str, ...]], Message] = {}
        #: what the mask edits so far decided for each result they reached, by result id:
        #: ``mask``, ``keep`` (whole) or ``by:<id>`` (superseded by that result)
        self.fate: dict[str, str] = {}
        self.actions: ActionMemo = {}  # what each answered command does (mask plans)
        self.planner = MaskPlanner(quoting=True, memo=self.actions)
        #: the results the mask edits kept whole so far (fate ``keep``), in the fate's order
        self.kept: dict[str, None] = {}
        #: of those, the ones held whole only because masking them was too large a bet then
        #: (see :func:`.lossless._soon`): a later mask may release them
        self.held: set[str] = set()
        #: the superseded results no mask edit reached yet (fate none or ``keep``), and how
        #: far the planner's log of superseded entries was read
        self.open_superseded: dict[str, None] = {}
        self.superseded_read = (0, 0)
        #: the last mask edit planned, under what it read, and once counted what it removes
        #: and the first view position it changes (see :func:`.lossless._mask_draft`)
        self.mask_memo: tuple[tuple[object, ...], Mask, tuple[int, int | None] | None] | None = None
        #: what a mask may remove, message by message, as last read (see
        #: :func:`.lossless._reachable`): under what it read, and by view position
        self.reach_memo: tuple[tuple[object, ...], list[tuple[int, int]]] | None = None
        #: the view read so far for where an optional mask may start (see
        #: :func:`.lossless._candidates`): the log's length then, how far the results were
        #: read, the next view position, and what masking each removes
        self.soon: tuple[int, int, int, list[tuple[int, int, int]]] = (-1, -1, 0, [])
        self.stripped: dict[int, Message] = {}
        self.gains: dict[int, int] = {}  # what stripping each message removes
        self.most: dict[int, int] = {}  # the most masking each message removes (a bound)
        self.positions: dict[int, int] | None = None  # history position -> view position
        self.repair = RepairState()  # what the history so far leaves open (ids, calls)
        self.calls = 0
        self.last_time: float | None = None
        #: (history messages read, their fixed tokens, the task's position or -1): what
        #: :func:`.decide.fixed_tokens` counted so far
        self.fixed_seen: tuple[int, int, int] = (0, 0, -1)
        self.warned_tight = False
        #: the warden's budget, the longest reply, the output limit and the fixed part the
        #: last call fitted its budget to, and that budget (:meth:`.Budget.for_reply`)
        self.fitted: tuple[Budget, tuple[int, int | None, int], Budget] | None = None
        #: what the conversation was billed so far, and sending everything would have been
        self.ledger = Ledger()
        self.ledger_raw = 0  # the previous call's whole history, in tokens
        #: the reads paid since the last lossless edit on tokens a mask could have removed
        #: (see :func:`contextwarden._policy.batched`)
        self.idle = 0.0
        #: the calls that waited since, what they read not counted yet (see
        #: :func:`.lossless.settle`): :attr:`idle` is exact once they are
        self.waits: list[Wait] = []
        #: about how many bytes it keeps alive: its messages (:func:`held_bytes` each: the
        #: agent's, and the copies edits made), their slots, what it remembers of them
        self.bytes = 0
        self.lock = threading.Lock()
        #: the request's tokens as the view stands (tool definitions included), and the view
        #: position this call's new messages start at: figures of the call in progress
        self.total = 0
        self.new_start = 0

    def position(self, i: int) -> int | None:
        """Where history message ``i`` stands in the view (None when an edit removed it)."""
        if self.positions is None:
            self.positions = {s: p for p, s in enumerate(self.sources) if isinstance(s, int)}
        return self.positions.get(i)

    def open_results(self, upto: int) -> list[int]:
        """The history positions of the results up to ``upto`` a mask edit may still change:
        from the oldest result kept whole, or the first no mask edit reached, on (every older
        one was decided by an earlier edit)."""
        results, at = self.index.results, self.index.result_at
        reach = [*(at[r] for r in self.kept if r in at), self.mask_upto + 1]
        return results[bisect_left(results, min(reach)) : bisect_right(results, upto)]

    def undecided(self, start: int) -> list[int]:
        """The history positions before ``start`` of the results a mask edit may not have
        decided (kept whole, or after every mask's reach), in order: a mask reaches every
        result up to its ``upto``, so the others before ``start`` are masked or superseded."""
        results, at = self.index.results, self.index.result_at
        kept = {at[r] for r in self.kept if r in at and at[r] < start}
        return sorted(
            kept.union(results[bisect_right(results, self.mask_upto) : bisect_left(results, start)])
        )

    def reachable(self, upto: int) -> list[tuple[int, int]]:
        """``(history position, view position)`` of each message of :meth:`open_results` the
        view holds with a result no mask edit reached yet or kept whole."""
        fate, ids = self.fate, self.index.ids
        return [
            (pos, p)
            for pos in self.open_results(upto)
            if (p := self.position(pos)) is not None
            and any(fate.get(r) in (None, "keep") for r in ids[pos])
        ]

    def stable_prefix(self) -> int:
        """View messages before the first one a pending mask or strip would change."""
        frontier = max(self.mask_upto, self.strip_upto)
        results, thinking = self.index.results, self.index.thinking
        r, k = bisect_right(results, frontier), bisect_right(thinking, frontier)
        while r < len(results) or k < len(thinking):  # in history order: the first in the view
            if k == len(thinking) or (r < len(results) and results[r] < thinking[k]):
                i, r = results[r], r + 1
            else:
                i, k = thinking[k], k + 1
            p = self.position(i)
            if p is not None:
                return p
        return len(self.sources)

    def hidden(self, edit: Edit) -> tuple[Message, ...]:
        """The agent's original messages an edit takes out of the view."""
        out: list[Message] = []
        for start, end in edit.removed if isinstance(edit, Compaction | WindowCut | Repair) else ():
            out.extend(self.inputs[start:end])
        return tuple(out)
