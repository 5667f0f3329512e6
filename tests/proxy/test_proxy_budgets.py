"""No client can starve the proxy: read deadlines for headers and bodies, a budget for bodies in
flight, compactions that cannot hold other requests' threads, one deadline per compaction, summary
calls counted and capped, a breaker for failing summaries, upstream pools chosen by load. Also the
smaller findings: a path climbing with ``..``, a client leaving mid-upload on ``/v1/responses``.
Loopback, real HTTP servers, a fake upstream; no timed assertion (each test waits on events and
bounds its waits only so that a failure cannot hang the suite)."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from fake_upstream import Behaviour, FakeUpstream, serve
from proxy_doubles import StartProxy, agent_history
from test_proxy_clients import post

from contextwarden.proxy import ProxyConfig, create_app

Upstream = tuple[FakeUpstream, str]


def _fake(**kw: Any) -> Iterator[Upstream]:
    fake = FakeUpstream(sign_summaries=True, **kw)
    with serve(fake.app, log_level="critical") as url:
        try:
            yield fake, url
        finally:
            fake.summary_gate.set()


@pytest.fixture
def hanging() -> Iterator[Upstream]:
    """An upstream whose summary calls hang (until the test ends)."""
    yield from _fake(summary_delay=60)


@pytest.fixture
def failing() -> Iterator[Upstream]:
    """An upstream whose summary calls fail (500)."""
    yield from _fake(summary_status=500)


@pytest.fixture
def signing() -> Iterator[Upstream]:
    yield from _fake()


def _connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    return socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=10)


def _read_all(sock: socket.socket, limit: float = 10.0) -> bytes:
    """What the server sends until it closes the connection (at most ``limit`` seconds)."""
    sock.settimeout(limit)
    out = b""
    try:
        while chunk := sock.recv(65536):
            out += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return out


def test_headers_trickled_past_the_header_timeout_close_the_connection(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    _, url = upstream
    proxy = start_proxy(url, header_timeout=0.5)
    sock = _connect(proxy)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
    closed = threading.Event()

    def trickle() -> None:
        for i in range(40):  # a header line every 0.2 s, for 8 s at most
            if closed.is_set():
                return
            try:
                sock.sendall(f"X-Pad-{i}: {i}\r\n".encode())
            except OSError:
                return
            time.sleep(0.2)

    worker = threading.Thread(target=trickle, daemon=True)
    worker.start()
    got = _read_all(sock)
    closed.set()
    worker.join()
    assert got == b""  # closed, nothing answered (there was no request yet)
    # well before the trickle would have ended: the server closed it, not the client
    assert worker.is_alive() is False
    # and a normal client still gets through
    r = httpx.get(f"{proxy}/stats", timeout=10)
    assert r.status_code == 200


def test_a_body_trickled_past_the_body_timeout_gets_408_and_is_dropped(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, body_timeout=1.0)
    sock = _connect(proxy)
    sock.sendall(
        b"POST /v1/messages HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
        b"content-length: 100000\r\n\r\n{"
    )
    stop = threading.Event()

    def trickle() -> None:
        while not stop.is_set():
            try:
                sock.sendall(b" ")
            except OSError:
                return
            time.sleep(0.2)

    threading.Thread(target=trickle, daemon=True).start()
    got = _read_all(sock)
    stop.set()
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), got[:200]
    assert json.loads(body)["error"]["type"] == "timeout_error"  # Anthropic's error format
    assert fake.requests == []
    stats = httpx.get(f"{proxy}/stats", timeout=10).json()
    assert stats["buffered_bytes"] == 0


def test_bodies_over_the_process_budget_get_503_in_the_providers_format(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, max_buffered_bytes=1 << 20, body_timeout=30)
    sock = _connect(proxy)  # an upload declaring 900 KB holds most of the budget
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
        b"content-length: 900000\r\n\r\n{"
    )
    try:
        for _ in range(100):  # until the proxy has counted it
            if httpx.get(f"{proxy}/stats", timeout=10).json()["buffered_bytes"]:
                break
            time.sleep(0.05)
        big = {
            "model": "claude-x",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "x" * 300_000}],
        }
        r = httpx.post(f"{proxy}/v1/messages", json=big, timeout=10)
        assert r.status_code == 503
        assert r.json()["error"]["type"] == "overloaded_error"
        assert r.headers["retry-after"] == "1"
        small = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
        assert httpx.post(f"{proxy}/v1/chat/completions", json=small, timeout=10).status_code == 200
    finally:
        sock.close()
    for _ in range(100):  # the abandoned upload's share comes back
        if httpx.get(f"{proxy}/stats", timeout=10).json()["buffered_bytes"] == 0:
            break
        time.sleep(0.05)
    assert httpx.get(f"{proxy}/stats", timeout=10).json()["buffered_bytes"] == 0
    assert httpx.post(f"{proxy}/v1/messages", json=big, timeout=10).status_code == 200


def test_an_unrelated_request_goes_through_while_45_compactions_hang(
    hanging: Upstream, start_proxy: StartProxy
) -> None:
    """45 compactions of one client on a summarizer that hangs: a few hold their summary calls
    (the client's summary pool), the rest get the extractive summary at once; another client's
    request and another conversation of the same client are answered meanwhile."""
    fake, url = hanging
    proxy = start_proxy(
        url, window=8_000, warden_config={"summarizer": {"timeout_s": 50}}, client_concurrency=32
    )
    done: list[int] = []

    def compacting(i: int) -> None:
        h = agent_history(f"TASK {i}: job number {i}", 60)[:100]
        r = httpx.post(
            f"{proxy}/v1/chat/completions",
            json={"model": "gpt-4o", "messages": h},
            headers={"Authorization": "Bearer sk-busy"},
            timeout=120,
        )
        done.append(r.status_code)

    hello = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello"}]}
    with ThreadPoolExecutor(45) as pool:
        futures = [pool.submit(compacting, i) for i in range(45)]
        for _ in range(400):  # until the pool's summary calls are hanging
            if fake.summary_calls >= 8 and len(done) >= 37:
                break
            time.sleep(0.05)
        assert fake.summary_calls == 8  # the client's summary pool, no more
        for key in ("sk-other", "sk-busy"):
            r = httpx.post(
                f"{proxy}/v1/chat/completions",
                json=hello,
                headers={"Authorization": f"Bearer {key}"},
                timeout=20,
            )
            assert r.status_code == 200
        assert len(done) == 37  # answered while 8 compactions still hang
        fake.summary_gate.set()
        for f in futures:
            f.result()
    assert sorted(set(done)) == [200]
    stats = httpx.get(f"{proxy}/stats", timeout=10).json()
    assert stats["summary_pool_full"] == 37


def test_one_compaction_makes_its_summary_calls_within_one_timeout(
    hanging: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = hanging
    proxy = start_proxy(url, window=8_000, warden_config={"summarizer": {"timeout_s": 1}})
    r = post(proxy, agent_history("TASK: one deadline", 60)[:100], "sk-A")
    # the first call hangs past the deadline; no other call is started after it
    assert fake.summary_calls == 1
    assert r.headers["x-contextwarden-summary-calls"] == "1"
    assert r.headers["x-contextwarden-summarizer"] == "extractive"


def test_summary_calls_are_counted_in_headers_and_stats(
    signing: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = signing
    proxy = start_proxy(url, window=8_000)
    r = post(proxy, agent_history("TASK: count me", 60)[:100], "sk-A")
    calls = fake.summary_calls
    assert calls > 0
    assert r.headers["x-contextwarden-summary-calls"] == str(calls)
    assert r.headers["x-contextwarden-summary-model"] == "gpt-4o"
    tokens_in = int(r.headers["x-contextwarden-summary-input-tokens"])
    tokens_out = int(r.headers["x-contextwarden-summary-output-tokens"])
    assert tokens_out == 40 * calls  # what the fake reported, call by call
    assert tokens_in > 1000
    stats = httpx.get(f"{proxy}/stats", timeout=10).json()
    assert stats["summary_calls"] == calls
    assert stats["summary_input_tokens"] == tokens_in
    assert stats["summary_output_tokens"] == tokens_out
    assert stats["input_tokens_billed"] == stats["tokens_after"] + tokens_in
    assert stats["tokens_saved_net"] == stats["tokens_saved"] - tokens_in
    assert stats["summaries_by_model"] == {
        "gpt-4o": {"calls": calls, "input_tokens": tokens_in, "output_tokens": tokens_out}
    }


def test_repeated_summary_failures_trip_the_clients_breaker(
    failing: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = failing
    proxy = start_proxy(
        url,
        window=8_000,
        warden_config={"summarizer": {"max_retries": 0}},
        summary_breaker_failures=3,
    )
    for i in range(3):
        r = post(proxy, agent_history(f"TASK {i}: fails", 60)[:100], "sk-A")
        assert r.headers["x-contextwarden-summarizer"] == "extractive"
    calls = fake.summary_calls
    assert calls >= 3
    r = post(proxy, agent_history("TASK 4: breaker", 60)[:100], "sk-A")
    assert fake.summary_calls == calls  # no call: the breaker is open for this client
    assert r.headers["x-contextwarden-summary-breaker"] == "open"
    assert r.headers["x-contextwarden-summarizer"] == "extractive"
    post(proxy, agent_history("TASK 5: another client", 60)[:100], "sk-B")
    assert fake.summary_calls > calls  # another client's breaker is its own
    assert httpx.get(f"{proxy}/stats", timeout=10).json()["summary_breaker_open"] == 1


def test_a_path_climbing_out_of_its_route_is_refused(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = upstream
    proxy = start_proxy(url)
    for path in (
        b"/v1/chat/completions/../../admin",
        b"/v1/chat/completions/%2e%2e/%2E%2E/admin",
        b"/v1/./models",
        b"/v1/responses/%252e%252e/x",
    ):
        sock = _connect(proxy)
        sock.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        got = _read_all(sock)
        sock.close()
        assert got.startswith(b"HTTP/1.1 400"), (path, got[:100])
        assert b"invalid_path" in got
    assert fake.requests == []


def test_a_client_leaving_mid_upload_on_responses_is_a_499_without_traceback(
    upstream: Upstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    fake, url = upstream
    proxy = start_proxy(url)
    with caplog.at_level(logging.INFO):
        sock = _connect(proxy)
        sock.sendall(
            b"POST /v1/responses HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
            b'content-length: 5000\r\n\r\n{"input": ['
        )
        time.sleep(0.2)
        sock.close()
        for _ in range(100):
            stats = httpx.get(f"{proxy}/stats", timeout=10).json()
            if stats["client_disconnects"]:
                break
            time.sleep(0.05)
    assert stats["client_disconnects"] == 1 and stats["by_status"] == {"499": 1}
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert fake.requests == []


def test_upstream_pools_are_chosen_by_load(upstream: Upstream, start_proxy: StartProxy) -> None:
    fake, url = upstream
    proxy = start_proxy(url, max_connections=8)  # 8 pools of one connection each
    hold = Behaviour(delay=30)
    fake.then(hold)
    small = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(httpx.post, f"{proxy}/v1/chat/completions", json=small, timeout=60)
        for _ in range(100):
            if fake.requests:
                break
            time.sleep(0.05)
        try:
            for _ in range(16):  # two rounds of the pools: none lands behind the held one
                r = httpx.post(f"{proxy}/v1/chat/completions", json=small, timeout=5)
                assert r.status_code == 200
        finally:
            hold.gate.set()
        assert held.result().status_code == 200


def test_one_app_never_shares_a_body_reader_with_another(
    upstream: Upstream,
) -> None:
    """Two apps in one process (and two clients of one app) each read bodies with their own
    reader and count tokens with their own counters: nothing one was sent is remembered for the
    other."""
    _, url = upstream
    one = create_app(ProxyConfig(upstream=url, cache="memory"))
    two = create_app(ProxyConfig(upstream=url, cache="memory"))
    a = one.state.proxy.clients.get("a")
    assert a.bodies is not two.state.proxy.clients.get("a").bodies
    b = one.state.proxy.clients.get("b")
    assert a.bodies is not b.bodies
    # nor token counters: counts cached by content would answer faster for what another sent
    count_a = a.warden.inner.counter_for("gpt-4o")
    assert count_a is not b.warden.inner.counter_for("gpt-4o")
    assert count_a is a.warden.inner.counter_for("gpt-4o")


def test_one_compaction_makes_a_bounded_number_of_summary_calls(
    failing: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = failing
    proxy = start_proxy(
        url,
        window=8_000,
        warden_config={"summarizer": {"max_retries": 5}},
        summary_max_calls=2,
    )
    r = post(proxy, agent_history("TASK: retry forever", 60)[:100], "sk-A")
    assert fake.summary_calls == 2  # retries and strategies included
    assert r.headers["x-contextwarden-summary-calls"] == "2"
    assert r.headers["x-contextwarden-summarizer"] == "extractive"
