"""A conversation's working context: its history, its log of edits, and the call that extends
both (:mod:`.conversation`, one module per step beside it). The log's records live in
:mod:`contextwarden._log`; the policy's decisions are asked in :mod:`.decide`. What a warden is
built from (:mod:`.build`) loads on first use, with the first ``Warden()``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .._lazy import lazy_names

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


__getattr__ = lazy_names(__name__, _HOMES, globals())
