"""contextwarden: keep an LLM agent's history inside the context window."""

from __future__ import annotations

from ._config import CompactionConfig, WardenConfig
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
    Block,
    ImageBlock,
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    assistant,
    system,
    tool_result,
    user,
)
from ._tokens import TokenCounter

__version__ = "0.1.0"

__all__ = [
    "Block",
    "CompactionConfig",
    "CompactionRefused",
    "ConfigError",
    "ContextOverflowError",
    "ContextWardenError",
    "FormatError",
    "ImageBlock",
    "Message",
    "Role",
    "StoreError",
    "SummarizerError",
    "TextBlock",
    "ThinkingBlock",
    "TokenCounter",
    "TokenizerError",
    "ToolCallBlock",
    "ToolResultBlock",
    "TranscriptError",
    "UnknownModelError",
    "WardenConfig",
    "assistant",
    "system",
    "tool_result",
    "user",
]
