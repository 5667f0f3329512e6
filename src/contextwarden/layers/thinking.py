"""Layer: strip old thinking (layer 2).

Thinking stays on the ``keep_recent`` newest assistant messages that have it and is removed from
older ones. Provider rules come first:

* A thinking block is removed whole or kept whole, never edited: Anthropic verifies the
  ``signature`` of a signed block and cannot read a redacted one.
* With ``keep_current_turn`` (the default), the assistant messages after the last user message,
  i.e. the tool loop in progress, keep all their thinking: Anthropic requires the thinking
  blocks of the current assistant turn to come back unchanged, and DeepSeek's thinking mode asks
  the same of ``reasoning_content`` within a turn. In a one-user-message agent run the whole run
  is that turn, so nothing is stripped there; the sliding window still bounds it.
* A message holding nothing but thinking keeps it (removing it would leave an empty message).
* Pinned messages are left alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._events import Event
from .._lazy import lazy_names
from .._messages import Message, ThinkingBlock
from .base import Applied, LayerContext, LayerResult, place_events, require_messages
from .units import HistoryIndex, index_of

if TYPE_CHECKING:
    from .config import ThinkingConfig

__all__ = ["ThinkingConfig", "strip_thinking"]

#: the settings, given on first use: importing the warden does not load pydantic
_HOMES = {"ThinkingConfig": ".config"}
__getattr__ = lazy_names(__name__, _HOMES, globals())

LAYER = "thinking"


def strip_message(message: Message, ctx: LayerContext) -> Applied:
    """Remove every thinking block of one assistant message (unless nothing else would remain)."""
    kept = tuple(b for b in message.content if not isinstance(b, ThinkingBlock))
    if not kept or len(kept) == len(message.content):
        return message, ()
    removed = [b for b in message.content if isinstance(b, ThinkingBlock)]
    out = message.replace(content=kept)
    event = Event(
        "thinking_stripped",
        LAYER,
        None,
        None,
        ctx.counter.count_message(message),
        ctx.counter.count_message(out),
        sum(len(b.data or "") if b.redacted else len(b.thinking) for b in removed),
        0,
        f"{len(removed)} blocks" if len(removed) > 1 else "",
    )
    return out, (event,)


def strip_decision(message: Message, i: int, index: HistoryIndex, keep_current_turn: bool) -> bool:
    """True when message ``i`` loses its thinking."""
    if message.role != "assistant" or message.is_pinned:
        return False
    if not index.thinking_is_old(i, keep_current_turn=keep_current_turn):
        return False
    return any(isinstance(b, ThinkingBlock) for b in message.content)


def strip_thinking(messages: Sequence[Message], ctx: LayerContext) -> LayerResult:
    """Remove thinking from all but the ``keep_recent`` newest assistant messages
    that have it, within the provider rules in the module docstring. Pure; one
    ``thinking_stripped`` event per message changed."""
    cfg = ctx.config.thinking
    require_messages(messages)
    if not cfg.enabled:
        return LayerResult(tuple(messages))
    index = index_of(messages, keep_results=0, keep_thinking=cfg.keep_recent)
    out: list[Message] = []
    events: list[Event] = []
    for i, m in enumerate(messages):
        if not strip_decision(m, i, index, cfg.keep_current_turn):
            out.append(m)
            continue
        new, templates = strip_message(m, ctx)
        out.append(new)
        place_events(templates, i, events)
    return LayerResult(tuple(out), tuple(events))
