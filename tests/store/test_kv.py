"""One key-value store (memory, SQLite, Redis) behind the summaries and the edit logs: every
backend behaves as the same model, scopes never meet, and a conversation's log is stored by
appending what each call adds (the bytes a call writes do not grow with the history)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fakeredis
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis_server import redis_server

sys.path.insert(0, str(Path(__file__).parents[1] / "context"))
from test_continuity import openai_steps  # noqa: E402

from contextwarden import Warden  # noqa: E402
from contextwarden.store.cache import SummaryCache  # noqa: E402
from contextwarden.store.kv import (  # noqa: E402
    KeyValueStore,
    MemoryStore,
    RedisStore,
    Scoped,
    SQLiteStore,
)
from contextwarden.store.logs import LogStore, SQLiteLogStore, dumps  # noqa: E402

Make = Callable[[], KeyValueStore]


def _sqlite(folder: Path) -> Make:
    return lambda: SQLiteStore(folder / f"{uuid.uuid4().hex}.sqlite3")


def _fakeredis() -> KeyValueStore:
    return RedisStore(client=fakeredis.FakeRedis(), prefix=f"t{uuid.uuid4().hex}:")


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str | None]:
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture(params=["memory", "sqlite", "fakeredis", "redis"])
def make(request: pytest.FixtureRequest, tmp_path: Path, redis_url: str | None) -> Make:
    if request.param == "memory":
        return MemoryStore
    if request.param == "sqlite":
        return _sqlite(tmp_path)
    if request.param == "fakeredis":
        return _fakeredis
    if redis_url is None:
        pytest.skip("redis-server is not installed (.ci/run installs it)")
    return lambda: RedisStore(redis_url, prefix=f"t{uuid.uuid4().hex}:")


_KEYS = st.sampled_from(["a", "b", "a/b", "ключ"])
_NAMESPACES = st.sampled_from(["log", "log.edits", "summary"])
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), _NAMESPACES, _KEYS, st.binary(max_size=20)),
        st.tuples(st.just("delete"), _NAMESPACES, _KEYS),
        st.tuples(
            st.just("append"),
            _NAMESPACES,
            _KEYS,
            st.lists(st.binary(max_size=8), max_size=4),
            st.integers(0, 6),
        ),
    ),
    max_size=25,
)


# the fixture is a factory: each example makes a fresh store
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(program=_OPS)
def test_every_backend_is_the_same_model(make: Make, program: list[tuple[Any, ...]]) -> None:
    store = make()
    values: dict[tuple[str, str], bytes] = {}
    lists: dict[tuple[str, str], list[bytes]] = {}
    for op, ns, key, *rest in program:
        if op == "put":
            store.put(ns, key, rest[0])
            values[ns, key] = rest[0]
        elif op == "delete":
            found = (ns, key) in values or bool(lists.get((ns, key)))
            assert store.delete(ns, key) == found
            values.pop((ns, key), None)
            lists.pop((ns, key), None)
        else:
            items, at = rest
            at = min(at, len(lists.get((ns, key), [])))  # a writer appends where its copy ends
            store.append(ns, key, items, at)
            lists[ns, key] = [*lists.get((ns, key), [])[:at], *items]
    for ns in ("log", "log.edits", "summary"):
        assert store.keys(ns) == sorted(k for n, k in values if n == ns)
        for key in ("a", "b", "a/b", "ключ"):
            assert store.get(ns, key) == values.get((ns, key))
            assert store.items(ns, key) == lists.get((ns, key), [])


def test_scopes_and_namespaces_never_meet(make: Make) -> None:
    store = make()
    alice, bob = Scoped(store, "alice"), Scoped(store, "bob")
    alice.put("summary", "k", b"alice's")
    bob.put("summary", "k", b"bob's")
    alice.append("log.edits", "k", [b"1"], 0)
    assert (alice.get("summary", "k"), bob.get("summary", "k")) == (b"alice's", b"bob's")
    assert bob.items("log.edits", "k") == [] and alice.items("log.edits", "k") == [b"1"]
    assert store.get("log", "k") is None and alice.keys("summary") == ["k"]
    cache = SummaryCache(alice)
    assert dict(cache) == {"k": "alice's"}


def _bytes_per_call(store: LogStore, steps: int) -> tuple[list[int], list[int]]:
    """Bytes each call of a ``steps``-call conversation writes to the store, and how many edits
    the conversation had after each call."""
    warden = Warden(log_store=store)
    per_call, edits = [], []
    for history in openai_steps("Fix the failing test", steps)[1:]:
        before = store.store.bytes_written
        _, result = warden.transform_openai(history, model="gpt-4o", window=1_000_000)
        per_call.append(store.store.bytes_written - before)
        edits.append(len(warden.edit_log(result.conversation)))
    return per_call, edits


def test_a_call_writes_what_it_adds_not_the_whole_log(tmp_path: Path) -> None:
    per_call, edits = _bytes_per_call(SQLiteLogStore(tmp_path / "logs.db"), 200)
    quiet = [n for n, (a, b) in enumerate(zip([0, *edits], edits, strict=False)) if a == b]
    early = [per_call[n] for n in quiet if 10 <= n < 30]
    late = [per_call[n] for n in quiet if 180 <= n < 200]
    assert early and late
    # a call without a new edit writes its new messages' hashes and the small header: as many
    # bytes at call 190 as at call 20 (the whole record grew tenfold in between)
    assert max(late) <= max(early) + 16
    (key,) = _conversations(tmp_path)
    stored = SQLiteLogStore(tmp_path / "logs.db").get_log(key)
    assert stored is not None and len(stored["history"]) == 402
    # what the store used to rewrite on every call: the whole record, by then 20x bigger
    assert len(dumps(stored)) > 20 * max(late)


def _conversations(tmp_path: Path) -> list[str]:
    with sqlite3.connect(tmp_path / "logs.db") as conn:
        return [r[0] for r in conn.execute("SELECT key FROM contextwarden_kv WHERE ns = 'log'")]


_WORKER = """
import json, sys
sys.path.insert(0, {context!r})
from test_continuity import openai_steps
from contextwarden import Warden
from contextwarden.store.logs import SQLiteLogStore
warden = Warden(log_store=SQLiteLogStore({path!r}))
steps = openai_steps("Fix the failing test", 30)
for line in sys.stdin:
    request, _ = warden.transform_openai(steps[int(line)], model="gpt-4o", window=8_000)
    print(json.dumps(request), flush=True)
"""


def test_two_processes_append_to_one_log_and_send_what_one_process_sends(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    code = _WORKER.format(context=str(Path(__file__).parents[1] / "context"), path=path)
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    try:
        served = []
        for k in range(1, 31):
            worker = workers[k % 2]
            assert worker.stdin is not None and worker.stdout is not None
            worker.stdin.write(f"{k}\n")
            worker.stdin.flush()
            served.append(json.loads(worker.stdout.readline()))
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()
    alone = Warden()
    steps = openai_steps("Fix the failing test", 30)
    expected = [
        alone.transform_openai(steps[k], model="gpt-4o", window=8_000)[0] for k in range(1, 31)
    ]
    assert served == expected
