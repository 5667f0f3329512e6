"""Summaries through the proxy (issue 12): by default a compaction is summarised by the proxy's
own upstream, with the calling client's credentials and the request's model; ``--summary-model``
picks another; ``extractive`` stays offline; a failed summary falls back to the embedded one and
the agent's call goes through; the log line and a header say who wrote each summary."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
from fake_upstream import Behaviour, FakeUpstream, serve
from proxy_doubles import StartProxy

from contextwarden.formats import validate_anthropic, validate_openai
from contextwarden.proxy import ProxyConfig, create_app

Upstream = tuple[FakeUpstream, str]

MARK = "Fixed the parser off-by-one in grammar/base.py"


def _summary() -> str:
    return (
        f"<completed>\n{MARK}; ran the parser tests.\n</completed>\n"
        "<remaining>\nRun the whole suite.\n</remaining>\n"
        "<current_state>\nThe parser change is in place.\n</current_state>\n<notes>\n</notes>"
    )


def _openai_reply(text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-summary",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }


def _anthropic_reply(text: str) -> dict[str, Any]:
    return {
        "id": "msg_summary",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 10},
    }


def _answer_summaries(fake: FakeUpstream, reply: dict[str, Any], n: int = 12) -> None:
    """Queue ``n`` summary replies (a long span is summarised in several calls, then merged);
    the agent's own call, last, may take one too."""
    for _ in range(n):
        fake.then(Behaviour(body=reply))


