"""One conversation: the agent's history, the log of edits made for it, and the view they give.

A :class:`Conversation` holds what the warden knows of one conversation (:class:`~.state.State`:
the messages the agent sent, the same messages as they entered the view, the log of
:class:`~contextwarden._log.Edit` records, and the view, which is
:func:`~contextwarden._log.apply` of the two). One :class:`~.state.Call` at a time extends it:

1. :meth:`Conversation.continuation` says whether a request continues this conversation: its
   messages equal the history's *by content* (where ``cache_control`` breakpoints sit, ids and
   timestamps do not count), or only a few of the newest messages were replaced (a reminder the
   client appends to its newest message and takes back on the next call, aider's files-in-chat
   turn that moves after the newest reply) and no edit reached them. A request that rewrote more,
   or what an edit stands on (the agent rewound or edited its history), does not continue it.
2. :meth:`Conversation.rebuilt` makes the same conversation from the request's own messages
   (so the client's breakpoints stay where it put them) and the same log; :meth:`restore` does
   it from a stored :meth:`record` (another worker, a restart).
3. :meth:`Conversation.prepare` appends the new messages (:mod:`.append`) and makes the
   policy's lossless edits (:mod:`.lossless`); it tells whether a compaction must run now
   (:mod:`.decide`); :func:`.cuts.record_compaction` records its result and :func:`.cuts.window_cut`
   drops whole oldest units when no summary is made (:mod:`.cuts`).

Every step plans its edit as a value and only :func:`.commit.commit` writes the log. All of
it runs under the conversation's lock, one call at a time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from .._log import Compaction, Edit, Repair, WindowCut, edit_from_dict, make_ref
from .._messages import Message
from .._policy import Ledger
from .append import append
from .call import Call, Outcome
from .commit import commit
from .cuts import window_cut
from .decide import Due, edit_reason, fixed_tokens
from .lossless import lossless_edit, settle
from .state import State

__all__ = ["Call", "Conversation", "Diverged", "split_tail"]

#: The version of :meth:`Conversation.record`'s layout.
RECORD_VERSION = 2

#: How many of its newest messages a request may replace and still continue a conversation:
#: clients rewrite the end of a request each call (aider moves its files-in-chat turn after the
#: newest reply, a reminder is appended to the newest message and taken back).
REWIND_MAX = 4


def _may_rewind(n: int, shared: int, touched: int, anchored: int) -> bool:
    """Whether a request that shares ``shared`` of a history's ``n`` messages continues it: it
    replaces no more than :data:`REWIND_MAX` of the newest, and nothing an edit stands on."""
    return n - shared <= REWIND_MAX and shared > touched and shared >= anchored


class Conversation(State):
    """One conversation's state and the steps that extend it (see the module docstring)."""

    # -- continuity ----------------------------------------------------------------------------
    def continuation(self, messages: Sequence[Message]) -> int | None:
        """How many leading messages of ``messages`` this conversation continues from, or None
        when it does not continue (see the module docstring). ``len(self.inputs)`` means the
        request holds the whole history, by content; less means the messages after that were
        replaced (a taken-back reminder), which no edit reached."""
        n = len(self.inputs)
        inputs = self.inputs
        shared = 0
        limit = min(n, len(messages))
        while shared < limit:
            a, b = messages[shared], inputs[shared]
            if a is not b and a.fingerprint != b.fingerprint:
                break
            shared += 1
        if shared == n:
            return n
        return shared if _may_rewind(n, shared, self.touched, self.anchored) else None

    def exact(self, messages: Sequence[Message]) -> bool:
        """True when ``messages`` begins with the history as given (the same values, metadata
        and breakpoints included): the conversation goes on without being rebuilt."""
        n = len(self.inputs)
        # list equality compares the same objects without calling __eq__: microseconds for an
        # agent's own list; equal messages rebuilt from provider dicts match too
        return len(messages) >= n and list(messages[:n]) == self.inputs

    def rebuilt(self, call: Call, upto: int) -> Conversation:
        """This conversation made again from ``call.messages[:upto]`` (equal by content to its
        history there) and the same log; the call's state is left untouched."""
        settle(self, call.ctx)  # what the calls that waited read, counted while it holds
        return self._replay(call, upto, self.edits, self.calls, self.last_time)._bill(self.bill())

    def _replay(
        self,
        call: Call,
        upto: int,
        edits: Sequence[Edit],
        calls: int,
        last_time: float | None,
    ) -> Conversation:
        fresh = Conversation(self.key, self.counter_name, self.config)
        fresh.lock = self.lock
        scratch = replace(call, out=Outcome())
        append(fresh, scratch, 0, upto)
        again = [(e.removed, e.inserted) for e in fresh.edits if isinstance(e, Repair)]
        before = [(e.removed, e.inserted) for e in edits if isinstance(e, Repair)]
        if again != before:
            raise Diverged  # the same content repaired differently: cannot happen, but never guess
        fresh.edits, fresh.mask_upto, fresh.strip_upto = [], -1, -1
        fresh.touched = fresh.anchored = -1
        commit(fresh, scratch, list(edits), replay=True)
        fresh.calls, fresh.last_time = calls, last_time
        return fresh

    # -- persistence ---------------------------------------------------------------------------
    def record(self) -> dict[str, Any]:
        """What another process needs to continue this conversation: the content hashes of
        its history, its log and its counters (JSON-ready)."""
        return {
            "v": RECORD_VERSION,
            "key": self.key,
            "counter": self.counter_name,
            "touched": self.touched,
            "anchored": self.anchored,
            "history": [m.fingerprint for m in self.inputs],
            "edits": [e.as_dict() for e in self.edits],
            "calls": self.calls,
            "last_time": self.last_time,
            **self.bill(),
        }

    def bill(self) -> dict[str, Any]:
        """What the policy's bets read besides the log (JSON-ready): the bill so far (the
        ledger and the previous call's whole history) and the reads waited since the last
        lossless edit, a few numbers whatever the conversation's length (the record's
        header is written on every call). Without them a conversation continued elsewhere
        would size its bets as if it had just begun. The results held whole only while
        masking them was too large a bet are read from the log (each mask's ``start``)."""
        ledger = self.ledger
        return {
            "ledger": [ledger.raw, ledger.ours, ledger.raw_cached, ledger.cached, self.ledger_raw],
            # where the last call's edits made its request stop being the cached one: the
            # next call bills it from there
            "cut_from": ledger.cut_from,
            "idle": self.idle,
        }

    def _bill(self, bill: Mapping[str, Any]) -> Conversation:
        """This conversation with the bill of :meth:`bill` (a record's; an older record
        without one: an empty bill, whose bets wait until it has grown again)."""
        raw, ours, raw_cached, cached, last = bill.get("ledger") or (0.0, 0.0, 0, 0, 0)
        cut = bill.get("cut_from")
        self.ledger = Ledger(
            float(raw), float(ours), int(raw_cached), int(cached), None if cut is None else int(cut)
        )
        self.ledger_raw = int(last)
        self.idle = float(bill.get("idle", 0.0))
        return self

    @staticmethod
    def record_continues(record: Mapping[str, Any], messages: Sequence[Message]) -> int | None:
        """:meth:`continuation` for a stored record."""
        history: list[str] = record["history"]
        n = len(history)
        shared = 0
        limit = min(n, len(messages))
        while shared < limit and messages[shared].fingerprint == history[shared]:
            shared += 1
        if shared == n:
            return n
        touched, anchored = int(record["touched"]), int(record["anchored"])
        return shared if _may_rewind(n, shared, touched, anchored) else None

    def restore(self, call: Call, record: Mapping[str, Any], upto: int) -> Conversation:
        """The conversation ``record`` describes, made from ``call.messages[:upto]``."""
        edits = [edit_from_dict(raw) for raw in record["edits"]]
        again = self._replay(call, upto, edits, int(record["calls"]), record.get("last_time"))
        return again._bill(record)

    # -- the call's steps ----------------------------------------------------------------------
    def prepare(self, call: Call, now: float | None) -> tuple[Call, Due]:
        """Append the new messages, then make the policy's lossless edits: the call with the
        reserve the next reply needs (from the replies so far), and whether a compaction (or a
        window cut) is due."""
        self.new_start = len(self.view)
        if self.calls:  # bill the previous call, as it was sent
            raw, sent = self.ledger_raw, sum(self.tokens) + call.overhead
            self.ledger = self.ledger.settle(raw, sent, call.rates)
        append(self, call, len(self.inputs), len(call.messages))
        self.ledger_raw = self.input_tokens + call.overhead
        budget = call.ctx.budget
        if budget is not None:  # the reserve the next reply needs, and the fixed part's room
            fixed = fixed_tokens(self, call)
            fit = (self.longest_reply, call.max_tokens, fixed)
            if self.fitted is not None and self.fitted[0] is budget and self.fitted[1] == fit:
                budget = self.fitted[2]  # the warden's budget and the replies as last call
            else:
                given = budget
                budget = budget.for_reply(self.longest_reply, call.max_tokens, fixed=fixed)
                self.fitted = (given, fit, budget)
            if budget is not call.ctx.budget:
                call = replace(call, ctx=replace(call.ctx, budget=budget))
        due = edit_reason(self, call, now)
        lossless_edit(self, call, due.reason)
        plan = due.plan
        if plan is None or budget is None or not due.must:
            return call, due
        # the lossless edits come first; then the cut the model chose, down to its aim (not
        # just under the trigger), so the next calls only append instead of trimming a little
        # on every call
        if plan.action == "compact" or not self.config.compaction.enabled:
            return call, replace(due, compact=self.total > plan.aim)
        if self.total > budget.limit:  # a summary is recent: whole oldest units go
            window_cut(self, call)
            return call, due
        return call, replace(due, deferred=True)

    # -- questions -----------------------------------------------------------------------------
    def recall(self, ref: str) -> tuple[Message, ...] | None:
        """The agent's original messages behind ``ref`` (a ``cw:`` reference a marker or a
        summary of this conversation shows), verbatim; ``None`` if it names none of them."""
        for edit in reversed(self.edits):
            if isinstance(edit, Compaction | WindowCut) and edit.ref == ref and edit.removed:
                return self.hidden(edit)
        for s in (*self.index.results, *self.index.thinking):  # a masked result, stripped reasoning
            if make_ref((self.inputs[s],)) == ref:
                return (self.inputs[s],)
        for edit in reversed(self.edits):  # a step of a compaction its summary names
            if isinstance(edit, Compaction) and edit.summary and ref in edit.summary:
                return self.hidden(edit)
        return None


def split_tail(messages: Sequence[Message]) -> tuple[Sequence[Message], tuple[Message, ...]]:
    """``(history, tail)``: the system messages with content after the last other message are
    the request's tail (a per-call reminder); a request of system messages only has none (an
    empty one stays in the history, where the repair deals with it)."""
    end = len(messages)
    while end > 0 and messages[end - 1].role == "system" and messages[end - 1].char_count:
        end -= 1
    if end == 0 or end == len(messages):
        return messages, ()
    return messages[:end], tuple(messages[end:])


class Diverged(Exception):
    """A conversation made again from its history repaired it differently from its log: the
    caller starts a new log instead."""
