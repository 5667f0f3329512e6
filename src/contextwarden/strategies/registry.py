"""The one strategy registry. Built-in strategies register here exactly the way your own does:

.. code-block:: python

    from contextwarden.strategies import register_strategy, StrategyOutcome

    @register_strategy("drop_greetings")
    def drop_greetings(messages, ctx):
        ...  # return StrategyOutcome(...) or None

    # or: register_strategy("drop_greetings", drop_greetings)

A strategy is a pure function ``(messages, ctx) -> StrategyOutcome | None`` (see
:mod:`.base`). Registering a name twice raises unless ``replace=True``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import overload

from .base import Strategy
from .full_summary import full_summary
from .importance import importance
from .incremental import incremental
from .key_events import key_events
from .sliding_window import sliding_window

__all__ = ["get_strategy", "register_strategy", "strategy_names", "unregister_strategy"]

_REGISTRY: dict[str, Strategy] = {}


@overload
def register_strategy(
    name: str, fn: None = None, *, replace: bool = False
) -> Callable[[Strategy], Strategy]: ...
@overload
def register_strategy(name: str, fn: Strategy, *, replace: bool = False) -> Strategy: ...
def register_strategy(
    name: str, fn: Strategy | None = None, *, replace: bool = False
) -> Strategy | Callable[[Strategy], Strategy]:
    """Register ``fn`` under ``name`` (or, without ``fn``, return a decorator that does).
    Raises ValueError for an empty name, or a taken one unless ``replace`` is true."""
    if not name or not isinstance(name, str):
        raise ValueError(f"strategy name must be a non-empty string, got {name!r}")

    def add(f: Strategy) -> Strategy:
        if not callable(f):
            raise TypeError(f"strategy {name!r} must be callable, got {type(f).__name__}")
        if name in _REGISTRY and _REGISTRY[name] is not f and not replace:
            raise ValueError(f"strategy {name!r} is already registered (pass replace=True)")
        _REGISTRY[name] = f
        return f

    return add if fn is None else add(fn)


def unregister_strategy(name: str) -> None:
    """Remove ``name`` (KeyError naming it when absent)."""
    if name not in _REGISTRY:
        raise KeyError(f"no strategy named {name!r}; registered: {', '.join(strategy_names())}")
    del _REGISTRY[name]


def get_strategy(name: str) -> Strategy:
    """The strategy registered as ``name`` (KeyError listing the known names when absent)."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(
            f"no strategy named {name!r}; registered: {', '.join(strategy_names())}"
        ) from None


def strategy_names() -> list[str]:
    """Registered names, sorted."""
    return sorted(_REGISTRY)


# The built-ins, registered through the public call like any user strategy.
register_strategy("sliding_window", sliding_window)
register_strategy("importance", importance)
register_strategy("key_events", key_events)
register_strategy("incremental", incremental)
register_strategy("full_summary", full_summary)
