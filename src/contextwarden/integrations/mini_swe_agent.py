"""mini-swe-agent: a model wrapper whose requests go through the warden.

::

    from minisweagent.agents.default import DefaultAgent
    from minisweagent.models import get_model
    from contextwarden.integrations.mini_swe_agent import WardenModel

    model = WardenModel(get_model("openai/gpt-4o"), window=128_000)
    DefaultAgent(model, env, **agent_config).run(task)

How it works, and what the hook cannot see: docs/integrations.md (mini-swe-agent).
"""

from __future__ import annotations

from typing import Any

from .._config import WardenConfig
from ._common import WardenHook, model_name

__all__ = ["WardenModel"]

_CHAT_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


class WardenModel(WardenHook):
    """Wraps a mini-swe-agent model: ``query`` sends the warden's copy of the messages
    (:class:`WardenHook`'s arguments; ``model`` default: the wrapped ``config.model_name``)."""

    def __init__(
        self,
        inner: Any,
        model: str | None = None,
        window: int | None = None,
        config: WardenConfig | None = None,
    ) -> None:
        if not callable(getattr(inner, "query", None)):
            raise TypeError(f"inner must be a mini-swe-agent model, got {type(inner).__name__}")
        self.inner = inner
        super().__init__(model, window, config)

    def query(self, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        """The wrapped model's ``query`` on the warden's copy of ``messages``."""
        if any(not isinstance(m, dict) or m.get("object") == "response" for m in messages):
            return self.inner.query(messages, **kwargs)  # Responses-API history: not ours
        chat = [
            {k: v for k, v in m.items() if k != "extra"}
            for m in messages
            if m.get("role") in _CHAT_ROLES
        ]
        model = self._model or model_name(getattr(self.inner, "config", None), ("model_name",))
        out, result = self.warden.transform_openai(chat, model=model)
        self.last_result = result
        return self.inner.query(out, **kwargs)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names this wrapper lacks: everything else is the wrapped model's.
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"WardenModel({self.inner!r})"
