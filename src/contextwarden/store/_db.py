"""Opening an SQLite file safely when several processes open a new file at once, every sqlite3
failure a :class:`StoreError` naming the file: connections wait up to ``timeout`` on locks,
migrations run in one ``BEGIN IMMEDIATE`` transaction that re-reads what is applied, and the
steps SQLite does not retry itself (switching to WAL) are retried until the same deadline."""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from .._exceptions import ContextWardenError, StoreError

__all__ = ["Database", "Migration", "connect", "has_table", "is_busy", "is_read_only", "migrate"]

_T = TypeVar("_T")


def is_busy(exc: sqlite3.Error) -> bool:
    """True for the errors a later attempt can get past ("database is locked" / "busy")."""
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def _retrying(fn: Callable[[], _T], deadline: float) -> _T:
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def connect(path: Path, *, what: str, timeout: float) -> sqlite3.Connection:
    """A connection to ``path`` (its folder created) in WAL mode, autocommit, usable from any thread,
    waiting up to ``timeout`` seconds on locks; a file that exists but cannot be written opens
    read-only (:func:`is_read_only`). :class:`StoreError` names ``what`` and the file when it
    cannot be opened."""
    deadline = time.monotonic() + timeout
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            str(path), timeout=timeout, check_same_thread=False, isolation_level=None
        )
        try:
            conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
            _retrying(lambda: conn.execute("PRAGMA journal_mode=WAL").fetchone(), deadline)
            # WAL + NORMAL: a commit survives the process being killed (not a power cut).
            conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error:
            conn.close()
            raise
    except (OSError, sqlite3.Error) as exc:
        if path.is_file() and _cannot_write(exc):
            return _open_read_only(path, what, timeout)
        raise StoreError(f"cannot open {what} {str(path)!r}: {exc}") from exc
    return conn


def _cannot_write(exc: BaseException) -> bool:
    """Whether ``exc`` says the file or its folder cannot be written (not that it is broken)."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM)
    text = str(exc).lower()
    return "readonly" in text or "read-only" in text or "unable to open" in text


def _open_read_only(path: Path, what: str, timeout: float) -> sqlite3.Connection:
    """``path`` opened read-only. When its folder cannot be written either (a read-only mount),
    SQLite cannot make the shared-memory file a WAL reader needs: the file is then read as
    immutable (nothing can change it there)."""
    writable_dir = os.access(path.parent, os.W_OK)
    uri = f"file:{quote(str(path.resolve()))}?mode=ro" + ("" if writable_dir else "&immutable=1")
    try:
        conn = sqlite3.connect(
            uri, uri=True, timeout=timeout, check_same_thread=False, isolation_level=None
        )
        conn.execute("PRAGMA query_only=1")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open {what} {str(path)!r} even read-only: {exc}") from exc
    return conn


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    query = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    return conn.execute(query, (name,)).fetchone() is not None


def is_read_only(conn: sqlite3.Connection) -> bool:
    """Whether :func:`connect` opened the file read-only."""
    row = conn.execute("PRAGMA query_only").fetchone()
    return bool(row and row[0])


#: A migration: SQL statements separated by ``;``, or a function of the connection.
Migration = str | Callable[[sqlite3.Connection], None]


def migrate(
    conn: sqlite3.Connection,
    *,
    table: str,
    migrations: Sequence[tuple[str, Migration]],
    timeout: float,
) -> None:
    """Apply the ``migrations`` not yet named in ``table``, in order, in one ``BEGIN
    IMMEDIATE`` transaction: the first process to take the write lock creates the schema, the
    others wait for it and then find nothing left to do. An up-to-date file opens without the
    write lock, even while another process holds it. sqlite3 errors propagate (the caller
    names the file)."""

    def applied() -> set[str]:
        return (
            {r[0] for r in conn.execute(f"SELECT name FROM {table}")}
            if has_table(conn, table)
            else set()
        )

    deadline = time.monotonic() + timeout
    if {name for name, _ in migrations} <= _retrying(applied, deadline):
        return
    _retrying(lambda: conn.execute("BEGIN IMMEDIATE"), deadline)
    try:
        done = applied()
        conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (name TEXT PRIMARY KEY, applied REAL)")
        for name, step in migrations:
            if name in done:
                continue
            if isinstance(step, str):
                for statement in filter(str.strip, step.split(";")):
                    conn.execute(statement)
            else:
                step(conn)
            conn.execute(f"INSERT INTO {table} (name) VALUES (?)", (name,))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


class Database:
    """One SQLite file opened by :func:`connect`, its connection shared by this process's
    threads behind a lock (other processes open their own); ``what`` names it in errors."""

    def __init__(self, path: Path, *, what: str, timeout: float) -> None:
        self.path, self.what, self.timeout = path, what, timeout
        self._lock = threading.Lock()
        self._db = connect(path, what=what, timeout=timeout)
        self.read_only = is_read_only(self._db)

    def _migrate(self, table: str, migrations: Sequence[tuple[str, Migration]]) -> None:
        """:func:`migrate`; a failure closes the connection and is a :class:`StoreError`."""
        try:
            migrate(self._db, table=table, migrations=migrations, timeout=self.timeout)
        except sqlite3.Error as exc:
            self._db.close()
            raise StoreError(f"cannot open {self.what} {str(self.path)!r}: {exc}") from exc

    def _run(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """``fn(connection)`` under the lock; sqlite errors (a corrupt page...) become
        :class:`StoreError` naming the file."""
        with self._lock:
            try:
                return fn(self._db)
            except sqlite3.Error as exc:
                raise StoreError(f"{self.what} {str(self.path)!r}: {exc}") from exc

    def _all(self, sql: str, *args: object) -> list[Any]:
        """The rows of one query, under the lock (errors as in :meth:`_run`)."""
        return self._run(lambda c: c.execute(sql, args).fetchall())

    def _one(self, sql: str, *args: object) -> Any:
        """The first row of one query, or None."""
        return self._run(lambda c: c.execute(sql, args).fetchone())

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """One write transaction under the lock: it commits whole or not at all; sqlite errors
        (a full disk, a corrupt page, a lock held past the timeout) and values SQLite cannot
        take become StoreError naming the file."""
        if self.read_only:
            raise StoreError(
                f"{self.what} {str(self.path)!r} is read-only (opened from a file that cannot "
                "be written); it can be read, not written"
            )
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield
                    self._db.execute("COMMIT")
                except BaseException:
                    if self._db.in_transaction:
                        with contextlib.suppress(sqlite3.Error):  # the first error is the news
                            self._db.execute("ROLLBACK")
                    raise
            except (sqlite3.Error, ValueError, TypeError) as exc:
                if isinstance(exc, ContextWardenError):
                    raise
                raise StoreError(f"{self.what} {str(self.path)!r}: {exc}") from exc

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self._db.close()
