"""CrewAI 1.x: ``before_llm_call`` / ``after_llm_call`` hooks that hand the model the warden's
copy of an agent's messages.

::

    from contextwarden.integrations.crewai import WardenHooks

    hooks = WardenHooks(window=128_000).register()   # every agent, crew and flow
    crew.kickoff()
    hooks.unregister()

How it works, and what the hook cannot see: docs/integrations.md (CrewAI).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .. import Message, WardenConfig, from_openai, to_openai
from ._common import WardenHook, model_name, output_limit, require

if TYPE_CHECKING:
    from crewai import hooks as crew_hooks
else:  # the framework, imported with a message naming the extra when it is missing
    crew_hooks = require("crewai.hooks", "crewai")

__all__ = ["WardenHooks"]


class WardenHooks(WardenHook):
    """A :class:`~contextwarden.Warden` behind CrewAI's model-call hooks (:class:`WardenHook`'s
    arguments; ``model`` default: the agent's LLM ``model``). :meth:`register` adds the hooks to
    CrewAI's global hooks; pass them to a crew's or an agent's hooks to scope them."""

    def __init__(
        self,
        model: str | None = None,
        window: int | None = None,
        config: WardenConfig | None = None,
    ) -> None:
        super().__init__(model, window, config)
        # per executor: (the whole history, the copy put in its list)
        self._held: dict[int, tuple[list[Any], list[Any]]] = {}

    def register(self) -> WardenHooks:
        """Add both hooks to CrewAI's global hooks (agents built after this call use them)."""
        crew_hooks.register_before_llm_call_hook(self.before_llm_call)
        crew_hooks.register_after_llm_call_hook(self.after_llm_call)
        return self

    def unregister(self) -> None:
        """Remove both hooks from CrewAI's global hooks."""
        crew_hooks.unregister_before_llm_call_hook(self.before_llm_call)
        crew_hooks.unregister_after_llm_call_hook(self.after_llm_call)

    def before_llm_call(self, context: Any) -> None:
        messages = context.messages
        history = self._whole(context)
        model = self._model or model_name(context.llm, ("model",))
        canonical = [_read(i, m) for i, m in enumerate(history)]
        result = self.warden.transform(
            [m for group in canonical for m in group],
            model=model,
            tools=_tools(context.executor),
            max_tokens=output_limit(context.llm),
        )
        self.last_result = result
        given = [_back(msg, history, canonical) for msg in result.messages]
        messages[:] = given
        self._held[id(context.executor)] = (history, list(given))

    def after_llm_call(self, context: Any) -> None:
        context.messages[:] = self._whole(context)
        self._held.pop(id(context.executor), None)

    def _whole(self, context: Any) -> list[Any]:
        """The executor's whole history: what the hook last set aside, and what the agent
        appended to the copy since (the list as it is when the copy is no longer there)."""
        messages = context.messages
        held = self._held.get(id(context.executor))
        if held is not None:
            whole, given = held
            n = len(given)
            if len(messages) >= n and all(a is b for a, b in zip(messages, given, strict=False)):
                return [*whole, *messages[n:]]
        return list(messages)


def _read(i: int, message: Any) -> list[Message]:
    """One executor message as canonical values keyed by its position (``crew-I``, and
    ``crew-I#K`` for the rest of a tool message that splits)."""
    if not isinstance(message, Mapping):
        raise TypeError(f"message {i}: expected a dict, got {type(message).__name__}")
    try:
        converted = from_openai([dict(message)])
    except Exception as exc:
        raise ValueError(f"WardenHooks: message {i} could not be read: {exc}") from exc
    return [
        m.replace(id=f"crew-{i}" if k == 0 else f"crew-{i}#{k}") for k, m in enumerate(converted)
    ]


def _back(msg: Message, history: Sequence[Any], canonical: Sequence[Sequence[Message]]) -> Any:
    """The executor's own dict for an untouched message; a new dict for an edited or new one."""
    key = msg.id if isinstance(msg.id, str) else ""
    if key.startswith("crew-") and "#" not in key:
        i = int(key[5:])
        group = canonical[i]
        if len(group) == 1 and msg == group[0]:
            return history[i]
    return to_openai([msg])[0]


def _tools(executor: Any) -> list[Mapping[str, Any]] | None:
    """The executor's native tool schemas (OpenAI format): they count against the window."""
    tools = getattr(executor, "_openai_tools", None)
    return [t for t in tools if isinstance(t, Mapping)] or None if isinstance(tools, list) else None
