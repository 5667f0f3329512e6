"""Summary caches, ``MutableMapping[str, str]`` keyed by the hash of what a summary replaces:
:class:`SummaryCache` (the ``summary`` namespace of a :mod:`key-value store <.kv>`; opened by
:class:`SqliteCache`, the default, and :class:`RedisCache`) and :class:`LruCache` (memory, at
most ``max_entries``). A key or value that is not a string is a ``TypeError``; backend failures
are :class:`~contextwarden.StoreError`."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

from .._exceptions import ConfigError
from .kv import KeyValueStore, RedisStore, SQLiteStore
from .sqlite import data_dir

__all__ = ["LruCache", "RedisCache", "SqliteCache", "SummaryCache", "default_cache_path"]

#: The namespace of summaries in a shared store.
NAMESPACE = "summary"

#: File name of the default summary cache inside the data dir.
CACHE_FILE = "summary-cache.sqlite3"


def default_cache_path() -> Path:
    """``<data dir>/summary-cache.sqlite3`` (the data dir of :func:`~.sqlite.data_dir`:
    ``$CONTEXTWARDEN_DATA_DIR``, else ``~/.local/share/contextwarden``)."""
    return data_dir() / CACHE_FILE


def _check_str(what: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"summary cache {what} must be str, got {type(value).__name__}")
    return value


#: What an :class:`LruCache` entry costs beyond its characters.
LRU_ENTRY_BYTES = 200


def _entry_bytes(key: str, value: str) -> int:
    return len(key) + len(value) + LRU_ENTRY_BYTES


class LruCache(MutableMapping[str, str]):
    """Summaries in memory, at most ``max_entries`` of them (least recently used dropped first).
    Thread-safe; ``kept_bytes``: about how many bytes it keeps (keys and values, and
    :data:`LRU_ENTRY_BYTES` an entry)."""

    def __init__(self, max_entries: int = 256) -> None:
        if max_entries < 1:
            raise ConfigError(f"LruCache max_entries must be >= 1, got {max_entries}")
        self.max_entries = max_entries
        self._data: dict[str, str] = {}
        self._lock = threading.Lock()
        self.kept_bytes = 0

    def __getitem__(self, key: str) -> str:
        with self._lock:
            value = self._data.pop(key)
            self._data[key] = value
            return value

    def __setitem__(self, key: str, value: str) -> None:
        _check_str("key", key)
        _check_str("value", value)
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self.kept_bytes -= _entry_bytes(key, old)
            self._data[key] = value
            self.kept_bytes += _entry_bytes(key, value)
            while len(self._data) > self.max_entries:
                gone = next(iter(self._data))
                self.kept_bytes -= _entry_bytes(gone, self._data.pop(gone))

    def __delitem__(self, key: str) -> None:
        with self._lock:
            self.kept_bytes -= _entry_bytes(key, self._data.pop(key))

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            return iter(list(self._data))

    def __len__(self) -> int:
        return len(self._data)


class SummaryCache(MutableMapping[str, str]):
    """The summaries kept in ``store`` under ``namespace`` (see the module docstring)."""

    def __init__(self, store: KeyValueStore, namespace: str = NAMESPACE) -> None:
        self.store = store
        self.namespace = namespace

    def __getitem__(self, key: str) -> str:
        raw = self.store.get(self.namespace, _check_str("key", key))
        if raw is None:
            raise KeyError(key)
        return raw.decode("utf-8", "surrogatepass")

    def __setitem__(self, key: str, value: str) -> None:
        _check_str("key", key)
        encoded = _check_str("value", value).encode("utf-8", "surrogatepass")
        self.store.put(self.namespace, key, encoded)

    def __delitem__(self, key: str) -> None:
        if not self.store.delete(self.namespace, _check_str("key", key)):
            raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.store.get(self.namespace, key) is not None

    def __iter__(self) -> Iterator[str]:
        # a snapshot: iterating while another process writes must not fail or repeat keys
        return iter(self.store.keys(self.namespace))

    def __len__(self) -> int:
        return len(self.store.keys(self.namespace))

    def close(self) -> None:
        """Close the store's connections (idempotent)."""
        close = getattr(self.store, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> SummaryCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SqliteCache(SummaryCache):
    """A summary cache in one SQLite file (by default :func:`default_cache_path`; its folder is
    created if missing), in WAL mode with a 5 s busy timeout: readers never block the writer, so
    several proxy processes can share it. Call :meth:`close` (or use ``with``) when done."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, timeout: float = 5.0) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self.sqlite = SQLiteStore(self.path, timeout=timeout, what="summary cache")
        super().__init__(self.sqlite)

    @property
    def journal_mode(self) -> str:
        """The file's journal mode as SQLite reports it (``"wal"``)."""
        return self.sqlite.journal_mode

    def __repr__(self) -> str:
        return f"SqliteCache({str(self.path)!r})"


class RedisCache(SummaryCache):
    """A summary cache in Redis, shared by every process that points at the same database: ``url``
    (``redis://localhost:6379/0``) or a ready ``client`` with the ``redis.Redis`` API. Keys go under
    ``prefix`` (default the ``summary`` namespace of a :class:`~.kv.RedisStore`); ``ttl`` (seconds)
    lets Redis expire them. Without the ``redis`` package a :class:`~contextwarden.ConfigError`
    says what to install."""

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Any = None,
        prefix: str = "contextwarden:summary:",
        ttl: int | None = None,
    ) -> None:
        self.redis = RedisStore(url, client=client, prefix=prefix, ttl_s=ttl, what="summary cache")
        self.prefix, self.ttl = prefix, ttl
        super().__init__(self.redis, "")

    def ping(self) -> bool:
        """True when the server answers (raises :class:`StoreError` when it does not)."""
        return self.redis.ping()

    def __repr__(self) -> str:
        return repr(self.redis).replace("RedisStore", "RedisCache", 1)
