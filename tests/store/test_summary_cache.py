"""Summary caches: SqliteCache (file, WAL) and RedisCache (fakeredis always; a real redis-server on
loopback when the binary is installed) behave as MutableMapping[str, str] and are shared."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator, MutableMapping
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis_server import free_port, redis_server

from contextwarden import ConfigError, StoreError
from contextwarden.store.cache import RedisCache, SqliteCache, default_cache_path
from contextwarden.store.kv import MIGRATIONS

fakeredis = pytest.importorskip("fakeredis")
redis = pytest.importorskip("redis")


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server on loopback, or skip when it is not installed."""
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        if url is None:
            pytest.skip("redis-server not installed or not starting; fakeredis covers the API")
        yield url


Factory = Callable[[], MutableMapping[str, str]]


def _sqlite_factory() -> Factory:
    folder = Path(tempfile.mkdtemp(prefix="cw-cache-"))
    return lambda: SqliteCache(folder / f"{uuid.uuid4().hex}.sqlite3")


def _fakeredis_factory() -> Factory:
    server = fakeredis.FakeServer()
    return lambda: RedisCache(
        client=fakeredis.FakeRedis(server=server), prefix=f"t{uuid.uuid4().hex}:"
    )


@pytest.fixture(params=["sqlite", "fakeredis", "redis"])
def make_cache(request: pytest.FixtureRequest) -> Factory:
    """A factory of fresh, empty caches of one backend."""
    if request.param == "sqlite":
        return _sqlite_factory()
    if request.param == "fakeredis":
        return _fakeredis_factory()
    url = request.getfixturevalue("redis_url")
    return lambda: RedisCache(url, prefix=f"t{uuid.uuid4().hex}:")


keys = st.text(min_size=0, max_size=12)  # includes "", unicode, and Redis glob characters
values = st.text(max_size=40)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("set"), keys, values), st.tuples(st.just("del"), keys, st.just(""))
    ),
    max_size=25,
)


# make_cache is a factory: each example builds a fresh, empty cache, so sharing the fixture is safe.
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(program=ops)
def test_behaves_like_a_dict(make_cache: Factory, program: list[tuple[str, str, str]]) -> None:
    cache, model = make_cache(), dict[str, str]()
    for op, key, value in program:
        if op == "set":
            cache[key] = value
            model[key] = value
        else:
            if key in model:
                del cache[key]
                del model[key]
            else:
                with pytest.raises(KeyError):
                    del cache[key]
        assert len(cache) == len(model)
    assert dict(cache.items()) == model
    assert sorted(cache) == sorted(model)
    for key in model:
        assert key in cache and cache[key] == model[key]
    assert "never-set-\x00" not in cache
    with pytest.raises(KeyError):
        cache["never-set-\x00"]
    cache.close()  # type: ignore[attr-defined]


def test_rejects_non_string_keys_and_values(make_cache: Factory) -> None:
    cache = make_cache()
    with pytest.raises(TypeError, match="value must be str"):
        cache["k"] = b"bytes"  # type: ignore[assignment]
    with pytest.raises(TypeError, match="key must be str"):
        cache[1] = "v"  # type: ignore[index]
    assert 1 not in cache
    assert len(cache) == 0


def test_sqlite_file_is_wal_and_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    with SqliteCache(path) as cache:
        assert cache.journal_mode == "wal"
        cache["h1"] = "summary one"
    with SqliteCache(path) as again:  # migrations run once: reopening neither fails nor wipes
        assert again["h1"] == "summary one"
    with sqlite3.connect(path) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM contextwarden_kv_migrations")]
    assert names == [name for name, _ in MIGRATIONS]


