"""Clients of one proxy are isolated by construction: a client is its credential (a keyed hash of
it), and each has its own conversations, summaries and caches. A client sending another's history
gets nothing the other one's requests produced: not its summary, not its spelling, not a header
that tells a hit from a miss; a client flooding the proxy with conversations evicts only its own.
Loopback, a real HTTP server, a fake upstream that signs each summary with the credential it
was asked with."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fake_upstream import FakeUpstream, serve
from proxy_doubles import StartProxy, agent_history

from contextwarden.formats._body import BodyReader
from contextwarden.proxy.clients import (
    CLIENT_BYTES,
    STATE_PER_BODY_BYTE,
    ClientTable,
    ScopedCache,
    client_id,
    held_bytes,
)
from contextwarden.proxy.config import ProxyConfig
from contextwarden.proxy.transform import transform_body
from contextwarden.proxy.warden import WardenFactory

Upstream = tuple[FakeUpstream, str]


@pytest.fixture
def signing() -> Iterator[Upstream]:
    fake = FakeUpstream(sign_summaries=True)
    with serve(fake.app, log_level="critical") as url:
        yield fake, url


def post(proxy: str, messages: list[dict[str, Any]], key: str, **extra: Any) -> httpx.Response:
    r = httpx.post(
        f"{proxy}/v1/chat/completions",
        json={"model": "gpt-4o", "messages": messages, **extra},
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    return r


def forwarded(fake: FakeUpstream, key: str) -> list[dict[str, Any]]:
    """The agent requests (not summary calls) the upstream received with ``key``."""
    return [
        r.json
        for r in fake.requests
        if r.headers.get("authorization") == f"Bearer {key}"
        and b"You condense the working history" not in r.body[:4000]
    ]


def test_a_client_sending_another_clients_history_gets_its_own_summary(
    signing: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = signing
    proxy = start_proxy(url, window=8_000)
    h = agent_history("TASK: fix the parser in alpha.py", 60)
    a = post(proxy, h[:100], "sk-A")
    assert int(a.headers["x-contextwarden-compacted"]) > 0
    calls_a = fake.summary_calls
    assert calls_a > 0
    assert "signed:Bearer sk-A" in json.dumps(forwarded(fake, "sk-A")[-1])
    # B sends A's history plus one message: its own summary, made with its own key
    b = post(proxy, h[:101], "sk-B")
    sent_b = json.dumps(forwarded(fake, "sk-B")[-1])
    assert "signed:Bearer sk-A" not in sent_b
    assert "signed:Bearer sk-B" in sent_b
    assert fake.summary_calls > calls_a
    assert b.headers["x-contextwarden-summary-calls"] == str(fake.summary_calls - calls_a)


def test_a_request_is_never_rewritten_in_another_clients_spelling(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, window=200_000)
    tail = agent_history("TASK: rename the beta module", 3)[1:]
    a = [{"role": "system", "content": [{"type": "text", "text": "You are a coding agent."}]}]
    b = [{"role": "developer", "content": "You are a coding agent."}]
    post(proxy, a + tail, "sk-A")
    post(proxy, b + tail + [{"role": "user", "content": "go on"}], "sk-B")
    sent = forwarded(fake, "sk-B")[-1]["messages"]
    assert sent[0] == b[0]  # its own role and its own string, not A's system parts


def _headers(r: httpx.Response) -> tuple[str, str, str]:
    return (
        r.headers["x-contextwarden-tokens-before"],
        r.headers["x-contextwarden-tokens-after"],
        r.headers["x-contextwarden-compacted"],
    )


def test_headers_do_not_tell_a_client_what_another_sent(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    _, url = upstream
    h = agent_history("TASK: port the lexer", 60)[:110]
    fresh = start_proxy(url, window=8_000, summarizer="extractive")
    alone = _headers(post(fresh, h, "sk-B"))  # what B sees when nobody sent it before
    proxy = start_proxy(url, window=8_000, summarizer="extractive")
    post(proxy, h[:100], "sk-A")
    post(proxy, h, "sk-A")
    assert _headers(post(proxy, h, "sk-B")) == alone
    assert alone[2] != "0"  # B's request is compacted for B, as on a fresh proxy


def test_one_client_cannot_evict_another_clients_log(
    signing: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = signing
    proxy = start_proxy(url, window=8_000)
    h = agent_history("TASK: fix the victim's bug", 60)
    post(proxy, h[:100], "sk-victim")
    first = forwarded(fake, "sk-victim")[-1]["messages"]
    calls = fake.summary_calls
    with httpx.Client(timeout=30) as client:
        for i in range(520):  # more one-message conversations than a warden keeps
            r = client.post(
                f"{proxy}/v1/chat/completions",
                json={"model": "gpt-4o", "messages": [{"role": "user", "content": f"q{i}"}]},
                headers={"Authorization": "Bearer sk-flood"},
            )
            assert r.status_code == 200
    post(proxy, h[:102], "sk-victim")
    assert fake.summary_calls == calls  # its log continued: no new summary to pay
    again = forwarded(fake, "sk-victim")[-1]["messages"]
    assert again[: len(first)] == first  # and its prefix was not rewritten


def test_client_ids_are_keyed_hashes_of_the_credential() -> None:
    key = b"k" * 32
    ids = {
        client_id([(b"authorization", b"Bearer sk-one")], key),
        client_id([(b"Authorization", b"Bearer sk-one")], key),
    }
    assert len(ids) == 1
    (one,) = ids
    assert "sk-one" not in one
    assert client_id([(b"authorization", b"Bearer sk-two")], key) != one
    assert client_id([(b"x-api-key", b"Bearer sk-one")], key) != one  # the header counts
    assert client_id([(b"authorization", b"Bearer sk-one")], b"x" * 32) != one


def test_a_scoped_cache_sees_only_its_own_keys() -> None:
    shared: dict[str, str] = {}
    a, b = ScopedCache(shared, "a"), ScopedCache(shared, "b")
    a["k"] = "for a"
    assert "k" in a and "k" not in b and b.get("k") is None
    assert list(a) == ["k"] and list(b) == []
    with pytest.raises(KeyError):
        b["k"]


def test_the_table_evicts_by_bytes_the_clients_own_first_then_the_least_recent_other() -> None:
    made: list[str] = []

    def make(cid: str) -> object:
        made.append(cid)
        return object()

    mib = 1 << 20
    body = mib // STATE_PER_BODY_BYTE  # a body whose conversation state is estimated at 1 MiB
    table = ClientTable(make, max_clients=10, max_state_bytes=10 * mib, client_state_bytes=4 * mib)
    a = table.get("a")
    for i in range(6):
        table.account(a, f"a{i}", 2 * body)  # 2 MiB each: over A's own 4 MiB quota
    assert list(a.conversations) == ["a4", "a5"]  # A forgot its own oldest
    b = table.get("b")
    table.account(b, "b0", 2 * body)
    c = table.get("c")
    for i in range(3):
        table.account(c, f"c{i}", 2 * body)
    # 4 + 2 + 4 MiB = 10 MiB: within the whole budget, nobody else dropped
    assert len(table) == 3
    d = table.get("d")
    table.account(d, "d0", 2 * body)  # over: the least recently used other client goes
    assert table.snapshot()["evicted_clients"] == 1
    assert table.bytes <= table.max_state_bytes
    assert table.get("d") is d and table.get("b") is b
    assert "a" in made and table.get("a") is not a  # A was dropped: a new state for it


def test_the_table_counts_what_each_client_keeps_by_its_parts() -> None:
    factory = WardenFactory(ProxyConfig(upstream="http://127.0.0.1:9", cache="memory"), None)
    mib = 1 << 20
    table = ClientTable(factory, max_state_bytes=mib, client_state_bytes=mib // 2)
    bodies: list[bytes] = []
    for k in range(12):
        history = [{"role": "user", "content": f"task {k}"}]
        history += [
            {"role": "assistant", "content": f"step {i} of task {k} " * 40} for i in range(40)
        ]
        bodies.append(json.dumps({"model": "gpt-4o", "messages": history}).encode())
    for k, raw in enumerate(bodies):
        state = table.get(f"client-{k % 3}")
        assert isinstance(state.bodies, BodyReader)
        outcome = transform_body(state.warden, "openai", raw, bodies=state.bodies)
        table.account(state, outcome.conversation, len(raw))
        # what is counted is what the warden and the reader say they keep, never an estimate
        counted = [held_bytes(s) for s in table._clients.values()]
        assert [s.bytes for s in table._clients.values()] == counted
        assert table.bytes == sum(counted) <= table.max_state_bytes
        assert all(c > CLIENT_BYTES + len(raw) for c in counted[-1:])
    assert table.snapshot()["evicted_conversations"] + table.snapshot()["evicted_clients"] > 0
