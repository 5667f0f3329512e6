"""The proxy's wire behaviour with plain httpx: what reaches the upstream, what comes back, byte for
byte, and what the proxy adds (headers, errors in the provider's format, /stats, logs, the token).
A stub warden makes the reductions predictable; the real warden runs in the SDK tests."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

import httpx
import pytest
from fake_upstream import Behaviour, FakeUpstream
from proxy_doubles import StartProxy, StubWarden

Upstream = tuple[FakeUpstream, str]

KEY = "sk-secret-key-never-logged"


def _chat(n: int, **extra: object) -> dict[str, object]:
    messages = [{"role": "system", "content": "be brief"}] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "x" * 200}
        for i in range(n)
    ]
    return {"model": "gpt-4o", "messages": messages, **extra}


def test_openai_messages_reduced_everything_else_forwarded(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = upstream
    warden = StubWarden(keep=2)
    proxy = start_proxy(url, warden=warden)
    body = _chat(
        6,
        temperature=0.25,
        tools=[{"type": "function", "function": {"name": "f"}}],
        vendor_extension={"nested": [1, 2.5, None, "é"]},
    )
    r = httpx.post(
        f"{proxy}/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {KEY}", "X-Custom": "kept"},
    )
    assert r.status_code == 200
    got = fake.last.json
    assert got["messages"] == [body["messages"][0], *body["messages"][-2:]]  # type: ignore[index]
    assert {k: v for k, v in got.items() if k != "messages"} == {
        k: v for k, v in body.items() if k != "messages"
    }
    assert fake.last.headers["authorization"] == f"Bearer {KEY}"
    assert fake.last.headers["x-custom"] == "kept"
    assert warden.calls[-1]["tools"] == body["tools"] and warden.calls[-1]["model"] == "gpt-4o"
    before = len(json.dumps(body["messages"])) // 4
    after = len(json.dumps(got["messages"])) // 4
    assert r.headers["x-contextwarden-tokens-before"] == str(before)
    assert r.headers["x-contextwarden-tokens-after"] == str(after)
    assert r.headers["x-contextwarden-compacted"] == "4"
    assert r.content == fake.sent[-1][0]  # the reply, byte for byte
    assert r.headers["x-request-id"] == "req_1"  # upstream headers pass through


def test_unchanged_request_is_forwarded_byte_for_byte(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, warden=StubWarden(keep=10))
    raw = b'{ "model" : "gpt-4o",\n "messages":[{"role":"user","content":"hi \\u00e9"}], "n": 1.0 }'
    r = httpx.post(
        f"{proxy}/v1/chat/completions", content=raw, headers={"content-type": "application/json"}
    )
    assert r.status_code == 200
    assert fake.last.body == raw
    assert r.headers["x-contextwarden-compacted"] == "0"
    assert r.headers["x-contextwarden-tokens-before"] == r.headers["x-contextwarden-tokens-after"]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_stream_arrives_chunk_by_chunk_and_intact(
    upstream: Upstream, start_proxy: StartProxy, path: str
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, warden=StubWarden())
    gate = threading.Event()
    fake.then(Behaviour(hold_after=2, gate=gate))
    body = (
        _chat(3, stream=True)
        if "chat" in path
        else {
            "model": "claude-sonnet-4-5",
            "max_tokens": 10,
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        }
    )
    received = b""
    with httpx.stream("POST", proxy + path, json=body, timeout=30) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        chunks = r.iter_raw()
        # The upstream holds after two events until the gate opens: they can only arrive here
        # now if the proxy relays each chunk as it comes instead of buffering the body.
        while received.count(b"\n\n") < 2:
            received += next(chunks)
        assert not gate.is_set()
        gate.set()
        for chunk in chunks:
            received += chunk
    assert received == b"".join(fake.sent[-1])
    assert received.endswith(
        b"data: [DONE]\n\n" if "chat" in path else b'{"type": "message_stop"}\n\n'
    )


def test_anthropic_system_and_count_tokens(upstream: Upstream, start_proxy: StartProxy) -> None:
    fake, url = upstream
    warden = StubWarden(keep=1)
    proxy = start_proxy(url, warden=warden)
    system = [{"type": "text", "text": "you are terse", "cache_control": {"type": "ephemeral"}}]
    messages = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
    body = {"model": "claude-sonnet-4-5", "max_tokens": 50, "system": system, "messages": messages}
    r = httpx.post(f"{proxy}/v1/messages", json=body, headers=headers)
    assert r.status_code == 200 and r.json()["type"] == "message"
    assert fake.last.json == {**body, "messages": messages[-1:]}
    assert warden.calls[-1]["system"] == system
    assert fake.last.headers["x-api-key"] == KEY
    assert fake.last.headers["anthropic-version"] == "2023-06-01"
    count_body = {k: v for k, v in body.items() if k != "max_tokens"}
    r = httpx.post(f"{proxy}/v1/messages/count_tokens", json=count_body, headers=headers)
    assert r.status_code == 200
    assert fake.last.path == "/v1/messages/count_tokens"
    assert fake.last.json["messages"] == messages[-1:]
    assert r.json() == {"input_tokens": len(fake.last.body) // 4}
    assert r.headers["x-contextwarden-tokens-after"] == str(len(json.dumps(messages[-1:])) // 4)


def test_other_paths_pass_through_any_method(upstream: Upstream, start_proxy: StartProxy) -> None:
    fake, url = upstream
    warden = StubWarden()
    proxy = start_proxy(url, warden=warden)
    r = httpx.get(f"{proxy}/v1/models?limit=3&after=x", headers={"api-key": KEY})
    assert r.json() == {
        "method": "GET",
        "path": "/v1/models",
        "query": "limit=3&after=x",
        "body_len": 0,
    }
    assert fake.last.headers["api-key"] == KEY and fake.last.body == b""
    assert r.headers["x-echo"] == "1" and "x-contextwarden-tokens-before" not in r.headers
    payload = b"\x00\x01 binary upload \xff" * 1000
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        r = httpx.request(method, f"{proxy}/files/abc", content=payload)
        assert r.json()["method"] == method and fake.last.body == payload
    r = httpx.get(f"{proxy}/v1/chat/completions")  # other methods on a chat path pass through too
    assert r.json()["method"] == "GET"
    assert warden.calls == []


def test_hop_by_hop_and_proxy_headers_are_not_forwarded(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, warden=StubWarden(), token="tok")
    httpx.get(
        f"{proxy}/v1/models",
        headers={
            "X-Contextwarden-Token": "tok",
            "Proxy-Authorization": "Basic xyz",
            "TE": "trailers",
            "Keep-Alive": "timeout=5",
            "X-Kept": "yes",
        },
    )
    got = fake.last.headers
    assert got["x-kept"] == "yes"
    for name in ("x-contextwarden-token", "proxy-authorization", "te", "keep-alive"):
        assert name not in got
    assert got["host"] == url.removeprefix("http://")
    # a header the Connection header names is hop-by-hop too
    httpx.get(
        f"{proxy}/v1/models",
        headers={
            "X-Contextwarden-Token": "tok",
            "Connection": "keep-alive, X-Hop",
            "X-Hop": "no",
            "X-End": "yes",
        },
    )
    assert "x-hop" not in fake.last.headers and fake.last.headers["x-end"] == "yes"


def test_paths_are_forwarded_as_sent(upstream: Upstream, start_proxy: StartProxy) -> None:
    fake, url = upstream
    proxy = start_proxy(url, warden=StubWarden())
    r = httpx.get(f"{proxy}/v1/files/a%2Fb%20c/content?x=%26y")
    assert r.status_code == 200
    assert fake.last.raw_path == "/v1/files/a%2Fb%20c/content" and fake.last.query == "x=%26y"


def test_a_client_leaving_mid_stream_is_recorded_once(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, warden=StubWarden())
    gate = threading.Event()
    fake.then(Behaviour(hold_after=2, gate=gate))
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]}
    try:
        with httpx.stream("POST", f"{proxy}/v1/chat/completions", json=body, timeout=30) as r:
            next(r.iter_raw())  # then leave without reading the rest
    finally:
        gate.set()
    deadline = time.monotonic() + 20
    while (
        httpx.get(f"{proxy}/stats").json()["requests"] < 1
    ):  # bounded wait for the proxy to notice
        assert time.monotonic() < deadline, "the abandoned request was never recorded"
        time.sleep(0.05)
    assert httpx.post(f"{proxy}/v1/chat/completions", json=body).status_code == 200  # still serving
    stats = httpx.get(f"{proxy}/stats").json()
    assert stats["requests"] == 2 and stats["by_route"] == {"openai": 2}


def test_upstream_errors_reach_the_client_unchanged(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, warden=StubWarden())
    err = {"error": {"message": "slow down", "type": "rate_limit_error", "code": "rate_limit"}}
    fake.then(
        Behaviour(status=429, body=err, headers={"retry-after": "7", "x-ratelimit-remaining": "0"})
    )
    r = httpx.post(f"{proxy}/v1/chat/completions", json=_chat(1))
    assert r.status_code == 429 and r.json() == err and r.content == fake.sent[-1][0]
    assert r.headers["retry-after"] == "7" and r.headers["x-ratelimit-remaining"] == "0"
    fake.then(Behaviour(status=503, body=b"<html>upstream down</html>"))
    r = httpx.get(f"{proxy}/v1/models")
    assert r.status_code == 503 and r.content == b"<html>upstream down</html>"


@pytest.mark.parametrize(
    ("path", "provider"), [("/v1/chat/completions", "openai"), ("/v1/messages", "anthropic")]
)
def test_upstream_timeout_is_504_in_the_provider_format(
    upstream: Upstream, start_proxy: StartProxy, path: str, provider: str
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, warden=StubWarden(), timeout=0.3)
    gate = threading.Event()
    fake.then(Behaviour(delay=30, gate=gate))
    try:
        r = httpx.post(proxy + path, json=_chat(1), timeout=30)
    finally:
        gate.set()
    assert r.status_code == 504
    if provider == "openai":
        assert r.json()["error"]["code"] == "upstream_timeout"
    else:
        assert r.json()["type"] == "error" and r.json()["error"]["type"] == "timeout_error"
    stats = httpx.get(f"{proxy}/stats").json()
    assert stats["upstream_timeouts"] == 1 and stats["errors"] == 1


def test_unreachable_upstream_is_502(start_proxy: StartProxy) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proxy = start_proxy(f"http://127.0.0.1:{port}", warden=StubWarden())
    r = httpx.post(f"{proxy}/v1/messages", json={"model": "m", "messages": []})
    assert r.status_code == 502
    assert r.json()["error"]["type"] == "api_error"
    r = httpx.get(f"{proxy}/v1/models")
    assert r.status_code == 502 and r.json()["error"]["code"] == "upstream_unreachable"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_stream_that_stalls_or_breaks_ends_with_an_error_event(
    upstream: Upstream, start_proxy: StartProxy, provider: str
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, warden=StubWarden(), timeout=0.5)
    path = "/v1/chat/completions" if provider == "openai" else "/v1/messages"
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]}
    gate = threading.Event()
    fake.then(Behaviour(hold_after=1, gate=gate)).then(Behaviour(break_after=2))
    try:
        stalled = httpx.post(proxy + path, json=body, timeout=30).content
        broken = httpx.post(proxy + path, json=body, timeout=30).content
    finally:
        gate.set()
    for content, sent in ((stalled, fake.sent[0]), (broken, fake.sent[1])):
        assert content.startswith(b"".join(sent))
        last = content.removeprefix(b"".join(sent))
        data = json.loads(last.split(b"data: ", 1)[1])
        if provider == "openai":
            assert set(data) == {"error"}
        else:
            assert last.startswith(b"event: error\n") and data["type"] == "error"
    stats = httpx.get(f"{proxy}/stats").json()
    # the client got a 200 status line both times: stream failures, not errors (as documented)
    assert stats["upstream_timeouts"] == 1 and stats["stream_failures"] == 2
    assert stats["errors"] == 0 and stats["by_status"] == {"200": 2}


def test_proxy_token(upstream: Upstream, start_proxy: StartProxy) -> None:
    fake, url = upstream
    proxy = start_proxy(url, warden=StubWarden(), token="s3cret")
    for headers in ({}, {"X-Contextwarden-Token": "wrong"}, {"Authorization": "Bearer s3cret"}):
        r = httpx.post(f"{proxy}/v1/chat/completions", json=_chat(1), headers=headers)
        assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
        r = httpx.post(f"{proxy}/v1/messages", json=_chat(1), headers=headers)
        assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
        assert httpx.get(f"{proxy}/stats", headers=headers).status_code == 401
        assert httpx.get(f"{proxy}/v1/models", headers=headers).status_code == 401
    assert fake.requests == []  # nothing unauthenticated reached the upstream
    for value in ("s3cret", "Bearer s3cret"):
        r = httpx.post(
            f"{proxy}/v1/chat/completions",
            json=_chat(1),
            headers={"X-Contextwarden-Token": value, "Authorization": f"Bearer {KEY}"},
        )
        assert r.status_code == 200
        assert "x-contextwarden-token" not in fake.last.headers
        assert fake.last.headers["authorization"] == f"Bearer {KEY}"


def test_stats_count_requests_tokens_and_errors(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, warden=StubWarden(keep=2))
    befores, afters = [], []
    for n in (1, 8, 12):
        r = httpx.post(f"{proxy}/v1/chat/completions", json=_chat(n))
        befores.append(int(r.headers["x-contextwarden-tokens-before"]))
        afters.append(int(r.headers["x-contextwarden-tokens-after"]))
    fake.then(Behaviour(status=500, body={"error": {"message": "boom"}}))
    r = httpx.post(f"{proxy}/v1/chat/completions", json=_chat(1))
    assert (
        r.status_code == 500
    )  # the request was reduced (nothing to cut) before the upstream failed
    befores.append(int(r.headers["x-contextwarden-tokens-before"]))
    afters.append(int(r.headers["x-contextwarden-tokens-after"]))
    httpx.get(f"{proxy}/v1/models")
    stats = httpx.get(f"{proxy}/stats").json()
    assert stats["requests"] == 5 and stats["transformed"] == 4
    assert stats["tokens_before"] == sum(befores) and stats["tokens_after"] == sum(afters)
    assert stats["tokens_saved"] == sum(befores) - sum(afters) > 0
    assert stats["compactions"] == 2 and stats["errors"] == 1
    assert stats["by_route"] == {"openai": 4, "passthrough": 1}
    assert stats["by_status"] == {"200": 4, "500": 1}


def test_one_json_log_line_per_request_without_secrets(
    upstream: Upstream,
    start_proxy: StartProxy,
    caplog: pytest.LogCaptureFixture,
    request: pytest.FixtureRequest,
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, warden=StubWarden())
    caplog.set_level(logging.INFO, logger="contextwarden.proxy")
    # Listen on the logger itself: a CLI run earlier in the session may have stopped propagation.
    log = logging.getLogger("contextwarden.proxy")
    log.addHandler(caplog.handler)
    request.addfinalizer(lambda: log.removeHandler(caplog.handler))
    body = _chat(5, stream=True)
    body["messages"][1]["content"] = "PROMPT-CONTENT-MARKER"  # type: ignore[index]
    httpx.post(
        f"{proxy}/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {KEY}", "x-api-key": KEY},
    ).read()
    httpx.get(f"{proxy}/v1/models", headers={"api-key": KEY})
    records = list({id(r): r for r in caplog.records if r.name == "contextwarden.proxy"}.values())
    assert len(records) == 2
    chat, models = (json.loads(r.getMessage()) for r in records)
    assert chat["path"] == "/v1/chat/completions" and chat["model"] == "gpt-4o"
    assert chat["stream"] is True and chat["status"] == 200
    assert chat["tokens_before"] > chat["tokens_after"] > 0
    assert chat["latency_ms"] >= chat["headers_ms"] >= 0
    assert models["route"] == "passthrough" and models["status"] == 200
    assert KEY not in caplog.text and "PROMPT-CONTENT-MARKER" not in caplog.text


def test_unknown_model_runs_lossless_only_with_a_warning(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = upstream
    warden = StubWarden(keep=2)
    proxy = start_proxy(url, warden=warden)
    r = httpx.post(f"{proxy}/v1/chat/completions", json=_chat(6, model="unknown-model"))
    assert r.status_code == 200
    assert r.headers["x-contextwarden-warning"].startswith("unknown_model: no context window")
    assert "x-contextwarden-skipped" not in r.headers
    # the retry ran without model or window: the warden's lossless-only mode
    assert [(c["model"], c["window"]) for c in warden.calls] == [
        ("unknown-model", None),
        (None, None),
    ]
    assert r.headers["x-contextwarden-tokens-after"] == str(
        len(json.dumps(fake.last.json["messages"])) // 4
    )
    assert fake.last.json["model"] == "unknown-model"
    assert httpx.get(f"{proxy}/stats").json()["unbounded"] == 1


def test_unreadable_requests_are_forwarded_unchanged(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, warden=StubWarden())
    cases = [
        (
            json.dumps({"model": "gpt-4o", "messages": [{"role": "user"}, 3]}).encode(),
            "invalid_request: message 1",
        ),
        (b'{"model": "gpt-4o", "messages": "not a list"}', "no_messages"),
        (b"[1, 2]", "not_json"),
        (b"not json at all", "not_json"),
    ]
    for raw, reason in cases:
        fake.then(Behaviour(status=400, body={"error": {"message": "upstream says no"}}))
        r = httpx.post(f"{proxy}/v1/chat/completions", content=raw)
        assert fake.last.body == raw
        assert r.status_code == 400 and r.json() == {"error": {"message": "upstream says no"}}
        assert r.headers["x-contextwarden-skipped"].startswith(reason)
        assert "x-contextwarden-tokens-before" not in r.headers
    assert httpx.get(f"{proxy}/stats").json()["skipped"] == len(cases)


@pytest.mark.parametrize("suffix", ["", "/v1", "/v1/"])
def test_upstream_base_with_or_without_v1(
    upstream: Upstream, start_proxy: StartProxy, suffix: str
) -> None:
    fake, url = upstream
    proxy = start_proxy(url + suffix, warden=StubWarden())
    assert httpx.post(f"{proxy}/v1/chat/completions", json=_chat(1)).status_code == 200
    assert fake.last.path == "/v1/chat/completions"


def test_compressed_replies_are_relayed_as_sent(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    import gzip

    fake, url = upstream
    proxy = start_proxy(url, warden=StubWarden())
    reply = {
        "id": "chatcmpl-z",
        "choices": [{"message": {"role": "assistant", "content": "é" * 500}}],
    }
    packed = gzip.compress(json.dumps(reply).encode())
    fake.then(Behaviour(body=packed, headers={"content-encoding": "gzip"}))
    with httpx.stream("POST", f"{proxy}/v1/chat/completions", json=_chat(1)) as r:
        raw = b"".join(r.iter_raw())
    assert raw == packed  # not decompressed on the way
    assert r.headers["content-encoding"] == "gzip" and int(r.headers["content-length"]) == len(
        packed
    )
    fake.then(Behaviour(body=packed, headers={"content-encoding": "gzip"}))
    assert httpx.post(f"{proxy}/v1/chat/completions", json=_chat(1)).json() == reply  # decodes fine


async def test_connections_are_served_with_nagle_off_on_a_socket_bound_as_uvicorn_binds() -> None:
    """uvicorn binds its worker processes' socket with proto 0, on which asyncio leaves Nagle on:
    the proxy's protocol turns it off itself (else a response written in two parts waits for
    the client's delayed ACK)."""
    import asyncio
    import socket

    import uvicorn
    from uvicorn.server import ServerState

    from contextwarden.proxy.server import protocol

    config = uvicorn.Config(lambda *_: None, log_level="critical")
    config.load()
    state = ServerState()

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # proto 0, as uvicorn's
    listener.bind(("127.0.0.1", 0))
    made: list[Any] = []

    def factory() -> Any:
        proto = protocol(5.0)(config=config, server_state=state, app_state={})
        made.append(proto)
        return proto

    server = await asyncio.get_running_loop().create_server(factory, sock=listener)
    try:
        _, writer = await asyncio.open_connection(*listener.getsockname())
        for _ in range(100):
            if made and made[0].transport is not None:
                break
            await asyncio.sleep(0.01)
        sock = made[0].transport.get_extra_info("socket")
        assert sock.proto == 0  # asyncio did not turn Nagle off on it
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        writer.close()
    finally:
        server.close()
