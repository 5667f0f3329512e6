"""Summarizers: turn a span of agent history into a four-part summary.

- :class:`ExtractiveSummarizer`: the embedded default, no LLM, deterministic.
- :class:`LLMSummarizer`: an LLM through Chat Completions (any OpenAI-compatible server),
  Anthropic Messages, the Responses API or Gemini ``generateContent``.
- :class:`Summarizer`: the protocol both follow (``summarize`` / ``asummarize``), with
  :class:`SummaryRequest` as input.
- :func:`check_summary`: why a summary is unfit to replace what it summarises (empty list: fit);
  :func:`summary_cache_key`: the key a summary is cached under.
- :class:`SummarizerConfig` / :func:`build_summarizer`: the ``summarizer:`` config section and
  the summarizer it describes (``parse_summarizer_spec`` reads the CLI's ``PROVIDER:MODEL``).
- :func:`summarizer_for_request`: an LLM summarizer on the proxy's upstream with the calling
  client's credentials.
- :func:`extract_facts` / :class:`Facts` (from :mod:`contextwarden.analysis.facts`): what a
  history says (task, commands, files, errors, plan, pins, findings), without an LLM.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import TYPE_CHECKING, Any

from ..analysis.facts import CommandRun, ErrorSeen, Facts, FileTouch, TodoItem, extract_facts
from ..analysis.sections import SummarySections, parse_summary
from .base import (
    Summarizer,
    SummaryRequest,
    check_summary,
    effective_cap,
    request_facts,
    summary_cache_key,
)
from .config import SummarizerConfig, parse_summarizer_spec
from .extractive import ExtractiveSummarizer

if TYPE_CHECKING:
    from .build import build_summarizer
    from .llm import LLMSummarizer
    from .upstream import summarizer_for_request

__all__ = [
    "CommandRun",
    "ErrorSeen",
    "ExtractiveSummarizer",
    "Facts",
    "FileTouch",
    "LLMSummarizer",
    "Summarizer",
    "SummarizerConfig",
    "SummaryRequest",
    "SummarySections",
    "TodoItem",
    "build_summarizer",
    "check_summary",
    "effective_cap",
    "extract_facts",
    "parse_summarizer_spec",
    "parse_summary",
    "request_facts",
    "summarizer_for_request",
    "summary_cache_key",
]

#: The names whose modules talk HTTP (httpx and tenacity, with their own imports, are a tenth of a
#: second): each is imported from its module on first use, so that the extractive summarizer
#: does not pay for it.
_HOMES: Mapping[str, str] = {
    "LLMSummarizer": ".llm",
    "build_summarizer": ".build",
    "summarizer_for_request": ".upstream",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(home, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value
