"""One key-value store for what contextwarden keeps between calls and processes (summaries and
edit logs, each in a namespace), per ``(namespace, key)`` a value (replaced whole) and a list
(grown by :meth:`KeyValueStore.append`, which writes only what is new): :class:`MemoryStore`
(this process), :class:`SQLiteStore` (one WAL file, one machine) and :class:`RedisStore`
(every worker and host; the ``redis`` extra). :class:`Scoped` is a view under a key prefix, so
one client never reads another's keys. Backend failures are :class:`~contextwarden.StoreError`
naming the store."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, TypeVar

from .._exceptions import ConfigError, StoreError
from ._db import Database, Migration, has_table

__all__ = ["KeyValueStore", "MemoryStore", "RedisStore", "SQLiteStore", "Scoped"]

_T = TypeVar("_T")


class KeyValueStore(Protocol):
    """Values and append-only lists by ``(namespace, key)``. ``bytes_written`` counts the bytes
    of values and items written (what a write costs the backend)."""

    @property
    def bytes_written(self) -> int: ...

    def get(self, namespace: str, key: str) -> bytes | None: ...

    def put(self, namespace: str, key: str, value: bytes) -> None: ...

    def delete(self, namespace: str, key: str) -> bool: ...

    def keys(self, namespace: str) -> list[str]: ...

    def items(self, namespace: str, key: str) -> list[bytes]:
        """The list under ``key``, oldest first (empty when there is none)."""
        ...

    def append(self, namespace: str, key: str, items: Sequence[bytes], at: int) -> None:
        """Cut the list under ``key`` to its first ``at`` items, then append ``items``."""
        ...


class Scoped:
    """``store`` seen through a key prefix (``scope/``)."""

    def __init__(self, store: KeyValueStore, scope: str) -> None:
        self.store = store
        self._prefix = scope + "/"

    @property
    def bytes_written(self) -> int:
        return self.store.bytes_written

    def get(self, namespace: str, key: str) -> bytes | None:
        return self.store.get(namespace, self._prefix + key)

    def put(self, namespace: str, key: str, value: bytes) -> None:
        self.store.put(namespace, self._prefix + key, value)

    def delete(self, namespace: str, key: str) -> bool:
        return self.store.delete(namespace, self._prefix + key)

    def keys(self, namespace: str) -> list[str]:
        n = len(self._prefix)
        return [k[n:] for k in self.store.keys(namespace) if k.startswith(self._prefix)]

    def items(self, namespace: str, key: str) -> list[bytes]:
        return self.store.items(namespace, self._prefix + key)

    def append(self, namespace: str, key: str, items: Sequence[bytes], at: int) -> None:
        self.store.append(namespace, self._prefix + key, items, at)


class MemoryStore:
    """A store in this process's memory."""

    def __init__(self) -> None:
        self._values: dict[tuple[str, str], bytes] = {}
        self._lists: dict[tuple[str, str], list[bytes]] = {}
        self._lock = threading.Lock()
        self.bytes_written = 0

    def get(self, namespace: str, key: str) -> bytes | None:
        with self._lock:
            return self._values.get((namespace, key))

    def put(self, namespace: str, key: str, value: bytes) -> None:
        with self._lock:
            self._values[namespace, key] = value
            self.bytes_written += len(value)

    def delete(self, namespace: str, key: str) -> bool:
        with self._lock:
            found = self._values.pop((namespace, key), None) is not None
            return bool(self._lists.pop((namespace, key), None)) or found

    def keys(self, namespace: str) -> list[str]:
        with self._lock:
            return sorted(k for ns, k in self._values if ns == namespace)

    def items(self, namespace: str, key: str) -> list[bytes]:
        with self._lock:
            return list(self._lists.get((namespace, key), ()))

    def append(self, namespace: str, key: str, items: Sequence[bytes], at: int) -> None:
        with self._lock:
            kept = self._lists.setdefault((namespace, key), [])
            del kept[at:]
            kept.extend(items)
            self.bytes_written += sum(len(i) for i in items)


