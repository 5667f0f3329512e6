"""Building the proxy's warden and its summary cache from a :class:`ProxyConfig`."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, MutableMapping
from typing import TYPE_CHECKING, Literal

from .._exceptions import ContextWardenError
from .config import ProxyConfig
from .transform import BodyWarden

if TYPE_CHECKING:
    from .._config import WardenConfig
    from .._tokens import TokenCounter
    from ..summarizers.base import Summarizer

__all__ = ["ClientCounters", "WardenFactory", "build_cache", "build_warden", "request_summarizer"]


def build_cache(config: ProxyConfig) -> MutableMapping[str, str]:
    """The summary cache ``config`` asks for: a :class:`~contextwarden.store.cache.SqliteCache`
    at ``config.cache_path`` (default under the data dir), a
    :class:`~contextwarden.store.cache.RedisCache` at ``config.redis_url``, or a plain dict."""
    from ..store.cache import RedisCache, SqliteCache

    if config.cache == "redis":
        assert config.redis_url is not None  # ProxyConfig checks this
        return RedisCache(config.redis_url)
    if config.cache == "memory":
        return {}
    return SqliteCache(config.cache_path)


class WardenFactory:
    """Makes one client's warden: its own conversations and caches, its summaries kept in its
    own namespace of the shared summary cache (``memory``: a bounded dict of its own). The
    summarizer the config names is built once and shared: it holds no conversation."""

    #: Summaries one client keeps with the ``memory`` cache.
    MEMORY_SUMMARIES = 256

    def __init__(self, config: ProxyConfig, cache: MutableMapping[str, str] | None) -> None:
        self.config = config
        self.cache = cache
        self.summarizer = _configured_summarizer(config)

    def __call__(self, client: str) -> BodyWarden:
        from ..store.cache import LruCache
        from .clients import ScopedCache

        own: MutableMapping[str, str]
        if self.cache is None or self.config.cache == "memory":
            own = LruCache(self.MEMORY_SUMMARIES)
        else:
            own = ScopedCache(self.cache, client)
        warden = _warden(self.config, own, self.summarizer)
        # counts cached by content stay within the client (see ClientCounters)
        warden.counter_for = ClientCounters(self.config.warden)  # type: ignore[attr-defined]
        if hasattr(warden, "_prefix_codec"):
            # the codec keeps each conversation's messages as read and written: sized within
            # the client's share of memory (its default is sized for a process of its own)
            from ..formats._prefix import PrefixCodec

            share = self.config.client_state_bytes // 8
            warden._prefix_codec = PrefixCodec(
                max_conversations=64, max_bytes=share, max_written_bytes=share
            )
        return warden


class ClientCounters:
    """``counter_for(model)`` of one client's warden: token counters of its own. The shared
    counters cache counts by message content for every caller of the process; a client whose
    request is counted faster because another client sent the same messages could tell that
    they did. Counters of one client share nothing with another's but the tokenizer."""

    #: Messages each counter of a client remembers the count of.
    CACHE_SIZE = 20_000

    def __init__(self, config: WardenConfig) -> None:
        self.config = config
        self._counters: dict[tuple[str, float, bool], TokenCounter] = {}
        self._lock = threading.Lock()

    def __call__(self, model: str | None = None) -> TokenCounter:
        from .._tokens import ExactCounter, _counter_spec, get_counter

        model = model or self.config.model
        if self.config.counter != "exact":
            return get_counter(model, kind=self.config.counter)  # no cache by content
        spec = _counter_spec(model)
        with self._lock:
            counter = self._counters.get(spec)
            if counter is None:
                encoding, scale, count_ids = spec
                counter = self._counters[spec] = ExactCounter(
                    encoding, scale=scale, count_ids=count_ids, cache_size=self.CACHE_SIZE
                )
            return counter


def _configured_summarizer(config: ProxyConfig) -> Summarizer | None:
    """The summarizer ``config.summary_source`` names for the warden itself (None: the
    extractive one, or each request's own)."""
    source = config.summary_source
    if source in ("upstream", "extractive") or not config.warden.compaction.enabled:
        return None
    from ..summarizers.config import SummarizerConfig, build_summarizer, parse_summarizer_spec

    settings = config.warden
    section = settings.summarizer
    if source != "config":
        fields = section.model_dump(exclude_unset=True) | parse_summarizer_spec(source)
        section = SummarizerConfig.model_validate(fields)
    built: Summarizer = build_summarizer(section, max_chars=settings.compaction.summary_max_chars)
    return built


def _warden(
    config: ProxyConfig, cache: MutableMapping[str, str], summarizer: Summarizer | None
) -> BodyWarden:
    from .._compaction import Compactor
    from .._warden import Warden

    settings = config.warden
    if not settings.compaction.enabled:
        return Warden(settings, compactor=None)
    return Warden(
        settings, compactor=Compactor(settings.compaction, cache=cache, summarizer=summarizer)
    )


def build_warden(config: ProxyConfig, cache: MutableMapping[str, str]) -> BodyWarden:
    """A Warden configured by ``config.warden`` whose compactor keeps summaries in ``cache``, so a
    compaction is paid once and every later call replaying the same prefix reuses it.

    Its own summarizer is the one ``config.summary_source`` names: the warden config's
    ``summarizer:`` section (``config``), that section with ``PROVIDER:MODEL`` put in, or the
    embedded extractive one (``extractive``, and ``upstream``, where each request brings its own:
    :func:`request_summarizer`). A key variable that is unset is a
    :class:`~contextwarden.ConfigError` naming it, at start-up."""
    return _warden(config, cache, _configured_summarizer(config))


def request_summarizer(
    config: ProxyConfig, headers: Mapping[str, str], api: Literal["openai", "anthropic"]
) -> Callable[[str | None], Summarizer | None] | None:
    """For ``summary_source == "upstream"``: the summarizer a request brings, made from its
    model (given when the body is read) and ``headers`` (its credentials), asking the proxy's
    upstream; None for the other sources (the warden's own summarizer writes)."""
    if config.summary_source != "upstream":
        return None
    from ..summarizers.upstream import summarizer_for_request

    settings = config.warden

    def make(model: str | None) -> Summarizer | None:
        if not (config.summary_model or (model and model.strip())):
            return None  # nothing to ask for: the extractive summary
        try:
            return summarizer_for_request(
                config.upstream,
                headers,
                model or "",
                api,
                summary_model=config.summary_model,
                timeout_s=settings.summarizer.timeout_s,
                max_retries=settings.summarizer.max_retries,
                max_chars=settings.compaction.summary_max_chars,
            )
        except ContextWardenError:  # a model name it cannot use: the warden's own summary
            return None

    return make
