"""The session store: the original history, append-only, in one SQLite file (WAL mode).

Nothing here is ever updated or deleted: messages are appended with a sequence number; every
span a compaction elided is stored under its reference (``cw:...``) so ``recall(ref)`` returns it
verbatim; events are appended as JSON. Schema changes are named migrations applied in order
(the list below only grows).

The default file lives in the data directory: ``$CONTEXTWARDEN_DATA_DIR`` or
``~/.local/share/contextwarden``; tests point the variable at a temporary folder.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .._codec import message_from_dict, message_to_dict
from .._exceptions import StoreError
from .._messages import Message

__all__ = ["SessionStore", "data_dir", "default_db_path"]

MIGRATIONS: list[tuple[str, str]] = [
    (
        "001_sessions_messages",
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            created REAL NOT NULL,
            meta TEXT NOT NULL DEFAULT '{}'
        );
        CREATE TABLE messages (
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
        CREATE TABLE elided (
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
        CREATE TABLE events (
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            kind TEXT NOT NULL,
            body TEXT NOT NULL,
            created REAL NOT NULL,
            PRIMARY KEY (session_id, seq)
        );
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


class SessionStore:
    """Append-only storage of sessions in SQLite. Thread-safe; one connection per store."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_db_path()
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._migrate()
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open session store {self.path}: {exc}") from exc

    # -- schema ------------------------------------------------------------------------------
    def _migrate(self) -> None:
        self._db.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied REAL)")
        done = {row[0] for row in self._db.execute("SELECT name FROM _migrations")}
        for name, sql in MIGRATIONS:
            if name in done:
                continue
            self._db.execute("BEGIN")
            try:
                for statement in filter(str.strip, sql.split(";")):
                    self._db.execute(statement)
                self._db.execute("INSERT INTO _migrations VALUES (?, ?)", (name, time.time()))
                self._db.execute("COMMIT")
            except sqlite3.Error:
                self._db.execute("ROLLBACK")
                raise

    def migrations(self) -> list[str]:
        """Names of the applied migrations, in order."""
        return [r[0] for r in self._db.execute("SELECT name FROM _migrations ORDER BY rowid")]

    # -- sessions ----------------------------------------------------------------------------
    def create_session(self, session_id: str | None = None, meta: dict[str, Any] | None = None) -> str:
        """Create (or reopen) a session and return its id."""
        sid = session_id or uuid.uuid4().hex
        with self._write():
            self._db.execute(
                "INSERT OR IGNORE INTO sessions VALUES (?, ?, ?)",
                (sid, time.time(), json.dumps(meta or {})),
            )
        return sid

    def sessions(self) -> list[str]:
        return [r[0] for r in self._db.execute("SELECT id FROM sessions ORDER BY created")]

    # -- messages ----------------------------------------------------------------------------
    def append(self, session_id: str, messages: Sequence[Message]) -> list[int]:
        """Append ``messages`` in order; returns their sequence numbers."""
        with self._write():
            row = self._db.execute(
                "SELECT COALESCE(MAX(seq), -1) FROM messages WHERE session_id = ?", (session_id,)
            ).fetchone()
            start = int(row[0]) + 1
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
        return list(self.iter_messages(session_id))

    def iter_messages(self, session_id: str) -> Iterator[Message]:
        rows = self._db.execute(
            "SELECT seq, body FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)
        ).fetchall()
        for seq, body in rows:
            yield message_from_dict(json.loads(body), index=int(seq))

    def count(self, session_id: str) -> int:
        row = self._db.execute(
            "SELECT COUNT(*) FROM messages WHERE session_id = ?", (session_id,)
        ).fetchone()
        return int(row[0])

    # -- elided spans ------------------------------------------------------------------------
    def put_elided(self, session_id: str, ref: str, messages: Sequence[Message]) -> None:
        """Keep ``messages`` under ``ref`` (first write wins: a ref names fixed content)."""
        body = _dumps([message_to_dict(m) for m in messages])
        with self._write():
            self._db.execute(
                "INSERT OR IGNORE INTO elided VALUES (?, ?, ?, ?)",
                (ref, session_id, body, time.time()),
            )

    def get_elided(self, ref: str) -> list[Message] | None:
        row = self._db.execute("SELECT body FROM elided WHERE ref = ?", (ref,)).fetchone()
        if row is None:
            return None
        return [message_from_dict(d, index=i) for i, d in enumerate(json.loads(row[0]))]

    # -- events ------------------------------------------------------------------------------
    def add_event(self, session_id: str, kind: str, body: dict[str, Any]) -> None:
        with self._write():
            row = self._db.execute(
                "SELECT COALESCE(MAX(seq), -1) FROM events WHERE session_id = ?", (session_id,)
            ).fetchone()
            self._db.execute(
                "INSERT INTO events VALUES (?, ?, ?, ?, ?)",
                (session_id, int(row[0]) + 1, kind, _dumps(body), time.time()),
            )

    def events(self, session_id: str) -> list[tuple[str, dict[str, Any]]]:
        rows = self._db.execute(
            "SELECT kind, body FROM events WHERE session_id = ? ORDER BY seq", (session_id,)
        ).fetchall()
        return [(k, json.loads(b)) for k, b in rows]

    # -- plumbing ----------------------------------------------------------------------------
    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self) -> _Tx:
        return _Tx(self._db, self._lock, self.path)


class _Tx:
    """One write transaction under the store's lock; sqlite errors become StoreError."""

    def __init__(self, db: sqlite3.Connection, lock: threading.Lock, path: Path) -> None:
        self._db, self._lock, self._path = db, lock, path

    def __enter__(self) -> None:
        self._lock.acquire()
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        try:
            self._db.execute("COMMIT" if exc is None else "ROLLBACK")
        finally:
            self._lock.release()
        if isinstance(exc, sqlite3.Error):
            raise StoreError(f"session store {self._path}: {exc}") from exc


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)
