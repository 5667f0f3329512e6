"""Layer: mask old tool results (seed 000, layer 1)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MaskConfig"]


class MaskConfig(BaseModel):
    """Observation masking: old, long tool results shrink to head and tail lines (seed 000 L1)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="Mask old tool results. Default: true.")
    keep_recent: int = Field(
        6, ge=0, description="The most recent tool results kept whole. Default: 6."
    )
    min_chars: int = Field(
        500, ge=0, description="Only results longer than this many characters are masked. Default: 500."
    )
    head_lines: int = Field(3, ge=0, description="Lines kept from the start. Default: 3.")
    tail_lines: int = Field(2, ge=0, description="Lines kept from the end. Default: 2.")
    exclude_tools: tuple[str, ...] = Field(
        (), description="Tool names whose results are never masked. Default: none."
    )
