"""Compaction strategies, one file each; :data:`BUILTIN_STRATEGIES` names them.

``sliding_window``, ``importance``, ``key_events``, ``incremental`` and ``full_summary`` are pure
functions ``(messages, ctx) -> StrategyOutcome | None``; :func:`detect_task_type` picks their
order. The :class:`~contextwarden._compaction.Compactor` runs them.
"""

from __future__ import annotations

from .base import Strategy, StrategyContext, StrategyOutcome, make_ref
from .full_summary import full_summary
from .importance import importance
from .incremental import incremental
from .key_events import key_events
from .registry import BUILTIN_STRATEGIES
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
