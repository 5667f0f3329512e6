"""Hooks for the agent frameworks users already run, one module per framework (each an optional
extra, ``pip install 'contextwarden[langchain]'``; importing this package imports none of them):
:mod:`.openai_agents`, :mod:`.langchain`, :mod:`.autogen`, :mod:`.mini_swe_agent`,
:mod:`.litellm`, :mod:`.pydantic_ai`, :mod:`.crewai`, :mod:`.adk`. Every hook keeps the
framework's own history whole and hands the model the warden's copy. ``docs/integrations.md``
tells what each hook sees, what it cannot, and which offer the recall tool."""

from __future__ import annotations

__all__: list[str] = []
