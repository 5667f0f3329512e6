"""The built-in strategies by name. Your own strategy (a pure function ``(messages, ctx) ->
StrategyOutcome | None``, see :mod:`.base`) goes to the warden that uses it, beside these:
``Warden(config, strategies={"drop_greetings": drop_greetings})`` with its name in the config's
``compaction.fallback_order`` or ``strategy_order`` (no process-wide registry)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .base import Strategy
from .full_summary import full_summary
from .importance import importance
from .incremental import incremental
from .key_events import key_events
from .sliding_window import sliding_window

__all__ = ["BUILTIN_STRATEGIES"]

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
