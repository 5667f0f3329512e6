"""Summary caches: where a compaction's summary is kept, keyed by the hash of what it replaces.

Both backends are ``MutableMapping[str, str]`` so the compactor does not care which one it holds:

* :class:`SqliteCache` (the default): one SQLite file in WAL mode, safe to share between the threads
  of one process and between processes on one machine (several may open a new file at once).
* :class:`LruCache`: a dict in memory holding at most ``max_entries``, the least recently used
  forgotten first (one process; a proxy gives each client one of its own).
* :class:`RedisCache`: one Redis database shared by every proxy process behind a load balancer.
  Needs the ``redis`` package (``pip install 'contextwarden[redis]'``).

Keys and values are plain strings; anything else is a ``TypeError`` (the mapping contract). Backend
failures (sqlite3, redis) are translated to :class:`~contextwarden.StoreError` with the original
error chained.

``redis`` is an optional extra: :func:`_redis` imports it when a Redis cache is made, so that the
other caches work without it.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, MutableMapping
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from .._exceptions import ConfigError, StoreError
from ._db import connect, migrate
from .sqlite import data_dir

__all__ = ["LruCache", "RedisCache", "SqliteCache", "default_cache_path"]

_T = TypeVar("_T")

#: File name of the default summary cache inside the data dir.
CACHE_FILE = "summary-cache.sqlite3"

#: Schema migrations, applied in order and recorded in ``PRAGMA user_version`` (append only:
#: a migration that has shipped is never edited, a new one is added at the end).
_MIGRATIONS: list[tuple[str, str]] = [
    (
        "create summaries",
        "CREATE TABLE IF NOT EXISTS summaries ("
        " key TEXT PRIMARY KEY,"
        " value TEXT NOT NULL,"
        " created_at REAL NOT NULL)",
    ),
]


def default_cache_path() -> Path:
    """``<data dir>/summary-cache.sqlite3`` (the data dir of :func:`~.sqlite.data_dir`:
    ``$CONTEXTWARDEN_DATA_DIR``, else ``~/.local/share/contextwarden``)."""
    return data_dir() / CACHE_FILE


def _applied(conn: sqlite3.Connection) -> set[str]:
    # The migrations applied are the first ``user_version`` of the list.
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    return {name for name, _sql in _MIGRATIONS[: int(version)]}


def _statement(sql: str) -> Callable[[sqlite3.Connection], None]:
    def apply(conn: sqlite3.Connection) -> None:
        conn.execute(sql)

    return apply


def _record(conn: sqlite3.Connection, _name: str, number: int) -> None:
    conn.execute(f"PRAGMA user_version={int(number)}")


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


class SqliteCache(MutableMapping[str, str]):
    """A summary cache in one SQLite file.

    ``path`` defaults to :func:`default_cache_path`; its folder is created if missing. The file is
    opened in WAL mode (readers never block the writer, so several proxy processes can share it)
    with a 5 s busy timeout. One connection is shared by the threads of this process behind a lock
    (the proxy runs transforms in a thread pool). Call :meth:`close` (or use ``with``) when done.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, timeout: float = 5.0) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self._lock = threading.Lock()
        self._conn = connect(self.path, what="summary cache", timeout=timeout)
        try:
            migrate(
                self._conn,
                applied=_applied,
                migrations=[(name, _statement(sql)) for name, sql in _MIGRATIONS],
                record=_record,
                timeout=timeout,
            )
        except sqlite3.Error as exc:
            self._conn.close()
            raise StoreError(f"cannot open summary cache {str(self.path)!r}: {exc}") from exc

    def _run(self, fn: Callable[[], _T]) -> _T:
        """Run ``fn`` under the lock, translating sqlite errors."""
        with self._lock:
            try:
                return fn()
            except sqlite3.Error as exc:
                raise StoreError(f"summary cache {str(self.path)!r}: {exc}") from exc

    @property
    def journal_mode(self) -> str:
        """The file's journal mode as SQLite reports it (``"wal"``)."""
        row = self._run(lambda: self._conn.execute("PRAGMA journal_mode").fetchone())
        return str(row[0])

    def __getitem__(self, key: str) -> str:
        _check_str("key", key)
        row = self._run(
            lambda: self._conn.execute(
                "SELECT value FROM summaries WHERE key = ?", (key,)
            ).fetchone()
        )
        if row is None:
            raise KeyError(key)
        return str(row[0])

    def __setitem__(self, key: str, value: str) -> None:
        _check_str("key", key)
        _check_str("value", value)
        self._run(
            lambda: self._conn.execute(
                "INSERT OR REPLACE INTO summaries (key, value, created_at) VALUES (?, ?, ?)",
                (key, value, time.time()),
            )
        )

    def __delitem__(self, key: str) -> None:
        _check_str("key", key)
        cur = self._run(lambda: self._conn.execute("DELETE FROM summaries WHERE key = ?", (key,)))
        if cur.rowcount == 0:
            raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        row = self._run(
            lambda: self._conn.execute("SELECT 1 FROM summaries WHERE key = ?", (key,)).fetchone()
        )
        return row is not None

    def __iter__(self) -> Iterator[str]:
        # A snapshot: iterating while another process writes must not fail or repeat keys.
        rows = self._run(
            lambda: self._conn.execute("SELECT key FROM summaries ORDER BY key").fetchall()
        )
        return iter([str(r[0]) for r in rows])

    def __len__(self) -> int:
        row = self._run(lambda: self._conn.execute("SELECT COUNT(*) FROM summaries").fetchone())
        return int(row[0])

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SqliteCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqliteCache({str(self.path)!r})"


