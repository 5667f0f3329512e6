"""Building the summarizer a ``summarizer:`` configuration section describes."""

from __future__ import annotations

import os
from collections.abc import Mapping

from .._exceptions import ConfigError
from .base import Summarizer
from .config import DEFAULT_MAX_CHARS, SummarizerConfig
from .extractive import ExtractiveSummarizer
from .llm import LLMSummarizer

__all__ = ["build_summarizer"]


def build_summarizer(
    config: SummarizerConfig, *, env: Mapping[str, str] | None = None, max_chars: int | None = None
) -> Summarizer:
    """The summarizer ``config`` describes. An LLM provider's key variable must be set in ``env``
    (default ``os.environ``), else :class:`ConfigError` names it now rather than at the first
    compaction (a local server that needs no key: set it to anything); the key is read again at
    each call. ``max_chars`` caps every summary (the compaction's ``summary_max_chars``)."""
    if config.provider == "extractive":
        return ExtractiveSummarizer(max_chars=max_chars)
    environ = os.environ if env is None else env
    key_env = config.key_env
    assert key_env is not None and config.model is not None  # the validator saw to both
    if not environ.get(key_env):
        raise ConfigError(
            f"summarizer.api_key_env: the {config.provider} summarizer reads its key from "
            f"${key_env}, which is not set (set it, or name another variable in "
            f"summarizer.api_key_env)"
        )
    return LLMSummarizer(
        config.base_url,
        config.model,
        provider=config.provider,
        api_key_env=key_env,
        timeout=config.timeout_s,
        max_retries=config.max_retries,
        max_chars=DEFAULT_MAX_CHARS if max_chars is None else max_chars,
    )
