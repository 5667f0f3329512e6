"""The ``summarizer:`` config section (:class:`SummarizerConfig`), built by
:func:`~contextwarden.summarizers.llm.build_summarizer`: ``extractive`` (the default, offline)
or an LLM through ``openai`` (any Chat Completions server), ``anthropic``, ``responses`` or
``gemini``, its key read from the environment variable the config names."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from .._exceptions import ConfigError
from ._wire import WIRES

__all__ = [
    "SummarizerConfig",
    "SummarizerProvider",
    "parse_summarizer_spec",
]

#: An LLM summary's cap when none is given (the compaction config's ``summary_max_chars``).
DEFAULT_MAX_CHARS = 4000

SummarizerProvider = Literal["extractive", "openai", "anthropic", "responses", "gemini"]


class SummarizerConfig(BaseModel):
    """Who writes compaction summaries: the embedded extractive one (offline) or an LLM."""

    # An LLM writes better summaries; the default stays offline. A summary is written once
    # per compaction and kept; when an LLM summary fails, the extractive one stands in for it.

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    provider: SummarizerProvider = Field(
        "extractive",
        description="extractive (embedded, offline), openai (any Chat Completions server), "
        "anthropic (Messages API), responses (Responses API) or gemini (generateContent). "
        "Default: extractive.",
    )
    model: str | None = Field(
        None,
        description="Model that writes summaries; required for every provider but extractive. "
        "Default: none.",
    )
    base_url: str | None = Field(
        None,
        description="API root: requests go to {base_url}/chat/completions (openai), "
        "{base_url}/v1/messages (anthropic), {base_url}/responses (responses) or "
        "{base_url}/v1beta/models/MODEL:generateContent (gemini). Default: "
        "https://api.openai.com/v1, https://api.anthropic.com or "
        "https://generativelanguage.googleapis.com.",
    )
    api_key_env: str | None = Field(
        None,
        description="Environment variable holding the API key (the key itself never goes in "
        "the config). Default: OPENAI_API_KEY (openai, responses), ANTHROPIC_API_KEY or "
        "GEMINI_API_KEY.",
    )
    timeout_s: float = Field(
        60.0,
        gt=0,
        description="Total seconds one summary may take, retries included; then the "
        "extractive summary is used. Default: 60.",
    )
    max_retries: int = Field(
        2,
        ge=0,
        description="Retries after a rate limit, server error or timeout, within timeout_s. "
        "Default: 2.",
    )

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise PydanticCustomError("summarizer_base_url", "must start with http:// or https://")
        return value

    @model_validator(mode="after")
    def _model_for_llm(self) -> SummarizerConfig:
        if self.provider != "extractive" and not (self.model and self.model.strip()):
            raise PydanticCustomError(
                "summarizer_model",
                "provider '{provider}' needs a model (set summarizer.model)",
                {"provider": self.provider},
            )
        return self

    @property
    def key_env(self) -> str | None:
        """The environment variable the key is read from (None for extractive)."""
        if self.provider == "extractive":
            return None
        return self.api_key_env or WIRES[self.provider].key_env


def parse_summarizer_spec(spec: str) -> dict[str, str]:
    """The ``summarizer`` settings a command-line ``PROVIDER:MODEL`` names: ``extractive``,
    ``openai:gpt-4o-mini``, ``anthropic:claude-haiku-4-5``. Raises :class:`ConfigError`
    naming what is wrong."""
    provider, _, model = spec.strip().partition(":")
    provider = provider.strip().lower()
    allowed = ("extractive", *WIRES)
    if provider not in allowed:
        raise ConfigError(
            f"--summarizer {spec!r}: unknown provider {provider!r}; expected one of "
            f"{', '.join(allowed)} (as PROVIDER:MODEL, e.g. openai:gpt-4o-mini)"
        )
    if provider == "extractive":
        if model.strip():
            raise ConfigError(f"--summarizer {spec!r}: extractive takes no model")
        return {"provider": provider}
    if not model.strip():
        raise ConfigError(f"--summarizer {spec!r}: {provider} needs a model, as {provider}:MODEL")
    return {"provider": provider, "model": model.strip()}
