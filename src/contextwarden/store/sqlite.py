"""The session store: the original history, append-only, in one SQLite file (WAL mode).

Messages are appended with a sequence number, elided spans kept by session and ``cw:``
reference (``recall(ref)`` returns that session's own originals), events appended as JSON;
nothing is updated or deleted. A file that cannot be written opens read-only. Schema changes
are named migrations (the list only grows) applied in one immediate transaction. Every failure
is a :class:`~contextwarden.StoreError` naming the file; a write commits whole or not at all.
The default file is in ``$CONTEXTWARDEN_DATA_DIR`` or ``~/.local/share/contextwarden``."""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from .._codec import message_from_dict, message_to_dict
from .._exceptions import ContextWardenError, StoreError
from .._messages import Message
from ._db import Database, Migration, has_table

__all__ = ["SessionStore", "data_dir", "default_db_path"]

_T = TypeVar("_T")

MIGRATIONS: list[tuple[str, Migration]] = [
    (
        "001_sessions_messages",
        """
        CREATE TABLE IF NOT EXISTS sessions (
            id TEXT PRIMARY KEY,
            created REAL NOT NULL,
            meta TEXT NOT NULL DEFAULT '{}'
        );
        CREATE TABLE IF NOT EXISTS messages (
            session_id TEXT NOT NULL REFERENCES sessions(id),
            seq INTEGER NOT NULL,
            fingerprint TEXT NOT NULL,
            body TEXT NOT NULL,
            created REAL NOT NULL,
            PRIMARY KEY (session_id, seq)
        );
        """,
    ),
    (
        "002_elided_spans",
        """
        CREATE TABLE IF NOT EXISTS elided (
            ref TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            body TEXT NOT NULL,
            created REAL NOT NULL
        );
        """,
    ),
    (
        "003_events",
        """
        CREATE TABLE IF NOT EXISTS events (
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            kind TEXT NOT NULL,
            body TEXT NOT NULL,
            created REAL NOT NULL,
            PRIMARY KEY (session_id, seq)
        );
        """,
    ),
    (
        "004_elided_by_session",
        """
        CREATE TABLE IF NOT EXISTS elided_spans (
            session_id TEXT NOT NULL,
            ref TEXT NOT NULL,
            body TEXT NOT NULL,
            created REAL NOT NULL,
            PRIMARY KEY (session_id, ref)
        );
        INSERT OR IGNORE INTO elided_spans SELECT session_id, ref, body, created FROM elided;
        """,
    ),
]


