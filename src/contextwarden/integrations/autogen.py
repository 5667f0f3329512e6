"""AutoGen (``autogen-core``): a ``ChatCompletionContext`` whose view is the warden's copy.

::

    from autogen_agentchat.agents import AssistantAgent
    from contextwarden.integrations.autogen import WardenChatCompletionContext

    agent = AssistantAgent("coder", model_client, model_context=WardenChatCompletionContext(
        model="gpt-4o", window=128_000))

How it works, and what the hook cannot see: docs/integrations.md (AutoGen).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from .._config import WardenConfig
from .._messages import Block, ImageBlock, Message, TextBlock, ThinkingBlock, ToolCallBlock
from .._messages import ToolResultBlock as ResultBlock
from .._warden import TransformResult
from ..recall import RECALL_TOOL_NAME
from ..recall import recall_tool as recall_definition
from ._common import answer_recall, hook_warden, require

if TYPE_CHECKING:
    from autogen_core import Component
    from autogen_core.model_context import ChatCompletionContext
    from autogen_core.models import LLMMessage, SystemMessage, UserMessage
    from autogen_core.tools import FunctionTool
else:  # the framework, imported with a message naming the extra when it is missing
    _core = require("autogen_core", "autogen")
    Component = _core.Component
    FunctionTool = require("autogen_core.tools", "autogen").FunctionTool
    ChatCompletionContext = require("autogen_core.model_context", "autogen").ChatCompletionContext
    _models = require("autogen_core.models", "autogen")
    SystemMessage, UserMessage = _models.SystemMessage, _models.UserMessage
    LLMMessage = Any

__all__ = ["WardenChatCompletionContext", "WardenContextConfig"]

SOURCE = "contextwarden"  # the ``source`` of a message the warden wrote


class WardenContextConfig(BaseModel):
    """The component config of :class:`WardenChatCompletionContext` (``dump_component()``)."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(
        default=None, description="Model name for the tokenizer and window. Default: none."
    )
    window: int | None = Field(
        default=None, gt=0, description="Context window in tokens. Default: the model's."
    )
    warden: dict[str, Any] | None = Field(
        default=None, description="WardenConfig fields. Default: the defaults."
    )
    initial_messages: list[Any] | None = Field(
        default=None, description="Messages the context starts with. Default: none."
    )


class WardenChatCompletionContext(ChatCompletionContext, Component[WardenContextConfig]):
    """A chat completion context that keeps every message and serves the warden's view
    (:class:`~._common.WardenHook`'s arguments); ``recalls`` how many calls of
    :meth:`recall_tool` were answered."""

    component_config_schema = WardenContextConfig
    component_provider_override = "contextwarden.integrations.autogen.WardenChatCompletionContext"

    def __init__(
        self,
        model: str | None = None,
        window: int | None = None,
        config: WardenConfig | None = None,
        initial_messages: list[LLMMessage] | None = None,
    ) -> None:
        super().__init__(initial_messages)
        self._model = model
        self._window = window
        self.warden = hook_warden(config, model, window)
        self.last_result: TransformResult | None = None
        self.recalls = 0

    def recall_tool(self) -> FunctionTool:
        """The recall tool: an ``autogen-core`` ``FunctionTool`` answering from this context's
        latest view (its conversation in the warden)."""
        description = recall_definition("openai")["function"]["description"]
        return FunctionTool(self._answer_recall, description, name=RECALL_TOOL_NAME, strict=True)

    async def _answer_recall(
        self, ref: Annotated[str, "The reference, e.g. cw:3f2a9c0d11e4b7a6."]
    ) -> str:
        text, _ = answer_recall(self.warden, self.last_result, ref.strip())
        self.recalls += 1
        return text

    async def get_messages(self) -> list[LLMMessage]:
        """The warden's copy of the stored messages, for the next model call."""
        stored = list(self._messages)
        messages = [to_message(m, f"ag-{i}") for i, m in enumerate(stored)]
        result = await self.warden.atransform(messages, model=self._model)
        self.last_result = result
        return [_back(out, stored, messages) for out in result.messages]

    def _to_config(self) -> WardenContextConfig:
        cfg = self.warden.config
        return WardenContextConfig(
            model=self._model,
            window=self._window,
            warden=cfg.model_dump(exclude_unset=True) or None,
            initial_messages=self._initial_messages,
        )

    @classmethod
    def _from_config(cls, config: WardenContextConfig) -> WardenChatCompletionContext:
        warden = WardenConfig.model_validate(config.warden) if config.warden else None
        return cls(config.model, config.window, warden, config.initial_messages)


def to_message(m: Any, key: str) -> Message:
    """The canonical value of one AutoGen ``LLMMessage`` (``id`` set to ``key``)."""
    kind = getattr(m, "type", None)
    if kind == "SystemMessage":
        return Message("system", (TextBlock(m.content),), id=key)
    if kind == "UserMessage":
        parts = m.content if isinstance(m.content, list) else [m.content]
        blocks: list[Block] = []
        for p in parts:
            if isinstance(p, str):
                blocks.append(TextBlock(p))
            else:  # an autogen_core.Image
                blocks.append(ImageBlock({"url": p.data_uri}))
        return Message("user", tuple(blocks), name=m.source, id=key)
    if kind == "AssistantMessage":
        blocks = [ThinkingBlock(m.thought)] if m.thought else []
        if isinstance(m.content, str):
            blocks.append(TextBlock(m.content))
        else:
            blocks.extend(ToolCallBlock(c.id, c.name, c.arguments) for c in m.content)
        return Message("assistant", tuple(blocks), name=m.source, id=key)
    if kind == "FunctionExecutionResultMessage":
        results = tuple(
            ResultBlock(r.call_id, r.content, is_error=bool(r.is_error), extra={"name": r.name})
            for r in m.content
        )
        return Message("tool", results, id=key)
    raise TypeError(f"message {key}: not an AutoGen LLMMessage ({type(m).__name__})")


def _back(out: Message, stored: list[Any], given: list[Message]) -> Any:
    """The AutoGen message for one canonical output message."""
    key = out.id or ""
    index = int(key[3:]) if key.startswith("ag-") else -1
    if index < 0:  # written by the warden (a summary)
        if out.role == "system":
            return SystemMessage(content=out.text)
        return UserMessage(content=out.text, source=SOURCE)
    original = stored[index]
    if out is given[index] or out == given[index]:
        return original  # untouched: the stored object
    kind = original.type
    if kind in ("SystemMessage", "UserMessage") and all(type(b) is TextBlock for b in out.content):
        return original.model_copy(update={"content": out.text})
    if kind == "AssistantMessage":
        thought = "\n".join(b.thinking for b in out.thinking) or None
        update: dict[str, Any] = {"thought": thought}
        if isinstance(original.content, str):
            update["content"] = out.text
        else:
            kept = {c.id for c in out.tool_calls}
            update["content"] = [c for c in original.content if c.id in kept]
        return original.model_copy(update=update)
    if kind == "FunctionExecutionResultMessage":
        by_id = {r.call_id: r for r in original.content}
        results = [
            by_id[b.tool_call_id].model_copy(update={"content": b.text})
            for b in out.tool_results
            if b.tool_call_id in by_id
        ]
        return original.model_copy(update={"content": results})
    return original
