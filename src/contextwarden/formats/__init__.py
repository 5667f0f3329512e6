"""Provider formats: lossless adapters between provider message dicts and :class:`Message`.

How it works: docs/formats.md (`contextwarden.formats`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._common import check_tools, opaque_payload
    from ._prefix import ImagedList as ImagedList
    from ._prefix import PrefixCodec as PrefixCodec
    from .anthropic import LEADING_USER_TEXT, from_anthropic, to_anthropic
    from .anthropic import compaction_block_at as compaction_block_at
    from .cache_control import add_cache_breakpoints, count_cache_breakpoints
    from .openai import from_openai, to_openai
    from .responses import compaction_item_at as compaction_item_at
    from .responses import compaction_trigger as compaction_trigger
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

#: Where each name is defined, imported from there on first use: a warden reading neutral
#: messages loads no adapter (they are a fifth of ``from contextwarden import Warden``). The
#: names not in ``__all__`` are the warden's provider-dict entry points' helpers.
_HOMES: Mapping[str, str] = {
    name: "." + home
    for home, names in {
        "_common": "check_tools opaque_payload",
        "_prefix": "ImagedList PrefixCodec",
        "anthropic": "LEADING_USER_TEXT compaction_block_at from_anthropic to_anthropic",
        "cache_control": "add_cache_breakpoints count_cache_breakpoints",
        "openai": "from_openai to_openai",
        "responses": "compaction_item_at compaction_trigger from_responses to_responses",
        "validate": "check_messages validate_anthropic validate_openai",
    }.items()
    for name in names.split()
}

__getattr__ = lazy_names(__name__, _HOMES, globals())
