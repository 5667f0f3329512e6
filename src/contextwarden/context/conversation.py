"""One conversation: the agent's history, the log of edits made for it, and the view they give.

A :class:`Conversation` holds what the warden knows of one conversation: the messages the agent
sent (as given), the same messages as they entered the view (a huge tool output cut once), the
log of :class:`~contextwarden._log.Edit` records, and the view, which is
:func:`~contextwarden._log.apply` of the two. One :class:`Call` at a time extends it:

1. :meth:`Conversation.continuation` says whether a request continues this conversation: its
   messages equal the history's *by content* (where ``cache_control`` breakpoints sit, ids and
   timestamps do not count), or only a few of the newest messages were replaced (a reminder the
   client appends to its newest message and takes back on the next call, aider's files-in-chat
   turn that moves after the newest reply) and no edit reached them. A request that rewrote more,
   or what an edit stands on (the agent rewound or edited its history), does not continue it.
2. :meth:`Conversation.rebuilt` makes the same conversation from the request's own messages
   (so the client's breakpoints stay where it put them) and the same log; :meth:`restore` does
   it from a stored :meth:`record` (another worker, a restart).
3. :meth:`Conversation.prepare` appends the new messages and makes the policy's lossless edits
   (mask, strip thinking); :meth:`compaction_due` tells whether a compaction must run now
   (over the trigger, and not within the cool-down after the last one unless over the hard
   limit); :meth:`record_compaction` records its result; :meth:`window_cut` drops whole oldest
   units when no summary is made.

All of it runs under the conversation's lock, one call at a time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .._budget import reply_tokens
from .._config import WardenConfig
from .._events import CompactionPlan, CompactResult, Event, emit
from .._log import Edit, EditReason, Source, apply
from .._messages import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    held_bytes,
)
from .._policy import (
    CacheRates,
    Inputs,
    Ledger,
    Plan,
    calls_until_cut,
    decide,
    edit_pays,
    payable_calls,
)
from .._task import strip_injected, task_index
from ..layers.base import LayerContext
from ..layers.mask import ActionMemo, MaskPlan, mask_message, mask_plan, prints_file
from ..layers.repair import RepairState, repair_appended, unchanged_next
from ..layers.thinking import strip_message
from ..layers.truncate import needs_truncation, truncate_message
from ..layers.units import HistoryIndex
from ..strategies.base import compaction_target, make_ref
from ..summarizers._mentions import words_of

__all__ = ["Call", "Conversation", "Diverged", "split_tail"]

#: The fates (:attr:`Conversation.fate`) that leave a result whole.
_WHOLE = frozenset({"keep", "whole"})

#: The version of :meth:`Conversation.record`'s layout.
RECORD_VERSION = 1
#: What a conversation keeps per history message besides the message: its slots in the lists
#: and maps of :class:`Conversation` (inputs, base, view, sources, tokens, names, positions...).
SLOT_BYTES = 240
#: Calls after which the growth per call is measured well enough to warn that the room is tight.
MEASURED_CALLS = 3
#: What one remembered gain (of a mask or strip) costs.
GAIN_BYTES = 120
#: What one remembered tool action (of a mask plan) costs.
ACTION_BYTES = 200


@dataclass
class Call:
    """One call's working state: the request's history (``messages``, without the per-call
    ``tail``), how it is counted and budgeted, and what the call did."""

    messages: Sequence[Message]
    ctx: LayerContext
    conv: Conversation
    overhead: int
    rates: CacheRates
    tail: tuple[Message, ...] = ()
    tail_tokens: int = 0
    total: int = 0
    tokens_before: int = 0
    new_start: int = 0
    must_compact: bool = False
    #: over the trigger and within the hard limit, cutting now would not pay: the request
    #: waits for the hard limit (the final guard leaves it whole up to the limit)
    deferred: bool = False
    focus: str | None = None
    summarizer: Any = None
    #: the summarizer calls a compaction would pay for now (0 with the embedded summarizer)
    summary_calls: int = 0
    #: the output limit the request gives the provider (its ``max_tokens``), if any
    max_tokens: int | None = None
    events: list[Event] = field(default_factory=list)
    compactor_events: list[Event] = field(default_factory=list)
    edits: list[Edit] = field(default_factory=list)
    elided: dict[str, tuple[Message, ...]] = field(default_factory=dict)
    compaction: CompactResult | None = None


#: How many of its newest messages a request may replace and still continue a conversation:
#: clients rewrite the end of a request each call (aider moves its files-in-chat turn after the
#: newest reply, a reminder is appended to the newest message and taken back).
REWIND_MAX = 4


def _may_rewind(n: int, shared: int, touched: int, anchored: int) -> bool:
    """Whether a request that shares ``shared`` of a history's ``n`` messages continues it: it
    replaces no more than :data:`REWIND_MAX` of the newest, and nothing an edit stands on."""
    return n - shared <= REWIND_MAX and shared > touched and shared >= anchored


def _reach(edit: Edit) -> tuple[int, int]:
    """``(touched, anchored)``: the last history position ``edit`` changes or removes, and the
    last position a message it inserts is anchored before (-1 for none)."""
    touched = max([edit.upto, *(p for p, _, _ in edit.superseded)])
    for _, end in edit.removed:
        touched = max(touched, end - 1)
    for p, _ in edit.replaced:
        touched = max(touched, p)
    anchored = max((a for a, _ in edit.inserted), default=-1)
    if edit.kind == "repair":  # synthetic results close calls of the message before the anchor
        touched = max(touched, anchored)
    return touched, anchored


class Conversation:
    """One conversation's state (see the module docstring). ``key`` names it in its warden's
    table (and store); ``counter_name`` is the token counter its counts were made with."""

    def __init__(self, key: str, counter_name: str, config: WardenConfig) -> None:
        self.key = key
        self.counter_name = counter_name
        self.config = config
        self.inputs: list[Message] = []  # the agent's messages, as given
        self.base: list[Message] = []  # the same, huge tool output cut on entry
        self.names: list[tuple[str, ...]] = []  # tool names of each message's results
        self.call_names: dict[str, str] = {}
        self.call_at: dict[str, int] = {}  # a call's id in the view -> its history position
        # the paths and code names written outside tool results (the agent's text and calls,
        # the user's and system messages), each with the history position it was first in
        self.typed: dict[str, int] = {}
        self.edits: list[Edit] = []
        self.view: list[Message] = []
        self.sources: list[Source] = []
        self.tokens: list[int] = []  # per view message
        self.input_tokens = 0
        self.mask_upto = -1
        self.strip_upto = -1
        self.touched = -1  # the last history position an edit changed or removed
        self.anchored = -1  # the last position an edit's inserted message stands before
        self.results: list[int] = []  # history positions holding tool results, in order
        self.longest_reply = 0  # the room the longest assistant message took (reply_tokens)
        self.thinking: list[int] = []  # history positions of assistant messages with thinking
        self.last_user = -1
        self.masked: dict[tuple[int, tuple[str, ...]], Message] = {}
        #: what the mask edits so far decided for each result they reached, by result id:
        #: ``mask``, ``keep`` (whole) or ``by:<id>`` (superseded by that result); see _marked
        self.fate: dict[str, str] = {}
        self._plan: tuple[int, MaskPlan] | None = None
        self._actions: ActionMemo = {}  # what each answered command does (mask plans)
        self.stripped: dict[int, Message] = {}
        self.gains: dict[tuple[str, int], int] = {}
        self.positions: dict[int, int] | None = None  # history position -> view position
        self.repair = RepairState()  # what the history so far leaves open (ids, calls)
        self.calls = 0
        self.last_time: float | None = None
        #: the request's tokens right after the last compaction (the cool-down starts there)
        self.compacted_at: int | None = None
        #: (history messages read, their fixed tokens, the task's position or -1): _fixed
        self._fixed_seen: tuple[int, int, int] = (0, 0, -1)
        self.warned_tight = False
        #: what the conversation was billed so far, and against sending everything
        self.ledger = Ledger()
        self.ledger_raw = 0  # the previous call's whole history, in tokens
        #: about how many bytes it keeps alive: its messages (:func:`held_bytes` each: the
        #: agent's, and the copies edits made), their slots, what it remembers of them
        self.bytes = 0
        self.lock = threading.Lock()

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
        return self._replay(call, upto, self.edits, self.calls, self.last_time, self.compacted_at)

    def _replay(
        self,
        call: Call,
        upto: int,
        edits: Sequence[Edit],
        calls: int,
        last_time: float | None,
        compacted_at: int | None,
    ) -> Conversation:
        fresh = Conversation(self.key, self.counter_name, self.config)
        fresh.lock = self.lock
        scratch = replace(call, conv=fresh, events=[], edits=[], elided={})
        fresh._append(scratch, 0, upto)
        again = [(e.removed, e.inserted) for e in fresh.edits]
        before = [(e.removed, e.inserted) for e in edits if e.kind == "repair"]
        if again != before:
            raise Diverged  # the same content repaired differently: cannot happen, but never guess
        fresh.edits, fresh.mask_upto, fresh.strip_upto = [], -1, -1
        fresh.touched = fresh.anchored = -1
        fresh._commit(scratch, list(edits), replay=True)
        fresh.calls, fresh.last_time, fresh.compacted_at = calls, last_time, compacted_at
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
            "compacted_at": self.compacted_at,
        }

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
        edits = [Edit.from_dict(raw) for raw in record["edits"]]
        compacted = record.get("compacted_at")
        fresh = self._replay(
            call,
            upto,
            edits,
            int(record["calls"]),
            record.get("last_time"),
            int(compacted) if compacted is not None else None,
        )
        return fresh

    # -- appending -----------------------------------------------------------------------------
    def prepare(self, call: Call, now: float | None) -> None:
        """Append the new messages, then make the policy's lossless edits; sets
        ``call.must_compact`` when a compaction (or a window cut) is due."""
        ctx = call.ctx
        call.new_start = len(self.view)
        if self.calls:  # bill the previous call, as it was sent
            self.ledger = self.ledger.settle(
                self.ledger_raw, sum(self.tokens) + call.overhead, call.rates
            )
        self._append(call, len(self.inputs), len(call.messages))
        self.ledger_raw = call.tokens_before
        budget = ctx.budget
        if budget is not None:  # the reserve the next reply needs, and the fixed part's room
            budget = budget.for_reply(self.longest_reply, call.max_tokens)
            budget = budget.with_fixed(self._fixed(call))
            if budget is not ctx.budget:
                ctx = call.ctx = replace(ctx, budget=budget)
        cold = (
            call.rates.caching
            and call.rates.ttl_s is not None
            and self.last_time is not None
            and (time.time() if now is None else now) - self.last_time > call.rates.ttl_s
        )
        plan = self._decide(call, cold) if budget is not None else None
        must = plan is not None and plan.action in ("compact", "window_cut")
        call.deferred = plan is not None and plan.action == "wait"
        reason: EditReason = "must" if must else ("free" if cold else "pays")
        if not call.rates.caching and not must:
            reason = "immediate"
        self._lossless_edit(call, reason)
        if plan is None or budget is None or not must:
            return
        # the lossless edits come first; then the cut the model chose, down to its aim (not
        # just under the trigger), so the next calls only append instead of trimming a little
        # on every call
        if plan.action == "compact" or not self.config.compaction.enabled:
            call.must_compact = call.total > plan.aim
        elif call.total > budget.limit:  # a summary is recent: whole oldest units go
            self.window_cut(call)
        else:
            call.deferred = True

    def _fixed(self, call: Call) -> int:
        """The tokens of the request no edit removes: tools, system messages, pinned messages
        and the user's task (counted as they arrive, once)."""
        count = call.ctx.counter.count_message
        n, tokens, task = self._fixed_seen
        for i in range(n, len(self.base)):
            m = self.base[i]
            if m.role == "system" or m.is_pinned:
                tokens += count(m)
        if task < 0 and self.last_user >= 0:
            found = task_index(self.base)
            if found is not None:
                m = self.base[found]
                task = found
                tokens += 0 if m.role == "system" or m.is_pinned else count(m)
        self._fixed_seen = (len(self.base), tokens, task)
        return tokens + call.overhead

    def _inputs(self, call: Call, total: int, cold: bool = False, *, bet: bool = False) -> Inputs:
        """What the cost model decides from, for a request of ``total`` tokens now."""
        budget = call.ctx.budget
        assert budget is not None
        last = max((e.call for e in self.edits if e.kind == "compaction"), default=None)
        lead = call.overhead  # the leading system messages stay, and stay cached
        for m, t in zip(self.view, self.tokens, strict=False):
            if m.role != "system":
                break
            lead += t
        return Inputs(
            budget,
            total,
            self._pace(call),
            self.calls,
            call.rates,
            new_tokens=sum(self.tokens[call.new_start :]),
            summary_cost=float(call.summary_calls),
            since_summary=None if last is None else self.calls - last,
            cold=cold,
            lead=lead,
            ledger=self.ledger.settle(call.tokens_before, total, call.rates) if bet else None,
        )

    def _decide(self, call: Call, cold: bool) -> Plan:
        """The cost model's plan for the request now; warns once when the fixed part leaves too
        little room for a summary to buy its calls."""
        budget = call.ctx.budget
        assert budget is not None
        if call.total <= budget.trigger:
            return Plan("none", budget.target, "under the trigger")
        policy = self.config.policy
        plan = decide(
            self._inputs(call, call.total, cold, bet=True),
            policy,
            summarises=self.config.compaction.enabled,
        )
        # said once growth is measured: a first call's whole history is not growth per call
        if plan.tight and not self.warned_tight and self.calls >= MEASURED_CALLS:
            self.warned_tight = True
            emit(
                call.events,
                Event(
                    "warning",
                    "policy",
                    tokens_before=budget.fixed,
                    tokens_after=budget.limit,
                    detail=f"between the trigger ({budget.trigger:,} tokens) and the target "
                    f"({budget.target:,}), in the room the fixed part (system prompt, tools, "
                    f"task, pins: {budget.fixed:,}) leaves under the limit ({budget.limit:,}), "
                    f"a summary buys fewer than {policy.summary_spacing} calls at "
                    f"{self._pace(call):,.0f} tokens a call: summaries are spaced that far "
                    "apart, and whole oldest turns are cut between them",
                    data={"fixed": budget.fixed, "limit": budget.limit, "tight": True},
                ),
            )
        return plan

    def _append(self, call: Call, start: int, stop: int) -> None:
        ctx = call.ctx
        msgs = call.messages
        count = ctx.counter.count_message
        cfg = self.config.truncate
        for i in range(start, stop):
            m = msgs[i]
            self.inputs.append(m)
            self.bytes += held_bytes(m) + SLOT_BYTES
            tokens = count(m)
            self.input_tokens += tokens
            names: list[str] = []
            thinking = False
            for b in m.content:
                if isinstance(b, ToolCallBlock):
                    self.call_names[b.id] = b.name
                elif isinstance(b, ToolResultBlock):
                    names.append(self.call_names.get(b.tool_call_id, ""))
                elif isinstance(b, ThinkingBlock):
                    thinking = True
            role = m.role
            if names:
                self.names.append(tuple(names))
                self.results.append(i)
            else:
                self.names.append(())
                if role == "user":
                    self.last_user = i
            if role == "assistant":
                if thinking:
                    self.thinking.append(i)
                self.longest_reply = max(self.longest_reply, reply_tokens(tokens, m.usage))
            entry = m if unchanged_next(self.repair, m) else self._repair(call, i, m)
            if entry is not None and entry.role == "tool":
                entry = self._answered(call, i, entry)
            if entry is None:  # a repair took it out: it stays in the history, not the view
                self.base.append(m)
                self._note_typed(i, m)
                continue
            if (
                needs_truncation(entry, cfg) or _oversized_client_block(entry, cfg.max_chars)
            ) and not entry.is_pinned:
                entry, events = truncate_message(entry, tuple(names), ctx)
                for e in events:
                    emit(call.events, replace(e, index=len(self.view)))
            if entry is not m:  # a copy (repaired, cut): kept beside the agent's message
                self.bytes += held_bytes(entry)
            for b in entry.tool_calls:
                self.call_at[b.id] = i
            self.base.append(entry)
            self._note_typed(i, entry)
            if self.positions is not None:
                self.positions[i] = len(self.view)
            self.view.append(entry)
            self.sources.append(i)
            self.tokens.append(tokens if entry is m else count(entry))
        call.total = sum(self.tokens) + call.overhead
        call.tokens_before = self.input_tokens + call.overhead

    def _repair(self, call: Call, i: int, m: Message) -> Message | None:
        """History message ``i`` as it enters the view, repaired (see :mod:`..layers.repair`):
        the same object when nothing is wrong, a fixed copy (ids made unique, an empty user
        message given a placeholder), or None when it is taken out (a result without its call).
        Synthetic results closing calls left unanswered before it are recorded as a ``repair``
        edit and put in the view first. Raises FormatError under ``config.strict``."""
        out, events, _ = repair_appended(
            call.messages, i, self.repair, strict=self.config.strict, stop=i + 1
        )
        if not events:
            return m
        call.events.extend(events)
        if m.role == "tool" and len(out) <= 1 and all(x.role == "tool" for x in out):
            # a tool message kept as one (or dropped) closes no turn: out is its own repair
            synthetic: list[Message] = []
            entry = out[0] if out else None
        else:  # synthetic results (tool messages) before the message itself, if it stays
            # a call an edit already took out of the view (a window cut) needs no result
            synthetic = [
                x
                for x in out
                if x.role == "tool" and all(self._in_view(r.tool_call_id) for r in x.tool_results)
            ]
            rest = [x for x in out if x.role != "tool"]
            entry = rest[0] if rest else None
        if synthetic or entry is None:
            number = len(self.edits)
            edit = Edit(
                "repair",
                "must",
                removed=((i, i + 1),) if entry is None else (),
                inserted=tuple((i, s) for s in synthetic),
                call=self.calls,
            )
            self._note(edit)
            call.edits.append(edit)
            count = call.ctx.counter.count_message
            for k, s in enumerate(synthetic):
                self.view.append(s)
                self.sources.append((number, k))
                self.tokens.append(count(s))
        return entry

    def _answered(self, call: Call, i: int, entry: Message) -> Message | None:
        """Tool message ``entry`` (history ``i``) without the results for calls an edit already
        took out of the view (a compaction or window cut made while they were pending): a
        result needs its call in the same request. What else it carries stays, as a user turn;
        with nothing left it leaves the view (a ``repair`` edit)."""
        gone = [
            b
            for b in entry.content
            if isinstance(b, ToolResultBlock) and not self._in_view(b.tool_call_id)
        ]
        if not gone:
            return entry
        rest = tuple(b for b in entry.content if b not in gone)
        emit(
            call.events,
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
        edit = Edit("repair", "must", removed=((i, i + 1),), call=self.calls)
        self._note(edit)
        call.edits.append(edit)
        return None

    def _in_view(self, call_id: str) -> bool:
        at = self.call_at.get(call_id)
        return at is None or self.position(at) is not None

    # -- lossless edits: mask and strip, batched -----------------------------------------------
    def mask(self, ctx: LayerContext, i: int, m: Message) -> Message:
        """History message ``i`` (``m`` as it entered the view) with its tool results as the
        mask edits so far decided (:attr:`fate`)."""
        return self._masked(ctx, i, m, self.fate)

    def _masked(self, ctx: LayerContext, i: int, m: Message, fate: Mapping[str, str]) -> Message:
        """History message ``i`` with its tool results as ``fate`` says: masked, kept whole,
        or reduced to the superseded marker (a result ``fate`` does not name stays whole)."""
        names = self.names[i]
        if not names or m.is_pinned or not self.config.mask.enabled:
            return m
        key = tuple(fate.get(r.tool_call_id, "whole") for r in m.tool_results)
        done = self.masked.get((i, key))
        if done is None:
            # the marker names the reference the original is kept under (elided)
            ref = make_ref((self.inputs[i],))
            whole = frozenset(
                r.tool_call_id for r, f in zip(m.tool_results, key, strict=True) if f in _WHOLE
            )
            by = {
                r.tool_call_id: f[3:]
                for r, f in zip(m.tool_results, key, strict=True)
                if f.startswith("by:")
            }
            plan = MaskPlan(whole, by)
            held, reads = self._call_words(m) | self._typed_before(i, m), self._reads(i, m)
            done = mask_message(
                m, (len(names), names), ctx, ref, plan=plan, held=held, reads=reads
            )[0]
            if done is not m:
                self.bytes += held_bytes(done)
            self.masked[(i, key)] = done
        return done

    def _marked(self, fate: Mapping[str, str], edit: Edit) -> dict[str, str]:
        """``fate`` once mask edit ``edit`` is made: its superseded results get the marker; the
        other results at or before its ``upto`` are masked unless it keeps them (a result masked
        or superseded before stays so)."""
        out = dict(fate)
        for _, rid, by in edit.superseded:
            if out.get(rid) in (None, "keep"):
                out[rid] = "by:" + by
        keep = set(edit.keep)
        for pos in self.results:
            if pos > edit.upto:
                break
            for r in self.base[pos].tool_results:
                if out.get(r.tool_call_id) in (None, "keep"):
                    out[r.tool_call_id] = "keep" if r.tool_call_id in keep else "mask"
        return out

    def _mask_plan(self) -> MaskPlan:
        """:func:`~..layers.mask.mask_plan` of the history so far (computed once per length)."""
        n = len(self.base)
        if self._plan is None or self._plan[0] != n:
            known = len(self._actions)
            self._plan = (n, mask_plan(self.base, quoting=True, memo=self._actions))
            self.bytes += ACTION_BYTES * (len(self._actions) - known)
        return self._plan[1]

    def _mask_edit(
        self, ctx: LayerContext, reason: EditReason, upto: int
    ) -> tuple[Edit, int, int | None]:
        """The mask edit reaching ``upto`` (with its plan: the latest reads of the files the
        agent works on kept whole, newest first, within ``mask.protect_ratio`` of the window;
        superseded results reduced to a marker wherever they are), the tokens it removes and
        the first view position it changes."""
        plan = self._mask_plan() if self.config.mask.plan else MaskPlan(frozenset(), {})
        where = {r.tool_call_id: pos for pos in self.results for r in self.base[pos].tool_results}
        budget = ctx.budget
        room = int(self.config.mask.protect_ratio * budget.window) if budget is not None else 0
        keep: list[str] = []
        # results kept whole before stay so (releasing one rewrites the request from there),
        # unless over the trigger, where the request is rewritten anyway: newest first there
        kept = [] if reason == "must" else [r for r, f in self.fate.items() if f == "keep"]
        fresh = sorted(plan.protected - set(kept), key=lambda r: -where.get(r, -1))
        for rid in [*sorted(kept, key=lambda r: -where.get(r, -1)), *fresh]:
            pos = where.get(rid)
            if pos is None or pos > upto or self.fate.get(rid) not in (None, "keep"):
                continue
            p = self.position(pos)
            if p is None:
                continue
            size = self.tokens[p]
            if size > room:
                continue
            room -= size
            keep.append(rid)
        superseded = tuple(
            sorted(
                (where[rid], rid, by)
                for rid, by in plan.superseded.items()
                if self.config.mask.supersede
                and rid in where
                and self.fate.get(rid) in (None, "keep")
                and self.position(where[rid]) is not None
            )
        )
        edit = Edit(
            "mask",
            reason,
            upto=upto,
            call=self.calls,
            keep=tuple(sorted(keep)),
            superseded=superseded,
        )
        fate = self._marked(self.fate, edit)
        changed = sorted(
            {where[rid] for rid, f in fate.items() if f != self.fate.get(rid) and rid in where}
        )
        removed = 0
        first: int | None = None
        count = ctx.counter.count_message
        for pos in changed:
            p = self.position(pos)
            if p is None:
                continue
            now = self.view[p]
            after = self._masked(ctx, pos, self.base[pos], fate)
            if pos <= self.strip_upto:
                after = self.strip(ctx, pos, after)
            gain = self.tokens[p] - count(after) if after is not now else 0
            if gain != 0:
                removed += gain
                first = p if first is None else min(first, p)
        return edit, removed, first

    def _call_words(self, m: Message) -> frozenset[str]:
        """The paths and code names of the calls ``m``'s results answer (their arguments stay
        in the request: a mask's names line need not repeat them)."""

        out: set[str] = set()
        for c in self._answered_calls(m):
            paths, names = words_of(c.arguments)
            out.update(paths)
            out.update(names)
        return frozenset(out)

    def _answered_calls(self, m: Message) -> Iterator[ToolCallBlock]:
        """The calls ``m``'s results answer, as the history holds them."""
        for r in m.tool_results:
            at = self.call_at.get(r.tool_call_id)
            if at is not None:
                yield from (c for c in self.base[at].tool_calls if c.id == r.tool_call_id)

    def _note_typed(self, i: int, m: Message) -> None:
        """Record the paths and code names history message ``i`` writes outside tool results."""
        if m.role == "tool":
            return
        for text in (m.text, *(c.arguments for c in m.tool_calls)):
            if text:
                paths, names = words_of(text)
                for w in (*paths, *names):
                    self.typed.setdefault(w, i)

    def _typed_before(self, i: int, m: Message) -> frozenset[str]:
        """The names of ``m``'s results that a message before position ``i`` outside the tool
        results holds: the agent wrote them (or the user did), so the request holds them
        while that message stands, and a summary of it lists what the agent wrote first."""
        out: set[str] = set()
        for r in m.tool_results:
            paths, names = words_of(r.text)
            out.update(w for w in (*paths, *names) if self.typed.get(w, i) < i)
        return frozenset(out)

    def _reads(self, i: int, m: Message) -> frozenset[str]:
        """The ids of history message ``i``'s results that print a file's lines (their call is
        a read): as the mask plan found them when it made the call's action, else read now."""
        out: set[str] = set()
        for c in self._answered_calls(m):
            known = self._actions.get((c.id, i))
            if (known[0].kind == "read") if known else prints_file(c):
                out.add(c.id)
        return frozenset(out)

    def strip(self, ctx: LayerContext, i: int, m: Message) -> Message:
        """History message ``i`` without its thinking."""
        done = self.stripped.get(i)
        if done is None:
            if m.role != "assistant" or m.is_pinned or not self.config.thinking.enabled:
                done = m
            else:
                done = strip_message(m, ctx)[0]
                if done is not m:
                    self.bytes += held_bytes(done)
            self.stripped[i] = done
        return done

    def position(self, i: int) -> int | None:
        """Where history message ``i`` stands in the view (None when an edit removed it)."""
        if self.positions is None:
            self.positions = {s: p for p, s in enumerate(self.sources) if isinstance(s, int)}
        return self.positions.get(i)

    def _frontiers(self) -> tuple[int, int]:
        """How far a mask and a strip may reach now: all but the ``keep_recent`` newest tool
        results; all but the ``keep_recent`` newest assistant messages with thinking (and, with
        ``keep_current_turn``, nothing after the last user message)."""
        cfg = self.config
        keep = cfg.mask.keep_recent
        mask_to = -1
        if cfg.mask.enabled:
            kept = 0
            for pos in reversed(self.results):
                kept += len(self.names[pos])
                if kept > keep:
                    mask_to = pos
                    break
        strip_to = -1
        if cfg.thinking.enabled and len(self.thinking) > cfg.thinking.keep_recent:
            strip_to = self.thinking[len(self.thinking) - cfg.thinking.keep_recent - 1]
            if cfg.thinking.keep_current_turn:
                strip_to = min(strip_to, self.last_user - 1)
        return mask_to, strip_to

    def _gain(self, ctx: LayerContext, i: int, p: int, kind: str) -> int:
        """Tokens a mask (or strip) of history message ``i``, at view position ``p``, removes."""
        key = (kind, i)
        gain = self.gains.get(key)
        if gain is None:
            m = self.view[p]
            after = self.mask(ctx, i, m) if kind == "mask" else self.strip(ctx, i, m)
            gain = self.tokens[p] - ctx.counter.count_message(after) if after is not m else 0
            self.gains[key] = gain
            self.bytes += GAIN_BYTES
        return gain

    def _lossless_edit(self, call: Call, reason: EditReason) -> None:
        """Add one mask and/or strip edit when the policy says so (see :mod:`.._policy`)."""
        mask_to, strip_to = self._frontiers()
        if mask_to <= self.mask_upto and strip_to <= self.strip_upto:
            return
        removed = 0
        first: int | None = None
        mask_edit: Edit | None = None
        if mask_to > self.mask_upto and self.config.mask.enabled:
            mask_edit, removed, first = self._mask_edit(call.ctx, reason, mask_to)
        for kind, done, upto, positions in (("strip", self.strip_upto, strip_to, self.thinking),):
            for i in reversed(positions):
                if i <= done:
                    break
                if i > upto:
                    continue
                p = self.position(i)
                if p is None:
                    continue
                gain = self._gain(call.ctx, i, p, kind)
                if gain > 0:
                    removed += gain
                    first = p if first is None else min(first, p)
        if first is None or removed <= 0:
            return
        policy = self.config.policy
        if reason == "pays":
            rewritten = sum(self.tokens[first:]) - removed
            new_tokens = sum(self.tokens[call.new_start :])
            left = self._calls_until_compaction(call, call.total - removed)
            # an edit pays back while the whole history could still be sent, or not at all
            budget = call.ctx.budget
            payable = (
                payable_calls(call.tokens_before, budget.window, self._pace(call))
                if budget is not None
                else None
            )
            if payable is not None:
                left = payable if left is None else min(left, payable)
            # the bill so far, this call included as it stands (see Ledger)
            now = self.ledger.settle(call.tokens_before, call.total, call.rates)
            if not edit_pays(
                removed, rewritten, new_tokens, self.calls, call.rates, policy, left, ledger=now
            ):
                return
        elif reason == "immediate" and not edit_pays(removed, 0, 0, self.calls, call.rates, policy):
            return
        before = call.total
        new_edits: list[Edit] = []
        if mask_edit is not None:
            new_edits.append(mask_edit)
        if strip_to > self.strip_upto:
            new_edits.append(Edit("strip_thinking", reason, upto=strip_to, call=self.calls))
        self._commit(call, new_edits, first)
        originals = {
            make_ref((self.inputs[s],)): (self.inputs[s],)
            for p, s in enumerate(self.sources[first:], first)
            if isinstance(s, int) and self.view[p] is not self.base[s]
        }
        call.elided.update(originals)
        kinds = " and ".join(
            "masked" if e.kind == "mask" else "thinking stripped" for e in new_edits
        )
        emit(
            call.events,
            Event(
                "masked" if new_edits[0].kind == "mask" else "thinking_stripped",
                "policy",
                first,
                None,
                before,
                call.total,
                detail=f"{kinds} up to history message {max(mask_to, strip_to)} ({reason}): "
                f"{before - call.total} tokens removed",
                data={"reason": reason, "refs": tuple(originals)},
            ),
        )

    def _pace(self, call: Call) -> float:
        """Tokens the history has grown by per call, on average so far (the fixed part aside)."""
        budget = call.ctx.budget
        fixed = budget.fixed if budget is not None else call.overhead
        return max(self.input_tokens + call.overhead - fixed, 0) / (self.calls + 1)

    def _calls_until_compaction(self, call: Call, total: int) -> int | None:
        """About how many calls until a request of ``total`` tokens is cut (see
        :func:`~contextwarden._policy.calls_until_cut`). None without a window or compaction."""
        budget = call.ctx.budget
        if budget is None or not self.config.compaction.enabled:
            return None
        return calls_until_cut(self._inputs(call, total), self.config.policy)

    def _note(self, edit: Edit) -> None:
        """Put ``edit`` in the log and extend what the log reaches."""
        self.edits.append(edit)
        self.bytes += sum(held_bytes(m) for _, m in (*edit.inserted, *edit.replaced))
        if edit.kind == "mask":
            self.mask_upto = max(self.mask_upto, edit.upto)
        elif edit.kind == "strip_thinking":
            self.strip_upto = max(self.strip_upto, edit.upto)
        touched, anchored = _reach(edit)
        self.touched = max(self.touched, touched)
        self.anchored = max(self.anchored, anchored)

    def _commit(
        self, call: Call, edits: Sequence[Edit], first: int = 0, *, replay: bool = False
    ) -> None:
        """Append ``edits`` to the log and rebuild the view from the history and the log
        (token counts are reused before ``first``, the first view position they may change).
        Each record is stamped with the request's tokens before and after it; ``replay`` puts
        records made earlier back as they are."""
        before = call.total
        ctx = call.ctx
        for e in edits:
            if e.kind == "mask":
                self.fate = self._marked(self.fate, e)
        view, sources = apply(
            self.base,
            [*self.edits, *edits],
            mask=lambda i, m: self.mask(ctx, i, m),
            strip=lambda i, m: self.strip(ctx, i, m),
        )
        count = ctx.counter.count_message
        old_view, old_tokens = self.view, self.tokens
        same = 0
        limit = min(first, len(view), len(old_view))
        while same < limit and view[same] is old_view[same]:
            same += 1
        known = {id(m): t for m, t in zip(old_view[same:], old_tokens[same:], strict=True)}
        if not replay:
            kept = sum(old_tokens[:same]) + call.overhead
            cut = self.ledger.cut_from
            self.ledger = replace(self.ledger, cut_from=kept if cut is None else min(cut, kept))
        self.view, self.sources = view, sources
        self.tokens = old_tokens[:same] + [
            t if (t := known.get(id(m))) is not None else count(m) for m in view[same:]
        ]
        self.positions = None
        call.total = sum(self.tokens) + call.overhead
        call.new_start = len(view)
        if not replay:
            edits = [replace(e, tokens_before=before, tokens_after=call.total) for e in edits]
            call.edits.extend(edits)
        for e in edits:
            self._note(e)

    # -- compaction and window cuts ------------------------------------------------------------
    def record_compaction(self, call: Call, result: CompactResult | None, forced: bool) -> None:
        """Record what the compactor returned (None: it declined) as a ``compaction`` edit, then
        cut whole oldest units if the request is still over the trigger."""
        call.events.extend(call.compactor_events)
        budget = call.ctx.budget
        if result is not None:
            plan = result.plan or CompactionPlan.between(self.view, result.new_messages)
            edit = _plan_edit(plan, self.sources, len(self.inputs))
            if edit is not None:
                before = call.total
                hidden = self._hidden(edit)
                edit = replace(
                    edit,
                    reason="forced" if forced else "must",
                    ref=result.refs[-1] if result.refs else None,
                    strategy=result.strategy,
                    summary=result.summary,
                    summarizer=result.summarizer,
                    call=self.calls,
                )
                self._commit(call, [edit])
                self.compacted_at = call.total
                call.compaction = result
                if edit.ref is not None:
                    call.elided[edit.ref] = hidden
                    for ref in result.refs[:-1]:
                        call.elided.setdefault(ref, hidden)
                if not any(e.kind == "context_compacted" for e in call.compactor_events):
                    emit(
                        call.events,
                        Event(
                            "context_compacted",
                            "compaction",
                            None,
                            None,
                            before,
                            call.total,
                            detail=f"{result.strategy}: {len(hidden)} messages summarised, "
                            f"{1 - call.total / max(before, 1):.0%} saved",
                            compaction=result,
                        ),
                    )
        if budget is not None and call.total > budget.trigger:
            self.window_cut(call)

    def _hidden(self, edit: Edit) -> tuple[Message, ...]:
        """The agent's original messages an edit takes out of the view."""
        out: list[Message] = []
        for start, end in edit.removed:
            out.extend(self.inputs[start:end])
        return tuple(out)

    def window_cut(self, call: Call) -> None:
        """The window as an edit: drop whole oldest units (never the system prompt,
        the task, pinned content or the newest unit) until the request is at the target."""
        budget = call.ctx.budget
        if budget is None or not self.config.window.enabled:
            return
        aim = compaction_target(budget)
        index = HistoryIndex(keep_results=0, keep_thinking=0)
        index.extend(self.view, 0)
        drop: list[int] = []
        chosen: set[int] = set()
        excess = call.total - aim
        # the user's own instructions go last: only when dropping everything else is not enough
        for rules in ((self._no_summary, _no_instruction), (self._no_summary,)):
            for u in index.droppable(self.view, rules):
                if excess <= 0:
                    break
                start, end = index.unit_span(u)
                if start in chosen:
                    continue
                chosen.add(start)
                drop.extend(range(start, end))
                excess -= sum(self.tokens[start:end])
        drop.sort()
        if not drop:
            return
        positions = sorted(s for p in drop if isinstance(s := self.sources[p], int))
        # messages an earlier edit inserted into a dropped unit (a repair's synthetic results
        # for the calls dropped with it) leave with it
        inserts = sorted({s[0] for p in drop if isinstance(s := self.sources[p], tuple)})
        before = call.total
        ref = make_ref([self.inputs[i] for i in positions])
        edit = Edit(
            "window_cut",
            "must",
            removed=_ranges(positions),
            dropped=tuple(inserts),
            ref=ref,
            call=self.calls,
        )
        hidden = self._hidden(edit)
        self._commit(call, [edit])
        call.elided[ref] = hidden
        emit(
            call.events,
            Event(
                "dropped",
                "window",
                None,
                None,
                before,
                call.total,
                detail=f"window cut: {len(positions)} oldest messages dropped to the target "
                f"({before} -> {call.total} tokens)",
                data={"ref": ref},
            ),
        )

    def _no_summary(self, view: Sequence[Message], start: int, end: int) -> bool:
        """A cut rule: an earlier compaction's summary stays, as it stands for what was cut
        before."""
        return not any(
            isinstance(s := self.sources[p], tuple) and self.edits[s[0]].kind == "compaction"
            for p in range(start, end)
        )

    def recall(self, ref: str) -> tuple[Message, ...] | None:
        """The agent's original messages behind ``ref`` (a ``cw:`` reference a marker or a
        summary of this conversation shows), verbatim; ``None`` if it names none of them."""
        for edit in reversed(self.edits):
            if edit.ref == ref and edit.removed:
                return self._hidden(edit)
        for s in (*self.results, *self.thinking):  # a masked result, a stripped reasoning
            if make_ref((self.inputs[s],)) == ref:
                return (self.inputs[s],)
        for edit in reversed(self.edits):  # a step of a compaction its summary names
            if edit.kind == "compaction" and edit.summary and ref in edit.summary:
                return self._hidden(edit)
        return None

    def stable_prefix(self) -> int:
        """View messages before the first one a pending mask or strip would change."""
        frontier = max(self.mask_upto, self.strip_upto)
        for p, s in enumerate(self.sources):
            if isinstance(s, int) and s > frontier and (self.names[s] or s in self.thinking):
                return p
        return len(self.sources)


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


def _oversized_client_block(message: Message, limit: int) -> bool:
    """A user message over ``limit`` characters that holds no word of the user's, only what
    the client put there (aider's files in the chat, a repository map): it is cut as it enters,
    like a huge tool output, instead of making every request that carries it a compaction."""
    return (
        message.role == "user"
        and any(isinstance(b, TextBlock) and len(b.text) > limit for b in message.content)
        and not strip_injected(message.text)
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


def _plan_edit(plan: CompactionPlan, sources: Sequence[Source], history: int) -> Edit | None:
    """The ``compaction`` edit of ``plan``, made on the view whose message sources are
    ``sources``: removed history messages leave by position, removed summaries of earlier
    edits drop those edits, each inserted message is anchored to the next history message kept
    (or the end of the ``history`` messages). None when the plan changes nothing."""
    gone = set(plan.removed)
    removed = sorted(s for p in plan.removed if isinstance(s := sources[p], int))
    dropped = sorted({s[0] for p in plan.removed if isinstance(s := sources[p], tuple)})
    anchor = [history] * (len(sources) + 1)  # view position -> next kept history position
    for p in range(len(sources) - 1, -1, -1):
        s = sources[p]
        anchor[p] = s if isinstance(s, int) and p not in gone else anchor[p + 1]
    inserted = tuple((anchor[p], m) for p, m in plan.inserted)
    replaced = tuple(
        (s, m) for p, m in plan.replaced if isinstance(s := sources[p], int) and p not in gone
    )
    if not removed and not inserted and not replaced and not dropped:
        return None
    return Edit(
        "compaction",
        removed=_ranges(removed),
        inserted=inserted,
        replaced=replaced,
        dropped=tuple(dropped),
    )
