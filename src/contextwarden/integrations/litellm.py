"""litellm's proxy: a ``CustomLogger`` whose ``async_pre_call_hook`` runs the warden.

In the litellm proxy's ``config.yaml``::

    litellm_settings:
      callbacks: my_hooks.warden_hook      # my_hooks.py: warden_hook = ContextWardenHook(window=128_000)

How it works, and what the hook cannot see: docs/integrations.md (litellm proxy).
"""

from __future__ import annotations

from typing import Any

from .._exceptions import UnknownModelError
from .._warden import TransformResult
from ..formats._common import reply_limit
from ..formats.openai import from_openai, to_openai
from ..formats.responses import from_responses, to_responses
from ._common import WardenHook, require

# litellm is not in the dev environment (its versions on some indexes pin openai<3): typed as Any.
CustomLogger: Any = require("litellm.integrations.custom_logger", "litellm").CustomLogger

__all__ = ["ContextWardenHook"]

_CHAT_CALLS = frozenset({"completion", "acompletion"})
_RESPONSES_CALLS = frozenset({"responses", "aresponses"})


class ContextWardenHook(WardenHook, CustomLogger):  # type: ignore[misc]
    """A litellm ``CustomLogger`` for the proxy's pre-call hook (:class:`WardenHook`'s
    arguments; ``model`` default: the request's; a model the registry does not know, such as a
    proxy alias, gets the lossless layers only unless ``window`` is given)."""

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: Any
    ) -> dict[str, Any]:
        kind = str(getattr(call_type, "value", call_type))
        model = self._model or (data.get("model") if isinstance(data.get("model"), str) else None)
        tools = data.get("tools") if isinstance(data.get("tools"), list) else None
        if kind in _CHAT_CALLS and isinstance(data.get("messages"), list):
            limit = reply_limit(data, "openai")
            result = await self._run(from_openai(data["messages"]), model, tools, limit)
            return {**data, "messages": to_openai(list(result.messages))}
        if (
            kind in _RESPONSES_CALLS
            and isinstance(data.get("input"), list)
            and data.get("previous_response_id") is None
        ):
            messages = from_responses(data["input"], instructions=data.get("instructions"))
            result = await self._run(messages, model, None, reply_limit(data, "responses"))
            instructions, items = to_responses(list(result.messages))
            out = {**data, "input": items}
            if instructions is not None:
                out["instructions"] = instructions
            return out
        return data

    async def _run(
        self, messages: Any, model: str | None, tools: Any, limit: int | None = None
    ) -> TransformResult:
        """``limit``: the request's output limit, the room its reply keeps."""
        try:
            result = await self.warden.atransform(
                messages, model=model, tools=tools, max_tokens=limit
            )
        except UnknownModelError:
            # A proxy alias the registry does not know: the lossless layers still help.
            result = await self.warden.atransform(messages, tools=tools)
        self.last_result = result
        return result
