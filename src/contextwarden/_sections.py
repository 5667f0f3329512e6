"""The policy's and the task's settings (the configuration's ``policy:`` and ``task:``), apart
from the code that reads them: pydantic is loaded with the configuration, not with the warden."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["PolicyConfig", "TaskConfig"]


class PolicyConfig(BaseModel):
    """The cost model's parameters; see :mod:`contextwarden._policy` and ``docs/policy.md``."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    mode: Literal["cache_aware", "immediate"] = Field(
        "cache_aware",
        description="cache_aware: edit when over the trigger, when an edit pays for itself in "
        "cache reads, or when the cache has gone cold; immediate: every call, as soon as an "
        "edit helps. Models without prompt caching always behave as immediate. "
        "Default: cache_aware.",
    )
    pricing: Literal["conservative", "model"] = Field(
        "conservative",
        description="The cache prices an edit is weighed at, and the bill so far is kept at "
        "(so loss_cap bounds the bill at those prices). conservative: the model's own, bounded "
        "by the least favourable major provider's (read 0.1x, write 1.25x), so a decision pays "
        "wherever the request is routed; model: the model's own (those for a model the "
        "registry has no cache prices for). Default: conservative.",
    )
    horizon: int | None = Field(
        None,
        ge=1,
        description="Calls expected to come after this one, when you know it. Default: none "
        "(as many as the conversation has made so far, bounded by loss_cap).",
    )
    loss_cap: float = Field(
        0.01,
        ge=0,
        le=1,
        description="An optional edit is a bet that the session goes on; it is made only when "
        "losing the bet (the session ends right after) costs at most this share of the bill "
        "so far. Lower: never dearer by more than that, fewer early savings. Default: 0.01.",
    )
    summary_spacing: int = Field(
        6,
        ge=1,
        description="The fewest calls between two compactions with a summary: compactions "
        "over n calls are at most ceil(n / summary_spacing). Where the fixed part leaves too "
        "little room for a summary to buy that many calls, the window is cut without a "
        "summary in between. Higher: fewer summary calls and waits, a summary that lags "
        "further behind what was cut (recall by reference covers the gap). Default: 6.",
    )
    cache_ttl_s: float | None = Field(
        None,
        gt=0,
        description="Seconds an unused cached prefix lives; after that pending edits are free. "
        "Default: the model registry's figure.",
    )


class TaskConfig(BaseModel):
    """How the user's task is told from what a client injects into user messages."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    injected_patterns: tuple[str, ...] = Field(
        (),
        description="Extra regular expressions for blocks a client injects into user messages "
        "(removed before a message is judged to be the task). The defaults cover Claude Code, "
        "Codex CLI, Gemini CLI, aider, Cline and SWE-agent. Default: none.",
    )

    @field_validator("injected_patterns")
    @classmethod
    def _compiles(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for i, p in enumerate(value):
            try:
                re.compile(p, re.DOTALL | re.MULTILINE)
            except re.error as exc:
                raise ValueError(
                    f"task pattern {i} ({p!r}) is not a valid regular expression: {exc}"
                ) from None
        return value
