"""contextwarden: keep an LLM agent's history inside the context window.

The façade: the names most programs need, each documented with an example in ``docs/api.md``.
They are imported on first use (``import contextwarden`` loads nothing else), so a program that
only needs ``count_tokens`` does not pay for the proxy, the summarizers or the SQLite store.
Everything else lives in the sub-packages: ``formats`` (provider formats and validators),
``layers`` (masking, truncation, thinking, window), ``strategies``, ``summarizers``, ``proxy``,
``transcripts``, ``integrations`` and ``testing`` (test doubles for your own tests).
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._budget import Budget
    from ._compaction import Compactor
    from ._config import WardenConfig, load_config
    from ._events import Event
    from ._exceptions import (
        CompactionRefused,
        ConfigError,
        ContextOverflowError,
        ContextWardenError,
        FormatError,
        StoreError,
        SummarizerError,
        TokenizerError,
        TranscriptError,
        UnknownModelError,
    )
    from ._messages import (
        ImageBlock,
        Message,
        TextBlock,
        ThinkingBlock,
        ToolCallBlock,
        ToolResultBlock,
        assistant,
        system,
        tool_result,
        user,
    )
    from ._model_overrides import apply_model_overrides
    from ._models import ModelInfo, ModelRegistry, context_window, model_info
    from ._replay import ReplayReport, compact_history, replay
    from ._session import Session
    from ._tokens import TokenCounter, count_tokens, get_counter
    from ._transcripts import load_transcript, save_transcript
    from ._version import __version__ as __version__
    from ._warden import TransformResult, Warden
    from .formats import from_anthropic, from_openai, to_anthropic, to_openai

#: Where each public name is defined (imported from there on first access), and the version.
_HOMES: Mapping[str, str] = {
    "Budget": "._budget",
    "CompactionRefused": "._exceptions",
    "Compactor": "._compaction",
    "ConfigError": "._exceptions",
    "ContextOverflowError": "._exceptions",
    "ContextWardenError": "._exceptions",
    "Event": "._events",
    "FormatError": "._exceptions",
    "ImageBlock": "._messages",
    "Message": "._messages",
    "ModelInfo": "._models",
    "ModelRegistry": "._models",
    "ReplayReport": "._replay",
    "Session": "._session",
    "StoreError": "._exceptions",
    "SummarizerError": "._exceptions",
    "TextBlock": "._messages",
    "ThinkingBlock": "._messages",
    "TokenCounter": "._tokens",
    "TokenizerError": "._exceptions",
    "ToolCallBlock": "._messages",
    "ToolResultBlock": "._messages",
    "TranscriptError": "._exceptions",
    "TransformResult": "._warden",
    "UnknownModelError": "._exceptions",
    "Warden": "._warden",
    "WardenConfig": "._config",
    "apply_model_overrides": "._model_overrides",
    "assistant": "._messages",
    "compact_history": "._replay",
    "context_window": "._models",
    "count_tokens": "._tokens",
    "from_anthropic": ".formats",
    "from_openai": ".formats",
    "get_counter": "._tokens",
    "load_config": "._config",
    "load_transcript": "._transcripts",
    "model_info": "._models",
    "replay": "._replay",
    "save_transcript": "._transcripts",
    "system": "._messages",
    "to_anthropic": ".formats",
    "to_openai": ".formats",
    "tool_result": "._messages",
    "user": "._messages",
    "__version__": "._version",
}

__all__ = [
    "Budget",
    "CompactionRefused",
    "Compactor",
    "ConfigError",
    "ContextOverflowError",
    "ContextWardenError",
    "Event",
    "FormatError",
    "ImageBlock",
    "Message",
    "ModelInfo",
    "ModelRegistry",
    "ReplayReport",
    "Session",
    "StoreError",
    "SummarizerError",
    "TextBlock",
    "ThinkingBlock",
    "TokenCounter",
    "TokenizerError",
    "ToolCallBlock",
    "ToolResultBlock",
    "TranscriptError",
    "TransformResult",
    "UnknownModelError",
    "Warden",
    "WardenConfig",
    "apply_model_overrides",
    "assistant",
    "compact_history",
    "context_window",
    "count_tokens",
    "from_anthropic",
    "from_openai",
    "get_counter",
    "load_config",
    "load_transcript",
    "model_info",
    "replay",
    "save_transcript",
    "system",
    "to_anthropic",
    "to_openai",
    "tool_result",
    "user",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'contextwarden' has no attribute {name!r}")
    value = getattr(import_module(home, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, "__version__"})
