"""summarizer_for_request: the proxy's summaries go to its own upstream, in the request's wire
format, with the calling client's credentials and nothing else of its headers."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from fake_provider import FakeProvider, Reply

from contextwarden import ConfigError, SummarizerError
from contextwarden.summarizers import SummaryRequest, summary_cache_key
from contextwarden.summarizers.upstream import summarizer_for_request
from contextwarden.testing import ConversationBuilder

TASK = "Make the CSV exporter quote fields that contain commas"


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        yield server


@pytest.fixture(autouse=True)
def _proxy_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    # the proxy's own keys must never be used for a client's summary
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proxy-own")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-proxy-own")


def _request() -> SummaryRequest:
    b = ConversationBuilder().user(TASK)
    b.bash("cat src/exporter.py", "def export_rows(rows):\n    return ','.join(rows)\n" * 20)
    b.bash("python -m pytest -q", "1 failed", returncode=1)
    return SummaryRequest(b.messages, task=TASK)


CLIENT = {
    "Authorization": "Bearer sk-client",
    "Cookie": "session=secret",
    "X-Trace-Id": "abc",
    "Content-Type": "application/json",
    "OpenAI-Organization": "org-client",
}


@pytest.mark.parametrize("suffix", ["", "/v1", "/v1/"])
def test_openai_upstream_with_the_clients_credentials(fake: FakeProvider, suffix: str) -> None:
    summarizer = summarizer_for_request(fake.url + suffix, CLIENT, "gpt-4o", "openai")
    summary = summarizer.summarize(_request())
    assert "Fake summary #1" in summary
    (sent,) = fake.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-client"
    assert sent.headers["openai-organization"] == "org-client"
    assert "cookie" not in sent.headers and "x-trace-id" not in sent.headers
    assert sent.json["model"] == "gpt-4o"


@pytest.mark.parametrize("suffix", ["", "/v1"])
def test_anthropic_upstream_with_the_clients_key_and_version(
    fake: FakeProvider, suffix: str
) -> None:
    headers = {
        "x-api-key": "sk-ant-client",
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "prompt-caching-2024-07-31",
    }
    summarizer = summarizer_for_request(
        fake.url + suffix,
        headers,
        "claude-sonnet-4-5",
        "anthropic",
        summary_model="claude-haiku-4-5",
    )
    asyncio.run(summarizer.asummarize(_request()))  # the proxy is async
    (sent,) = fake.requests
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == "sk-ant-client"
    assert sent.headers["anthropic-beta"] == "prompt-caching-2024-07-31"
    assert "authorization" not in sent.headers
    assert sent.json["model"] == "claude-haiku-4-5"  # --summary-model picks a cheaper one


def test_a_client_without_credentials_sends_none(fake: FakeProvider) -> None:
    fake.queue(Reply(status=401, json={"error": {"message": "missing key"}}))
    summarizer = summarizer_for_request(
        fake.url, {"Content-Type": "application/json"}, "gpt-4o", "openai"
    )
    with pytest.raises(SummarizerError, match="401 \\(with the credentials in the summarizer"):
        summarizer.summarize(_request())
    (sent,) = fake.requests
    assert "authorization" not in sent.headers  # not the proxy's OPENAI_API_KEY


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("http://x", {}, "m", "cohere"),
            "api must be one of openai, anthropic, responses, gemini",
        ),
        (("x.example.com", {}, "m", "openai"), "must be an http\\(s\\) URL"),
        (("http://x", {}, "", "openai"), "names no model"),
    ],
)
def test_bad_arguments(args: tuple[str, dict[str, str], str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        summarizer_for_request(*args)  # type: ignore[arg-type]


def test_callers_with_different_credentials_never_share_a_cached_summary() -> None:
    request = _request()
    one = summarizer_for_request("http://u", {"authorization": "Bearer a"}, "m", "openai")
    same = summarizer_for_request("http://u", {"Authorization": "Bearer a"}, "m", "openai")
    other = summarizer_for_request("http://u", {"authorization": "Bearer b"}, "m", "openai")
    assert summary_cache_key(request, one) == summary_cache_key(request, same)
    assert summary_cache_key(request, one) != summary_cache_key(request, other)
    assert "Bearer" not in one.config_id  # a digest, never the credential itself


@pytest.mark.parametrize(
    ("model", "reasoning"),
    [
        ("gpt-4o", False),
        ("gpt-4o-mini", False),
        ("deepseek-chat", False),
        ("o3-mini", True),
        ("o1", True),
        ("gpt-5-mini", True),
        ("openai/gpt-5.1", True),
    ],
)
def test_reasoning_models_are_asked_in_the_shape_they_accept(
    fake: FakeProvider, model: str, reasoning: bool
) -> None:
    """OpenAI's reasoning models refuse ``max_tokens`` and a temperature; asking them so would
    fail every summary and fall back to the extractive one."""
    summarizer_for_request(fake.url, CLIENT, model, "openai").summarize(_request())
    (sent,) = fake.requests
    if reasoning:
        assert "max_tokens" not in sent.json and "temperature" not in sent.json
        assert sent.json["max_completion_tokens"] >= 4096
    else:
        assert sent.json["max_tokens"] > 0 and sent.json["temperature"] == 0
        assert "max_completion_tokens" not in sent.json


def test_anthropic_models_keep_max_tokens(fake: FakeProvider) -> None:
    summarizer_for_request(fake.url, CLIENT, "claude-haiku-4-5", "anthropic").summarize(_request())
    (sent,) = fake.requests
    assert sent.json["max_tokens"] > 0
