"""The triggers of a compaction: tokens over the trigger, the turn count, the model
writing the summary marker, a ``/compact [focus]`` user command; the fifth, an explicit API
call, is ``Compactor.compact(..., force=True)``."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from .._config import CompactionConfig
from .._messages import Message

if TYPE_CHECKING:
    from .._budget import Budget
    from .._tokens import TokenCounter

__all__ = ["Trigger", "TriggerReason", "explicit_trigger", "should_compact"]

TriggerReason = Literal["tokens", "turns", "marker", "command", "api"]

_COMPACT_CMD = re.compile(r"^\s*/compact(?:\s+(?P<focus>\S.*?))?\s*$", re.DOTALL)


@dataclass(frozen=True)
class Trigger:
    """Why a compaction should run now: ``reason``, and the ``focus`` a ``/compact``
    command asked for."""

    reason: TriggerReason
    focus: str | None = None
    detail: str = ""


def should_compact(
    messages: Sequence[Message],
    *,
    budget: Budget,
    counter: TokenCounter,
    turns: int | None = None,
    config: CompactionConfig | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> Trigger | None:
    """The first trigger that fires, or None: ``command`` (the last message is a user ``/compact
    [focus]``, not to be sent to the model), ``marker`` (the last assistant message, followed by
    nothing but its results, holds ``config.summary_marker``), ``turns`` (``turns``, default the
    assistant messages, reached ``config.turn_threshold``), ``tokens`` (over ``budget.trigger``).
    The fifth, an API call, is ``Compactor.compact(..., force=True)``."""
    cfg = config or CompactionConfig.model_validate({})
    explicit = explicit_trigger(messages, turns=turns, config=cfg)
    if explicit is not None:
        return explicit
    tokens = counter.count_messages(messages, tools=tools)
    if tokens > budget.trigger:
        return Trigger("tokens", None, f"{tokens} tokens over the trigger {budget.trigger}")
    return None


def explicit_trigger(
    messages: Sequence[Message],
    *,
    turns: int | None = None,
    config: CompactionConfig | None = None,
) -> Trigger | None:
    """The triggers besides tokens, in the order of :func:`should_compact`: the ``/compact``
    command, the summary marker, the turn count (``turns`` since the last compaction; default:
    the assistant messages in ``messages``)."""
    cfg = config or CompactionConfig.model_validate({})
    if messages:
        last = messages[-1]
        if last.role == "user":
            match = _COMPACT_CMD.match(last.text)
            if match is not None:
                return Trigger("command", match.group("focus"), "user command /compact")
        k = len(messages) - 1
        while k > 0 and messages[k].role == "tool":
            k -= 1
        if messages[k].role == "assistant" and cfg.summary_marker in messages[k].text:
            return Trigger("marker", None, f"the model wrote {cfg.summary_marker}")
    n = turns if turns is not None else sum(1 for m in messages if m.role == "assistant")
    if n >= cfg.turn_threshold:
        return Trigger("turns", None, f"{n} turns (threshold {cfg.turn_threshold})")
    return None
