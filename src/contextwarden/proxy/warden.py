"""Building the proxy's warden and its summary cache from a :class:`ProxyConfig`."""

from __future__ import annotations

from collections.abc import MutableMapping

from .config import ProxyConfig
from .transform import BodyWarden

__all__ = ["build_cache", "build_warden"]


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
    compaction is paid once and every later call replaying the same prefix reuses it."""
    from .._compaction import Compactor
    from .._warden import Warden

    settings = config.warden
    compactor = Compactor(settings.compaction, cache=cache) if settings.compaction.enabled else None
    return Warden(settings, compactor=compactor)
