"""Nothing one client's exchange leaves behind reaches another client: the proxy's pooled upstream
client keeps no cookies (Cloudflare-fronted APIs set them on every reply)."""

from __future__ import annotations

import httpx
from fake_upstream import Behaviour, FakeUpstream
from proxy_doubles import StartProxy, StubWarden

Upstream = tuple[FakeUpstream, str]

CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}


def test_a_cookie_set_for_one_client_never_reaches_another(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, warden=StubWarden())
    fake.then(Behaviour(headers={"set-cookie": "__cf_bm=alice-only; Path=/; HttpOnly"}))
    with httpx.Client() as alice:
        r = alice.post(f"{proxy}/v1/chat/completions", json=CHAT)
        assert r.status_code == 200
        assert r.headers["set-cookie"] == "__cf_bm=alice-only; Path=/; HttpOnly"  # alice gets it
        # alice's own client sends it back: it reaches the upstream as her plain header
        alice.post(f"{proxy}/v1/chat/completions", json=CHAT)
        assert fake.last.headers["cookie"] == "__cf_bm=alice-only"
    with httpx.Client() as bob:
        for path in ("/v1/chat/completions", "/v1/messages"):
            assert bob.post(proxy + path, json=CHAT).status_code == 200
            assert "cookie" not in fake.last.headers
        assert bob.get(f"{proxy}/v1/models").status_code == 200  # passthrough shares the client
        assert "cookie" not in fake.last.headers


def test_a_cookie_set_on_a_passthrough_route_stays_with_its_client(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, warden=StubWarden())
    fake.then(Behaviour(headers={"set-cookie": "sid=first; Path=/"}))
    r = httpx.get(f"{proxy}/v1/models")
    assert r.headers["set-cookie"] == "sid=first; Path=/"
    httpx.post(f"{proxy}/v1/chat/completions", json=CHAT, headers={"cookie": "mine=1"})
    assert fake.last.headers["cookie"] == "mine=1"  # only what this client sent
    httpx.get(f"{proxy}/v1/models")
    assert "cookie" not in fake.last.headers
