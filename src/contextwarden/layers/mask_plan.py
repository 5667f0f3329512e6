"""The mask plan of a growing history, brought up to date message by message.

A mask edit keeps the latest reads of the files the agent works on whole (*protected*) and
reduces results a later one made redundant to a one-line marker (*superseded*); see
:func:`~contextwarden.analysis.actions.superseded_results` and
:func:`~contextwarden.analysis.actions.protected_results` for the rules.
:class:`MaskPlanner` keeps both for one history that only grows: each new tool action updates
them by what it changes (the results with its key or its text, the reads of a working file),
so a call costs the new messages, not the history. A history that breaks the usual order
(a result before its call, an id used twice) is planned again from the start each time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from .._messages import Message, ToolCallBlock
from ..analysis.actions import (
    ActionMemo,
    ToolAction,
    call_action,
    same_file,
    text_actions,
    tool_actions,
)

__all__ = ["MaskPlan", "MaskPlanner", "kept_whole", "mask_plan"]


@dataclass(frozen=True)
class MaskPlan:
    """What a mask edit should know about the results it may mask: ``protected`` (keep whole
    while the budget allows; mask last), ``superseded`` (mask first, to a one-line marker;
    each mapped to the id of the result that superseded it) and ``current``: the latest read
    of every file (and line range) the agent printed, none superseded, while it may still edit
    any of them by quoting (it edits by quoting, or has not edited yet): what a mask made
    only because it pays keeps whole."""

    protected: frozenset[str]
    superseded: Mapping[str, str]
    current: frozenset[str] = frozenset()


class MaskPlanner:
    """The tool actions, superseded and protected results of one growing history.

    ``recent_edits`` and ``quoting`` are :func:`~contextwarden.analysis.actions.protected_results`'s; ``memo`` keeps
    what each call does (shared with the caller, who reads it back). Call :meth:`extend` with
    the history each time it grew (the messages before are those already seen), then read
    :meth:`plan`.
    """

    def __init__(
        self, recent_edits: int = 8, *, quoting: bool = False, memo: ActionMemo | None = None
    ) -> None:
        self.recent_edits = recent_edits
        self.quoting = quoting
        self.memo: ActionMemo = memo if memo is not None else {}
        self.n = 0
        #: a history out of the usual order: planned again from the start on every extend
        self.irregular = False
        # flat tables keyed by call id (no tuple per call for the garbage collector to walk)
        self._calls: dict[str, ToolCallBlock] = {}
        self._call_at: dict[str, tuple[int, int]] = {}
        self._results: dict[str, int] = {}
        self._texts: dict[str, str] = {}
        self._plan: MaskPlan | None = None
        #: bumped each time the plan is made again from the start; ``log``: the ids whose
        #: superseded entry was set or changed since, in order (a reader keeps its place)
        self.generation = 0
        self.log: list[str] = []
        self._clear()

    def _clear(self) -> None:
        self.actions: list[ToolAction] = []
        self.superseded: dict[str, str] = {}
        self._by_key: dict[str, str] = {}
        # the ids of the actions with one key, oldest first: a lone id is kept as itself
        self._groups: dict[str, str | list[str]] = {}
        self._fallback: dict[str, dict[str, None]] = {}
        self._by_text: dict[str, list[str]] = {}
        self._edits: list[ToolAction] = []
        #: whether the agent edited files only without quoting them (``sed -i``, a write)
        self._plain = False
        self._reads: list[ToolAction] = []
        self._candidates: dict[str, None] = {}
        self._matches: dict[tuple[str, str], bool] = {}
        self._plan = None
        self.generation += 1
        self.log = []

    # -- building ----------------------------------------------------------------------------
    def extend(self, history: Sequence[Message]) -> None:
        """Take in ``history[self.n:]``."""
        start, known = self.n, len(self.actions)
        if start == len(history):
            return
        for j in range(start, len(history)):
            m = history[j]
            found: list[tuple[int, int, ToolAction]] = []
            if j > 0 and history[j - 1].role == "assistant" and not history[j - 1].tool_calls:
                acts = self.memo.get(("", j - 1))
                if acts is None:
                    acts = tuple(text_actions(history[j - 1], j - 1, history))
                    self.memo["", j - 1] = acts
                found.extend((j - 1, k, a) for k, a in enumerate(acts))
            if m.role == "user":
                self._texts[f"msg:{j}"] = m.text
            for k, c in enumerate(m.tool_calls):
                if c.id in self._calls or c.id in self._results:
                    self.irregular = True
                self._calls[c.id] = c
                self._call_at[c.id] = (j, k)
            for r in m.tool_results:
                rid = r.tool_call_id
                if rid in self._results:
                    self.irregular = True
                self._results[rid] = j
                self._texts[rid] = r.text
                call = self._calls.get(rid)
                if call is None:
                    continue
                acts = self.memo.get((rid, j))
                if acts is None:
                    acts = (call_action(call, j),)
                    self.memo[rid, j] = acts
                found.append((*self._call_at[rid], acts[0]))
            if not self.irregular:
                found.sort(key=lambda f: (f[0], f[1]))
                for _, _, a in found:
                    self._add(a)
        self.n = len(history)
        if len(self.actions) != known or self.irregular:
            self._plan = None
        if self.irregular:
            self._clear()
            for a in tool_actions(history, self.memo):
                self._add(a)

    def _add(self, a: ToolAction) -> None:
        """The newest action: what it supersedes and whether its result is protected."""
        self.actions.append(a)
        if a.key is not None and a.kind != "edit":
            group = self._groups.get(a.key)
            if group is None:
                self._groups[a.key] = a.id
            else:
                if isinstance(group, str):
                    group = self._groups[a.key] = [group]
                for x in group:
                    self._supersede(x, a.id)
                group.append(a.id)
            # ranged reads of a file whose whole text this action printed
            for ranged in self._fallback.get(a.key, ()):
                members = self._groups[ranged]
                for x in (members,) if isinstance(members, str) else members:
                    self._supersede(x, a.id)
            if a.kind == "read" and a.paths:
                whole = f"read {a.paths[0]}"
                if whole != a.key:
                    self._fallback.setdefault(whole, {})[a.key] = None
        text = self._texts.get(a.id, "")
        if "\n" in text and not text.isspace():
            same = self._by_text.setdefault(text, [])
            for x in same:
                if x not in self._by_key:
                    self.superseded[x] = a.id
                    self.log.append(x)
            same.append(a.id)
        if a.kind == "edit" and a.paths and not a.quotes and not self._edits:
            self._plain = True
        if a.kind == "edit" and a.paths and (a.quotes or not self.quoting):
            self._plain = False
            self._edits.append(a)
            self._protect()
        elif a.kind == "read":
            self._reads.append(a)
            if self._edits:  # read after the first recent edit
                self._candidates[a.id] = None

    def _supersede(self, x: str, by: str) -> None:
        self._by_key[x] = by
        self.superseded[x] = by
        self.log.append(x)

    def _protect(self) -> None:
        """The reads that may be protected once the recent edits changed: every read of a
        working file, and every read made after the first recent edit."""
        recent = self._edits[-self.recent_edits :]
        working = {p for a in recent for p in a.paths}
        since = recent[0].position
        self._candidates = {
            r.id: None
            for r in self._reads
            if r.position >= since or any(self._same(p, w) for p in r.paths for w in working)
        }

    def _same(self, a: str, b: str) -> bool:
        known = self._matches.get((a, b))
        if known is None:
            known = self._matches[a, b] = same_file(a, b)
        return known

    # -- questions ---------------------------------------------------------------------------
    def plan(self, history: Sequence[Message] = ()) -> MaskPlan:
        """The plan of the history taken in so far, ``history`` (when given) taken in first."""
        if history:
            self.extend(history)
        if self._plan is None:
            superseded = self.superseded
            protected = frozenset(x for x in self._candidates if x not in superseded)
            current = frozenset(
                () if self._plain else (r.id for r in self._reads if r.id not in superseded)
            )
            self._plan = MaskPlan(protected, superseded, current)
        return self._plan


def kept_whole(
    order: Iterable[str],
    at: Mapping[str, int],
    upto: int,
    size: Callable[[int], int | None],
    room: int,
) -> list[str]:
    """The results a mask reaching history position ``upto`` keeps whole: of ``order`` (the
    candidates, best first: a plan's protected results, newest first), each at or before
    ``upto`` (``at``: a result's position), in the request (``size`` of its position, its
    tokens, is not None) and within the ``room`` the ones before it left."""
    keep: list[str] = []
    for rid in order:
        pos = at.get(rid)
        if pos is None or pos > upto:
            continue
        tokens = size(pos)
        if tokens is None or tokens > room:
            continue
        room -= tokens
        keep.append(rid)
    return keep


def mask_plan(
    history: Sequence[Message],
    recent_edits: int = 8,
    *,
    quoting: bool = False,
    memo: ActionMemo | None = None,
) -> MaskPlan:
    """The plan of ``history`` read at once (:class:`MaskPlanner`; ``memo``: see
    :func:`~contextwarden.analysis.actions.tool_actions`)."""
    return MaskPlanner(recent_edits, quoting=quoting, memo=memo).plan(history)
