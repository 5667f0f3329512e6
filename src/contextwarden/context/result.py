"""What a call of :meth:`~contextwarden.Warden.transform` gives back, and the compaction hook it
calls."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .._messages import Message

if TYPE_CHECKING:
    from .._budget import Budget
    from .._events import CompactResult, Event
    from .._log import Edit
    from .._tokens import TokenCounter

__all__ = ["CompactionHook", "TransformResult"]


@runtime_checkable
class CompactionHook(Protocol):
    """What the warden calls when over the trigger after the lossless edits (the built-in
    :class:`~contextwarden._compaction.Compactor` is one). Return ``None`` to decline (a window
    cut then does the job). The result's ``plan`` (:class:`~contextwarden._events.CompactionPlan`:
    positions removed, summaries inserted, messages replaced) is appended to the
    conversation's log as it is; a result with only ``new_messages`` keeps the messages equal
    in content to the input's, in order, and the others are its summaries."""

    def compact(
        self,
        messages: Sequence[Message],
        *,
        budget: Budget,
        counter: TokenCounter,
        tools: Sequence[Mapping[str, Any]] | None,
        focus: str | None,
    ) -> CompactResult | None: ...


@dataclass(frozen=True)
class TransformResult:
    """What one :meth:`Warden.transform` produced.

    ``messages`` is the request to send; ``tokens_before``/``tokens_after`` are the whole
    request's tokens (tool definitions included) without and with the warden; ``events`` lists
    what happened this call (truncations of new messages, the edits made, repairs, cuts);
    ``compaction`` is set when a compaction was made this call; ``newest_truncated`` when the
    newest unit alone was over the budget and was cut; ``budget`` is ``None`` when no window was
    known. ``conversation`` is the id of the conversation's log, ``edits`` the records added this
    call, ``stable_prefix`` how many leading messages the log's pending edits will not rewrite
    (where a cache breakpoint pays), and ``elided`` the originals hidden by this call's edits,
    by ``cw:`` reference.
    """

    messages: tuple[Message, ...]
    tokens_before: int
    tokens_after: int
    events: tuple[Event, ...] = ()
    compaction: CompactResult | None = None
    newest_truncated: bool = False
    budget: Budget | None = None
    conversation: str = ""
    edits: tuple[Edit, ...] = ()
    stable_prefix: int = 0
    elided: Mapping[str, tuple[Message, ...]] = field(default_factory=dict)

    @property
    def saved_tokens(self) -> int:
        """``tokens_before - tokens_after``."""
        return self.tokens_before - self.tokens_after

    @property
    def within_budget(self) -> bool:
        """True when no budget is known or the result is at or under its trigger."""
        return self.budget is None or self.tokens_after <= self.budget.trigger

    def stable_end(self, written: int) -> int | None:
        """Where the stable prefix ends among the ``written`` messages of an API that writes
        the leading system messages apart (Anthropic's ``system``; those in the middle stay in
        place): None for no stable mark (the writer may merge messages: past the end is none)."""
        leading = next(
            (k for k, m in enumerate(self.messages) if m.role != "system"), len(self.messages)
        )
        stable = self.stable_prefix - leading
        return (max(stable, 0) or None) if stable < written else None
