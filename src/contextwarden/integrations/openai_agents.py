"""The OpenAI Agents SDK: a ``call_model_input_filter`` that runs the warden before each call.

::

    from agents import Agent, RunConfig, Runner
    from contextwarden.integrations.openai_agents import input_filter

    config = RunConfig(call_model_input_filter=input_filter(model="gpt-4o", window=128_000))
    await Runner.run(agent, "Fix the failing test", run_config=config)

How it works, and what the hook cannot see: docs/integrations.md (OpenAI Agents SDK).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from .._config import WardenConfig
from .._warden import TransformResult, Warden
from ..formats.responses import from_responses, to_responses
from ..recall import RECALL_TOOL_NAME, recall_ref, recall_tool
from ._common import answer_recall, hook_warden, model_name, output_limit, require

if TYPE_CHECKING:
    from agents import FunctionTool
    from agents.run_config import ModelInputData
else:  # the framework, imported with a message naming the extra when it is missing
    FunctionTool = require("agents", "openai-agents").FunctionTool
    ModelInputData = require("agents.run_config", "openai-agents").ModelInputData

__all__ = ["WardenInputFilter", "input_filter"]


def input_filter(
    model: str | None = None,
    window: int | None = None,
    config: WardenConfig | None = None,
) -> WardenInputFilter:
    """A filter for ``RunConfig(call_model_input_filter=...)`` (:class:`~._common.WardenHook`'s
    arguments); reuse it for all the runs of an application."""
    return WardenInputFilter(hook_warden(config, model, window), model)


class WardenInputFilter:
    """The callable :func:`input_filter` returns (async: the SDK awaits it): ``warden`` and
    ``last_result`` as a :class:`~._common.WardenHook`'s; ``recalls`` the recall calls answered."""

    def __init__(self, warden: Warden, model: str | None) -> None:
        self.warden = warden
        self._model = model
        self.last_result: TransformResult | None = None
        self.recalls = 0

    def recall_tool(self) -> FunctionTool:
        """The recall tool, for ``Agent(tools=[..., warden_filter.recall_tool()])``.

        It answers from the conversation of this filter's latest call: give each agent run that
        goes on at the same time as another its own filter.
        """
        definition = recall_tool("responses")
        return FunctionTool(
            name=RECALL_TOOL_NAME,
            description=definition["description"],
            params_json_schema=definition["parameters"],
            on_invoke_tool=self._answer_recall,
            strict_json_schema=True,
        )

    async def _answer_recall(self, context: Any, arguments: str) -> str:
        """The tool's output for one call: the originals kept under its ``ref``, or why none."""
        text, _ = answer_recall(self.warden, self.last_result, recall_ref(arguments))
        self.recalls += 1
        return text

    async def __call__(self, data: Any) -> Any:
        model_data = data.model_data
        # Items are dicts as the SDK keeps them; one a caller passed as a pydantic object is
        # read the way the SDK itself turns output items into input items.
        items = [
            i.model_dump(exclude_unset=True) if hasattr(i, "model_dump") else i
            for i in model_data.input
        ]
        model = self._model or model_name(data.agent, ("model",))
        messages = from_responses(items, instructions=model_data.instructions)
        limit = output_limit(getattr(data.agent, "model_settings", None))
        result = await self.warden.atransform(
            messages, model=model, tools=_tool_definitions(data.agent), max_tokens=limit
        )
        self.last_result = result
        instructions, out = to_responses(list(result.messages))
        return ModelInputData(input=cast(Any, out), instructions=instructions)

    def __repr__(self) -> str:
        return f"WardenInputFilter(model={self._model!r})"


def _tool_definitions(agent: Any) -> list[Mapping[str, Any]] | None:
    """The agent's function tools as OpenAI tool definitions: they count against the window.

    Hosted tools (web search, file search...) have no definition the client sends in full and
    are left out.
    """
    tools = getattr(agent, "tools", None) or ()
    out: list[Mapping[str, Any]] = []
    for tool in tools:
        schema = getattr(tool, "params_json_schema", None)
        name = getattr(tool, "name", None)
        if isinstance(schema, Mapping) and isinstance(name, str):
            fn = {"name": name, "description": getattr(tool, "description", "") or ""}
            out.append({"type": "function", "function": {**fn, "parameters": dict(schema)}})
    return out or None
