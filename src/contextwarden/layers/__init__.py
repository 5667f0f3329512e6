"""The layers: pure functions ``(messages, ctx) -> LayerResult``, one file each, config beside.

=============  ==========  ================================================
name           stage       what
=============  ==========  ================================================
``truncate``   lossless    head + tail of tool output over 50,000 chars
``mask``       lossless    old tool results -> first 3 + last 2 lines
``thinking``   lossless    thinking only on the newest assistant with it
``window``     guard       drop oldest units while over the trigger
=============  ==========  ================================================

Each is usable on its own. The :class:`~contextwarden._warden.Warden` applies the same per-message
functions through the conversation's edit log (:mod:`contextwarden._log`): truncation once, when a
message enters; masking and stripping as edits the cache-aware policy batches; the window as an
edit that cuts to the target; the sliding window itself as the final guard of every call (it also
removes tool calls left unanswered at the very end, which no API accepts). Your own layers are
passed to the warden that runs them (``Warden(layers=[...])``), not registered process-wide.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from .base import Layer, LayerContext, LayerResult, is_protected, pinned_spans
    from .config import MaskConfig, ThinkingConfig, TruncateConfig, WindowConfig
    from .mask import mask_text, mask_tool_results
    from .pending import drop_pending_calls
    from .thinking import strip_thinking
    from .truncate import truncate_text, truncate_tool_output
    from .units import HistoryIndex
    from .window import sliding_window

#: Where each name is defined, imported from there on first use: a module that needs one
#: layer (or only the settings) does not load the others.
_HOMES: Mapping[str, str] = {
    "HistoryIndex": ".units",
    "Layer": ".base",
    "LayerContext": ".base",
    "LayerResult": ".base",
    "MaskConfig": ".config",
    "ThinkingConfig": ".config",
    "TruncateConfig": ".config",
    "WindowConfig": ".config",
    "drop_pending_calls": ".pending",
    "is_protected": ".base",
    "mask_text": ".mask",
    "mask_tool_results": ".mask",
    "pinned_spans": ".base",
    "sliding_window": ".window",
    "strip_thinking": ".thinking",
    "truncate_text": ".truncate",
    "truncate_tool_output": ".truncate",
}

__all__ = [
    "HistoryIndex",
    "Layer",
    "LayerContext",
    "LayerResult",
    "MaskConfig",
    "ThinkingConfig",
    "TruncateConfig",
    "WindowConfig",
    "drop_pending_calls",
    "is_protected",
    "mask_text",
    "mask_tool_results",
    "pinned_spans",
    "sliding_window",
    "strip_thinking",
    "truncate_text",
    "truncate_tool_output",
]


__getattr__ = lazy_names(__name__, _HOMES, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
