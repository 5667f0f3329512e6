"""What a provider bills for a run of requests once prompt caching is counted.

Providers cache prompt prefixes: the leading part of a request identical to the previous
request's is read from the cache at a fraction of the input price (0.1x on Anthropic, DeepSeek
and gpt-5; 0.5x on gpt-4o), what follows is written to it (1.25x on Anthropic's 5-minute cache;
1x where writes are not billed extra). So a context manager that rewrites the middle of a
history turns reads into writes: it can cut tokens and still raise the bill.

The model, deliberately simple and the same for every provider: a request is its prefix (system
prompt, tool definitions and framing: one item with its own key) followed by its messages; the
cached tokens are those of the longest leading run of items equal to the previous request's
(only the previous one: an agent's next request extends its last, and each hit refreshes the
entry), 0 when that request is older than the cache's TTL or the run is shorter than the
minimum cacheable length; the rest is written, unless the whole request is under that minimum
(then nothing is cached). For Anthropic this assumes each request marks its end with a
``cache_control`` breakpoint, as Claude Code, pi and the proxy do. Pure arithmetic on values.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from ._exceptions import ConfigError, UnknownModelError
from ._models import ModelInfo, is_amount, is_count, model_info

__all__ = ["CachePricing", "CallBill", "PromptRequest", "bill_requests"]

#: Anthropic's prompt-caching multipliers on the base input price (5-minute cache): reads
#: 0.1x, writes 1.25x, entries live 5 minutes after their last use (Anthropic's pricing page,
#: "Prompt caching", as of 2025-11).
ANTHROPIC_READ = 0.1
ANTHROPIC_WRITE = 1.25
ANTHROPIC_TTL_S = 300.0


def _real(value: object) -> bool:
    """A number that is neither a bool nor infinite nor NaN."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class CachePricing:
    """Prices of one model's prompt cache, USD per million tokens.

    ``input_per_mtok``: an uncached input token; ``read_per_mtok``: a token read from the
    cache; ``write_per_mtok``: a token written to it (equal to the input price where writes
    are not billed extra). ``ttl_s``: seconds an entry lives after its last use (``None``:
    it outlives any session, as DeepSeek's disk cache does). ``min_cacheable_tokens``: a
    shorter prefix is not cached (default 0).
    """

    input_per_mtok: float
    read_per_mtok: float
    write_per_mtok: float
    ttl_s: float | None = ANTHROPIC_TTL_S
    min_cacheable_tokens: int = 0

    def __post_init__(self) -> None:
        for name in ("input_per_mtok", "read_per_mtok", "write_per_mtok"):
            value = getattr(self, name)
            if not (_real(value) and value >= 0):
                raise ConfigError(f"CachePricing.{name} must be a number >= 0, got {value!r}")
        ttl, least = self.ttl_s, self.min_cacheable_tokens
        if not is_amount(ttl, above=0):
            raise ConfigError(f"CachePricing.ttl_s must be > 0 or None, got {ttl!r}")
        if not is_count(least, 0):
            raise ConfigError(
                f"CachePricing.min_cacheable_tokens must be an int >= 0, got {least!r}"
            )

    @classmethod
    def ratios(
        cls,
        input_per_mtok: float,
        read: float = ANTHROPIC_READ,
        write: float = ANTHROPIC_WRITE,
        ttl_s: float | None = ANTHROPIC_TTL_S,
        min_cacheable_tokens: int = 0,
    ) -> CachePricing:
        """Prices as multiples of ``input_per_mtok``; the defaults are Anthropic's 5-minute
        cache (read 0.1x, write 1.25x, TTL 300 s)."""
        return cls(
            input_per_mtok=input_per_mtok,
            read_per_mtok=input_per_mtok * read,
            write_per_mtok=input_per_mtok * write,
            ttl_s=ttl_s,
            min_cacheable_tokens=min_cacheable_tokens,
        )

    @classmethod
    def for_model(
        cls, model: str, overrides: Mapping[str, ModelInfo] | None = None
    ) -> CachePricing | None:
        """The cache prices the model registry lists for ``model`` (its 5-minute write price
        where there are two; ``overrides`` from a config's ``models:`` first); ``None`` when
        the model is unknown or has no input price. A model without prompt caching, or without
        a known cache read price, is priced with reads and writes at the input price (what it
        bills)."""
        try:
            info = model_info(model, overrides)
        except UnknownModelError:
            return None
        price = info.input_price_per_mtok
        if price is None:
            return None
        read = info.cache_read_price_per_mtok
        if info.caching == "none" or read is None:
            return cls(price, price, price, ttl_s=None)
        write = info.cache_write_price_per_mtok
        return cls(
            input_per_mtok=price,
            read_per_mtok=read,
            write_per_mtok=price if write is None else write,
            ttl_s=info.cache_ttl_s,
            min_cacheable_tokens=info.min_cacheable_tokens,
        )

    def cost(self, cached: int, written: int, uncached: int = 0) -> float:
        """USD for ``cached`` tokens read, ``written`` written and ``uncached`` at the plain
        input price."""
        return (
            cached * self.read_per_mtok
            + written * self.write_per_mtok
            + uncached * self.input_per_mtok
        ) / 1_000_000


