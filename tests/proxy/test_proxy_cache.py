"""One compaction serves every later call, across proxy processes: two proxies (two apps, two
wardens, as two processes behind a load balancer would have) share the summary cache, in Redis
(a real redis-server on loopback) or in one SQLite file, for a client they both know as the same
one (the same ``client_key``); a proxy keyed otherwise shares nothing with them."""

from __future__ import annotations

from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_upstream import FakeUpstream
from proxy_doubles import StartProxy

from contextwarden.formats import validate_openai
from contextwarden.store.cache import RedisCache, SqliteCache

Upstream = tuple[FakeUpstream, str]

#: The key the proxies sharing a cache tell clients apart with (the same on each).
KEY = "a-shared-secret-key-for-the-test"


def _call(proxy: str, model: str, history: list[dict[str, Any]]) -> httpx.Response:
    r = httpx.post(
        f"{proxy}/v1/chat/completions",
        json={"model": model, "messages": history},
        headers={"Authorization": "Bearer sk-test"},
        timeout=60,
    )
    assert r.status_code == 200
    return r


@pytest.fixture
def summarizer_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the default (extractive) summarizer's calls, in every proxy of this process."""
    from contextwarden.summarizers.extractive import ExtractiveSummarizer

    calls: list[int] = []
    original = ExtractiveSummarizer.summarize

    def counting(self: Any, request: Any) -> Any:
        calls.append(1)
        return original(self, request)

    monkeypatch.setattr(ExtractiveSummarizer, "summarize", counting)
    return calls


def _check_shared(
    fake: FakeUpstream,
    proxies: list[str],
    cache: MutableMapping[str, str],
    recording: tuple[str, list[dict[str, Any]]],
    calls: list[int],
) -> None:
    """Two proxies on one store (sharing a client key, as workers serving one team do): the
    first compacts, writes its summary and the conversation's log; the second (a fresh warden,
    as in another process), asked the same, continues that log: no new compaction, no
    summarizer call, no new summary, and the first's exact bytes (so the provider's prompt
    cache stays warm)."""
    model, history = recording
    first, second = proxies
    r = _call(first, model, history)
    assert int(r.headers["x-contextwarden-compacted"]) > 0
    reduced = fake.last.body
    summaries = {k: v for k, v in cache.items() if "<completed>" in v}
    assert summaries and calls, "the compaction neither summarised nor cached a summary"
    paid = len(calls)
    r = _call(second, model, history)
    assert r.headers.get("x-contextwarden-compacted", "0") == "0"
    assert fake.last.body == reduced
    assert len(calls) == paid  # no summarizer ran
    assert {k: v for k, v in cache.items() if "<completed>" in v} == summaries
    assert validate_openai(fake.last.json["messages"]) == []
    stats = httpx.get(f"{second}/stats").json()
    assert stats["compactions"] == 0


def test_two_proxies_share_summaries_in_redis(
    upstream: Upstream,
    start_proxy: StartProxy,
    redis_url: str,
    openai_recording: tuple[str, list[dict[str, Any]]],
    summarizer_calls: list[int],
) -> None:
    fake, url = upstream
    db = redis_url.rsplit("/", 1)[0] + "/5"  # a database of its own
    cache = RedisCache(db)
    for key in list(cache):
        del cache[key]
    proxies = [
        start_proxy(
            url,
            window=16_000,
            cache="redis",
            redis_url=db,
            summarizer="extractive",
            client_key=KEY,
        )
        for _ in range(2)
    ]
    _check_shared(fake, proxies, cache, openai_recording, summarizer_calls)
    cache.close()


def test_two_proxies_share_summaries_in_one_sqlite_file(
    upstream: Upstream,
    start_proxy: StartProxy,
    tmp_path: Path,
    openai_recording: tuple[str, list[dict[str, Any]]],
    summarizer_calls: list[int],
) -> None:
    fake, url = upstream
    path = tmp_path / "summaries.sqlite3"
    settings = {"cache": "sqlite", "cache_path": path, "summarizer": "extractive"}
    proxies = [start_proxy(url, window=16_000, client_key=KEY, **settings) for _ in range(2)]
    with SqliteCache(path) as cache:
        _check_shared(fake, proxies, cache, openai_recording, summarizer_calls)
    # a proxy with another key takes the same credential for another client: its own summary
    paid = len(summarizer_calls)
    other = start_proxy(url, window=16_000, client_key="another-secret-key-0", **settings)
    model, history = openai_recording
    _call(other, model, history)
    assert len(summarizer_calls) > paid


def test_redis_down_does_not_fail_requests(
    upstream: Upstream, start_proxy: StartProxy, openai_recording: tuple[str, list[dict[str, Any]]]
) -> None:
    """A cache that cannot be reached is a miss: the request is still reduced and answered."""
    from redis_server import free_port

    fake, url = upstream
    proxy = start_proxy(
        url, window=16_000, cache="redis", redis_url=f"redis://127.0.0.1:{free_port()}/0"
    )
    model, history = openai_recording
    r = _call(proxy, model, history)
    assert int(r.headers["x-contextwarden-tokens-after"]) <= 16_000 * 0.75  # the trigger ratio
    assert validate_openai(fake.last.json["messages"]) == []
