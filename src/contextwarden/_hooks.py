"""Calling user-supplied hooks with the options they know: a compaction hook or a summarizer
written before an option existed is called without it."""

from __future__ import annotations

import inspect

__all__ = ["takes_keyword"]


def takes_keyword(fn: object, name: str) -> bool:
    """Whether ``fn`` can be called with the keyword ``name`` (it names it or takes
    ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
