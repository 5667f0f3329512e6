"""Layer: strip old thinking (seed 000, layer 2)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ThinkingConfig"]


class ThinkingConfig(BaseModel):
    """Thinking stays only on the most recent assistant message(s) that have it (seed 000 L2)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="Strip old thinking blocks. Default: true.")
    keep_recent: int = Field(
        1, ge=0, description="Assistant messages (newest first) that keep their thinking. Default: 1."
    )
