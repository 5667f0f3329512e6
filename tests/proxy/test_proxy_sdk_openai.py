"""The real ``openai`` SDK through the proxy (real warden, default SQLite summary cache) to a
recording fake upstream: a long real mini-swe-agent history arrives valid, reduced and inside the
window; auth is forwarded; replies, streamed or not, arrive intact; upstream 429 / 500 / timeouts
reach the client as the SDK's own errors (retries off)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from fake_upstream import Behaviour, FakeUpstream
from proxy_doubles import StartProxy

from contextwarden._tokens import count_tokens
from contextwarden._warden import Warden
from contextwarden.formats import from_openai, validate_openai

openai = pytest.importorskip("openai")

Upstream = tuple[FakeUpstream, str]
WINDOW = 16_000
MIN_REPLY_ROOM = 1_024  # contextwarden._budget.MIN_REPLY_ROOM
KEY = "sk-test-openai-key"


def _bound(model: str) -> int:
    """What the warden promises for WINDOW: the request leaves the reply at least the least room
    a reserve fitted to the agent's replies keeps (over the trigger, which sits in the room the
    system prompt and task leave, a request may wait for that limit when cutting would not pay)."""
    budget = Warden().budget_for(model, WINDOW)
    assert budget is not None and budget.limit < WINDOW
    return WINDOW - MIN_REPLY_ROOM


def _client(proxy: str, **kw: Any) -> Any:
    return openai.OpenAI(base_url=proxy + "/v1", api_key=KEY, max_retries=0, **kw)


def test_long_recording_arrives_valid_reduced_within_the_window(
    upstream: Upstream, start_proxy: StartProxy, openai_recording: tuple[str, list[dict[str, Any]]]
) -> None:
    fake, url = upstream
    model, history = openai_recording
    assert validate_openai(history) == []
    before = count_tokens(from_openai(history), model)
    assert before > 3 * WINDOW  # the recording really needs reducing
    proxy = start_proxy(url, window=WINDOW, cache="sqlite")
    raw = _client(proxy).chat.completions.with_raw_response.create(
        model=model, messages=history, temperature=0.0
    )
    reply = raw.parse()

    got = fake.last.json
    sent = got["messages"]
    assert validate_openai(sent) == []
    after = count_tokens(from_openai(sent), model)
    assert after <= _bound(model)  # within the window, with room for the reply
    assert int(raw.headers["x-contextwarden-tokens-after"]) == after
    assert int(raw.headers["x-contextwarden-tokens-before"]) == before
    assert int(raw.headers["x-contextwarden-compacted"]) > 0
    assert sent[0]["content"].startswith(history[0]["content"])  # the system prompt (+ a hint)
    assert sent[1] == history[1]  # the task
    assert sent[-1] == history[-1]  # the newest tool result
    assert got["model"] == model and got["temperature"] == 0.0
    assert fake.last.headers["authorization"] == f"Bearer {KEY}"
    # the reply is the upstream's, byte for byte and as parsed
    assert raw.http_response.content == fake.sent[-1][0]
    assert (
        reply.choices[0].message.content
        == json.loads(fake.sent[-1][0])["choices"][0]["message"]["content"]
    )


def test_an_agent_loop_replayed_call_by_call(
    upstream: Upstream, start_proxy: StartProxy, openai_recording: tuple[str, list[dict[str, Any]]]
) -> None:
    """Successive calls of one agent (each a longer prefix of the recording), as a stateless proxy
    sees them: every request reaching the upstream is valid and within the window."""
    fake, url = upstream
    model, history = openai_recording
    proxy = start_proxy(url, window=WINDOW, cache="sqlite")
    client = _client(proxy)
    cuts = [i + 1 for i, m in enumerate(history) if m["role"] == "tool"]
    newest_lost = []
    for end in cuts[len(cuts) // 3 :: max(1, len(cuts) // 8)]:
        client.chat.completions.create(model=model, messages=history[:end])
        sent = fake.last.json["messages"]
        assert validate_openai(sent) == [], end
        assert count_tokens(from_openai(sent), model) <= _bound(model), end
        # the system prompt is kept (a full summary may append its hint to it), so is the task
        assert sent[0]["role"] == "system" and sent[0]["content"].startswith(history[0]["content"])
        assert sent[1] == history[1]
        if sent[-1] != history[end - 1]:
            newest_lost.append(end)
    # DESIGN invariant 4: the newest message is always kept (the agent's latest observation)
    assert newest_lost == [], (
        f"the newest message was summarised away on calls ending at {newest_lost}"
    )


def test_stream_arrives_intact(upstream: Upstream, start_proxy: StartProxy) -> None:
    fake, url = upstream
    proxy = start_proxy(url, window=WINDOW)
    stream = _client(proxy).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "count to five"}], stream=True
    )
    chunks = list(stream)
    expected = [json.loads(e[len(b"data: ") :]) for e in fake.sent[-1] if e != b"data: [DONE]\n\n"]
    assert [c.model_dump(exclude_unset=True) for c in chunks] == expected
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "w0 w1 w2 w3 w4 "
    assert fake.last.json["stream"] is True


def test_upstream_429_and_500_reach_the_client_as_such(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, window=WINDOW)
    client = _client(proxy)
    messages = [{"role": "user", "content": "hi"}]
    limit = {
        "error": {
            "message": "Rate limit reached",
            "type": "requests",
            "code": "rate_limit_exceeded",
        }
    }
    fake.then(
        Behaviour(status=429, body=limit, headers={"retry-after": "1", "x-request-id": "req_429"})
    )
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=messages)
    assert caught.value.status_code == 429 and caught.value.body == limit["error"]
    assert (
        caught.value.request_id == "req_429" and caught.value.response.headers["retry-after"] == "1"
    )
    boom = {"error": {"message": "The server had an error", "type": "server_error", "code": None}}
    fake.then(Behaviour(status=500, body=boom))
    with pytest.raises(openai.InternalServerError) as failed:
        client.chat.completions.create(model="gpt-4o", messages=messages)
    assert failed.value.status_code == 500 and failed.value.body == boom["error"]
    assert len(fake.requests) == 2  # max_retries=0: one attempt each, nothing retried by the proxy


def test_timeouts(upstream: Upstream, start_proxy: StartProxy) -> None:
    """The upstream stalls past the proxy's timeout: the client gets the proxy's 504 (an
    InternalServerError in the SDK); past the client's own timeout: APITimeoutError."""
    fake, url = upstream
    proxy = start_proxy(url, window=WINDOW, timeout=0.3)
    messages = [{"role": "user", "content": "hi"}]
    gate = threading.Event()
    try:
        fake.then(Behaviour(delay=30, gate=gate))
        with pytest.raises(openai.InternalServerError) as caught:
            _client(proxy).chat.completions.create(model="gpt-4o", messages=messages)
        assert caught.value.status_code == 504
        assert caught.value.body["code"] == "upstream_timeout"
        slow_proxy = start_proxy(url, window=WINDOW, timeout=30)
        fake.then(Behaviour(delay=30, gate=gate))
        with pytest.raises(openai.APITimeoutError):
            _client(slow_proxy, timeout=0.3).chat.completions.create(
                model="gpt-4o", messages=messages
            )
    finally:
        gate.set()


def test_proxy_token_via_default_headers(upstream: Upstream, start_proxy: StartProxy) -> None:
    fake, url = upstream
    proxy = start_proxy(url, window=WINDOW, token="local-secret")
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.AuthenticationError) as denied:
        _client(proxy).chat.completions.create(model="gpt-4o", messages=messages)
    assert denied.value.body["code"] == "invalid_proxy_token"
    assert fake.requests == []
    client = _client(proxy, default_headers={"X-Contextwarden-Token": "local-secret"})
    assert client.chat.completions.create(model="gpt-4o", messages=messages).choices
    assert fake.last.headers["authorization"] == f"Bearer {KEY}"
    assert "x-contextwarden-token" not in fake.last.headers