def _copy_old_summaries(conn: sqlite3.Connection) -> None:
    """Summaries a summary cache of the previous layout kept in its own table stay found."""
    if has_table(conn, "summaries"):
        conn.execute(
            "INSERT OR IGNORE INTO contextwarden_kv (ns, key, value, updated) "
            "SELECT 'summary', key, CAST(value AS BLOB), created_at FROM summaries"
        )


#: Schema migrations, applied in order and named in ``contextwarden_kv_migrations`` (append
#: only: a migration that has shipped is never edited, a new one is added at the end).
MIGRATIONS: list[tuple[str, Migration]] = [
    (
        "001_kv",
        "CREATE TABLE IF NOT EXISTS contextwarden_kv (ns TEXT NOT NULL, key TEXT NOT NULL, "
        "value BLOB NOT NULL, updated REAL NOT NULL, PRIMARY KEY (ns, key));"
        "CREATE TABLE IF NOT EXISTS contextwarden_kv_items (ns TEXT NOT NULL, key TEXT NOT NULL, "
        "seq INTEGER NOT NULL, value BLOB NOT NULL, PRIMARY KEY (ns, key, seq))",
    ),
    ("002_summaries_from_the_summary_cache_table", _copy_old_summaries),
]


class SQLiteStore(Database):
    """A store in one SQLite file (WAL; the file may hold a session store's tables too). One
    connection, shared by this process's threads behind a lock; other processes open their own.
    ``what`` names the store in errors."""

    def __init__(self, path: str | Path, *, timeout: float = 5.0, what: str = "store") -> None:
        super().__init__(Path(path), what=what, timeout=timeout)
        self.bytes_written = 0
        self._migrate("contextwarden_kv_migrations", MIGRATIONS)

    @property
    def journal_mode(self) -> str:
        """The file's journal mode as SQLite reports it (``"wal"``)."""
        return str(self._one("PRAGMA journal_mode")[0])

    def get(self, namespace: str, key: str) -> bytes | None:
        row = self._one(
            "SELECT value FROM contextwarden_kv WHERE ns = ? AND key = ?", namespace, key
        )
        return bytes(row[0]) if row is not None else None

    def put(self, namespace: str, key: str, value: bytes) -> None:
        self._run(
            lambda c: c.execute(
                "INSERT OR REPLACE INTO contextwarden_kv (ns, key, value, updated) "
                "VALUES (?, ?, ?, ?)",
                (namespace, key, value, time.time()),
            )
        )
        self.bytes_written += len(value)

    def delete(self, namespace: str, key: str) -> bool:
        def run(c: sqlite3.Connection) -> bool:
            args = (namespace, key)
            gone = c.execute("DELETE FROM contextwarden_kv WHERE ns = ? AND key = ?", args)
            items = c.execute("DELETE FROM contextwarden_kv_items WHERE ns = ? AND key = ?", args)
            return gone.rowcount > 0 or items.rowcount > 0

        return self._run(run)

    def keys(self, namespace: str) -> list[str]:
        rows = self._all("SELECT key FROM contextwarden_kv WHERE ns = ? ORDER BY key", namespace)
        return [str(r[0]) for r in rows]

    def items(self, namespace: str, key: str) -> list[bytes]:
        query = "SELECT value FROM contextwarden_kv_items WHERE ns = ? AND key = ? ORDER BY seq"
        return [bytes(r[0]) for r in self._all(query, namespace, key)]

    def append(self, namespace: str, key: str, items: Sequence[bytes], at: int) -> None:
        with self._transaction():
            self._db.execute(
                "DELETE FROM contextwarden_kv_items WHERE ns = ? AND key = ? AND seq >= ?",
                (namespace, key, at),
            )
            self._db.executemany(
                "INSERT INTO contextwarden_kv_items (ns, key, seq, value) VALUES (?, ?, ?, ?)",
                [(namespace, key, at + i, item) for i, item in enumerate(items)],
            )
        self.bytes_written += sum(len(i) for i in items)


