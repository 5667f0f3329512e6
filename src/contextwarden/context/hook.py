"""Calling the compaction hook: with the options it takes, sync or async, its result recorded.

A hook written before an option existed is called without it (its ``compact`` is read once);
the conversation records what it returns (:func:`.cuts.record_compaction`).
"""

from __future__ import annotations

import inspect
from typing import Any

from .._log import Compaction, WindowCut
from .._messages import Message
from .call import Call
from .conversation import Conversation
from .cuts import record_compaction

__all__ = ["HookCaller", "takes_keyword"]


def takes_keyword(fn: object, name: str) -> bool:
    """Whether ``fn`` can be called with the keyword ``name`` (it names it or takes
    ``**kwargs``): a hook or a summarizer written before an option existed is called without
    it."""
    try:
        params = inspect.signature(fn).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


class HookCaller:
    """One compaction hook and the options its ``compact`` takes."""

    def __init__(self, hook: Any) -> None:
        self.hook = hook
        compact = getattr(hook, "compact", None)
        self.takes = {
            k: takes_keyword(compact, k)
            for k in ("force", "events", "summarizer", "memo", "unsummarized")
        }

    def options(self, conv: Conversation, call: Call) -> dict[str, Any]:
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
        if ctx.memo is not None and self.takes["memo"]:
            options["memo"] = ctx.memo  # what this call's masks read, read once
        if self.takes["unsummarized"]:
            options["unsummarized"] = unsummarized(conv)
        return options

    def run(self, conv: Conversation, call: Call, forced: bool) -> None:
        """Compact the view now and record the result."""
        record_compaction(
            conv, call, self.hook.compact(conv.view, **self.options(conv, call)), forced
        )

    async def arun(self, conv: Conversation, call: Call, forced: bool) -> None:
        """:meth:`run` awaiting the hook's ``acompact`` when it has one (else ``compact`` in a
        worker thread)."""
        import asyncio  # loaded already: the caller's event loop runs (importing it costs 20 ms)

        options = self.options(conv, call)
        acompact = getattr(self.hook, "acompact", None)
        if acompact is not None and asyncio.iscoroutinefunction(acompact):
            result = await acompact(conv.view, **options)
        else:
            result = await asyncio.to_thread(self.hook.compact, conv.view, **options)
        record_compaction(conv, call, result, forced)


def unsummarized(conv: Conversation) -> tuple[Message, ...]:
    """What window cuts took out of the conversation since its last compaction with a summary
    (as it entered: a huge output cut, never masked), in history order: no summary stands for
    it yet."""
    cut: list[int] = []
    for e in conv.edits:
        if isinstance(e, Compaction):
            cut = []
        elif isinstance(e, WindowCut):
            cut.extend(i for lo, hi in e.removed for i in range(lo, hi))
    return tuple(conv.base[i] for i in sorted(cut))
