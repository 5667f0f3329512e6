"""The real ``anthropic`` SDK through the proxy (real warden) to a recording fake upstream: a real
Claude Code history arrives valid and inside the window with ``system`` kept; auth headers are
forwarded; streams and count_tokens work; upstream errors and timeouts reach the client as the
SDK's own errors (retries off)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from fake_upstream import Behaviour, FakeUpstream
from proxy_doubles import StartProxy

from contextwarden._tokens import count_tokens
from contextwarden._warden import Warden
from contextwarden.formats import count_cache_breakpoints, from_anthropic, validate_anthropic

anthropic = pytest.importorskip("anthropic")

Upstream = tuple[FakeUpstream, str]
MODEL = "claude-opus-4-5"  # in our registry, and not deprecated in the SDK
WINDOW = 12_000
KEY = "sk-ant-test-key"


def _client(proxy: str, **kw: Any) -> Any:
    return anthropic.Anthropic(base_url=proxy, api_key=KEY, max_retries=0, **kw)


def test_claude_code_recording_arrives_valid_within_the_window(
    upstream: Upstream,
    start_proxy: StartProxy,
    anthropic_recording: tuple[Any, list[dict[str, Any]]],
) -> None:
    fake, url = upstream
    recorded_system, history = anthropic_recording
    system = recorded_system or "You are Claude Code, a coding agent."
    assert validate_anthropic(system, history) == []
    before = count_tokens(from_anthropic(history, system=system), MODEL)
    assert before > WINDOW  # the recording really needs reducing
    proxy = start_proxy(url, window=WINDOW, cache="sqlite")
    raw = _client(proxy).messages.with_raw_response.create(
        model=MODEL, max_tokens=1024, system=system, messages=history, stop_sequences=["</done>"]
    )
    reply = raw.parse()

    got = fake.last.json
    assert validate_anthropic(got.get("system"), got["messages"]) == []
    after = count_tokens(from_anthropic(got["messages"], system=got.get("system")), MODEL)
    budget = Warden().budget_for(MODEL, WINDOW)
    assert budget is not None and budget.trigger < WINDOW
    # The warden counts its canonical output; the Anthropic adapter may then merge adjacent user
    # turns (saving a few framing tokens), so the header may only over-state what was sent.
    assert after <= int(raw.headers["x-contextwarden-tokens-after"]) <= budget.trigger
    # The client set no cache_control: the proxy added breakpoints (system, newest turn).
    assert 2 <= count_cache_breakpoints(got["system"], got["messages"]) <= 4
    sent_system = "".join(b["text"] for b in got["system"])
    assert sent_system.startswith(system)  # kept (a full summary may append its hint)
    newest = got["messages"][-1]["content"]
    assert [{k: v for k, v in b.items() if k != "cache_control"} for b in newest] == history[-1][
        "content"
    ]
    assert newest[-1]["cache_control"] == {"type": "ephemeral"}  # the newest turn, marked
    assert (
        got["max_tokens"] == 1024 and got["stop_sequences"] == ["</done>"] and got["model"] == MODEL
    )
    # the SDK's auth header (x-api-key, or Authorization: Bearer in newer SDKs) is forwarded
    got_headers = fake.last.headers
    assert KEY in (
        got_headers.get("x-api-key"),
        got_headers.get("authorization", "").removeprefix("Bearer "),
    )
    assert fake.last.headers["anthropic-version"]  # the SDK's version header is forwarded
    assert raw.http_response.content == fake.sent[-1][0]
    assert reply.content[0].text == json.loads(fake.sent[-1][0])["content"][0]["text"]


def test_stream_arrives_intact(upstream: Upstream, start_proxy: StartProxy) -> None:
    fake, url = upstream
    proxy = start_proxy(url, window=WINDOW)
    with _client(proxy).messages.stream(
        model=MODEL,
        max_tokens=100,
        system=[{"type": "text", "text": "terse"}],
        messages=[{"role": "user", "content": "count to five"}],
    ) as stream:
        events = [e.type for e in stream]
        message = stream.get_final_message()
    assert "".join(b.text for b in message.content) == "w0 w1 w2 w3 w4 "
    assert message.stop_reason == "end_turn"
    sent_types = [json.loads(e.split(b"data: ", 1)[1])["type"] for e in fake.sent[-1]]
    assert "ping" in sent_types
    sent_types.remove("ping")  # the SDK reads pings but does not hand them on
    assert [t for t in events if t in sent_types] == sent_types  # every upstream event, in order
    assert fake.last.json["system"] == [
        {"type": "text", "text": "terse", "cache_control": {"type": "ephemeral"}}
    ]


def test_count_tokens_is_reduced_then_forwarded(
    upstream: Upstream,
    start_proxy: StartProxy,
    anthropic_recording: tuple[Any, list[dict[str, Any]]],
) -> None:
    fake, url = upstream
    _, history = anthropic_recording
    proxy = start_proxy(url, window=WINDOW)
    counted = _client(proxy).messages.count_tokens(model=MODEL, messages=history)
    assert fake.last.path == "/v1/messages/count_tokens"
    assert validate_anthropic(fake.last.json.get("system"), fake.last.json["messages"]) == []
    assert len(fake.last.json["messages"]) < len(history)
    assert counted.input_tokens == len(fake.last.body) // 4  # the upstream's answer, untouched


def _plain(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages without the proxy's cache breakpoints (count_tokens gets none)."""
    out = []
    for m in messages:
        content = m["content"]
        if isinstance(content, list):
            content = [{k: v for k, v in b.items() if k != "cache_control"} for b in content]
        out.append({**m, "content": content})
    return out


