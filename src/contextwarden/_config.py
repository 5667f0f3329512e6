"""WardenConfig: every knob, with the seeds' defaults. (Skeleton: loading from YAML/env to come.)"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .layers.mask import MaskConfig
from .layers.thinking import ThinkingConfig
from .layers.truncate import TruncateConfig
from .layers.window import WindowConfig

__all__ = ["CompactionConfig", "WardenConfig"]

TaskType = Literal["code", "analysis", "conversation", "mixed", "unknown"]
StrategyName = Literal["sliding_window", "importance", "key_events", "incremental", "full_summary"]


class CompactionConfig(BaseModel):
    """Lossy compaction when the lossless layers are not enough (seeds 001, 002, 003)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="Compact with summaries when over the trigger. Default: true.")
    sliding_window_size: int = Field(
        9,
        ge=1,
        description="Sliding-window compaction keeps this many recent messages (4 user/tool + 5 "
        "assistant, seed 003). Default: 9.",
    )
    importance_threshold: float = Field(
        3.0, description="Importance scoring keeps messages scoring at least this. Default: 3.0."
    )
    keep_recent_low: int = Field(
        5, ge=0, description="Low-scoring / non-key messages kept as recent context. Default: 5."
    )
    chunk_turns: int = Field(
        20, ge=1, description="Incremental summaries: turns per chunk. Default: 20."
    )
    turn_threshold: int = Field(
        200, ge=1, description="Compact after this many turns whatever the tokens. Default: 200."
    )
    summary_marker: str = Field(
        "!!!SUMMARY!!!", description="The model writing this asks for a compaction. Default: !!!SUMMARY!!!."
    )
    summary_max_chars: int = Field(
        4_000, ge=200, description="A summary is capped at this many characters. Default: 4000."
    )
    recent_memories: int = Field(
        10, ge=0, description="The full summary keeps this many recent memories. Default: 10."
    )
    require_confirmation: bool = Field(
        False, description="Ask the confirmation callback before a lossy compaction. Default: false."
    )
    on_refusal: Literal["drop_oldest", "new_session", "raise"] = Field(
        "drop_oldest", description="What to do when the user refuses. Default: drop_oldest."
    )
    strategy_order: dict[TaskType, list[StrategyName]] = Field(
        default_factory=lambda: {
            "code": ["sliding_window", "key_events", "incremental"],
            "analysis": ["sliding_window", "importance", "incremental"],
            "conversation": ["sliding_window", "importance", "incremental"],
            "mixed": ["sliding_window", "incremental", "importance"],
            "unknown": ["sliding_window", "importance", "incremental"],
        },
        description="Strategy order per detected task type (seed 003).",
    )
    fallback_order: list[StrategyName] = Field(
        default_factory=lambda: ["sliding_window", "importance", "key_events", "incremental"],
        description="Fixed order tried when the adaptive order fails (seed 003).",
    )


class WardenConfig(BaseModel):
    """Everything the warden does, and how much. Validated once, at construction."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = Field(None, description="Model name; picks the window and tokenizer. Default: none.")
    context_window: int | None = Field(
        None, ge=1, description="Override the model's context window. Default: from the registry."
    )
    reserve_tokens: int = Field(
        8_192, ge=0, description="Tokens reserved for the model's output (seed 004). Default: 8192."
    )
    trigger_ratio: float = Field(
        0.75,
        gt=0,
        le=1,
        description="Lossy steps start above window*ratio (seed 000/003: 0.75). Default: 0.75.",
    )
    target_ratio: float = Field(
        0.5,
        gt=0,
        le=1,
        description="Compaction aims for window*ratio, well below the trigger, so the next call "
        "does not compact again. Default: 0.5.",
    )
    counter: Literal["exact", "heuristic"] = Field(
        "exact", description="Token counter: exact BPE or the fast chars-based heuristic. Default: exact."
    )
    truncate: TruncateConfig = Field(default_factory=TruncateConfig)
    mask: MaskConfig = Field(default_factory=MaskConfig)
    thinking: ThinkingConfig = Field(default_factory=ThinkingConfig)
    window: WindowConfig = Field(default_factory=WindowConfig)
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)
