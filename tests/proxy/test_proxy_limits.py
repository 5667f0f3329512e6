"""Limits a shared proxy needs: a request body cap answered 413 in the provider's error format
before the body is read, bounded per-model tables, clipped log fields."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest
from fake_upstream import FakeUpstream
from proxy_doubles import StartProxy, StubWarden

from contextwarden.proxy.stats import CLIP, MODEL_TABLE

Upstream = tuple[FakeUpstream, str]
MiB = 1024 * 1024


def _assert_413(r: httpx.Response, path: str) -> None:
    assert r.status_code == 413
    if path == "/v1/messages":
        assert r.json()["type"] == "error"
        assert r.json()["error"]["type"] == "request_too_large"
    else:
        err = r.json()["error"]
        assert set(err) == {"message", "type", "param", "code"}
        assert err["type"] == "invalid_request_error" and err["code"] == "request_too_large"


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_an_80_mb_body_gets_413_in_the_provider_format(
    upstream: Upstream, start_proxy: StartProxy, path: str
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, warden=StubWarden())  # the default limit: 32 MiB
    big = b'{"model":"gpt-4o","messages":[{"role":"user","content":"' + b"x" * (80 * MiB) + b'"}]}'
    started = time.monotonic()
    r = httpx.post(proxy + path, content=big, timeout=120)
    _assert_413(r, path)
    assert "32" in r.json()["error"]["message"] or "33,554,432" in r.json()["error"]["message"]
    assert fake.requests == []
    small = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(proxy + path, json=small).status_code == 200  # still serving
    stats = httpx.get(f"{proxy}/stats").json()
    assert stats["by_status"] == {"200": 1, "413": 1} and stats["errors"] == 1
    assert time.monotonic() - started < 60


def _raw_exchange(proxy: str, head: bytes, body_part: bytes) -> bytes:
    """Send a request head and part of its body on a raw socket, then read what comes back
    without sending the rest."""
    where = urlsplit(proxy)
    with socket.create_connection((where.hostname, where.port), timeout=10) as sock:
        sock.sendall(head + body_part)
        data = b""
        while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        return data


def test_413_from_the_content_length_before_any_body_byte(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, warden=StubWarden(), max_body_bytes=1000)
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 80000000\r\n\r\n"
    )
    reply = _raw_exchange(proxy, head, b"")  # not one body byte sent
    assert reply.startswith(b"HTTP/1.1 413")
    assert json.loads(reply.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "request_too_large"
    assert fake.requests == []


def test_413_once_a_chunked_body_passes_the_limit(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, warden=StubWarden(), max_body_bytes=100_000)
    head = (
        b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    part = b"".join(b"%x\r\n%s\r\n" % (10_000, b"y" * 10_000) for _ in range(15))  # 150 KB, no end
    reply = _raw_exchange(proxy, head, part)
    assert reply.startswith(b"HTTP/1.1 413")
    assert json.loads(reply.split(b"\r\n\r\n", 1)[1])["error"]["type"] == "request_too_large"

    def chunks() -> Iterator[bytes]:  # and through a real client streaming 2 MB
        for _ in range(200):
            yield b"z" * 10_000

    r = httpx.post(f"{proxy}/v1/chat/completions", content=chunks(), timeout=60)
    _assert_413(r, "/v1/chat/completions")
    assert fake.requests == []


def test_a_body_at_the_limit_passes_and_uploads_elsewhere_are_not_capped(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = upstream
    body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}).encode()
    proxy = start_proxy(url, warden=StubWarden(), max_body_bytes=len(body))
    assert httpx.post(f"{proxy}/v1/chat/completions", content=body).status_code == 200
    assert httpx.post(f"{proxy}/v1/chat/completions", content=body + b" ").status_code == 413
    # a file upload is streamed to the upstream, never held: the cap is for bodies the warden reads
    upload = b"\x00" * (3 * len(body))
    r = httpx.post(f"{proxy}/v1/files", content=upload)
    assert r.status_code == 200 and fake.last.body == upload


def test_per_model_table_is_bounded_and_long_names_are_clipped(
    upstream: Upstream,
    start_proxy: StartProxy,
    caplog: pytest.LogCaptureFixture,
    request: pytest.FixtureRequest,
) -> None:
    fake, url = upstream
    fake.record = False
    log = logging.getLogger("contextwarden.proxy")
    log.addHandler(caplog.handler)
    request.addfinalizer(lambda: log.removeHandler(caplog.handler))
    caplog.set_level(logging.INFO, logger="contextwarden.proxy")
    proxy = start_proxy(url, warden=StubWarden())
    messages = [{"role": "user", "content": "hi"}]
    with httpx.Client() as client:
        for i in range(MODEL_TABLE + 50):
            model = f"m{i:04d}-" + "n" * 5000
            r = client.post(
                f"{proxy}/v1/chat/completions", json={"model": model, "messages": messages}
            )
            assert r.status_code == 200
        stats = client.get(f"{proxy}/stats").json()
    assert len(stats["by_model"]) == MODEL_TABLE
    assert all(len(name) == CLIP for name in stats["by_model"])
    kept = sorted(name[:5] for name in stats["by_model"])
    assert kept == [f"m{i:04d}" for i in range(50, MODEL_TABLE + 50)]  # the most recent ones
    lines = [r.getMessage() for r in caplog.records if r.name == "contextwarden.proxy"]
    assert lines and max(len(line) for line in lines) < 2 * CLIP + 400
