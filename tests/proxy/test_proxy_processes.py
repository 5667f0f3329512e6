"""Two ``contextwarden proxy`` processes behind one address, sharing one redis-server: an agent's
requests alternate between them and the upstream sees exactly what one process would have sent,
with no compaction made twice."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
from fake_upstream import FakeUpstream
from proxy_doubles import ProxyProcess, proxy_process

from contextwarden.store.cache import RedisCache

Upstream = tuple[FakeUpstream, str]
KEY = "one-team-shares-this-client-key"
WINDOW = 16_000


@contextmanager
def team_proxy(upstream_url: str, redis_url: str, data_dir: Path) -> Iterator[ProxyProcess]:
    """A proxy process of the team's: one redis store, one client key, the embedded summary
    (started; :meth:`~proxy_doubles.ProxyProcess.ready` waits until it answers)."""
    args = ["--window", str(WINDOW), "--cache", "redis", "--redis-url", redis_url]
    args += ["--client-key", KEY, "--summarizer", "extractive"]
    with proxy_process(upstream_url, *args, data_dir=data_dir, wait=False) as running:
        yield running


def agent_calls(history: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """What the agent sent, call by call: its history before each assistant message."""
    return [history[:k] for k, m in enumerate(history) if m["role"] == "assistant" and k > 1]


def run(
    proxies: list[str], model: str, calls: list[list[dict[str, Any]]], fake: FakeUpstream
) -> list[Any]:
    """Send the calls round robin; the message lists the upstream received for them."""
    seen = len(fake.requests)
    for n, messages in enumerate(calls):
        r = httpx.post(
            f"{proxies[n % len(proxies)]}/v1/chat/completions",
            json={"model": model, "messages": messages},
            headers={"Authorization": "Bearer sk-team"},
            timeout=60,
        )
        assert r.status_code == 200, r.text
    return [req.json["messages"] for req in fake.requests[seen:]]


def _omitted(messages: list[dict[str, Any]]) -> int:
    return sum(str(m.get("content")).count("characters omitted") for m in messages)


def compactions(proxies: list[str]) -> int:
    return sum(int(httpx.get(f"{p}/stats").json()["compactions"]) for p in proxies)


def test_requests_alternating_between_two_processes_on_one_redis(
    upstream: Upstream,
    redis_url: str,
    openai_recording: tuple[str, list[dict[str, Any]]],
    tmp_path: Path,
) -> None:
    fake, url = upstream
    model, history = openai_recording
    calls = agent_calls(history)
    base = redis_url.rsplit("/", 1)[0]
    for db in ("/6", "/7"):
        cache = RedisCache(base + db)
        for key in list(cache):
            del cache[key]
        cache.close()
    # three processes start side by side: one alone on its own db, a team of two on another
    with ExitStack() as stack:
        started = [
            stack.enter_context(team_proxy(url, base + db, tmp_path / name))
            for db, name in (("/6", "one"), ("/7", "a"), ("/7", "b"))
        ]
        alone, a, b = [p.ready() for p in started]
        expected = run([alone], model, calls, fake)
        once = compactions([alone])
        assert once >= 1, "the recording does not need a compaction at this window"
        sent = run([a, b], model, calls, fake)
        assert compactions([a, b]) == once
    assert sent == expected
    # each request begins with the one before it, but where an edit was made: a compaction, or
    # a batch of masks (more results reduced to an omitted-lines marker than before)
    pairs = list(zip(sent, sent[1:], strict=False))
    breaks = sum(1 for prev, cur in pairs if cur[: len(prev)] != prev)
    masks = sum(1 for prev, cur in pairs if _omitted(cur) > _omitted(prev))
    assert breaks <= once + masks
