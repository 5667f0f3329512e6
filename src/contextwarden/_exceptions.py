"""The exceptions contextwarden raises. One tree, rooted at :class:`ContextWardenError`::

    ContextWardenError
    ├── FormatError            a provider message list or a transcript file is malformed
    │   └── TranscriptError    ... while loading a file (names the file, line/message, field)
    ├── ConfigError            a bad configuration value or key (names its path)
    ├── UnknownModelError      no context window known for a model, and none given
    ├── TokenizerError         the BPE backend failed (translated from the backend's error)
    ├── SummarizerError        a summarizer failed or returned something unusable
    ├── ContextOverflowError   the context does not fit the window (ours or the provider's)
    ├── CompactionRefused      the user declined a lossy compaction and the policy is "raise"
    └── StoreError             the session store failed (translated from sqlite/redis errors)

Foreign errors (the tokenizer backend, httpx, sqlite) are translated at the boundary with
``raise ... from exc`` so callers catch one family.
"""

from __future__ import annotations

import re

__all__ = [
    "OVERFLOW_RE",
    "CompactionRefused",
    "ConfigError",
    "ContextOverflowError",
    "ContextWardenError",
    "FormatError",
    "StoreError",
    "SummarizerError",
    "TokenizerError",
    "TranscriptError",
    "UnknownModelError",
]


class ContextWardenError(Exception):
    """Base of every error contextwarden raises on purpose."""


class FormatError(ContextWardenError, ValueError):
    """A provider message list is malformed.

    ``index`` is the message's position, ``field`` the offending key path (``content[2].type``).
    """

    def __init__(self, message: str, *, index: int | None = None, field: str | None = None):
        where = [*self._source()]
        if index is not None:
            where.append(f"message {index}")
        if field:
            where.append(f"field {field!r}")
        prefix = f"{', '.join(where)}: " if where else ""
        super().__init__(prefix + message)
        self.index = index
        self.field = field
        self.reason = message

    def _source(self) -> list[str]:
        return []


class TranscriptError(FormatError):
    """A transcript file could not be read; names the file and the line or message."""

    def __init__(
        self,
        path: str,
        message: str,
        *,
        line: int | None = None,
        index: int | None = None,
        field: str | None = None,
    ):
        self.path = path
        self.line = line
        super().__init__(message, index=index, field=field)

    def _source(self) -> list[str]:
        return [self.path] if self.line is None else [self.path, f"line {self.line}"]


class ConfigError(ContextWardenError, ValueError):
    """A configuration value or key is wrong; the message names its path."""


class UnknownModelError(ContextWardenError, KeyError):
    """No context window is known for the model and none was given."""

    def __str__(self) -> str:  # KeyError quotes its argument; we want a sentence
        return str(self.args[0]) if self.args else "unknown model"


class TokenizerError(ContextWardenError, RuntimeError):
    """The BPE backend failed."""


class SummarizerError(ContextWardenError, RuntimeError):
    """A summarizer failed or returned an unusable summary. ``status``: the HTTP status of the
    last answer when an LLM was asked (None when none came); ``reason``: why, in the upstream's
    own words where it gave some (what a caller logs and counts)."""

    def __init__(self, message: str, *, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason or message


class ContextOverflowError(ContextWardenError):
    """The context does not fit the model's window (raised by our guard or mapped from a
    provider's "context length exceeded" error). ``tokens`` is what the request needs and
    ``limit`` what it may use, when known; without a message, one naming both is made."""

    def __init__(
        self, message: str | None = None, *, tokens: int | None = None, limit: int | None = None
    ):
        if message is None:
            needs = f"{tokens:,} tokens" if tokens is not None else "more tokens"
            over = f"the limit of {limit:,}" if limit is not None else "the limit"
            message = f"the request needs {needs}, over {over}"
        super().__init__(message)
        self.tokens = tokens
        self.limit = limit


#: What providers write when a request does not fit (OpenAI ``context_length_exceeded``,
#: Anthropic "prompt is too long", vLLM/llama.cpp "maximum context length", Gemini "exceeds").
OVERFLOW_RE = re.compile(
    r"context[_ ]length[_ ]exceeded|prompt is too long|maximum context length|context window|"
    r"too many tokens|exceeds the (?:maximum|context)|input is too long|reduce the length",
    re.IGNORECASE,
)


class CompactionRefused(ContextWardenError):
    """The confirmation callback declined a lossy compaction and ``on_refusal`` is "raise"."""


class StoreError(ContextWardenError, RuntimeError):
    """The session store failed."""
