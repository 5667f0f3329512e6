"""Key-event extraction: keep the events that carry the work, summarize the rest
except the most recent few.

A unit is a key event when it holds:

* a user instruction after the task (the human steering; not a tool observation);
* a file edit (``edit``/``write``/``str_replace``/``apply_patch``, ``sed -i``, ``cat > f``...);
* a test run (``pytest``, ``npm test``, ``cargo test``...);
* the task's completion (the assistant saying so, or a submit call);
* an error and what showed it fixed (the later success of the same command or of an edit of the
  same file): both are key;
* the last unresolved error of the history.

Edits and errors come from :func:`~contextwarden.analysis.facts.extract_facts`. Non-key units
are summarized, except the last ``config.keep_recent_low`` non-key messages (default 5, widened
to whole units); the newest unit is always kept.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._memo import Memo
from .._messages import Message
from ..analysis.actions import reads_as_output
from ..analysis.facts import walk_facts
from ._signals import is_completion, message_call_kinds
from .base import Layout, StrategyContext, StrategyOutcome, elide_except_recent, is_summary_message

__all__ = ["key_events", "key_indices"]


def key_indices(messages: Sequence[Message], *, memo: Memo | None = None) -> set[int]:
    """Indices of the messages that make their unit a key event (``memo``: the compactor's)."""
    facts = walk_facts(messages, memo=memo)
    key = set(facts.writes)
    for err in facts.errors:
        if err.fixed_at is not None:
            key.update((err.index, err.fixed_at))
    last = facts.last_unresolved_error
    if last is not None:
        key.add(last.index)
    for i, m in enumerate(messages):
        if is_summary_message(m):
            continue
        if (m.role == "user" and not reads_as_output(m.text)) or (
            m.role == "assistant" and ("test" in message_call_kinds(m) or is_completion(m))
        ):
            key.add(i)
    return key


def key_events(messages: Sequence[Message], ctx: StrategyContext) -> StrategyOutcome | None:
    """Elide the non-key units except the last ``keep_recent_low`` non-key messages."""
    layout = Layout.of(messages)
    body = layout.body()
    key = key_indices(messages, memo=ctx.memo)
    rest = [(s, e) for s, e in body if key.isdisjoint(range(s, e))]
    return elide_except_recent(
        "key_events",
        messages,
        layout,
        rest,
        ctx,
        lambda n: f"kept {len(body) - n} key or recent units of {len(body)}",
    )