def test_summaries_of_the_previous_file_layout_stay_found(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE summaries (key TEXT PRIMARY KEY, value TEXT, created_at REAL)")
        conn.execute("INSERT INTO summaries VALUES ('h-old', 'kept before', 0)")
        conn.execute("PRAGMA user_version=1")
    with SqliteCache(path) as cache:
        assert cache["h-old"] == "kept before" and list(cache) == ["h-old"]


def test_sqlite_default_path_is_under_the_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTEXTWARDEN_DATA_DIR", str(tmp_path / "data"))
    assert default_cache_path() == tmp_path / "data" / "summary-cache.sqlite3"
    with SqliteCache() as cache:
        cache["k"] = "v"
        assert cache.path == tmp_path / "data" / "summary-cache.sqlite3"
    assert (tmp_path / "data" / "summary-cache.sqlite3").is_file()


def test_sqlite_is_shared_between_processes(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    with SqliteCache(path) as cache:
        cache["mine"] = "from the parent"
        script = (
            "import sys; from contextwarden.store.cache import SqliteCache\n"
            "c = SqliteCache(sys.argv[1]); print(c['mine']); c['theirs'] = 'from the child'; c.close()"
        )
        out = subprocess.run(
            [sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == "from the parent"
        assert cache["theirs"] == "from the child"  # the open connection sees the other's write


def test_sqlite_is_safe_across_threads(tmp_path: Path) -> None:
    import threading

    cache = SqliteCache(tmp_path / "t.sqlite3")

    def work(n: int) -> None:
        for i in range(50):
            cache[f"{n}-{i}"] = str(i)
            assert cache[f"{n}-{i}"] == str(i)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache) == 200
    cache.close()


def test_sqlite_bad_path_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file, not a folder")
    with pytest.raises(StoreError, match="cannot open summary cache"):
        SqliteCache(tmp_path / "taken" / "c.sqlite3")
    (tmp_path / "junk.sqlite3").write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="junk.sqlite3"):
        SqliteCache(tmp_path / "junk.sqlite3")


def test_redis_is_shared_between_clients(redis_url: str) -> None:
    prefix = f"t{uuid.uuid4().hex}:"
    a, b = RedisCache(redis_url, prefix=prefix), RedisCache(redis_url, prefix=prefix)
    other = RedisCache(redis_url, prefix=prefix + "other:")
    a["hash-of-prefix"] = "the summary"
    assert b["hash-of-prefix"] == "the summary"
    assert list(b) == ["hash-of-prefix"]
    assert "hash-of-prefix" not in other  # prefixes isolate caches sharing a database
    del b["hash-of-prefix"]
    assert "hash-of-prefix" not in a
    for c in (a, b, other):
        c.close()


def test_redis_prefix_with_glob_characters_matches_literally() -> None:
    server = fakeredis.FakeServer()
    star = RedisCache(client=fakeredis.FakeRedis(server=server), prefix="a*:")
    plain = RedisCache(client=fakeredis.FakeRedis(server=server), prefix="ab:")
    plain["x"] = "1"
    star["y"] = "2"
    assert list(star) == ["y"]
    assert list(plain) == ["x"]


def test_redis_ttl_is_set() -> None:
    client = fakeredis.FakeRedis()
    cache = RedisCache(client=client, prefix="p:", ttl=60)
    cache["k"] = "v"
    assert 0 < client.ttl("p:k") <= 60


def test_redis_unreachable_is_a_store_error() -> None:
    cache = RedisCache(f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(StoreError, match="redis"):
        cache["k"] = "v"
    with pytest.raises(StoreError):
        cache.ping()


def test_redis_config_errors_and_repr_hide_the_password() -> None:
    with pytest.raises(ConfigError, match="exactly one"):
        RedisCache()
    with pytest.raises(ConfigError, match="exactly one"):
        RedisCache("redis://x", client=fakeredis.FakeRedis())
    with pytest.raises(ConfigError, match="ttl"):
        RedisCache(client=fakeredis.FakeRedis(), ttl=0)
    with pytest.raises(ConfigError, match="bad url"):
        RedisCache("http://not-redis")
    shown = repr(RedisCache("redis://user:s3cret@127.0.0.1:1/0"))
    assert "s3cret" not in shown and "127.0.0.1:1" in shown
