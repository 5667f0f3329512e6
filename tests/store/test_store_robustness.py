"""The stores as a careful operator would stress them: six processes opening a new file at once,
a writer killed with SIGKILL mid-write, a full disk, corrupt pages, rows that are not JSON. Every
failure is a StoreError naming the file; nothing committed is ever lost."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from contextwarden import StoreError
from contextwarden._messages import assistant, user
from contextwarden.store.cache import SqliteCache
from contextwarden.store.sqlite import MIGRATIONS, SessionStore

PROCESSES = 6
ROUNDS = 20


def _open_many(kind: str, folder: str, barrier: Any, results: Any) -> None:
    """One of the racing processes: for each round, wait for the others, then open that round's
    new file (all six at the same moment), use it, close it."""
    failures = []
    for n in range(ROUNDS):
        barrier.wait()
        path = Path(folder) / f"{kind}-{n}.sqlite3"
        try:
            if kind == "session":
                with SessionStore(path) as store:
                    store.create_session(f"s{os.getpid()}")
            else:
                with SqliteCache(path) as cache:
                    cache[f"k{os.getpid()}"] = "v"
        except Exception as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
    results.put(failures)


@pytest.mark.parametrize("kind", ["session", "cache"])
def test_six_processes_opening_a_new_file_at_once(tmp_path: Path, kind: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_open_many, args=(kind, str(tmp_path), barrier, results))
        for _ in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    failures = [f for _ in procs for f in results.get(timeout=120)]
    for p in procs:
        p.join(timeout=30)
    assert failures == []  # all 120 opens worked
    for n in range(ROUNDS):
        path = tmp_path / f"{kind}-{n}.sqlite3"
        if kind == "session":
            with SessionStore(path) as store:
                assert store.migrations() == [name for name, _ in MIGRATIONS]  # each once
                assert len(store.sessions()) == PROCESSES
        else:
            with SqliteCache(path) as cache:
                assert len(cache) == PROCESSES


WRITER = """
import sys
from contextwarden._messages import user
from contextwarden.store.sqlite import SessionStore
store = SessionStore(sys.argv[1])
sid = store.create_session("s")
i = 0
while True:
    store.append(sid, [user(f"message {i} " + "x" * 2000)])
    print(i, flush=True)  # committed
    i += 1
"""


def test_kill_9_mid_write_loses_nothing_committed(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite3"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    last = -1
    while last < 300:
        line = proc.stdout.readline()
        assert line, "the writer died"
        last = int(line)
    os.kill(proc.pid, signal.SIGKILL)  # mid-stream: it was writing as fast as it could
    proc.wait(timeout=30)
    with SessionStore(db) as store:
        messages = store.messages("s")
    assert len(messages) >= last + 1
    for i, m in enumerate(messages):
        assert m.text.startswith(f"message {i} ")


def test_a_full_disk_is_a_store_error_and_keeps_what_was_committed(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite3"
    store = SessionStore(db)
    sid = store.create_session("s")
    store.append(sid, [user("kept")])
    (pages,) = store._db.execute("PRAGMA page_count").fetchone()
    # the disk fills up a few pages from here (SQLite's own cap stands in for the device's)
    store._db.execute(f"PRAGMA max_page_count={pages + 4}")
    with pytest.raises(StoreError, match="full") as caught:
        for i in range(100):
            store.append(sid, [assistant(f"reply {i} " + "y" * 4000)])
    assert str(db) in str(caught.value)
    committed = store.count(sid)
    assert store.messages(sid)[0].text == "kept"
    with pytest.raises(StoreError, match="full"):  # the transaction was rolled back whole
        store.append(sid, [user("a"), assistant("b" * 20000)])
    assert store.count(sid) == committed
    store.add_event(sid, "note", {"small": True})  # a small write still fits
    store.close()
    with SessionStore(db) as again:
        assert again.count(sid) == committed
        assert again.events(sid) == [("note", {"small": True})]


def _fill(db: Path) -> None:
    with SessionStore(db) as store:
        sid = store.create_session("s")
        for i in range(200):
            store.append(sid, [user(f"message {i} " + "z" * 1000)])
    with sqlite3.connect(db) as conn:  # everything into the main file, so the damage lands there
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def test_corrupt_pages_are_a_store_error_naming_the_file(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite3"
    _fill(db)
    size = db.stat().st_size
    with open(db, "r+b") as f:
        f.seek(size // 2)
        f.write(os.urandom(8192))
        f.seek(4096 + 8)  # the first b-tree page after the schema: its cell pointers
        f.write(b"\xff" * 64)
    with pytest.raises(StoreError) as caught:
        with SessionStore(db) as store:
            store.messages("s")
    assert str(db) in str(caught.value)
    assert isinstance(caught.value.__cause__, sqlite3.DatabaseError)


@pytest.mark.parametrize("kind", ["session", "cache"])
def test_a_file_that_is_not_a_database(tmp_path: Path, kind: str) -> None:
    db = tmp_path / "notes.sqlite3"
    db.write_bytes(b"these are my notes, not a database\n" * 200)
    with pytest.raises(StoreError, match="notes.sqlite3"):
        SessionStore(db) if kind == "session" else SqliteCache(db)


def test_rows_that_are_not_json_are_a_store_error(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite3"
    with SessionStore(db) as store:
        sid = store.create_session("s")
        store.append(sid, [user("fine")])
        store.put_elided(sid, "cw:abc", [user("old")])
        store.add_event(sid, "note", {"a": 1})
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO messages VALUES ('s', 1, 'f', '{not json', 0)")
        conn.execute("INSERT INTO messages VALUES ('s', 2, 'f', '[1, 2]', 0)")
        conn.execute("UPDATE elided_spans SET body = 'garbage' WHERE ref = 'cw:abc'")
        conn.execute("INSERT INTO events VALUES ('s', 1, 'note', '\"a string\"', 0)")
    with SessionStore(db) as store:
        with pytest.raises(StoreError, match=r"message 1 of session 's' is unreadable") as caught:
            store.messages("s")
        assert str(db) in str(caught.value)
        assert isinstance(caught.value.__cause__, json.JSONDecodeError)
        with pytest.raises(StoreError, match="elided span 'cw:abc' is unreadable"):
            store.get_elided("cw:abc")
        with pytest.raises(StoreError, match="event 1 of session 's' is unreadable"):
            store.events("s")
        assert store.count("s") == 3  # what can be read still can
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM messages WHERE seq = 1")
    with SessionStore(db) as store, pytest.raises(StoreError, match="message 2 of session 's'"):
        store.messages("s")


def test_a_lone_surrogate_is_stored_and_read_back(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "s.sqlite3") as store:
        sid = store.create_session("s")
        store.append(sid, [user("cut \ud83d here")])
        assert store.messages(sid)[0].text == "cut \ud83d here"


def test_a_lock_held_past_the_timeout_is_a_store_error(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite3"
    with SessionStore(db) as store:
        sid = store.create_session("s")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        with SessionStore(db, timeout=0.2) as store:
            started = time.monotonic()
            with pytest.raises(StoreError, match="locked"):
                store.append(sid, [user("x")])
            assert time.monotonic() - started < 5
            holder.execute("ROLLBACK")
            assert store.append(sid, [user("y")]) == [0]  # the store's lock was released
    finally:
        holder.close()
