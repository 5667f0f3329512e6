"""A request the warden cannot bring within the window (system prompt, tools and the newest
message alone over it) is answered by the proxy with the provider's own context-length error,
never sent upstream oversize: the SDKs raise the error they raise for the provider's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from fake_upstream import FakeUpstream
from proxy_doubles import StartProxy, StubWarden

from contextwarden import ContextOverflowError, Warden

Upstream = tuple[FakeUpstream, str]

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")


class OverflowingWarden(StubWarden):
    """The warden's guard as the library raises it: over ``limit`` tokens, ContextOverflowError."""

    def __init__(self, limit: int) -> None:
        super().__init__(keep=100)
        self.limit = limit

    def _guard(self, messages: list[dict[str, Any]], system: Any = None) -> None:
        tokens = self._size(messages) + self._size(system)
        if tokens > self.limit:
            raise ContextOverflowError("over", tokens=tokens, limit=self.limit)

    def transform_openai(
        self, messages: list[dict[str, Any]], *, tools: Sequence[Any] | None = None, **kw: Any
    ) -> Any:
        self._guard(messages)
        return super().transform_openai(messages, tools=tools, **kw)

    def transform_anthropic(
        self, messages: list[dict[str, Any]], *, system: Any = None, **kw: Any
    ) -> Any:
        self._guard(messages, system)
        return super().transform_anthropic(messages, system=system, **kw)


def _huge(n: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "x" * n}]


def test_openai_gets_context_length_exceeded(upstream: Upstream, start_proxy: StartProxy) -> None:
    fake, url = upstream
    proxy = start_proxy(url, warden=OverflowingWarden(limit=1000))
    r = httpx.post(
        f"{proxy}/v1/chat/completions", json={"model": "gpt-4o", "messages": _huge(8000)}
    )
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and err["code"] == "context_length_exceeded"
    assert err["param"] == "messages"
    assert err["message"].startswith("This model's maximum context length is 1000 tokens.")
    assert fake.requests == []  # nothing went upstream
    client = openai.OpenAI(base_url=f"{proxy}/v1", api_key="k", max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=_huge(8000))  # type: ignore[arg-type]
    assert caught.value.code == "context_length_exceeded"
    stats = httpx.get(f"{proxy}/stats").json()
    assert (
        stats["context_overflows"] == 2
        and stats["errors"] == 2
        and stats["by_status"] == {"400": 2}
    )
    # one under the limit still goes through
    assert (
        httpx.post(
            f"{proxy}/v1/chat/completions", json={"model": "gpt-4o", "messages": _huge(10)}
        ).status_code
        == 200
    )


def test_anthropic_gets_prompt_is_too_long(upstream: Upstream, start_proxy: StartProxy) -> None:
    fake, url = upstream
    proxy = start_proxy(url, warden=OverflowingWarden(limit=1000))
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 10,
        "system": "s" * 8000,
        "messages": _huge(10),
    }
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        r = httpx.post(proxy + path, json=body)
        assert r.status_code == 400
        assert r.json()["type"] == "error"
        assert r.json()["error"]["type"] == "invalid_request_error"
        assert r.json()["error"]["message"].startswith("prompt is too long: ")
        assert "> 1000 maximum" in r.json()["error"]["message"]
    assert fake.requests == []
    client = anthropic.Anthropic(base_url=proxy, api_key="k", max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match="prompt is too long"):
        client.messages.create(**body)


def test_the_real_warden_refuses_a_system_prompt_over_the_window(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    system = "Follow these rules. " + " ".join(f"rule {i}: be careful." for i in range(5000))
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "go"}]
    try:
        Warden().transform_openai(messages, model="gpt-4o", window=8000)
    except ContextOverflowError:
        pass
    else:
        pytest.skip("this library build sends an oversize system prompt instead of raising")
    fake, url = upstream
    proxy = start_proxy(url, window=8000)
    r = httpx.post(f"{proxy}/v1/chat/completions", json={"model": "gpt-4o", "messages": messages})
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"
    assert fake.requests == []
