"""Compaction strategies, one file each; :data:`BUILTIN_STRATEGIES` names them.

``sliding_window``, ``importance``, ``key_events``, ``incremental`` and ``full_summary`` are pure
functions ``(messages, ctx) -> StrategyOutcome | None``; :func:`detect_task_type` picks their
order. The :class:`~contextwarden._compaction.Compactor` runs them. Your own strategy goes to
the warden that uses it, beside these: ``Warden(config, strategies={"drop_greetings":
drop_greetings})`` with its name in the config's ``compaction.fallback_order`` or
``strategy_order`` (no process-wide registry).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .base import Strategy, StrategyContext, StrategyOutcome, make_ref
from .full_summary import full_summary
from .importance import importance
from .incremental import incremental
from .key_events import key_events
from .sliding_window import sliding_window
from .task_type import TASK_TYPES, TaskType, detect_task_type

__all__ = [
    "BUILTIN_STRATEGIES",
    "TASK_TYPES",
    "Strategy",
    "StrategyContext",
    "StrategyOutcome",
    "TaskType",
    "detect_task_type",
    "full_summary",
    "importance",
    "incremental",
    "key_events",
    "make_ref",
    "sliding_window",
]

#: The strategies every compactor knows, by the names the config uses.
BUILTIN_STRATEGIES: Mapping[str, Strategy] = MappingProxyType(
    {
        "sliding_window": sliding_window,
        "importance": importance,
        "key_events": key_events,
        "incremental": incremental,
        "full_summary": full_summary,
    }
)
