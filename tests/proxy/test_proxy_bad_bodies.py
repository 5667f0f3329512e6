"""Bodies the warden cannot read never get a 5xx from the proxy: they go upstream exactly as sent
(the upstream answers them as it would without us), with ``X-Contextwarden-Skipped`` saying why,
one log line, and a count in ``/stats``. The real warden runs here."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
from fake_upstream import Behaviour, FakeUpstream
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proxy_doubles import StartProxy

Upstream = tuple[FakeUpstream, str]

PATHS = ["/v1/chat/completions", "/v1/messages"]
UPSTREAM_400 = {"error": {"message": "the upstream's own verdict", "type": "invalid_request_error"}}


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def _body(**extra: Any) -> dict[str, Any]:
    return {
        "model": "gpt-4o",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "hi"}],
        **extra,
    }


BAD_BODIES: dict[str, bytes] = {
    # an emoji cut in half: a lone high surrogate, valid JSON escape, not valid Unicode
    "lone surrogate": b'{"model":"gpt-4o","messages":[{"role":"user","content":"cut \\ud83d here"}]}',
    "tools of strings": json.dumps(_body(tools=["x"])).encode(),
    "tools of numbers": json.dumps(_body(tools=[1])).encode(),
    "tools of nulls": json.dumps(_body(tools=[None])).encode(),
    "messages of numbers": json.dumps(_body(messages=[1])).encode(),
    "messages of nulls": json.dumps(_body(messages=[None])).encode(),
    "450-deep nesting in a message": json.dumps(
        _body(messages=[{"role": "user", "content": "hi", "meta": _nested(450)}])
    ).encode(),
    "450-deep content": json.dumps(
        _body(messages=[{"role": "user", "content": _nested(450)}])
    ).encode(),
    "nesting past the JSON parser": b"[" * 200_000 + b"]" * 200_000,
    "non-object JSON": b"[1]",
    "a JSON string": b'"hello"',
    "model is a number": json.dumps(_body(model=5)).encode(),
    "messages is an object": json.dumps(_body(messages={"role": "user"})).encode(),
    "not UTF-8": b'{"model":"gpt-4o","messages":[{"role":"user","content":"\xff\xfe"}]}',
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", sorted(BAD_BODIES))
def test_bad_body_goes_upstream_unchanged_never_a_5xx(
    upstream: Upstream, start_proxy: StartProxy, path: str, name: str
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, window=8000)
    raw = BAD_BODIES[name]
    fake.then(Behaviour(status=400, body=UPSTREAM_400))
    r = httpx.post(
        proxy + path, content=raw, headers={"content-type": "application/json"}, timeout=60
    )
    assert r.status_code == 400 and r.json() == UPSTREAM_400  # the upstream's answer, untouched
    skipped = r.headers.get("x-contextwarden-skipped")
    if skipped is None:  # the warden could read it: it reported what it did, sent valid JSON
        assert "x-contextwarden-tokens-after" in r.headers
        assert fake.last.body == raw or isinstance(json.loads(fake.last.body), dict)
    else:
        assert fake.last.body == raw
    stats = httpx.get(f"{proxy}/stats").json()
    assert stats["requests"] == 1 and stats["by_status"] == {"400": 1}
    assert stats["skipped"] == (0 if skipped is None else 1)


def test_a_warden_failure_is_logged_counted_and_forwarded(
    upstream: Upstream,
    start_proxy: StartProxy,
    caplog: pytest.LogCaptureFixture,
    request: pytest.FixtureRequest,
) -> None:
    fake, url = upstream
    log = logging.getLogger("contextwarden.proxy")
    log.addHandler(caplog.handler)  # a CLI run earlier may have stopped propagation
    request.addfinalizer(lambda: log.removeHandler(caplog.handler))
    caplog.set_level(logging.INFO, logger="contextwarden.proxy")

    class Broken:
        def transform_openai(self, *a: object, **k: object) -> object:
            raise RuntimeError("a bug in the warden")

        transform_anthropic = transform_openai

    proxy = start_proxy(url, warden=Broken())
    for path in PATHS:
        raw = json.dumps(_body()).encode()
        r = httpx.post(proxy + path, content=raw)
        assert r.status_code == 200 and fake.last.body == raw
        assert r.headers["x-contextwarden-skipped"] == "warden_error: RuntimeError in the warden"
    stats = httpx.get(f"{proxy}/stats").json()
    assert stats["warden_errors"] == 2 and stats["skipped"] == 2 and stats["errors"] == 0
    records = list({id(r): r for r in caplog.records if r.name == "contextwarden.proxy"}.values())
    messages = [r.getMessage() for r in records]
    lines = [json.loads(m) for m in messages if m.startswith("{")]
    assert [line["skipped"] for line in lines] == ["warden_error", "warden_error"]
    assert sum("the warden failed" in m for m in messages) == 2


def test_a_lone_surrogate_in_a_history_the_warden_reduces(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    """Over the window, the warden rewrites the history: the lone surrogate must survive the
    re-serialisation or the body goes as sent, never a 5xx."""
    fake, url = upstream
    proxy = start_proxy(url, window=4000)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    for i in range(40):
        messages.append({"role": "user", "content": f"question {i} " + "word " * 150})
        messages.append({"role": "assistant", "content": f"answer {i} " + "word " * 150})
    raw = json.dumps({"model": "gpt-4o", "messages": messages}).encode()
    raw = raw.replace(b"question 1 ", b"question 1 \\ud83d ", 1)
    r = httpx.post(f"{proxy}/v1/chat/completions", content=raw, timeout=60)
    assert r.status_code == 200
    sent = fake.last.body
    assert sent == raw or len(sent) < len(raw)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
ROLES = st.sampled_from(["user", "assistant", "system", "tool", "developer", "bogus", 3, None])
MESSAGE = st.fixed_dictionaries(
    {"role": ROLES}, optional={"content": JSON, "tool_calls": JSON, "tool_call_id": JSON}
)
BODY = st.fixed_dictionaries(
    {"messages": st.lists(MESSAGE | JSON, max_size=5)},
    optional={
        "model": st.sampled_from(["gpt-4o", "claude-sonnet-4-5", 5, None]),
        "tools": JSON,
        "system": JSON,
    },
)


@settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=BODY, path=st.sampled_from(PATHS))
def test_no_body_shape_gets_a_5xx(
    upstream: Upstream, start_proxy: StartProxy, body: dict[str, Any], path: str
) -> None:
    fake, url = upstream
    proxy = getattr(test_no_body_shape_gets_a_5xx, "proxy", None)
    if proxy is None or getattr(test_no_body_shape_gets_a_5xx, "url", None) != url:
        proxy = start_proxy(url, window=8000)
        test_no_body_shape_gets_a_5xx.proxy, test_no_body_shape_gets_a_5xx.url = proxy, url  # type: ignore[attr-defined]
    fake.then(Behaviour(status=400, body=UPSTREAM_400))
    r = httpx.post(proxy + path, json=body, timeout=60)
    assert r.status_code < 500, r.text
    if r.status_code == 400 and r.json() == UPSTREAM_400:
        return  # the upstream's verdict (forwarded)
    if r.status_code == 400:  # the proxy's own: what it would send breaks the API's rules
        assert "the reduced request would be invalid" in r.text, r.text
        fake.script.clear()
        return
    assert r.status_code == 200


def test_a_structurally_invalid_history_goes_out_repaired_with_one_log_line_per_repair(
    upstream: Upstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """Histories no provider accepts (a result without its call, an id used twice, a call left
    unanswered mid-history, an empty user message) are repaired on the way, not sent invalid."""
    from contextwarden.formats import validate_openai

    fake, url = upstream
    proxy = start_proxy(url, window=32_000)

    def calls(*ids: str) -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "ls", "arguments": "{}"}}
                for i in ids
            ],
        }

    history = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Fix the bug"},
        {"role": "tool", "tool_call_id": "ghost", "content": "no call asked for this"},
        calls("c1", "c2"),
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "user", "content": "stop; read b.py"},
        calls("c1"),
        {"role": "tool", "tool_call_id": "c1", "content": "print('b')"},
        {"role": "user", "content": ""},
    ]
    assert validate_openai(history) != []
    with caplog.at_level(logging.WARNING, logger="contextwarden"):
        r = httpx.post(
            f"{proxy}/v1/chat/completions",
            json={"model": "gpt-4o", "messages": history},
            headers={"Authorization": "Bearer sk-test"},
            timeout=30,
        )
    assert r.status_code == 200
    assert "x-contextwarden-skipped" not in r.headers
    sent = fake.last.json["messages"]
    assert validate_openai(sent) == []
    repairs = [
        rec for rec in caplog.records if "contextwarden repair: repaired" in rec.getMessage()
    ]
    assert len(repairs) == 5  # orphan, c2 closed, c1 renamed, its result renamed, empty user
