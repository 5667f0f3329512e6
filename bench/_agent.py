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

The bill is :func:`contextwarden._billing.bill_requests` over the run's requests: one key per
message (equal keys exactly for the leading messages equal to the previous request's), the
message's tokens, and the reply priming as a last item. :data:`JUDGED` prices at Anthropic's
ratios with no minimum (read 0.1x, write 1.25x the input price, per million tokens of a
unit price, so a bill reads as "input-price tokens"); :func:`model_pricing` is the registry's
cache pricing of a model (USD).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from contextwarden._billing import CachePricing, PromptRequest, bill_requests
from contextwarden._messages import Message
from contextwarden._tokens import TokenCounter
from contextwarden.formats import from_openai, validate_openai

__all__ = [
    "JUDGED",
    "CallStat",
    "ReplayStats",
    "Sender",
    "agent_calls",
    "model_pricing",
    "replay_sender",
    "task_of",
]

#: ``sender(context) -> request``: OpenAI chat dicts in (the agent's history so far, never to
#: be mutated), the request to send out.
Sender = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


#: The ratios the team is judged on: Anthropic's 5-minute cache (reads 0.1x, writes 1.25x the
#: input price), no minimum length, no TTL (the recordings' calls are back to back). The unit
#: price is 1 per token, so a bill is in "input-price tokens".
JUDGED = CachePricing.ratios(1_000_000.0, 0.1, 1.25, ttl_s=None, min_cacheable_tokens=0)


def model_pricing(model: str) -> CachePricing | None:
    """The registry's cache pricing of ``model`` in USD (``None`` when it has no price)."""
    return CachePricing.for_model(model)


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
    task_kept: bool
    #: What the cache sees: a key per message (equal to the previous request's key exactly
    #: for its leading equal messages) and each message's tokens, reply priming last.
    request: PromptRequest


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

    def billed(self, pricing: CachePricing = JUDGED) -> float:
        """The bill of the run at ``pricing`` (:func:`bill_requests`)."""
        return sum(b.cost for b in bill_requests([c.request for c in self.calls], pricing))

    def summary(self, pricing: CachePricing = JUDGED) -> dict[str, Any]:
        """Totals: calls, tokens, cached tokens, hit ratio, bill, invalid, over the window,
        requests without the task."""
        return {
            "calls": len(self.calls),
            "tokens": self.tokens,
            "cached": self.cached,
            "hit_ratio": self.hit_ratio,
            "billed": self.billed(pricing),
            "invalid": self.invalid,
            "over_window": self.over_window,
            "task_lost": self.task_lost,
        }

    def per_call(self) -> list[dict[str, Any]]:
        """Tokens, cached tokens and validity per call (for plots)."""
        return [
            {"tokens": c.tokens, "cached": c.cached, "valid": not c.problems} for c in self.calls
        ]


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
    prev_keys: list[int] = []
    next_key = 0
    task = task_of(history)
    ends = agent_calls(history)
    if limit_calls is not None:
        ends = ends[:limit_calls]
    for end in ends:
        request = sender(list(history[:end]))
        problems = list(validate_openai(request))
        lead = _leading_equal(prev, request)
        # the leading messages equal to the previous request's cost what they cost then: only
        # the rest is converted and counted (the replay stays linear in the new messages)
        try:
            per = prev_tokens[:lead] + _message_tokens(request[lead:], counter)
        except Exception as exc:  # a request our adapter refuses is invalid; count it anyway
            problems.append(f"unreadable request: {exc}")
            per = [counter.count_text(repr(d)) for d in request]
        cached = sum(prev_tokens[:lead])
        total = sum(per) + reply_priming
        # the leading equal messages keep their keys; every other message is new to the cache
        keys = prev_keys[:lead] + list(range(next_key, next_key + len(request) - lead))
        next_key += len(request) - lead
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
                request=PromptRequest(keys=(*keys, -1), tokens=(*per, reply_priming)),
            )
        )
        prev, prev_tokens, prev_keys = request, per, keys
    return ReplayStats(tuple(stats))
