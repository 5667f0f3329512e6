"""Provider formats: lossless adapters between provider message dicts and :class:`Message`.

* OpenAI Chat Completions: :func:`from_openai`, :func:`to_openai` (:mod:`.openai`).
* Anthropic Messages: :func:`from_anthropic`, :func:`to_anthropic` (:mod:`.anthropic`).
* OpenAI Responses API input items: :func:`from_responses`, :func:`to_responses`
  (:mod:`.responses`).
* Anthropic prompt-cache breakpoints: :func:`add_cache_breakpoints`,
  :func:`count_cache_breakpoints` (:mod:`.cache_control`).
* Validity checks: :func:`validate_openai`, :func:`validate_anthropic` on provider dicts and
  :func:`check_messages` on canonical messages (:mod:`.validate`).

For every valid provider list ``d``: ``to_x(from_x(d)) == d``. Converting across providers
(``to_anthropic(from_openai(d))``) yields a valid request for the target API. How spelling,
provider-only keys and blocks the model has no type for are kept is described in
:mod:`._common`; :func:`opaque_payload` tells whether a block is such an opaque block.
:func:`check_tools` checks a request's tool definitions (a list of objects), naming the bad one.

Reading refuses what cannot be sent, naming the message and field (:class:`FormatError`):
lists and objects nested more than ``MAX_DEPTH`` (100) levels inside a message. Lone
surrogates in strings (half an emoji) are replaced by U+FFFD on the way in, so every output
encodes as UTF-8.
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