@dataclass(frozen=True)
class PromptRequest:
    """One request as the cache sees it.

    ``keys``: one per message, equal exactly when two messages serialize to the same bytes
    (e.g. :attr:`Message.fingerprint`, or the JSON of the provider dict); ``tokens``: each
    message's tokens, same length. ``prefix_key``/``prefix_tokens``: the part before the
    messages (system prompt if sent apart, tool definitions, framing), default ``None``/0.
    ``at``: when it was sent, epoch seconds (default ``None``: back to back with its
    neighbours, the TTL never applies).
    """

    keys: Sequence[Hashable]
    tokens: Sequence[int]
    prefix_key: Hashable = None
    prefix_tokens: int = 0
    at: float | None = None

    @property
    def total(self) -> int:
        """All the request's input tokens."""
        return self.prefix_tokens + sum(self.tokens)


@dataclass(frozen=True)
class CallBill:
    """The bill of one request: ``tokens`` in all, ``cached_tokens`` read from the cache,
    ``written_tokens`` written to it (the rest, if any, at the plain input price) and
    ``cost`` in USD."""

    tokens: int
    cached_tokens: int
    written_tokens: int
    cost: float

    @property
    def uncached_tokens(self) -> int:
        """Tokens billed at the plain input price (a request too short to cache)."""
        return self.tokens - self.cached_tokens - self.written_tokens


def _check(request: object, index: int) -> PromptRequest:
    where = f"requests[{index}]"
    if not isinstance(request, PromptRequest):
        raise TypeError(f"{where} must be a PromptRequest, got {type(request).__name__}")
    if len(request.keys) != len(request.tokens):
        raise ValueError(
            f"{where} has {len(request.keys)} keys but {len(request.tokens)} token counts"
        )
    for i, n in enumerate((request.prefix_tokens, *request.tokens)):
        if not is_count(n, 0):
            name = "prefix_tokens" if i == 0 else f"tokens[{i - 1}]"
            raise ValueError(f"{where}.{name} must be an int >= 0, got {n!r}")
    if request.at is not None and not _real(request.at):
        raise ValueError(f"{where}.at must be epoch seconds or None, got {request.at!r}")
    return request


def _shared_prefix_tokens(previous: PromptRequest, current: PromptRequest) -> int:
    """Tokens of the longest leading run of ``current`` equal to ``previous``."""
    if previous.prefix_key != current.prefix_key or previous.prefix_tokens != current.prefix_tokens:
        return 0
    shared = current.prefix_tokens
    for key_a, key_b, n_a, n_b in zip(
        previous.keys, current.keys, previous.tokens, current.tokens, strict=False
    ):
        if key_a != key_b or n_a != n_b:
            break
        shared += n_b
    return shared


def bill_requests(requests: Sequence[PromptRequest], pricing: CachePricing) -> list[CallBill]:
    """The bill of each of ``requests`` (one conversation, in order) at ``pricing``.

    See the module docstring for the model. Raises ``TypeError``/``ValueError`` naming the
    request and field that is malformed (keys and token counts of different lengths, a
    negative count, a time that is not a number). A request sent earlier than the one before
    it is taken as back to back.
    """
    bills: list[CallBill] = []
    previous: PromptRequest | None = None
    for index, raw in enumerate(requests):
        request = _check(raw, index)
        bills.append(bill_after(previous, request, pricing))
        previous = request
    return bills


def bill_after(
    previous: PromptRequest | None, request: PromptRequest, pricing: CachePricing
) -> CallBill:
    """The bill of ``request`` sent after ``previous`` (``None``: the first), both already
    well-formed (:func:`bill_requests` checks them; a replay builds them itself)."""
    total = request.total
    cached = 0
    if previous is not None:
        expired = (
            pricing.ttl_s is not None
            and request.at is not None
            and previous.at is not None
            and request.at - previous.at > pricing.ttl_s
        )
        if not expired:
            cached = _shared_prefix_tokens(previous, request)
    if cached < pricing.min_cacheable_tokens:
        cached = 0
    # A request shorter than the minimum is not cached at all: no write premium either.
    written = total - cached if total >= pricing.min_cacheable_tokens else 0
    uncached = total - cached - written
    return CallBill(total, cached, written, pricing.cost(cached, written, uncached))
