"""One call: the request's values, checked once, and what the call did.

A :class:`Call` is a value: the request's history (without its per-call ``tail``), how it is
counted, budgeted and priced, and the caller's options. What the call does is appended to its
:class:`Outcome` (events, the edits made, the originals they hid, the compaction), never
rewritten; the conversation's running figures (the request's tokens, where this call's
messages start) live in the conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._events import CompactResult, Event
from .._exceptions import ConfigError, FormatError
from .._log import Edit
from .._messages import Message
from ..layers.base import LayerContext

if TYPE_CHECKING:
    from .._policy import CacheRates

__all__ = ["Call", "Outcome", "check_arguments"]


@dataclass
class Outcome:
    """What one call did, in the order it did it."""

    events: list[Event] = field(default_factory=list)
    #: the compaction hook's own events (put in :attr:`events` when its result is recorded)
    compactor_events: list[Event] = field(default_factory=list)
    edits: list[Edit] = field(default_factory=list)
    #: the agent's originals the call's edits hid, by ``cw:`` reference
    elided: dict[str, tuple[Message, ...]] = field(default_factory=dict)
    compaction: CompactResult | None = None


@dataclass(frozen=True)
class Call:
    """One call's request (see the module docstring). ``summary_calls``: the summarizer calls
    a compaction would pay for now (0 with the embedded summarizer); ``max_tokens``: the
    output limit the request gives the provider, if any."""

    messages: Sequence[Message]
    ctx: LayerContext
    overhead: int
    rates: CacheRates
    tail: tuple[Message, ...] = ()
    tail_tokens: int = 0
    focus: str | None = None
    summarizer: Any = None
    summary_calls: int = 0
    max_tokens: int | None = None
    out: Outcome = field(default_factory=Outcome)


def check_arguments(
    messages: object, model: object, conversation: object, max_tokens: object
) -> None:
    """Raise :class:`FormatError` / :class:`ConfigError` naming the argument of a call that
    is not what :meth:`~contextwarden.Warden.transform` takes."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise FormatError(f"messages must be a sequence of Message, got {type(messages).__name__}")
    if model is not None and not isinstance(model, str):
        raise ConfigError(f"model must be a model name (str), got {type(model).__name__}")
    if conversation is not None and not isinstance(conversation, str):
        raise ConfigError(f"conversation must be a str id, got {type(conversation).__name__}")
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        raise ConfigError(f"max_tokens must be an int >= 1, got {max_tokens!r}")
