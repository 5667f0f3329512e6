"""contextwarden: keep an LLM agent's history inside the context window.

The façade: everything public is re-exported here, from private modules behind it. Sub-packages
hold the parts (``formats``, ``layers``, ``strategies``, ``summarizers``, ``store``, ``proxy``,
``cli``); ``contextwarden.testing`` has test doubles for your own tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._billing import CachePricing, CallBill, PromptRequest, bill_requests
from ._breakdown import Breakdown, token_breakdown
from ._budget import Budget
from ._compaction import (
    CompactionReport,
    Compactor,
    Trigger,
    TriggerReason,
    should_compact,
)
from ._config import CompactionConfig, WardenConfig, config_problems, load_config
from ._config_docs import config_reference
from ._events import CompactResult, Event, EventKind
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
from ._log import Edit
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
from ._models import (
    ModelInfo,
    ModelOverride,
    apply_model_overrides,
    context_window,
    known_models,
    model_info,
    register_model,
    unregister_model,
)
from ._policy import PolicyConfig
from ._replay import ReplayCall, ReplayReport, ReplayTotals, compact_history, iter_replay, replay
from ._session import ConfirmRequest, Session, is_context_overflow
from ._tokens import ExactCounter, HeuristicCounter, TokenCounter, count_tokens, get_counter
from ._transcripts import Transcript, TranscriptFormat, load_transcript, save_transcript
from ._warden import CompactionHook, TransformResult, Warden
from .formats import (
    check_messages,
    from_anthropic,
    from_openai,
    to_anthropic,
    to_openai,
    validate_anthropic,
    validate_openai,
)
from .layers import (
    Layer,
    LayerContext,
    LayerResult,
    MaskConfig,
    ThinkingConfig,
    TruncateConfig,
    WindowConfig,
)
from .store.sqlite import SessionStore
from .strategies import (
    StrategyContext,
    StrategyOutcome,
    detect_task_type,
)
from .summarizers import (
    ExtractiveSummarizer,
    Summarizer,
    SummarizerConfig,
    SummaryRequest,
    build_summarizer,
    check_summary,
    summary_cache_key,
)

if TYPE_CHECKING:
    from .summarizers.llm import LLMSummarizer

__version__ = "0.1.0"

__all__ = [
    "Block",
    "Breakdown",
    "Budget",
    "CachePricing",
    "CallBill",
    "CompactResult",
    "CompactionConfig",
    "CompactionHook",
    "CompactionRefused",
    "CompactionReport",
    "Compactor",
    "ConfigError",
    "ConfirmRequest",
    "ContextOverflowError",
    "ContextWardenError",
    "Edit",
    "Event",
    "EventKind",
    "ExactCounter",
    "ExtractiveSummarizer",
    "FormatError",
    "HeuristicCounter",
    "ImageBlock",
    "LLMSummarizer",
    "Layer",
    "LayerContext",
    "LayerResult",
    "MaskConfig",
    "Message",
    "ModelInfo",
    "ModelOverride",
    "PolicyConfig",
    "PromptRequest",
    "ReplayCall",
    "ReplayReport",
    "ReplayTotals",
    "Role",
    "Session",
    "SessionStore",
    "StoreError",
    "StrategyContext",
    "StrategyOutcome",
    "Summarizer",
    "SummarizerConfig",
    "SummarizerError",
    "SummaryRequest",
    "TextBlock",
    "ThinkingBlock",
    "ThinkingConfig",
    "TokenCounter",
    "TokenizerError",
    "ToolCallBlock",
    "ToolResultBlock",
    "Transcript",
    "TranscriptError",
    "TranscriptFormat",
    "TransformResult",
    "Trigger",
    "TriggerReason",
    "TruncateConfig",
    "UnknownModelError",
    "Warden",
    "WardenConfig",
    "WindowConfig",
    "apply_model_overrides",
    "assistant",
    "bill_requests",
    "build_summarizer",
    "check_messages",
    "check_summary",
    "compact_history",
    "config_problems",
    "config_reference",
    "context_window",
    "count_tokens",
    "detect_task_type",
    "from_anthropic",
    "from_openai",
    "get_counter",
    "is_context_overflow",
    "iter_replay",
    "known_models",
    "load_config",
    "load_transcript",
    "model_info",
    "register_model",
    "replay",
    "save_transcript",
    "should_compact",
    "summary_cache_key",
    "system",
    "to_anthropic",
    "to_openai",
    "token_breakdown",
    "tool_result",
    "unregister_model",
    "user",
    "validate_anthropic",
    "validate_openai",
]


def __getattr__(name: str) -> Any:
    # LLMSummarizer pulls in httpx: imported on first use so `import contextwarden` stays light
    if name == "LLMSummarizer":
        from .summarizers.llm import LLMSummarizer

        return LLMSummarizer
    raise AttributeError(f"module 'contextwarden' has no attribute {name!r}")
