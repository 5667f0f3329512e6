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

from .base import Layer, LayerContext, LayerResult
from .mask import MaskConfig, mask_text, mask_tool_results
from .pending import drop_pending_calls
from .pins import is_protected, pinned_spans
from .thinking import ThinkingConfig, strip_thinking
from .truncate import TruncateConfig, truncate_text, truncate_tool_output
from .units import HistoryIndex
from .window import WindowConfig, sliding_window

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
