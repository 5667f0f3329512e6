"""Building the proxy's warden and its summary cache from a :class:`ProxyConfig`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from typing import TYPE_CHECKING, Literal

from .._exceptions import ContextWardenError
from .config import ProxyConfig
from .transform import BodyWarden

if TYPE_CHECKING:
    from ..summarizers.base import Summarizer

__all__ = ["build_cache", "build_warden", "request_summarizer"]


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


def build_warden(config: ProxyConfig, cache: MutableMapping[str, str]) -> BodyWarden:
    """A Warden configured by ``config.warden`` whose compactor keeps summaries in ``cache``, so a
    compaction is paid once and every later call replaying the same prefix reuses it.

    Its own summarizer is the one ``config.summary_source`` names: the warden config's
    ``summarizer:`` section (``config``), that section with ``PROVIDER:MODEL`` put in, or the
    embedded extractive one (``extractive``, and ``upstream``, where each request brings its own:
    :func:`request_summarizer`). A key variable that is unset is a
    :class:`~contextwarden.ConfigError` naming it, at start-up."""
    from .._compaction import Compactor
    from .._warden import Warden

    settings = config.warden
    if not settings.compaction.enabled:
        return Warden(settings, compactor=None)
    summarizer = None
    source = config.summary_source
    if source not in ("upstream", "extractive"):
        from ..summarizers.config import SummarizerConfig, build_summarizer, parse_summarizer_spec

        section = settings.summarizer
        if source != "config":
            fields = section.model_dump(exclude_unset=True) | parse_summarizer_spec(source)
            section = SummarizerConfig.model_validate(fields)
        summarizer = build_summarizer(section, max_chars=settings.compaction.summary_max_chars)
    return Warden(
        settings, compactor=Compactor(settings.compaction, cache=cache, summarizer=summarizer)
    )


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
