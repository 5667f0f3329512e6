"""What a careful operator trips over: credentials in ``--upstream`` printed, bad options dumped,
an Accept-Encoding the client never sent, a client leaving mid-upload logged as a traceback."""

from __future__ import annotations

import json
import logging
import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from fake_upstream import FakeUpstream
from proxy_doubles import StartProxy, StubWarden, proxy_process
from typer.testing import CliRunner

from contextwarden.cli import app as main_app
from contextwarden.proxy import cli

Upstream = tuple[FakeUpstream, str]
SECRET = "hunter2-pw"


def _run(*args: str) -> Any:
    return CliRunner().invoke(main_app, ["proxy", *args])


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    seen: list[Any] = []
    monkeypatch.setattr(cli, "serve", lambda settings, **_: seen.append(settings))
    monkeypatch.delenv("CONTEXTWARDEN_PROXY_TOKEN", raising=False)
    return seen


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--upstream", f"ftp://bob:{SECRET}@api.example.com"],
            "upstream: upstream must be an http(s)",
        ),
        (["--upstream", "http://x", "--cache", "redis"], "cache 'redis' needs redis_url"),
    ],
)
def test_bad_options_are_one_line_without_credentials(
    served: list[Any], args: list[str], expected: str
) -> None:
    result = _run(*args)
    assert result.exit_code == 2 and served == []
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"contextwarden proxy: {expected}")
    assert SECRET not in result.output and "pydantic" not in result.output


def test_a_bad_warden_config_is_one_line(served: list[Any], tmp_path: Path) -> None:
    config = tmp_path / "cw.yaml"
    config.write_text("mask: {keep_recent: -1}\ncontextGuard: {reserveTokens: lots}\n")
    result = _run("--upstream", "http://x", "--config", str(config))
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1
    assert "keep_recent" in result.output


def test_the_banner_never_shows_upstream_credentials(upstream: Upstream, tmp_path: Path) -> None:
    fake, url = upstream
    with_creds = url.replace("http://", f"http://bob:{SECRET}@")
    with proxy_process(with_creds, data_dir=tmp_path) as running:
        httpx.get(f"{running.base}/v1/models")
    err = running.stderr
    assert f"-> http://***@127.0.0.1:{urlsplit(url).port}" in err
    assert SECRET not in err


def test_the_clients_accept_encoding_is_respected(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, warden=StubWarden())
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client() as client:
        for name in ("accept", "accept-encoding", "user-agent"):  # a client sending none of them
            del client.headers[name]
        for path in ("/v1/chat/completions", "/v1/models"):
            client.post(proxy + path, json=body) if "chat" in path else client.get(proxy + path)
            for name in ("accept", "accept-encoding", "user-agent"):
                assert name not in fake.last.headers, (path, name)
        client.post(f"{proxy}/v1/chat/completions", json=body, headers={"Accept-Encoding": "br"})
        assert fake.last.headers["accept-encoding"] == "br"
        client.get(f"{proxy}/v1/models", headers={"User-Agent": "my-agent/1.0"})
        assert fake.last.headers["user-agent"] == "my-agent/1.0"


def _leave_mid_upload(proxy: str, path: str) -> None:
    where = urlsplit(proxy)
    with socket.create_connection((where.hostname, where.port), timeout=10) as sock:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: 1000000\r\n\r\n"
        ).encode()
        sock.sendall(head + b'{"model": "gpt-4o", "messages": [' + b" " * 100_000)
        time.sleep(0.2)  # the proxy is reading the body now; then the client is gone


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/files"])
def test_a_client_leaving_mid_upload_is_one_log_line(
    upstream: Upstream,
    start_proxy: StartProxy,
    caplog: pytest.LogCaptureFixture,
    request: pytest.FixtureRequest,
    path: str,
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, warden=StubWarden())
    for name in ("contextwarden.proxy", "uvicorn.error", "uvicorn"):
        log = logging.getLogger(name)
        log.addHandler(caplog.handler)
        request.addfinalizer(lambda log=log: log.removeHandler(caplog.handler))
    caplog.set_level(logging.INFO)
    _leave_mid_upload(proxy, path)
    deadline = time.monotonic() + 20
    while httpx.get(f"{proxy}/stats").json()["requests"] < 1:
        assert time.monotonic() < deadline, "the abandoned upload was never recorded"
        time.sleep(0.05)
    time.sleep(0.3)  # anything else it would log about it has been logged by now
    records = list({id(r): r for r in caplog.records}.values())
    ours = [json.loads(r.getMessage()) for r in records if r.name == "contextwarden.proxy"]
    assert [(x["path"], x["status"], x["error"]) for x in ours] == [
        (path, 499, "client_disconnected")
    ]
    assert not any(r.exc_info for r in records), [r.getMessage() for r in records]
    assert "Traceback" not in caplog.text and "Exception in ASGI" not in caplog.text
    stats = httpx.get(f"{proxy}/stats").json()
    assert stats["client_disconnects"] == 1 and stats["errors"] == 0
    if "chat" in path:
        assert fake.requests == []
