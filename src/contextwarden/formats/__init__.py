"""Provider formats: lossless adapters between provider message dicts and :class:`Message`.

How it works: docs/formats.md (`contextwarden.formats`).
"""

from __future__ import annotations

from ._common import check_tools, opaque_payload
from .anthropic import LEADING_USER_TEXT, from_anthropic, to_anthropic
from .cache_control import add_cache_breakpoints, count_cache_breakpoints
from .openai import from_openai, to_openai
from .responses import from_responses, to_responses
from .validate import check_messages, validate_anthropic, validate_openai

__all__ = [
    "LEADING_USER_TEXT",
    "add_cache_breakpoints",
    "check_messages",
    "check_tools",
    "count_cache_breakpoints",
    "from_anthropic",
    "from_openai",
    "from_responses",
    "opaque_payload",
    "to_anthropic",
    "to_openai",
    "to_responses",
    "validate_anthropic",
    "validate_openai",
]
