"""Layer: the sliding window / context guard (seed 000 layer 3, seed 004 L2)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["WindowConfig"]


class WindowConfig(BaseModel):
    """Drop the oldest whole units (assistant message + its tool results) until under budget."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="Drop oldest units when over the trigger. Default: true.")
    keep_recent_messages: int = Field(
        20,
        ge=1,
        description="Messages at the end the window prefers to keep (seed 000); it still drops "
        "into them, oldest first, when the budget demands it. Default: 20.",
    )
