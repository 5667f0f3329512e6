"""Layer: truncate oversized tool output, head + tail (seed 004, L1)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["TruncateConfig"]


class TruncateConfig(BaseModel):
    """Head-and-tail truncation of one tool result's text (seed 004 L1)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="Truncate oversized tool output. Default: true.")
    max_chars: int = Field(
        50_000, ge=1, description="A tool result longer than this is truncated. Default: 50000."
    )
    head_chars: int = Field(2_000, ge=0, description="Characters kept from the start. Default: 2000.")
    tail_chars: int = Field(2_000, ge=0, description="Characters kept from the end. Default: 2000.")
