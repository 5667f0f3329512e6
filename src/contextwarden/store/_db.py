"""Opening an SQLite file safely when several processes open a new file at once, every sqlite3
failure a :class:`StoreError` naming the file: connections wait up to ``timeout`` on locks,
migrations run in one ``BEGIN IMMEDIATE`` transaction that re-reads what is applied, and the
steps SQLite does not retry itself (switching to WAL) are retried until the same deadline."""

from __future__ import annotations

import errno
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

from .._exceptions import StoreError

__all__ = ["applied_in", "connect", "has_table", "is_busy", "is_read_only", "migrate"]

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
        conn = _open(path, timeout)
    except (OSError, sqlite3.Error) as exc:
        if path.is_file() and _cannot_write(exc):
            return _open_read_only(path, what, timeout)
        raise StoreError(f"cannot open {what} {str(path)!r}: {exc}") from exc
    try:
        conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        _retrying(lambda: conn.execute("PRAGMA journal_mode=WAL").fetchone(), deadline)
        # WAL + NORMAL: a commit survives the process being killed (not a power cut).
        conn.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.Error as exc:
        conn.close()
        if path.is_file() and _cannot_write(exc):
            return _open_read_only(path, what, timeout)
        raise StoreError(f"cannot open {what} {str(path)!r}: {exc}") from exc
    return conn


def _open(path: Path, timeout: float) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    return sqlite3.connect(
        str(path), timeout=timeout, check_same_thread=False, isolation_level=None
    )


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


def applied_in(table: str) -> Callable[[sqlite3.Connection], set[str]]:
    """Reads the names of the applied migrations ``table`` records (none before it exists)."""
    return lambda conn: (
        {r[0] for r in conn.execute(f"SELECT name FROM {table}")}
        if has_table(conn, table)
        else set()
    )


def is_read_only(conn: sqlite3.Connection) -> bool:
    """Whether :func:`connect` opened the file read-only."""
    row = conn.execute("PRAGMA query_only").fetchone()
    return bool(row and row[0])


def migrate(
    conn: sqlite3.Connection,
    *,
    applied: Callable[[sqlite3.Connection], set[str]],
    migrations: Sequence[tuple[str, Callable[[sqlite3.Connection], None]]],
    record: Callable[[sqlite3.Connection, str, int], None],
    timeout: float,
) -> None:
    """Apply the ``migrations`` not yet ``applied``, in order, in one ``BEGIN IMMEDIATE``
    transaction: the first process to take the write lock creates the schema, the others wait
    for it and then find nothing left to do. ``applied`` only reads (an up-to-date file opens
    without the write lock, even while another process holds it); ``record(conn, name, number)``
    notes each migration. sqlite3 errors propagate (the caller names the file)."""
    deadline = time.monotonic() + timeout
    names = {name for name, _apply in migrations}
    if names <= _retrying(lambda: applied(conn), deadline):
        return
    _retrying(lambda: conn.execute("BEGIN IMMEDIATE"), deadline)
    try:
        done = applied(conn)
        for number, (name, apply) in enumerate(migrations, start=1):
            if name in done:
                continue
            apply(conn)
            record(conn, name, number)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
