"""Key-event extraction (seed 003): keep the events that carry the work, summarize the rest
except the most recent few.

A unit is a key event when it holds:

* a user instruction after the task (the human steering);
* a file edit (``edit``/``write``/``str_replace``/``apply_patch``, ``sed -i``, ``> file``...);
* a test run (``pytest``, ``npm test``, ``cargo test``...);
* the task's completion (the assistant saying so, or a submit call);
* an error followed by its fix: an error result and the next editing unit within
  :data:`FIX_WINDOW` units after it are both key;
* the last error of the history (it may still be unresolved).

Non-key units are summarized, except the last ``config.keep_recent_low`` non-key messages
(default 5, widened to whole units); the newest unit is always kept.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._messages import Message
from ._signals import is_completion, is_error_result, message_call_kinds
from .base import Layout, StrategyContext, StrategyOutcome, is_summary_message, summary_request

__all__ = ["FIX_WINDOW", "key_events", "key_units"]

#: An edit this many units after an error counts as its fix.
FIX_WINDOW = 4


def key_units(messages: Sequence[Message], units: Sequence[tuple[int, int]]) -> set[int]:
    """Positions (in ``units``) of the key events among ``units``."""
    key: set[int] = set()
    errors: list[int] = []
    edits: list[int] = []
    for k, (s, e) in enumerate(units):
        head = messages[s]
        if is_summary_message(head):
            continue
        kinds = message_call_kinds(head)
        if head.role == "user" or kinds & {"edit", "test"} or is_completion(head):
            key.add(k)
        if "edit" in kinds:
            edits.append(k)
        if any(is_error_result(m) for m in messages[s:e]):
            errors.append(k)
    for k in errors:
        fix = next((j for j in edits if k <= j <= k + FIX_WINDOW), None)
        if fix is not None:
            key.update((k, fix))
    if errors:
        key.add(errors[-1])
    return key


def key_events(messages: Sequence[Message], ctx: StrategyContext) -> StrategyOutcome | None:
    """Elide the non-key units except the last ``keep_recent_low`` non-key messages."""
    layout = Layout.of(messages)
    body = layout.body()
    key = key_units(messages, body)
    rest = [u for k, u in enumerate(body) if k not in key]
    kept = 0
    while rest and kept < ctx.config.keep_recent_low:
        s, e = rest.pop()
        kept += e - s
    if not rest or all(is_summary_message(messages[s]) for s, _ in rest):
        return None
    elided = layout.indices(rest)
    return StrategyOutcome(
        "key_events",
        elided,
        (summary_request(messages, elided, ctx),),
        detail=f"kept {len(key)} key events of {len(body)} units",
    )