def data_dir() -> Path:
    """``$CONTEXTWARDEN_DATA_DIR``, else ``$XDG_DATA_HOME/contextwarden``, else ``~/.local/share/contextwarden``."""
    env = os.environ.get("CONTEXTWARDEN_DATA_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "contextwarden"


def default_db_path() -> Path:
    """The default store file: ``<data dir>/sessions.sqlite3``."""
    return data_dir() / "sessions.sqlite3"


class SessionStore(Database):
    """Append-only storage of sessions in SQLite. Thread-safe; one connection per store.

    ``timeout`` is how long a call waits for another process's write lock (seconds, default 5).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, timeout: float = 5.0) -> None:
        path = Path(path) if path is not None else default_db_path()
        super().__init__(path, what="session store", timeout=timeout)
        # a file that cannot be written is read as it is (spans written before 004 included)
        self._spans = not self.read_only or self._run(lambda c: has_table(c, "elided_spans"))
        if not self.read_only:
            self._migrate("_migrations", MIGRATIONS)

    def migrations(self) -> list[str]:
        """Names of the applied migrations, in order."""
        return [r[0] for r in self._all("SELECT name FROM _migrations ORDER BY rowid")]

    # -- sessions ----------------------------------------------------------------------------
    def create_session(
        self, session_id: str | None = None, meta: dict[str, Any] | None = None
    ) -> str:
        """Create (or reopen) a session and return its id."""
        sid = session_id or uuid.uuid4().hex
        with self._transaction():
            self._db.execute(
                "INSERT OR IGNORE INTO sessions VALUES (?, ?, ?)",
                (sid, time.time(), json.dumps(meta or {})),
            )
        return sid

    def sessions(self) -> list[str]:
        """The session ids, oldest first."""
        return [r[0] for r in self._all("SELECT id FROM sessions ORDER BY created")]

    # -- messages ----------------------------------------------------------------------------
    def append(self, session_id: str, messages: Sequence[Message]) -> list[int]:
        """Append ``messages`` in order; returns their sequence numbers."""
        with self._transaction():
            start = self._next_seq("messages", session_id)
            now = time.time()
            self._db.executemany(
                "INSERT INTO messages VALUES (?, ?, ?, ?, ?)",
                [
                    (session_id, start + i, m.fingerprint, _dumps(message_to_dict(m)), now)
                    for i, m in enumerate(messages)
                ],
            )
        return list(range(start, start + len(messages)))

    def messages(self, session_id: str) -> list[Message]:
        """The whole original history of a session, in order."""
        query = "SELECT seq, body FROM messages WHERE session_id = ? ORDER BY seq"
        return [
            self._decode(
                f"message {seq} of session {session_id!r}",
                body,
                functools.partial(message_from_dict, index=int(seq)),
            )
            for seq, body in self._all(query, session_id)
        ]

    def count(self, session_id: str) -> int:
        """How many messages the session holds."""
        return int(self._one("SELECT COUNT(*) FROM messages WHERE session_id = ?", session_id)[0])

    # -- elided spans ------------------------------------------------------------------------
    def put_elided(self, session_id: str, ref: str, messages: Sequence[Message]) -> None:
        """Keep ``messages`` under ``ref`` for ``session_id`` (first write wins: a ref names
        fixed content within a session)."""
        body = _dumps([message_to_dict(m) for m in messages])
        with self._transaction():
            self._db.execute(
                "INSERT OR IGNORE INTO elided_spans VALUES (?, ?, ?, ?)",
                (session_id, ref, body, time.time()),
            )

    def get_elided(self, ref: str, session_id: str | None = None) -> list[Message] | None:
        """The messages ``session_id`` kept under ``ref``, or None. Without ``session_id``,
        those of whichever session stored ``ref`` first (for tools reading a whole store)."""

        def find(db: sqlite3.Connection) -> Any:
            where, args = "ref = ?", (ref,) if session_id is None else (ref, session_id)
            if session_id is not None:
                where = "ref = ? AND session_id = ?"
            tables = ("elided_spans", "elided") if self._spans else ("elided",)
            for table in tables:  # the older table: spans written before 004
                row = db.execute(
                    f"SELECT body FROM {table} WHERE {where} ORDER BY created LIMIT 1", args
                ).fetchone()
                if row is not None:
                    return row
            return None

        row = self._run(find)
        if row is None:
            return None

        def messages(data: Any) -> list[Message]:
            if not isinstance(data, list):
                raise TypeError(f"expected a list of messages, got {type(data).__name__}")
            return [message_from_dict(d, index=i) for i, d in enumerate(data)]

        return self._decode(f"elided span {ref!r}", row[0], messages)

    # -- events ------------------------------------------------------------------------------
    def add_event(self, session_id: str, kind: str, body: dict[str, Any]) -> None:
        with self._transaction():
            self._db.execute(
                "INSERT INTO events VALUES (?, ?, ?, ?, ?)",
                (session_id, self._next_seq("events", session_id), kind, _dumps(body), time.time()),
            )

    def events(self, session_id: str) -> list[tuple[str, dict[str, Any]]]:
        """The session's events (kind, body), in order."""
        query = "SELECT seq, kind, body FROM events WHERE session_id = ? ORDER BY seq"
        return [
            (kind, self._decode(f"event {seq} of session {session_id!r}", body, _event_body))
            for seq, kind, body in self._all(query, session_id)
        ]

    # -- plumbing ----------------------------------------------------------------------------
    def _next_seq(self, table: str, session_id: str) -> int:
        """The next sequence number of ``table`` in ``session_id`` (inside a transaction)."""
        query = f"SELECT COALESCE(MAX(seq), -1) FROM {table} WHERE session_id = ?"
        return int(self._db.execute(query, (session_id,)).fetchone()[0]) + 1

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _decode(self, where: str, body: str, build: Callable[[Any], _T]) -> _T:
        """``build(json.loads(body))``; a row that is not JSON or not what it should hold is a
        StoreError naming the file and the row."""
        try:
            return build(json.loads(body))
        except (ValueError, TypeError, KeyError, ContextWardenError) as exc:
            raise StoreError(
                f"session store {str(self.path)!r}: {where} is unreadable: {exc}"
            ) from exc


def _event_body(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise TypeError(f"expected a JSON object, got {type(data).__name__}")
    return data


def _dumps(obj: Any) -> str:
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: SQLite takes only UTF-8; escapes round-trip
            text = json.dumps(obj, ensure_ascii=True, separators=(",", ":"), default=str)
    return text
