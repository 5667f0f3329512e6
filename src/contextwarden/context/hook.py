"""Calling the compaction hook: with the options it takes, sync or async, its result recorded.

A hook written before an option existed is called without it (its ``compact`` is read once);
the conversation records what it returns (:meth:`~.conversation.Conversation.record_compaction`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from .._compaction import Compactor
from .._config import WardenConfig
from .._hooks import takes_keyword
from ..summarizers.build import build_summarizer
from ..summarizers.extractive import ExtractiveSummarizer
from .call import Call
from .conversation import Conversation
from .result import CompactionHook

__all__ = ["HookCaller", "build_hook", "rebuilder", "summary_calls"]


def build_hook(
    config: WardenConfig, hook: CompactionHook | None, summarizer: Any, strategies: Any
) -> CompactionHook | None:
    """The compaction hook a warden of ``config`` calls: ``hook`` (bound to the config's
    compaction section when it takes one), else the built-in engine with ``summarizer`` (the
    configured one by default) and ``strategies``; None with compaction off."""
    if hook is not None:
        bind = getattr(hook, "bind", None)
        return bind(config.compaction) if bind is not None else hook
    if not config.compaction.enabled:
        return None
    if summarizer is None and config.summarizer.provider != "extractive":
        summarizer = build_summarizer(
            config.summarizer, max_chars=config.compaction.summary_max_chars
        )
    return Compactor(config.compaction, summarizer=summarizer, strategies=strategies)


def rebuilder(config: WardenConfig, hook: CompactionHook | None) -> HookCaller:
    """The recovery after a context overflow: a full summary with a hint in the system prompt,
    written by ``hook``'s summarizer when it is the built-in engine."""
    base = hook if isinstance(hook, Compactor) else None
    cfg = config.compaction.model_copy(update={"strategy_order": {}, "fallback_order": []})
    return HookCaller(
        Compactor(cfg, summarizer=base.summarizer if base is not None else None, hint_system=True)
    )


def summary_calls(hook: CompactionHook | None, summarizer: Any) -> int:
    """The summarizer calls a compaction now would pay for: ``max_summary_calls`` with an
    LLM summarizer (``summarizer`` for this call, else the hook's), 0 with the embedded
    extractive one or a compaction hook of the caller's."""
    if not isinstance(hook, Compactor):
        return 0
    used = summarizer if summarizer is not None else hook.summarizer
    return 0 if isinstance(used, ExtractiveSummarizer) else hook.config.max_summary_calls


class HookCaller:
    """One compaction hook and the options its ``compact`` takes."""

    def __init__(self, hook: Any) -> None:
        self.hook = hook
        compact = getattr(hook, "compact", None)
        self.takes = {k: takes_keyword(compact, k) for k in ("force", "events", "summarizer")}

    def options(self, call: Call) -> dict[str, Any]:
        """The keyword arguments of this call's ``compact``."""
        ctx = call.ctx
        options: dict[str, Any] = dict(
            budget=ctx.budget, counter=ctx.counter, tools=ctx.tools, focus=call.focus
        )
        if self.takes["force"]:
            options["force"] = True  # the warden decided: over the target after the lossless edits
        if self.takes["events"]:
            options["events"] = call.out.compactor_events
        if call.summarizer is not None and self.takes["summarizer"]:
            options["summarizer"] = call.summarizer
        return options

    def run(self, conv: Conversation, call: Call, forced: bool) -> None:
        """Compact the view now and record the result."""
        conv.record_compaction(call, self.hook.compact(conv.view, **self.options(call)), forced)

    async def arun(self, conv: Conversation, call: Call, forced: bool) -> None:
        """:meth:`run` awaiting the hook's ``acompact`` when it has one (else ``compact`` in a
        worker thread)."""
        options = self.options(call)
        acompact = getattr(self.hook, "acompact", None)
        if acompact is not None and asyncio.iscoroutinefunction(acompact):
            result = await acompact(conv.view, **options)
        else:
            result = await asyncio.to_thread(self.hook.compact, conv.view, **options)
        conv.record_compaction(call, result, forced)
