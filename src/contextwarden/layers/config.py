"""The layers' own settings, one section each (the configuration's ``mask:``, ``thinking:``,
``truncate:`` and ``window:``); a layer reads them from a
:class:`~contextwarden.layers.base.LayerSettings`.

A leaf module: the configuration aggregates these sections and the layers read them, without
either importing the other; the layers name them for their types only (and give them on first
use), so that importing the warden does not load pydantic.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["MaskConfig", "ThinkingConfig", "TruncateConfig", "WindowConfig"]

#: Room the truncation marker takes (framing plus up to 20 digits); a config must leave room for
#: it so that a truncated text is never truncated again (idempotence).
MARKER_ROOM = 64


class MaskConfig(BaseModel):
    """Observation masking: old, long tool results shrink to head and tail lines."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    enabled: bool = Field(default=True, description="Mask old tool results. Default: true.")
    keep_recent: int = Field(
        default=6,
        ge=0,
        description="The most recent tool results kept whole by a mask that must make room "
        "(over the trigger), is free (the cache gone cold) or has no cache to weigh; a mask "
        "made only because it pays may reach any output the agent has acted on, as far as "
        "the cost model finds it pays. Default: 6.",
    )
    min_chars: int = Field(
        default=500,
        ge=0,
        description="Only results longer than this many characters are masked. Default: 500.",
    )
    head_lines: int = Field(default=3, ge=0, description="Lines kept from the start. Default: 3.")
    tail_lines: int = Field(default=2, ge=0, description="Lines kept from the end. Default: 2.")
    line_chars: int = Field(
        default=200,
        ge=20,
        description="A kept line longer than this keeps its first line_chars characters (and a "
        "' [...]' mark). Default: 200.",
    )
    exclude_tools: tuple[str, ...] = Field(
        default=(), description="Tool names whose results are never masked. Default: none."
    )
    plan: bool = Field(
        default=True,
        description="Mask knowing what a result is: the latest reads of the files the agent "
        "is editing by quoting their text (Edit, str_replace, apply_patch, SEARCH/REPLACE) "
        "stay whole within protect_ratio of the window; see also supersede. Default: true.",
    )
    supersede: bool = Field(
        default=False,
        description="With plan: a result superseded by a later one (the same file read again "
        "over the same lines, the same command run again, the same output) becomes a one-line "
        "marker as soon as a mask edit is made, even among the keep_recent newest. Off by "
        "default: on the recordings measured it lost lines later edits quote and saved little. "
        "Default: false.",
    )
    protect_ratio: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="With plan: the latest reads of the files the agent is editing stay whole, "
        "newest first, up to this share of the window in tokens, where a mask must make room "
        "(over the trigger, or the cache gone cold); a mask made only because it pays keeps "
        "them all whole, and the latest read of every other file too while the agent edits "
        "by quoting or has not edited yet. Default: 0.1.",
    )
    names: int = Field(
        default=32,
        ge=0,
        description="A masked result keeps a line naming up to this many files and code names "
        "of its omitted lines (definitions, paths, then the most frequent names), those the "
        "request does not hold otherwise (the call's arguments, what the agent or user wrote "
        "before it): one per 120 omitted characters of a file read, one per 400 of other "
        "output; 0 for none. Default: 32.",
    )


class ThinkingConfig(BaseModel):
    """Thinking stays only on the most recent assistant message(s) that have it."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    enabled: bool = Field(default=True, description="Strip old thinking blocks. Default: true.")
    keep_recent: int = Field(
        default=1,
        ge=0,
        description="Assistant messages (newest first) that keep their thinking. Default: 1.",
    )
    keep_current_turn: bool = Field(
        default=True,
        description="Never strip thinking from assistant messages after the last user message "
        "(the tool loop in progress), as Anthropic requires. Default: true.",
    )


class TruncateConfig(BaseModel):
    """Head-and-tail truncation of one tool result's text."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    enabled: bool = Field(
        default=True, description="Truncate oversized tool output. Default: true."
    )
    max_chars: int = Field(
        default=50_000,
        ge=1,
        description="A tool result longer than this is truncated. Default: 50000.",
    )
    head_chars: int = Field(
        default=2_000, ge=0, description="Characters kept from the start. Default: 2000."
    )
    tail_chars: int = Field(
        default=2_000, ge=0, description="Characters kept from the end. Default: 2000."
    )

    @model_validator(mode="after")
    def _room_for_marker(self) -> TruncateConfig:
        if self.head_chars + self.tail_chars + MARKER_ROOM > self.max_chars:
            raise ValueError(
                f"head_chars + tail_chars + {MARKER_ROOM} must not exceed max_chars "
                f"(got {self.head_chars} + {self.tail_chars} + {MARKER_ROOM} > {self.max_chars}); "
                "otherwise a truncated result would be longer than the limit"
            )
        return self


class WindowConfig(BaseModel):
    """Drop the oldest whole units (assistant message + its tool results) until under budget."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    enabled: bool = Field(
        default=True, description="Drop oldest units when over the trigger. Default: true."
    )
    keep_recent_messages: int = Field(
        default=20,
        ge=1,
        description="Messages at the end the window prefers to keep; it still drops "
        "into them, oldest first, when the budget demands it. Default: 20.",
    )
