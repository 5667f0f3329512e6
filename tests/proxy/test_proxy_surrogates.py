"""A body holding a lone surrogate (half of an emoji, cut by a byte-level truncation) is forwarded
byte for byte, as the docs promise: the warden would have to replace it to write the body back."""

from __future__ import annotations

import httpx
import pytest
from fake_upstream import FakeUpstream
from proxy_doubles import StartProxy

Upstream = tuple[FakeUpstream, str]

PAD = ",".join(
    '{"role":"assistant","content":"' + "x" * 3000 + '"},{"role":"user","content":"go"}'
    for _ in range(60)
)


@pytest.mark.parametrize(
    ("path", "raw"),
    [
        (
            "/v1/chat/completions",
            b'{"model":"gpt-4o","messages":[{"role":"user","content":"cut \\ud83d here"},'
            + PAD.encode()
            + b"]}",
        ),
        (
            "/v1/messages",
            b'{"model":"claude-sonnet-4-5","max_tokens":9,"messages":[{"role":"user","content":'
            b'[{"type":"text","text":"cut \\udc00 here"}]}]}',
        ),
        (
            "/v1/responses",
            b'{"model":"gpt-4o","input":[{"role":"user","content":"cut \\ud800"}]}',
        ),
    ],
)
def test_a_lone_surrogate_is_forwarded_unchanged(
    upstream: Upstream, start_proxy: StartProxy, path: str, raw: bytes
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, window=8_000)
    r = httpx.post(
        f"{proxy}{path}", content=raw, headers={"content-type": "application/json"}, timeout=30
    )
    assert r.status_code == 200
    assert fake.last.body == raw
    assert r.headers["x-contextwarden-skipped"].startswith("lone_surrogate")


def test_a_paired_surrogate_escape_is_an_ordinary_character(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, window=8_000)
    raw = (
        b'{"model":"gpt-4o","messages":[{"role":"user","content":"smile \\ud83d\\ude00"},'
        + PAD.encode()
        + b"]}"
    )
    r = httpx.post(
        f"{proxy}/v1/chat/completions",
        content=raw,
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert "x-contextwarden-skipped" not in r.headers
    assert "\U0001f600" in fake.last.json["messages"][0]["content"]  # reduced, emoji kept
    assert fake.last.body != raw
