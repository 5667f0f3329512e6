"""Building the proxy's warden and its summary cache from a :class:`ProxyConfig`."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, MutableMapping
from urllib.parse import parse_qs

from .._compaction import Compactor
from .._exceptions import ContextWardenError
from .._warden import Warden
from ..formats._prefix import PrefixCodec
from ..store.cache import LruCache, RedisCache, SqliteCache, default_cache_path
from ..store.logs import LogStore, RedisLogStore, SQLiteLogStore
from ..summarizers.base import Summarizer
from ..summarizers.config import SummarizerConfig, parse_summarizer_spec
from ..summarizers.llm import build_summarizer
from ..summarizers.upstream import summarizer_for_request
from .clients import ScopedCache
from .config import ProxyConfig
from .transform import BodyWarden

__all__ = ["SUMMARY_API", "WardenFactory", "build_cache", "request_summarizer"]

logger = logging.getLogger("contextwarden.proxy")


def build_cache(config: ProxyConfig) -> MutableMapping[str, str]:
    """The summary cache ``config`` asks for: a :class:`~contextwarden.store.cache.SqliteCache`
    at ``config.cache_path`` (default under the data dir), a
    :class:`~contextwarden.store.cache.RedisCache` at ``config.redis_url``, or a plain dict."""
    if config.cache == "redis":
        assert config.redis_url is not None  # ProxyConfig checks this
        return RedisCache(config.redis_url)
    if config.cache == "memory":
        return {}
    return SqliteCache(config.cache_path)


#: Messages each of a client's token counters remembers the count of.
CLIENT_COUNTER_CACHE = 20_000


class WardenFactory:
    """Makes one client's warden: its own conversations and caches, its summaries kept in its
    own namespace of the shared summary cache (``memory``: a bounded dict of its own). The
    summarizer the config names is built once and shared: it holds no conversation."""

    #: Summaries one client keeps with the ``memory`` cache.
    MEMORY_SUMMARIES = 256

    def __init__(
        self,
        config: ProxyConfig,
        cache: MutableMapping[str, str] | None,
        log_store: LogStore | None = None,
    ) -> None:
        self.config = config
        self.cache = cache
        self.summarizer = _configured_summarizer(config)
        #: every client's logs, each under its own key prefix
        self.log_store = log_store

    def __call__(self, client: str) -> BodyWarden:
        own: MutableMapping[str, str]
        if self.cache is None or self.config.cache == "memory":
            own = LruCache(self.MEMORY_SUMMARIES)
        else:
            own = ScopedCache(self.cache, client)
        logs = self.log_store.scoped(client) if self.log_store is not None else None
        # the warden counts with counters of its own (counts cached by content stay within the
        # client: a request counted faster because another client sent the same messages would
        # tell that they did), and its codec, which keeps each conversation's messages as read
        # and written, is sized within the client's share of memory (the client table counts
        # all of it: Warden.state_bytes)
        share = self.config.client_state_bytes // 4
        codec = PrefixCodec(max_conversations=64, max_bytes=share, max_written_bytes=share // 2)
        settings = self.config.warden
        compactor = (
            Compactor(settings.compaction, cache=own, summarizer=self.summarizer)
            if settings.compaction.enabled
            else None
        )
        return Warden(
            settings,
            compactor=compactor,
            log_store=logs,
            codec=codec,
            counter_cache=CLIENT_COUNTER_CACHE,
        )


def _configured_summarizer(config: ProxyConfig) -> Summarizer | None:
    """The summarizer ``config.summary_source`` names for the warden itself (None: the
    extractive one, or each request's own)."""
    source = config.summary_source
    if source in ("upstream", "extractive") or not config.warden.compaction.enabled:
        return None
    settings = config.warden
    section = settings.summarizer
    if source != "config":
        fields = section.model_dump(exclude_unset=True) | parse_summarizer_spec(source)
        section = SummarizerConfig.model_validate(fields)
    return build_summarizer(section, max_chars=settings.compaction.summary_max_chars)


def build_log_store(config: ProxyConfig) -> LogStore | None:
    """Where the conversations' logs are kept, beside the summaries: the SQLite file of the
    summary cache (its own table), or the Redis server; none with the ``memory`` cache (each
    process then keeps its own logs)."""
    if config.cache == "redis":
        assert config.redis_url is not None  # ProxyConfig checks this
        return RedisLogStore(config.redis_url)
    if config.cache == "memory":
        return None
    return SQLiteLogStore(config.cache_path or default_cache_path())


#: The wire format a route's summaries are asked in, when not the route's own: the API the client
#: itself speaks.
SUMMARY_API: dict[str, str] = {"count_tokens": "anthropic"}


def request_summarizer(
    config: ProxyConfig, headers: Mapping[str, str], route: str, query: str = ""
) -> Callable[[str | None], Summarizer | None] | None:
    """For ``summary_source == "upstream"``: the summarizer a request brings, made from its
    model (given when the body is read), ``headers`` (its credentials) and, for Gemini, the
    ``key=`` of its ``query``, asking the proxy's upstream in the API the client speaks on
    ``route`` (:data:`SUMMARY_API`); None for the other sources (the warden's own summarizer
    writes)."""
    if config.summary_source != "upstream":
        return None
    settings = config.warden
    api = SUMMARY_API.get(route, route)
    passed = dict(headers)
    key = parse_qs(query).get("key") if query else None
    if key and "x-goog-api-key" not in {k.lower() for k in passed}:
        passed["x-goog-api-key"] = key[0]

    def make(model: str | None) -> Summarizer | None:
        if not (config.summary_model or (model and model.strip())):
            return None  # nothing to ask for: the extractive summary
        try:
            return summarizer_for_request(
                config.upstream,
                passed,
                model or "",
                api,  # type: ignore[arg-type]
                summary_model=config.summary_model,
                timeout_s=settings.summarizer.timeout_s,
                max_retries=settings.summarizer.max_retries,
                max_chars=settings.compaction.summary_max_chars,
            )
        except ContextWardenError as exc:
            # an API or model name it cannot use: the warden's own summary, said in the log
            logger.warning(
                "contextwarden proxy: no %s summarizer for model %r (%s); the extractive "
                "summary writes",
                api,
                model,
                exc,
            )
            return None

    return make
