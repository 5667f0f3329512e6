"""An agent loop replayed call by call, and what each request would be billed.

The context of call *k* of a recording is every message before its *k*-th assistant message:
what the agent held when it asked for that message. A context manager under test is a
:data:`Sender`: given that context (OpenAI chat dicts, the agent's own full history) it returns
the request it would send. A stateful one (a Warden, a harness whose cut persists in the
agent's history) keeps its state between calls, exactly as in a live agent; one sender
serves one conversation.

Per call the replay records the request's tokens, how many of its leading tokens a provider
could read from its prompt cache (the leading messages equal to the previous request's, in
order), whether the request is valid for the OpenAI API (every tool result has its call and
vice versa, no empty content: ``contextwarden.formats.validate_openai``) and whether it fits
the window. The calls of a mini-swe-agent recording have no timestamps: they are taken as back
to back, so the cache never goes cold between them.

The bill of a call, at input price ``p`` per token: ``cached x read x p + (input - cached) x
write x p`` (``read``/``write`` are multiples of the input price: 0.1/1.25 for Anthropic's
5-minute cache, 0.5/1 for gpt-4o, 0.1/1 for DeepSeek and gpt-5). The arithmetic is the one of
:func:`contextwarden._billing.bill_requests`; the ratios here are computed in multiples of
the input price so that recordings of models without a known price still compare.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from contextwarden._messages import Message
from contextwarden._tokens import TokenCounter
from contextwarden.formats import from_openai, validate_openai

__all__ = [
    "ANTHROPIC_RATIOS",
    "CacheRatios",
    "CallStat",
    "ReplayStats",
    "Sender",
    "agent_calls",
    "bill",
    "replay_sender",
    "task_of",
]

#: ``sender(context) -> request``: OpenAI chat dicts in (the agent's history so far, never to
#: be mutated), the request to send out.
Sender = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


@dataclass(frozen=True)
class CacheRatios:
    """Cache prices as multiples of the input price: ``read`` for a cached prefix, ``write``
    for everything after it."""

    read: float
    write: float
    label: str = ""


#: Anthropic's 5-minute cache (read 0.1x, write 1.25x): the ratios the team is judged on.
ANTHROPIC_RATIOS = CacheRatios(0.1, 1.25, "read 0.1x / write 1.25x")


@dataclass(frozen=True)
class CallStat:
    """One request: its messages, input tokens, the tokens of its cached leading messages,
    its validity problems, whether it is over the window and whether it still holds the task
    (the first user message's text, verbatim)."""

    messages: int
    tokens: int
    cached: int
    problems: tuple[str, ...]
    over_window: bool
    task_kept: bool = True

    @property
    def written(self) -> int:
        return self.tokens - self.cached


@dataclass(frozen=True)
class ReplayStats:
    """A recording replayed through one sender: per-call stats and their totals."""

    calls: tuple[CallStat, ...]

    @property
    def tokens(self) -> int:
        return sum(c.tokens for c in self.calls)

    @property
    def cached(self) -> int:
        return sum(c.cached for c in self.calls)

    @property
    def hit_ratio(self) -> float:
        """Share of input tokens read from the cache."""
        return self.cached / self.tokens if self.tokens else 0.0

    @property
    def invalid(self) -> int:
        """Requests the provider would reject for their shape (orphan tool results, ...)."""
        return sum(1 for c in self.calls if c.problems)

    @property
    def over_window(self) -> int:
        return sum(1 for c in self.calls if c.over_window)

    @property
    def task_lost(self) -> int:
        """Requests without the task's text."""
        return sum(1 for c in self.calls if not c.task_kept)

    def billed(self, ratios: CacheRatios) -> float:
        """The bill in input-price tokens (multiply by the price per token for USD)."""
        return bill([(c.tokens, c.cached) for c in self.calls], ratios)

    def summary(self, ratios: CacheRatios) -> dict[str, Any]:
        return {
            "calls": len(self.calls),
            "tokens": self.tokens,
            "cached": self.cached,
            "hit_ratio": self.hit_ratio,
            "billed_units": self.billed(ratios),
            "invalid": self.invalid,
            "over_window": self.over_window,
            "task_lost": self.task_lost,
        }

    def as_dict(self) -> dict[str, Any]:
        return {"calls": [asdict(c) for c in self.calls]}


def bill(calls: Sequence[tuple[int, int]], ratios: CacheRatios) -> float:
    """The billed input of ``(input_tokens, cached_tokens)`` calls, in input-price tokens."""
    return sum(cached * ratios.read + (tokens - cached) * ratios.write for tokens, cached in calls)


def agent_calls(history: Sequence[dict[str, Any]]) -> list[int]:
    """The context lengths of a recording's calls: the index of every assistant message."""
    return [i for i, d in enumerate(history) if d.get("role") == "assistant"]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def task_of(history: Sequence[dict[str, Any]]) -> str:
    """The task: the text of the first user message (empty when there is none)."""
    return next((_text(d.get("content")) for d in history if d.get("role") == "user"), "")


def _leading_equal(prev: Sequence[dict[str, Any]], cur: Sequence[dict[str, Any]]) -> int:
    n = 0
    for a, b in zip(prev, cur, strict=False):
        if a is not b and a != b:
            break
        n += 1
    return n


def _message_tokens(request: Sequence[dict[str, Any]], counter: TokenCounter) -> list[int]:
    msgs: list[Message] = from_openai(list(request))
    return [counter.count_message(m) for m in msgs]


def replay_sender(
    history: Sequence[dict[str, Any]],
    sender: Sender,
    *,
    counter: TokenCounter,
    window: int,
    reply_priming: int = 3,
    limit_calls: int | None = None,
) -> ReplayStats:
    """Replay ``history`` (OpenAI chat dicts) call by call through ``sender``.

    Tokens are ``counter``'s per message plus ``reply_priming`` per request (the same sum as
    ``counter.count_messages``). A request that our OpenAI adapter refuses counts as invalid
    with the adapter's message. ``history`` is never mutated (each call gets a fresh list).
    """
    stats: list[CallStat] = []
    prev: list[dict[str, Any]] = []
    prev_tokens: list[int] = []
    task = task_of(history)
    ends = agent_calls(history)
    if limit_calls is not None:
        ends = ends[:limit_calls]
    for end in ends:
        request = sender(list(history[:end]))
        problems = list(validate_openai(request))
        try:
            per = _message_tokens(request, counter)
        except Exception as exc:  # a request our adapter refuses is invalid; count it anyway
            problems.append(f"unreadable request: {exc}")
            per = [counter.count_text(repr(d)) for d in request]
        lead = _leading_equal(prev, request)
        # a message equal to the previous request's is counted once (its tokens are the same)
        cached = sum(prev_tokens[:lead])
        total = sum(per) + reply_priming
        stats.append(
            CallStat(
                messages=len(request),
                tokens=total,
                cached=cached,
                problems=tuple(problems),
                over_window=total > window,
                task_kept=not task
                or any(
                    d.get("role") == "user" and task in _text(d.get("content")) for d in request
                ),
            )
        )
        prev, prev_tokens = request, per
    return ReplayStats(tuple(stats))