def _chat(proxy: str, model: str, history: list[dict[str, Any]], key: str) -> httpx.Response:
    r = httpx.post(
        f"{proxy}/v1/chat/completions",
        json={"model": model, "messages": history},
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    return r


def _text(messages: list[dict[str, Any]]) -> str:
    return json.dumps(messages, ensure_ascii=False)


def test_default_proxy_summarises_through_its_upstream_with_the_clients_key(
    upstream: Upstream,
    start_proxy: StartProxy,
    openai_recording: tuple[str, list[dict[str, Any]]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, window=16_000)  # default settings otherwise
    model, history = openai_recording
    _answer_summaries(fake, _openai_reply(_summary()))
    with caplog.at_level(logging.INFO, logger="contextwarden.proxy"):
        r = _chat(proxy, model, history, "sk-client-one")
    *summary_calls, forwarded = fake.requests
    # the summary calls: the upstream's chat completions, the client's key, the request's model
    assert summary_calls
    for call in summary_calls:
        assert call.path == "/v1/chat/completions"
        assert call.headers["authorization"] == "Bearer sk-client-one"
        assert call.json["model"] == model
        assert call.json.get("stream") in (None, False)
    # the request forwarded next holds that summary, within the window
    assert forwarded.headers["authorization"] == "Bearer sk-client-one"
    sent = forwarded.json["messages"]
    assert MARK in _text(sent)
    assert validate_openai(sent) == []
    assert int(r.headers["x-contextwarden-tokens-after"]) <= 16_000
    assert int(r.headers["x-contextwarden-compacted"]) > 0
    assert r.headers["x-contextwarden-summarizer"] == f"llm:openai:{model}"
    lines = [json.loads(rec.getMessage()) for rec in caplog.records if rec.getMessage()[:1] == "{"]
    assert lines[-1]["summarizer"] == f"llm:openai:{model}"
    stats = httpx.get(f"{proxy}/stats").json()
    assert stats["llm_summaries"] == 1 and stats["extractive_summaries"] == 0


def test_summary_model_picks_the_model_asked(
    upstream: Upstream, start_proxy: StartProxy, openai_recording: tuple[str, list[dict[str, Any]]]
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, window=16_000, summary_model="gpt-4o-mini")
    model, history = openai_recording
    _answer_summaries(fake, _openai_reply(_summary()))
    r = _chat(proxy, model, history, "sk-client-two")
    *summary_calls, forwarded = fake.requests
    assert summary_calls and {c.json["model"] for c in summary_calls} == {"gpt-4o-mini"}
    assert forwarded.json["model"] == model  # the agent's own call is unchanged
    assert r.headers["x-contextwarden-summarizer"] == "llm:openai:gpt-4o-mini"


def test_a_failed_summary_falls_back_and_the_call_goes_through(
    upstream: Upstream,
    openai_recording: tuple[str, list[dict[str, Any]]],
) -> None:
    fake, url = upstream
    # no retries (the summarizer: section's own setting), so one scripted failure is the story
    settings = ProxyConfig.model_validate(
        {
            "upstream": url,
            "window": 16_000,
            "cache": "memory",
            "warden": {"summarizer": {"max_retries": 0}},
        }
    )
    assert settings.summary_source == "upstream"  # retries alone do not name a provider
    model, history = openai_recording
    fake.then(Behaviour(status=500, body={"error": {"message": "boom", "type": "server_error"}}))
    with serve(create_app(settings)) as proxy:
        r = _chat(proxy, model, history, "sk-client-three")
        stats = httpx.get(f"{proxy}/stats").json()
    assert stats["llm_summaries"] == 0 and stats["extractive_summaries"] == 1
    assert len(fake.requests) == 2  # the failed summary call, then the agent's
    sent = fake.requests[1].json["messages"]
    assert validate_openai(sent) == []
    assert "<completed>" in _text(sent)  # the embedded summary stands in
    assert int(r.headers["x-contextwarden-tokens-after"]) <= 16_000
    assert r.headers["x-contextwarden-summarizer"] == "extractive"


def test_extractive_stays_offline(
    upstream: Upstream, start_proxy: StartProxy, openai_recording: tuple[str, list[dict[str, Any]]]
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, window=16_000, summarizer="extractive")
    model, history = openai_recording
    r = _chat(proxy, model, history, "sk-client-four")
    assert len(fake.requests) == 1  # only the agent's call went upstream
    assert int(r.headers["x-contextwarden-compacted"]) > 0
    assert r.headers["x-contextwarden-summarizer"] == "extractive"


def test_anthropic_requests_summarise_with_the_clients_key_and_version(
    upstream: Upstream,
    start_proxy: StartProxy,
    anthropic_recording: tuple[Any, list[dict[str, Any]]],
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, window=16_000, cache_breakpoints=False)
    system, history = anthropic_recording
    _answer_summaries(fake, _anthropic_reply(_summary()))
    r = httpx.post(
        f"{proxy}/v1/messages",
        json={
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "system": system,
            "messages": history,
        },
        headers={"x-api-key": "sk-ant-client", "anthropic-version": "2023-06-01"},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    *summary_calls, forwarded = fake.requests
    assert summary_calls
    for call in summary_calls:
        assert call.path == "/v1/messages"
        assert call.headers["x-api-key"] == "sk-ant-client"
        assert call.headers["anthropic-version"] == "2023-06-01"
        assert call.json["model"] == "claude-sonnet-4-5"
    assert MARK in _text(forwarded.json["messages"]) + _text(forwarded.json.get("system"))
    assert validate_anthropic(forwarded.json.get("system"), forwarded.json["messages"]) == []
    assert r.headers["x-contextwarden-summarizer"] == "llm:anthropic:claude-sonnet-4-5"


def test_bad_summarizer_option_is_a_clear_error() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="unknown provider 'cohere'"):
        ProxyConfig.model_validate({"upstream": "http://127.0.0.1:1", "summarizer": "cohere:x"})
    with pytest.raises(ValidationError, match="needs a model"):
        ProxyConfig.model_validate({"upstream": "http://127.0.0.1:1", "summarizer": "openai"})


def test_the_request_summarizer_follows_the_source_and_never_fails_a_request() -> None:
    from contextwarden.proxy.warden import request_summarizer

    headers = {"Authorization": "Bearer sk-x", "Cookie": "c=1"}
    upstream = ProxyConfig.model_validate({"upstream": "http://127.0.0.1:1"})
    make = request_summarizer(upstream, headers, "openai")
    assert make is not None
    llm = make("gpt-4o")
    assert llm is not None and llm.name == "llm:openai:gpt-4o"
    assert llm.headers == {"authorization": "Bearer sk-x"}  # credentials only
    assert make(None) is None and make("   ") is None  # no model: the warden's own summary
    offline = ProxyConfig.model_validate(
        {"upstream": "http://127.0.0.1:1", "summarizer": "extractive"}
    )
    assert request_summarizer(offline, headers, "openai") is None


def _speaks(api: str) -> bool:
    """Whether the summarizer has a transport for ``api`` (the Responses and Gemini ones come
    with the summarizer's own change)."""
    from contextwarden import ConfigError
    from contextwarden.summarizers.upstream import summarizer_for_request

    try:
        summarizer_for_request("http://127.0.0.1:1", {}, "m", api)  # type: ignore[arg-type]
    except ConfigError:
        return False
    return True


@pytest.mark.skipif(not _speaks("responses"), reason="no Responses summary transport here")
def test_a_responses_client_is_summarised_through_the_responses_api(
    upstream: Upstream, start_proxy: StartProxy, openai_recording: tuple[str, list[dict[str, Any]]]
) -> None:
    """Codex's models are served on the Responses API only: its summaries go there too."""
    from contextwarden.formats import from_openai, to_responses

    fake, url = upstream
    proxy = start_proxy(url, window=16_000)
    _, history = openai_recording
    instructions, items = to_responses(from_openai(history))
    reply = {
        "id": "resp_s",
        "object": "response",
        "status": "completed",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": _summary(), "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 10, "output_tokens": 10, "total_tokens": 20},
    }
    _answer_summaries(fake, reply)
    body = {"model": "gpt-5-codex", "instructions": instructions, "input": items, "store": False}
    r = httpx.post(
        f"{proxy}/v1/responses", json=body, headers={"Authorization": "Bearer sk-c"}, timeout=60
    )
    assert r.status_code == 200, r.text
    *summary_calls, forwarded = fake.requests
    assert summary_calls and all(c.path == "/v1/responses" for c in summary_calls)
    assert all(c.headers["authorization"] == "Bearer sk-c" for c in summary_calls)
    assert MARK in _text(forwarded.json["input"])
    assert r.headers["x-contextwarden-summarizer"].startswith("llm:")
    assert httpx.get(f"{proxy}/stats").json()["llm_summaries"] == 1


@pytest.mark.skipif(not _speaks("gemini"), reason="no Gemini summary transport here")
def test_a_gemini_client_is_summarised_through_the_gemini_api_with_its_key(
    upstream: Upstream, start_proxy: StartProxy, openai_recording: tuple[str, list[dict[str, Any]]]
) -> None:
    from contextwarden.formats import from_openai
    from contextwarden.formats.gemini import to_gemini

    fake, url = upstream
    proxy = start_proxy(url, window=16_000)
    _, history = openai_recording
    system, contents = to_gemini(from_openai(history))
    reply = {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": _summary()}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 10},
    }
    _answer_summaries(fake, reply)
    model = "gemini-2.5-pro"
    r = httpx.post(
        f"{proxy}/v1beta/models/{model}:generateContent?key=g-key",
        json={"contents": contents, "systemInstruction": system},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    *summary_calls, forwarded = fake.requests
    assert summary_calls
    for call in summary_calls:
        assert call.path == f"/v1beta/models/{model}:generateContent"
        assert call.headers.get("x-goog-api-key") == "g-key" or call.query == "key=g-key"
    assert MARK in _text(forwarded.json["contents"])
    assert r.headers["x-contextwarden-summarizer"].startswith("llm:")
