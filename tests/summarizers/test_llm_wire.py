"""Summaries through the API the client uses: Chat Completions, Messages, Responses and Gemini
``generateContent``, each against a local server speaking that wire format; a failed summary
carries the HTTP status and the upstream's own error text."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from fake_provider import FakeProvider, RecordedRequest, Reply

from contextwarden import SummarizerError
from contextwarden.summarizers import LLMSummarizer, SummaryRequest, parse_summary
from contextwarden.summarizers.upstream import summarizer_for_request
from contextwarden.testing import ConversationBuilder

TASK = "Make the CSV exporter quote fields that contain commas"
PROVIDERS = ("openai", "anthropic", "responses", "gemini")


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        yield server


def _request() -> SummaryRequest:
    b = ConversationBuilder().user(TASK)
    b.read("src/exporter.py", "def export(rows):\n    return ','.join(rows)\n" * 20)
    for i in range(4):
        b.bash(f"python check.py --case {i}", f"case {i}: a,b written unquoted\n" * 10)
    b.bash("pytest -q", "FAILED tests/test_export.py::test_quotes", returncode=1)
    return SummaryRequest(b.messages, task=TASK)


class _Meter:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int, int]] = []

    def start(self) -> None:
        return None

    def done(self, model: str, input_tokens: int, output_tokens: int, status: int) -> None:
        self.calls.append((model, input_tokens, output_tokens, status))


def _upstream(fake: FakeProvider, api: str) -> str:
    return fake.anthropic_base_url if api in ("anthropic", "gemini") else fake.openai_base_url


@pytest.mark.parametrize("api", PROVIDERS)
def test_each_api_is_spoken_on_its_own_wire(fake: FakeProvider, api: str) -> None:
    key_header = {
        "openai": ("authorization", "Bearer sk-1"),
        "anthropic": ("x-api-key", "sk-1"),
        "responses": ("authorization", "Bearer sk-1"),
        "gemini": ("x-goog-api-key", "sk-1"),
    }[api]
    llm = summarizer_for_request(_upstream(fake, api), dict([key_header]), "m-1", api)  # type: ignore[arg-type]
    meter = _Meter()
    summary = llm.summarize(_request(), meter=meter)

    (sent,) = fake.requests
    assert sent.provider == api and sent.model == "m-1"
    assert sent.headers[key_header[0]] == key_header[1]
    body = sent.json
    if api == "gemini":
        assert set(body) == {"systemInstruction", "contents", "generationConfig"}
        assert "summar" in body["systemInstruction"]["parts"][0]["text"].lower()
        assert body["contents"][0]["role"] == "user"
        assert body["generationConfig"]["maxOutputTokens"] > 0
    elif api == "responses":
        assert "summar" in body["instructions"].lower() and body["store"] is False
        assert body["input"][0]["role"] == "user" and body["max_output_tokens"] > 0
    elif api == "anthropic":
        assert "summar" in body["system"].lower() and body["max_tokens"] > 0
    else:
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert TASK in sent.user_text
    # the reply's text is the summary (a Gemini thought or a Responses reasoning item is not)
    assert "Fake summary #1" in summary and "Thinking about it" not in summary
    assert parse_summary(summary).remaining
    (model, used_in, used_out, status) = meter.calls[0]
    assert (model, used_in, status) == ("m-1", 10, 200)
    assert used_out > 0


@pytest.mark.parametrize("api", PROVIDERS)
def test_async_speaks_the_same_wire(fake: FakeProvider, api: str) -> None:
    llm = summarizer_for_request(_upstream(fake, api), {}, "m-1", api)  # type: ignore[arg-type]
    sync = llm.summarize(_request())
    again = asyncio.run(llm.asummarize(_request()))
    first, second = fake.requests
    assert first.path == second.path and first.json == second.json
    assert sync.replace("#1", "#2") == again


def test_a_gemini_key_sent_in_the_query_reaches_the_summary(fake: FakeProvider) -> None:
    llm = summarizer_for_request(
        fake.url + "/v1beta", {}, "gemini-2.5-flash", "gemini", query_key="g-1"
    )
    llm.summarize(_request())
    (sent,) = fake.requests
    assert sent.path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert sent.headers["x-goog-api-key"] == "g-1"
    assert "key=" not in sent.path  # the key travels in the header, not in a logged URL


def _responses_only(request: RecordedRequest) -> Reply:
    """An upstream that serves gpt-5-codex on the Responses API alone, as OpenAI does."""
    if request.provider != "responses" and request.model == "gpt-5-codex":
        return Reply(
            status=404,
            json={
                "error": {
                    "message": "This model is only supported in v1/responses",
                    "type": "invalid_request_error",
                }
            },
        )
    return Reply()


def test_a_responses_only_model_is_summarised_through_the_responses_api() -> None:
    with FakeProvider(_responses_only) as fake:
        ok = summarizer_for_request(
            fake.url, {"authorization": "Bearer k"}, "gpt-5-codex", "responses"
        )
        assert "Fake summary" in ok.summarize(_request())
        assert fake.requests[-1].json.get("temperature") is None  # a reasoning model refuses it

        chat = summarizer_for_request(
            fake.url, {"authorization": "Bearer k"}, "gpt-5-codex", "openai"
        )
        with pytest.raises(SummarizerError) as failed:
            chat.summarize(_request())
    assert failed.value.status == 404
    assert failed.value.reason == (
        "invalid_request_error: This model is only supported in v1/responses"
    )


@pytest.mark.parametrize("api", PROVIDERS)
def test_retries_exhausted_report_the_last_status_and_reason(fake: FakeProvider, api: str) -> None:
    overloaded = Reply(status=503, json={"error": {"message": "the model is overloaded"}})
    fake.queue(overloaded, overloaded, overloaded)
    sleeps: list[float] = []
    llm = LLMSummarizer(
        _upstream(fake, api),
        "m-1",
        provider=api,
        max_retries=2,
        backoff=0.25,
        sleep=sleeps.append,  # type: ignore[arg-type]
    )
    with pytest.raises(SummarizerError) as failed:
        llm.summarize(_request())
    assert sleeps == [0.25, 0.5] and len(fake.requests) == 3
    assert failed.value.status == 503
    assert "the model is overloaded" in failed.value.reason
    assert "failed after 3 attempts" in str(failed.value)


def test_a_reply_of_another_api_is_a_clear_error_with_its_status(fake: FakeProvider) -> None:
    fake.queue(Reply(json={"choices": [{"message": {"content": "x"}}]}))
    llm = LLMSummarizer(fake.url, "m-1", provider="gemini")
    with pytest.raises(SummarizerError, match="not a gemini completion") as failed:
        llm.summarize(_request())
    assert failed.value.status == 200


def test_no_answer_is_a_timeout_without_a_status(fake: FakeProvider) -> None:
    fake.queue(Reply(delay=2.0))
    llm = LLMSummarizer(fake.openai_base_url, "m-1", timeout=0.3, max_retries=0)
    with pytest.raises(SummarizerError) as failed:
        llm.summarize(_request())
    assert failed.value.status is None and failed.value.reason.startswith("timed out")
