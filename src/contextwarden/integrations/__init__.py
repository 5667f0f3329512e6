"""Hooks for the agent frameworks users already run, one module per framework.

Each module imports its framework and is an optional extra (``pip install
'contextwarden[langchain]'``); importing :mod:`contextwarden.integrations` itself imports none of
them. Every hook keeps the framework's own history whole and hands the model the warden's copy:

* :mod:`.openai_agents`: :func:`~.openai_agents.input_filter` for the OpenAI Agents SDK's
  ``RunConfig(call_model_input_filter=...)`` (Responses API items).
* :mod:`.langchain`: :class:`~.langchain.ContextWardenMiddleware`, a LangChain v1
  ``AgentMiddleware`` on ``wrap_model_call``.
* :mod:`.autogen`: :class:`~.autogen.WardenChatCompletionContext`, an ``autogen-core``
  ``ChatCompletionContext``.
* :mod:`.mini_swe_agent`: :class:`~.mini_swe_agent.WardenModel`, a wrapper around any
  mini-swe-agent model.
* :mod:`.litellm`: :class:`~.litellm.ContextWardenHook`, a ``CustomLogger`` for the litellm
  proxy's ``async_pre_call_hook``.
* :mod:`.pydantic_ai`: :class:`~.pydantic_ai.ContextWarden`, a pydantic-ai capability
  (``prepare_model_request``) that is also a ``ProcessHistory`` processor.
* :mod:`.crewai`: :class:`~.crewai.WardenHooks`, CrewAI's ``before_llm_call`` /
  ``after_llm_call`` hooks.
* :mod:`.adk`: :class:`~.adk.WardenCallback`, a Google ADK ``before_model_callback``.

The recall tool (:mod:`contextwarden.recall`): the LangChain middleware offers it and answers it
itself; the Agents SDK filter and the AutoGen context each give a ``FunctionTool`` for the
agent's tools (``recall_tool()``), which the framework runs in-process; the other hooks do not
offer it.

See ``docs/integrations.md`` for what each hook sees and what it cannot.
"""

from __future__ import annotations

__all__: list[str] = []
