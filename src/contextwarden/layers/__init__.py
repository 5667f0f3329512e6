"""The layers: pure functions ``(messages, ctx) -> LayerResult``, one file each, config beside.

=============  ==========  ================================================  ============
name           stage       what                                              seed
=============  ==========  ================================================  ============
``truncate``   lossless    head + tail of tool output over 50,000 chars       004 L1
``mask``       lossless    old tool results -> first 3 + last 2 lines         000 L1
``thinking``   lossless    thinking only on the newest assistant with it      000 L2
``window``     guard       drop oldest units while over the trigger           000 L3, 004 L2
=============  ==========  ================================================  ============

Lossless layers run on every call; guard layers only matter over the trigger, after compaction.
The sliding window, as the final guard, also removes tool calls left unanswered at the very end
of a history (:func:`drop_pending_calls`), which no API accepts.
All layers are registered here, in one place, with :func:`register_layer`, the same call you
use for your own. The :class:`~contextwarden._warden.Warden` runs the registered lossless layers
in order (built-ins first, through an incremental engine that gives the same output), then
compaction, then your guard layers, then the built-in sliding window as the final guard.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .base import Layer, LayerContext, LayerMemo, LayerResult
from .mask import MaskConfig, mask_text, mask_tool_results
from .pending import drop_pending_calls
from .pins import is_protected, pinned_spans
from .thinking import ThinkingConfig, strip_thinking
from .truncate import TruncateConfig, truncate_text, truncate_tool_output
from .units import HistoryIndex
from .window import WindowConfig, sliding_window

__all__ = [
    "BUILTIN_LAYERS",
    "HistoryIndex",
    "Layer",
    "LayerContext",
    "LayerMemo",
    "LayerResult",
    "LayerSpec",
    "MaskConfig",
    "Stage",
    "ThinkingConfig",
    "TruncateConfig",
    "WindowConfig",
    "drop_pending_calls",
    "get_layer",
    "is_protected",
    "layer_names",
    "mask_text",
    "mask_tool_results",
    "pinned_spans",
    "register_layer",
    "sliding_window",
    "strip_thinking",
    "truncate_text",
    "truncate_tool_output",
    "unregister_layer",
]

Stage = Literal["lossless", "guard"]


@dataclass(frozen=True)
class LayerSpec:
    """A registered layer: its name, function and stage."""

    name: str
    function: Layer
    stage: Stage
    builtin: bool = False


_REGISTRY: dict[str, LayerSpec] = {}

#: The built-in layers, in the order they run.
BUILTIN_LAYERS = ("truncate", "mask", "thinking", "window")


def register_layer(
    name: str,
    function: Layer,
    *,
    stage: Stage = "lossless",
    replace: bool = False,
    _builtin: bool = False,
) -> LayerSpec:
    """Register ``function`` under ``name``. Lossless layers run on every call after the
    built-in ones, in registration order; guard layers run after compaction, just before the
    built-in sliding window. A layer must be pure (never mutate its input) and keep every tool
    call with its result. Raises ``ValueError`` if the name is taken (unless ``replace``, which
    is refused for built-ins) or the stage is unknown."""
    if stage not in ("lossless", "guard"):
        raise ValueError(f"stage must be 'lossless' or 'guard', got {stage!r}")
    existing = _REGISTRY.get(name)
    if existing is not None and (existing.builtin or not replace):
        raise ValueError(f"a layer named {name!r} is already registered")
    spec = LayerSpec(name, function, stage, _builtin)
    _REGISTRY[name] = spec
    return spec


def unregister_layer(name: str) -> None:
    """Remove a layer you registered (built-ins stay). ``KeyError`` if unknown."""
    spec = _REGISTRY[name]
    if spec.builtin:
        raise ValueError(
            f"the built-in layer {name!r} cannot be unregistered; disable it in the config"
        )
    del _REGISTRY[name]


def get_layer(name: str) -> LayerSpec:
    """The layer registered under ``name`` (``KeyError`` naming the known ones if absent)."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no layer named {name!r}; known: {', '.join(_REGISTRY)}") from None


def layer_names(stage: Stage | None = None, *, builtin: bool | None = None) -> list[str]:
    """Registered layer names in run order, optionally only one stage / built-in or not."""
    return [
        s.name
        for s in _REGISTRY.values()
        if (stage is None or s.stage == stage) and (builtin is None or s.builtin == builtin)
    ]


register_layer("truncate", truncate_tool_output, stage="lossless", _builtin=True)
register_layer("mask", mask_tool_results, stage="lossless", _builtin=True)
register_layer("thinking", strip_thinking, stage="lossless", _builtin=True)
register_layer("window", sliding_window, stage="guard", _builtin=True)