class RedisStore:
    """A store in Redis: a value under ``prefix + namespace + ":" + key`` (``prefix + key`` for
    the empty namespace), a list under the same name with ``[]`` after the namespace. ``url``
    (``redis://host:6379/0``) or a ready ``client`` with the ``redis.Redis`` API; ``ttl_s`` lets
    Redis expire what is not written again within that many seconds."""

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Any = None,
        prefix: str = "contextwarden:",
        ttl_s: int | None = None,
        what: str = "store",
    ) -> None:
        if (url is None) == (client is None):
            raise ConfigError(f"{what} (redis): give exactly one of url= or client=")
        if ttl_s is not None and ttl_s <= 0:
            raise ConfigError(
                f"{what} (redis): ttl must be a positive number of seconds, got {ttl_s}"
            )
        self.url, self.prefix, self.ttl_s, self.what = url, prefix, ttl_s, what
        self.bytes_written = 0
        redis = _redis()
        if client is None:
            if redis is None:
                raise ConfigError(
                    f"the Redis {what} needs the redis package: pip install 'contextwarden[redis]'"
                )
            try:
                client = redis.Redis.from_url(str(url), decode_responses=False)
            except ValueError as exc:
                raise ConfigError(f"{what} (redis): bad url {url!r}: {exc}") from exc
        self.client = client
        self._errors: tuple[type[BaseException], ...] = (ConnectionError, OSError)
        if redis is not None:
            self._errors += (redis.RedisError,)

    def _run(self, fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except self._errors as exc:
            raise StoreError(f"{self.what} (redis): {exc}") from exc

    def name(self, namespace: str, key: str, *, items: bool = False) -> str:
        """The Redis key of a value (or of a list, with ``items``)."""
        if not namespace:
            return self.prefix + ("[]" if items else "") + key
        return f"{self.prefix}{namespace}{'[]' if items else ''}:{key}"

    def ping(self) -> bool:
        """True when the server answers (raises :class:`StoreError` when it does not)."""
        return bool(self._run(lambda: self.client.ping()))

    def get(self, namespace: str, key: str) -> bytes | None:
        raw = self._run(lambda: self.client.get(self.name(namespace, key)))
        return raw if raw is None or isinstance(raw, bytes) else str(raw).encode()

    def put(self, namespace: str, key: str, value: bytes) -> None:
        self._run(lambda: self.client.set(self.name(namespace, key), value, ex=self.ttl_s))
        self.bytes_written += len(value)

    def delete(self, namespace: str, key: str) -> bool:
        names = (self.name(namespace, key), self.name(namespace, key, items=True))
        return bool(self._run(lambda: self.client.delete(*names)))

    def keys(self, namespace: str) -> list[str]:
        start = self.name(namespace, "")
        pattern = "".join("\\" + c if c in "*?[]\\" else c for c in start) + "*"
        found = self._run(lambda: list(self.client.scan_iter(match=pattern, count=500)))
        names = {(k.decode() if isinstance(k, bytes) else str(k))[len(start) :] for k in found}
        # the empty namespace's lists sit under the prefix too
        return sorted(n for n in names if not (not namespace and n.startswith("[]")))

    def items(self, namespace: str, key: str) -> list[bytes]:
        raw = self._run(lambda: self.client.lrange(self.name(namespace, key, items=True), 0, -1))
        return [r if isinstance(r, bytes) else str(r).encode() for r in raw]

    def append(self, namespace: str, key: str, items: Sequence[bytes], at: int) -> None:
        name = self.name(namespace, key, items=True)

        def run() -> None:
            pipe = self.client.pipeline(transaction=True)
            if at <= 0:
                pipe.delete(name)
            else:
                pipe.ltrim(name, 0, at - 1)
            if items:
                pipe.rpush(name, *items)
            if self.ttl_s is not None:
                pipe.expire(name, self.ttl_s)
            pipe.execute()

        self._run(run)
        self.bytes_written += sum(len(i) for i in items)

    def close(self) -> None:
        close = getattr(self.client, "close", None)
        if callable(close):
            close()

    def __repr__(self) -> str:
        # the URL may hold a password: only the scheme and where it points are shown
        where = type(self.client).__name__
        if self.url:
            scheme, sep, rest = self.url.partition("://")
            where = f"{scheme}://***@{rest.rpartition('@')[2]}" if "@" in rest else self.url
        return f"RedisStore({where!r}, prefix={self.prefix!r})"


def _redis() -> ModuleType | None:
    """The ``redis`` package (the ``redis`` extra), or None when it is not installed."""
    try:
        import redis
    except ImportError:
        return None
    return redis
