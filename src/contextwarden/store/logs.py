"""Where conversations' edit logs are kept, so that any process continues any conversation.

A :class:`~contextwarden.Warden` given a log store writes each conversation's record (the
content hashes of its history, its edits with their summaries, its counters: see
:meth:`~contextwarden.context.conversation.Conversation.record`) after every call, and reads it
before the next one: after a restart, or when several workers serve one address, a request
continues the log another process wrote, with no new compaction and the cached prefix intact.

* :class:`SQLiteLogStore`: one SQLite file (WAL), for one machine: the default of
  :class:`~contextwarden.Session` and of the proxy's ``--store``.
* :class:`RedisLogStore`: a Redis server, for several workers or hosts.

Both keep the record as JSON bytes under the conversation's key (which the caller scopes: the
proxy prefixes a keyed hash of the client's credential). Failures are
:class:`~contextwarden.StoreError` naming the store. ``redis`` is an optional extra: :func:`_redis`
imports it when a Redis store is made.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from .._exceptions import StoreError
from ._db import connect, migrate

__all__ = [
    "LogStore",
    "MemoryLogStore",
    "RedisLogStore",
    "SQLiteLogStore",
    "ScopedLogStore",
    "dumps",
    "loads",
]


class LogStore(Protocol):
    """Get and put a conversation's record (JSON-ready mapping) by key."""

    def get_log(self, key: str) -> Mapping[str, Any] | None: ...

    def put_log(self, key: str, record: Mapping[str, Any]) -> None: ...


def dumps(record: Mapping[str, Any]) -> bytes:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()


def loads(data: bytes | str) -> Mapping[str, Any] | None:
    """The record in ``data``; None (with nothing raised) when it is not one: a record this
    version cannot read is a conversation to start anew, not an error for the caller."""
    try:
        record = json.loads(data)
    except ValueError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("history"), list):
        return None
    return record


class ScopedLogStore:
    """``store`` seen through a key prefix: one scope's conversations (a proxy client's) are
    never read or written under another's keys."""

    def __init__(self, store: LogStore, scope: str) -> None:
        self._store = store
        self._prefix = scope + "/"

    def get_log(self, key: str) -> Mapping[str, Any] | None:
        return self._store.get_log(self._prefix + key)

    def put_log(self, key: str, record: Mapping[str, Any]) -> None:
        self._store.put_log(self._prefix + key, record)


class MemoryLogStore:
    """A log store in this process's memory (tests, or to share logs between wardens)."""

    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def get_log(self, key: str) -> Mapping[str, Any] | None:
        with self._lock:
            data = self._data.get(key)
        return loads(data) if data is not None else None

    def put_log(self, key: str, record: Mapping[str, Any]) -> None:
        data = dumps(record)
        with self._lock:
            self._data[key] = data


def _create_logs(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS contextwarden_logs ("
        "key TEXT PRIMARY KEY, record BLOB NOT NULL, updated REAL NOT NULL)"
    )
    conn.execute("CREATE TABLE IF NOT EXISTS contextwarden_log_migrations (name TEXT PRIMARY KEY)")


def _applied(conn: sqlite3.Connection) -> set[str]:
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "contextwarden_log_migrations" not in tables:
        return set()
    return {r[0] for r in conn.execute("SELECT name FROM contextwarden_log_migrations")}


def _note(conn: sqlite3.Connection, name: str, number: int) -> None:
    del number
    conn.execute("INSERT OR IGNORE INTO contextwarden_log_migrations (name) VALUES (?)", (name,))


class SQLiteLogStore:
    """Logs in one SQLite file, in a table of their own (the file may be a session store's)."""

    def __init__(self, path: str | Path, *, timeout: float = 10.0) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn = connect(self.path, what="log store", timeout=timeout)
        try:
            migrate(
                self._conn,
                applied=_applied,
                migrations=[("001_logs", _create_logs)],
                record=_note,
                timeout=timeout,
            )
        except sqlite3.Error as exc:
            raise StoreError(f"log store {str(self.path)!r}: {exc}") from exc

    def get_log(self, key: str) -> Mapping[str, Any] | None:
        try:
            with self._lock:
                row = self._conn.execute(
                    "SELECT record FROM contextwarden_logs WHERE key = ?", (key,)
                ).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"log store {str(self.path)!r}: {exc}") from exc
        return loads(row[0]) if row is not None else None

    def put_log(self, key: str, record: Mapping[str, Any]) -> None:
        try:
            with self._lock:
                self._conn.execute(
                    "INSERT INTO contextwarden_logs (key, record, updated) VALUES (?, ?, ?) "
                    "ON CONFLICT(key) DO UPDATE SET record = excluded.record, "
                    "updated = excluded.updated",
                    (key, dumps(record), time.time()),
                )
        except sqlite3.Error as exc:
            raise StoreError(f"log store {str(self.path)!r}: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class RedisLogStore:
    """Logs in Redis under ``prefix + key``; ``ttl_s`` lets Redis expire idle conversations.
    ``url`` (``redis://host:6379/0``) or a ready ``client`` with the ``redis.Redis`` API."""

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Any = None,
        prefix: str = "contextwarden:log:",
        ttl_s: int | None = 7 * 24 * 3600,
    ) -> None:
        if client is None:
            if url is None:
                raise StoreError("RedisLogStore needs a url or a client")
            client = _redis().Redis.from_url(url, decode_responses=False)
        self._client = client
        self._prefix = prefix
        self._ttl = ttl_s

    def get_log(self, key: str) -> Mapping[str, Any] | None:
        try:
            data = self._client.get(self._prefix + key)
        except Exception as exc:  # redis.RedisError, connection errors
            raise StoreError(f"log store (redis): {exc}") from exc
        return loads(data) if data is not None else None

    def put_log(self, key: str, record: Mapping[str, Any]) -> None:
        try:
            self._client.set(self._prefix + key, dumps(record), ex=self._ttl)
        except Exception as exc:
            raise StoreError(f"log store (redis): {exc}") from exc


def _redis() -> ModuleType:
    """The ``redis`` package (the ``redis`` extra); a :class:`~contextwarden.StoreError` naming
    the extra when it is not installed."""
    try:
        import redis
    except ImportError as exc:
        raise StoreError(
            "the Redis log store needs the redis package: pip install 'contextwarden[redis]'"
        ) from exc
    return redis
