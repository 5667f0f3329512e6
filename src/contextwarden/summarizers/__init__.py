"""Summarizers: turn a span of agent history into a four-part summary.

:class:`ExtractiveSummarizer` (embedded, no LLM, deterministic) and :class:`LLMSummarizer`
(Chat Completions, Anthropic Messages, Responses, Gemini) follow the :class:`Summarizer`
protocol over a :class:`SummaryRequest`; :func:`check_summary` says why a summary is unfit and
:func:`summary_cache_key` keys its cache; :class:`SummarizerConfig` / :func:`build_summarizer`
are the ``summarizer:`` config section and what it builds; :func:`summarizer_for_request` is the
proxy's; :func:`extract_facts` / :class:`Facts` read what a history says without an LLM."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .._lazy import lazy_names
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
    from .llm import LLMSummarizer, build_summarizer
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
    "build_summarizer": ".llm",
    "summarizer_for_request": ".upstream",
}


__getattr__ = lazy_names(__name__, _HOMES, globals())
