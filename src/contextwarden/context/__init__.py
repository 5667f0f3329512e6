"""A conversation's working context: its history, its log of edits, and the call that extends
both (:mod:`.conversation`, one module per step beside it). The log's records live in
:mod:`contextwarden._log`; the policy's decisions are asked in :mod:`.decide`. What a warden is
built from (:mod:`.build`) loads on first use, with the first ``Warden()``."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .build import Parts, build_parts, rebuilder, summary_calls

__all__ = ["Parts", "build_parts", "rebuilder", "summary_calls"]

#: Where each name is defined, imported from there on first use.
_HOMES: Mapping[str, str] = {
    "Parts": ".build",
    "build_parts": ".build",
    "rebuilder": ".build",
    "summary_calls": ".build",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(home, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value