@pytest.mark.parametrize("max_tokens", [1024, 8000])
@pytest.mark.parametrize("first", [True, False])
def test_count_tokens_counts_the_request_the_proxy_sends(
    upstream: Upstream,
    start_proxy: StartProxy,
    anthropic_recording: tuple[Any, list[dict[str, Any]]],
    max_tokens: int,
    first: bool,
) -> None:
    """Claude Code asks count_tokens to decide its own auto-compact: the count is of what the
    proxy sends for that history, with the reply room the conversation's calls ask for (the
    count request states none), whether it comes between two calls or before the first."""
    fake, url = upstream
    system, history = anthropic_recording
    system = system or "You are Claude Code."
    proxy = start_proxy(url, window=WINDOW, recall_tool=False)
    client = _client(proxy)
    cut = len(history) * 2 // 3
    while history[cut - 1]["role"] != "user":
        cut -= 1
    if not first:
        client.messages.create(
            model=MODEL, max_tokens=max_tokens, system=system, messages=history[:cut]
        )
    client.messages.count_tokens(model=MODEL, system=system, messages=history)
    counted = fake.last.json
    client.messages.create(model=MODEL, max_tokens=max_tokens, system=system, messages=history)
    sent = fake.last.json
    assert _plain(counted["messages"]) == _plain(sent["messages"])
    assert "max_tokens" not in counted and "tools" not in counted


def test_upstream_errors_reach_the_client_as_such(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, window=WINDOW, timeout=0.3)
    client = _client(proxy)
    args: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
    }
    limited = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    fake.then(Behaviour(status=429, body=limited, headers={"retry-after": "3"}))
    with pytest.raises(anthropic.RateLimitError) as caught:
        client.messages.create(**args)
    assert caught.value.status_code == 429 and caught.value.body == limited
    assert caught.value.response.headers["retry-after"] == "3"
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    fake.then(Behaviour(status=529, body=overloaded))
    with pytest.raises(anthropic.APIStatusError) as busy:
        client.messages.create(**args)
    assert busy.value.status_code == 529 and busy.value.body == overloaded
    fake.then(
        Behaviour(
            status=500, body={"type": "error", "error": {"type": "api_error", "message": "x"}}
        )
    )
    with pytest.raises(anthropic.InternalServerError):
        client.messages.create(**args)
    gate = threading.Event()
    fake.then(Behaviour(delay=30, gate=gate))
    try:
        with pytest.raises(anthropic.InternalServerError) as timed_out:
            client.messages.create(**args)
    finally:
        gate.set()
    assert timed_out.value.status_code == 504
    assert timed_out.value.body["error"]["type"] == "timeout_error"
    assert len(fake.requests) == 4


def test_a_stream_that_stalls_raises_in_the_sdk(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    """Past the proxy's timeout in mid-stream the proxy sends Anthropic's ``event: error``; the
    SDK raises it instead of hanging or returning a truncated message as complete."""
    fake, url = upstream
    proxy = start_proxy(url, window=WINDOW, timeout=0.3)
    gate = threading.Event()
    fake.then(Behaviour(hold_after=3, gate=gate))
    try:
        with pytest.raises(anthropic.APIStatusError, match="timed out"):
            with _client(proxy).messages.stream(
                model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            ) as stream:
                for _ in stream:
                    pass
    finally:
        gate.set()