class RedisCache(MutableMapping[str, str]):
    """A summary cache in Redis, shared by every process that points at the same database.

    ``url`` is a Redis URL (``redis://localhost:6379/0``); or pass a ready ``client`` (anything
    with the ``redis.Redis`` API, e.g. ``fakeredis.FakeRedis``) and no URL. Keys are stored under
    ``prefix`` (default ``"contextwarden:summary:"``) so the cache can share a database; ``ttl``
    (seconds, default none) lets Redis expire old summaries. The ``redis`` package is imported
    only here; without it a :class:`~contextwarden.ConfigError` says what to install.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Any = None,
        prefix: str = "contextwarden:summary:",
        ttl: int | None = None,
    ) -> None:
        if (url is None) == (client is None):
            raise ConfigError("RedisCache: give exactly one of url= or client=")
        if ttl is not None and ttl <= 0:
            raise ConfigError(f"RedisCache: ttl must be a positive number of seconds, got {ttl}")
        self.prefix = prefix
        self.ttl = ttl
        self._url = url
        if client is None:
            redis = _redis()
            if redis is None:
                raise ConfigError(
                    "the Redis summary cache needs the redis package: "
                    "pip install 'contextwarden[redis]'"
                )
            try:
                client = redis.Redis.from_url(str(url), decode_responses=False)
            except ValueError as exc:
                raise ConfigError(f"RedisCache: bad url {url!r}: {exc}") from exc
        self._client = client
        self._error_types = _redis_error_types()

    def _run(self, fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except self._error_types as exc:
            raise StoreError(f"summary cache (redis): {exc}") from exc

    def _key(self, key: str) -> str:
        return self.prefix + _check_str("key", key)

    def ping(self) -> bool:
        """True when the server answers (raises :class:`StoreError` when it does not)."""
        return bool(self._run(lambda: self._client.ping()))

    def __getitem__(self, key: str) -> str:
        raw = self._run(lambda: self._client.get(self._key(key)))
        if raw is None:
            raise KeyError(key)
        return raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)

    def __setitem__(self, key: str, value: str) -> None:
        full = self._key(key)
        _check_str("value", value)
        self._run(lambda: self._client.set(full, value.encode("utf-8"), ex=self.ttl))

    def __delitem__(self, key: str) -> None:
        if not self._run(lambda: self._client.delete(self._key(key))):
            raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        return bool(self._run(lambda: self._client.exists(self._key(key))))

    def _scan(self) -> list[str]:
        pattern = _escape_glob(self.prefix) + "*"
        keys = self._run(lambda: list(self._client.scan_iter(match=pattern, count=500)))
        cut = len(self.prefix)
        out = {(k.decode("utf-8") if isinstance(k, bytes) else str(k))[cut:] for k in keys}
        return sorted(out)  # SCAN may repeat a key; a snapshot without duplicates

    def __iter__(self) -> Iterator[str]:
        return iter(self._scan())

    def __len__(self) -> int:
        return len(self._scan())

    def close(self) -> None:
        """Close the client's connections (idempotent)."""
        close = getattr(self._client, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> RedisCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        # The URL may hold a password: show only the scheme and where it points.
        where = _redact_url(self._url) if self._url else type(self._client).__name__
        return f"RedisCache({where!r}, prefix={self.prefix!r})"


def _escape_glob(text: str) -> str:
    """Escape Redis glob metacharacters so the prefix matches literally."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def _redact_url(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    _creds, at, host = rest.rpartition("@")
    return f"{scheme}://***@{host}" if at else url


def _redis() -> ModuleType | None:
    """The ``redis`` package (the ``redis`` extra), or ``None`` when it is not installed."""
    try:
        import redis
    except ImportError:
        return None
    return redis


def _redis_error_types() -> tuple[type[BaseException], ...]:
    redis = _redis()
    if redis is None:  # a client was injected without the redis package (a test double)
        return (ConnectionError, OSError)
    return (redis.RedisError, ConnectionError, OSError)
