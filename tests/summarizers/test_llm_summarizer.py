"""LLMSummarizer against a local fake server speaking each provider's wire format."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_provider import FakeProvider, RecordedRequest, Reply
from summarizer_loaders import final_diff_files, load_messages

from contextwarden import ConfigError, Message, SummarizerError
from contextwarden.summarizers import (
    LLMSummarizer,
    Summarizer,
    SummaryRequest,
    check_summary,
    parse_summary,
    summary_cache_key,
)
from contextwarden.testing import ConversationBuilder, FixedCounter

TASK = "Make the CSV exporter quote fields that contain commas"
GOOD = (
    "<completed>\n- read exporter.py\n</completed>\n<remaining>\n- quote fields\n</remaining>\n"
    "<current_state>\n- nothing changed yet\n</current_state>\n<notes>\n- none\n</notes>"
)


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        yield server


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")


def _history(steps: int = 4, output: str = "ok") -> tuple[Message, ...]:
    b = ConversationBuilder().user(TASK)
    b.read("src/exporter.py", "def export(rows):\n    return ','.join(rows)\n" * 5)
    for i in range(steps):
        b.bash(f"python check.py --case MARK{i}", f"{output} case {i}")
    b.edit("src/exporter.py", "','.join(rows)", "','.join(quote(r) for r in rows)")
    b.bash(
        "pytest -q",
        "FAILED tests/test_export.py::test_quotes - AssertionError: got a,b",
        returncode=1,
    )
    return b.messages


def _summarizer(fake: FakeProvider, provider: str = "openai", **kw: object) -> LLMSummarizer:
    base = fake.openai_base_url if provider == "openai" else fake.anthropic_base_url
    sleeps: list[float] = kw.pop("sleeps", [])  # type: ignore[assignment]
    return LLMSummarizer(
        base,
        "test-model",
        provider=provider,  # type: ignore[arg-type]
        sleep=sleeps.append,
        **kw,
    )  # type: ignore[arg-type]


def test_follows_the_protocol(fake: FakeProvider) -> None:
    assert isinstance(_summarizer(fake), Summarizer)


def test_openai_success_and_wire_format(fake: FakeProvider) -> None:
    fake.queue(Reply(summary=GOOD))
    request = SummaryRequest(_history(), task=TASK, pinned=("use csv.QUOTE_MINIMAL",))
    summary = _summarizer(fake).summarize(request)
    (sent,) = fake.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test-openai"
    assert "x-api-key" not in sent.headers
    body = sent.json
    assert body["model"] == "test-model" and body["temperature"] == 0
    assert body["max_tokens"] == 2048
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "<completed>" in body["messages"][0]["content"]
    user = body["messages"][1]["content"]
    assert f"<task>\n{TASK}" in user and "use csv.QUOTE_MINIMAL" in user
    assert "python check.py --case MARK3" in user
    # the reply's sections are kept, and the facts it left out were added
    sections = parse_summary(summary)
    assert "read exporter.py" in sections.completed
    assert "src/exporter.py" in sections.current_state
    assert "AssertionError: got a,b" in sections.current_state
    assert "use csv.QUOTE_MINIMAL" in sections.notes
    assert check_summary(summary, request) == []


def test_anthropic_success_and_wire_format(fake: FakeProvider) -> None:
    fake.queue(Reply(summary=GOOD))
    request = SummaryRequest(_history(), task=TASK)
    summary = _summarizer(fake, "anthropic").summarize(request)
    (sent,) = fake.requests
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == "sk-ant-test"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    body = sent.json
    assert body["max_tokens"] == 2048 and "<current_state>" in body["system"]
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert "read exporter.py" in summary
    assert check_summary(summary, request) == []


def test_no_key_in_the_environment_sends_no_key(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    fake.queue(Reply(summary=GOOD))
    _summarizer(fake).summarize(SummaryRequest(_history(), task=TASK))
    assert "authorization" not in fake.requests[0].headers


def test_custom_key_variable(fake: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_GATEWAY_KEY", "gw-123")
    fake.queue(Reply(summary=GOOD))
    _summarizer(fake, api_key_env="MY_GATEWAY_KEY").summarize(SummaryRequest(_history(), task=TASK))
    assert fake.requests[0].headers["authorization"] == "Bearer gw-123"


def test_429_then_success_waits_what_retry_after_says(fake: FakeProvider) -> None:
    fake.queue(
        Reply(status=429, json={"error": {"message": "slow down"}}, headers={"retry-after": "2"}),
        Reply(status=503, text="overloaded", headers={"retry-after-ms": "250"}),
        Reply(summary=GOOD),
    )
    sleeps: list[float] = []
    summary = _summarizer(fake, sleeps=sleeps).summarize(SummaryRequest(_history(), task=TASK))
    assert len(fake.requests) == 3
    assert sleeps == [2.0, 0.25]
    assert "read exporter.py" in summary


def test_server_errors_exhaust_retries_with_exponential_backoff(fake: FakeProvider) -> None:
    fake.queue(*[Reply(status=500, json={"error": "boom"})] * 4)
    sleeps: list[float] = []
    summarizer = _summarizer(fake, max_retries=3, backoff=0.5, sleeps=sleeps)
    with pytest.raises(SummarizerError, match="failed after 4 attempts; last: HTTP 500"):
        summarizer.summarize(SummaryRequest(_history(), task=TASK))
    assert len(fake.requests) == 4
    assert sleeps == [0.5, 1.0, 2.0]


def test_retry_after_is_capped(fake: FakeProvider) -> None:
    fake.queue(Reply(status=429, headers={"retry-after": "3600"}, json={}), Reply(summary=GOOD))
    sleeps: list[float] = []
    _summarizer(fake, max_backoff=5.0, sleeps=sleeps).summarize(
        SummaryRequest(_history(), task=TASK)
    )
    assert sleeps == [5.0]


def test_timeout_is_retried_then_reported(fake: FakeProvider) -> None:
    fake.queue(Reply(delay=5.0, summary=GOOD), Reply(delay=5.0, summary=GOOD))
    summarizer = _summarizer(fake, timeout=3.0, attempt_timeout=0.2, max_retries=1)
    with pytest.raises(SummarizerError, match="timed out"):
        summarizer.summarize(SummaryRequest(_history(), task=TASK))
    assert len(fake.requests) == 2


def test_timeout_then_success(fake: FakeProvider) -> None:
    fake.queue(Reply(delay=5.0, summary=GOOD), Reply(summary=GOOD))
    summary = _summarizer(fake, timeout=3.0, attempt_timeout=0.2, max_retries=2).summarize(
        SummaryRequest(_history(), task=TASK)
    )
    assert "read exporter.py" in summary


def test_client_errors_are_not_retried(fake: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    fake.queue(Reply(status=401, json={"error": {"message": "bad key"}}))
    with pytest.raises(
        SummarizerError,
        match=r"401 \(key read from \$OPENAI_API_KEY, which is "
        r"not set\)",
    ):
        _summarizer(fake).summarize(SummaryRequest(_history(), task=TASK))
    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply(text="<html>gateway</html>"), "not JSON"),
        (Reply(json={"object": "error"}), "not a openai completion"),
        (Reply(summary=""), "empty summary"),
        (Reply(summary="Sure! Here is the summary: all good."), "missing <completed>"),
        (
            Reply(summary="<completed>\nx\n</completed>\n<notes>\n</notes>"),
            "missing <remaining>, <current_state>",
        ),
        (
            Reply(
                summary="<completed></completed><remaining></remaining>"
                "<current_state></current_state><notes></notes>"
            ),
            "every section is empty",
        ),
    ],
)
def test_malformed_replies_raise(fake: FakeProvider, reply: Reply, message: str) -> None:
    fake.queue(reply)
    with pytest.raises(SummarizerError, match=message):
        _summarizer(fake).summarize(SummaryRequest(_history(), task=TASK))
    assert len(fake.requests) == 1  # a malformed reply is not retried


def test_previous_summary_and_focus_are_passed(fake: FakeProvider) -> None:
    fake.queue(Reply(summary=GOOD))
    request = SummaryRequest(
        _history(),
        task=TASK,
        previous_summary="<completed>\nEARLIER-42\n</completed>",
        focus="the quoting rules",
    )
    _summarizer(fake).summarize(request)
    user = fake.requests[0].user_text
    assert "<previous_summary>" in user and "EARLIER-42" in user
    assert "<focus>\nthe quoting rules" in user


def test_the_names_index_is_asked_for_and_what_the_reply_left_out_is_added(
    fake: FakeProvider,
) -> None:
    fake.queue(Reply(summary=GOOD))
    b = ConversationBuilder().user(TASK)
    b.bash("grep -rn 'def quote_field' src/", "src/util/text.py:12:def quote_field(value):\n" * 40)
    b.bash("python -c 'from src.exporter import export_rows'", "imported\n" * 40)
    request = SummaryRequest(b.messages, task=TASK, held=frozenset({"export_rows"}))
    summary = _summarizer(fake).summarize(request)
    user = fake.requests[0].user_text
    names = user.split("<names>")[1].split("</names>")[0]
    assert "src/util/text.py: quote_field" in names
    assert "export_rows" not in names  # the request holds it beside the summary
    assert "Files and code in play" in str(fake.requests[0].json)  # asked in the system prompt
    # the reply (GOOD) named none of them: the summary carries them anyway
    assert "quote_field" in summary and "src/util/text.py" in summary
    assert check_summary(summary, request) == []


def test_tool_outputs_are_clipped_in_the_input(fake: FakeProvider) -> None:
    fake.queue(Reply(summary=GOOD))
    huge = "line of noisy log output\n" * 4000  # 100k characters
    request = SummaryRequest(_history(steps=2, output=huge), task=TASK)
    _summarizer(fake, tool_output_chars=1000).summarize(request)
    user = fake.requests[0].user_text
    assert len(user) < 10_000
    assert "characters omitted" in user
    assert "case 1" in user  # the tail of each output survives


def test_text_protocol_outputs_are_clipped_the_users_words_are_not(fake: FakeProvider) -> None:
    """mini-swe-agent's text protocol: a command's output comes back as a user message; it is
    clipped as a tool result is, while a long instruction the user wrote stays whole."""
    fake.queue(Reply(summary=GOOD))
    huge = "line of noisy log output\n" * 4000
    said = "Also keep the header row." + " It matters because downstream tools read it." * 60
    b = ConversationBuilder().user(TASK).assistant("THOUGHT: look\n```bash\ncat big.log\n```")
    b.user(f"<returncode>0</returncode>\n<output>\n{huge}END-OF-LOG</output>")
    b.assistant("THOUGHT: again\n```bash\npython check.py\n```").user(said)
    request = SummaryRequest(b.messages, task=TASK)
    _summarizer(fake, tool_output_chars=1000).summarize(request)
    user = fake.requests[0].user_text
    assert len(user) < 10_000
    assert "characters omitted" in user and "END-OF-LOG" in user  # clipped, its tail kept
    assert said in user


def test_long_reply_is_fitted_under_the_cap(fake: FakeProvider) -> None:
    lines = "\n".join(f"- did step {i} with a fairly long description" for i in range(300))
    fake.queue(Reply(summary=GOOD.replace("- read exporter.py", lines)))
    request = SummaryRequest(_history(steps=60), task=TASK, max_chars=1500)
    summary = _summarizer(fake).summarize(request)
    assert len(summary) <= 1500
    assert check_summary(summary, request) == []
    assert "- did step 0 " in summary  # the reply's first lines are kept, its tail dropped


def test_map_reduce_when_the_history_exceeds_the_budget(fake: FakeProvider) -> None:
    steps = 60
    request = SummaryRequest(_history(steps=steps, output="x" * 300), task=TASK)
    summarizer = _summarizer(fake, input_token_budget=2500, counter=FixedCounter())
    summary = summarizer.summarize(request)
    histories = [r for r in fake.requests if "<history>" in r.user_text]
    merges = [r for r in fake.requests if "<part n=" in r.user_text]
    assert len(histories) >= 3 and merges
    assert len(fake.requests) == len(histories) + len(merges)
    # every message went to exactly one chunk, in order
    seen = [int(m) for r in histories for m in re.findall(r"--case MARK(\d+)\"", r.user_text)]
    assert seen == list(range(steps))
    # the first merge holds the chunk summaries, oldest first
    parts = re.findall(r"Fake summary #(\d+) ", merges[0].user_text)
    assert [int(p) for p in parts] == sorted(int(p) for p in parts)
    # each call stays within the summarizer's own budget (system prompt + user turn)
    counter = FixedCounter()
    for r in fake.requests:
        assert counter.count_text(r.user_text) <= 2500
    assert check_summary(summary, request) == []


def test_map_reduce_puts_the_previous_summary_into_the_merge(fake: FakeProvider) -> None:
    request = SummaryRequest(
        _history(steps=40, output="y" * 300),
        task=TASK,
        previous_summary=GOOD.replace("read exporter.py", "EARLIER-7"),
    )
    _summarizer(fake, input_token_budget=3000, counter=FixedCounter()).summarize(request)
    merges = [r for r in fake.requests if "<part n=" in r.user_text]
    assert merges and "EARLIER-7" in merges[0].user_text
    assert not any("<previous_summary>" in r.user_text for r in fake.requests)


def test_context_length_error_shrinks_the_chunks(fake: FakeProvider) -> None:
    too_long = {
        "error": {
            "code": "context_length_exceeded",
            "message": "This model's maximum context length is 4096 tokens",
        }
    }
    fake.queue(Reply(status=400, json=too_long))
    request = SummaryRequest(_history(steps=30, output="z" * 200), task=TASK)
    summary = _summarizer(fake, input_token_budget=20_000, counter=FixedCounter()).summarize(
        request
    )
    assert len(fake.requests) >= 3  # the refused call, then chunks and a merge
    assert "<part n=" in fake.requests[-1].user_text
    assert check_summary(summary, request) == []


def test_async_matches_sync_including_map_reduce(fake: FakeProvider) -> None:
    request = SummaryRequest(_history(steps=40, output="w" * 300), task=TASK)
    summarizer = _summarizer(fake, input_token_budget=2500, counter=FixedCounter())
    sync_summary = summarizer.summarize(request)
    sync_requests = len(fake.requests)
    fake.requests.clear()
    async_summary = asyncio.run(summarizer.asummarize(request))
    assert len(fake.requests) == sync_requests
    # replies number their call, so compare the structure, not the numbers
    strip = re.compile(r"#\d+")
    assert strip.sub("#", async_summary) == strip.sub("#", sync_summary)


def test_async_retries(fake: FakeProvider) -> None:
    fake.queue(Reply(status=529, json={"type": "error"}), Reply(summary=GOOD))
    waited: list[float] = []

    async def asleep(seconds: float) -> None:
        waited.append(seconds)

    summarizer = LLMSummarizer(
        fake.anthropic_base_url, "claude-test", provider="anthropic", asleep=asleep
    )
    summary = asyncio.run(summarizer.asummarize(SummaryRequest(_history(), task=TASK)))
    assert waited == [0.5] and "read exporter.py" in summary


def test_streaming_fake_is_well_formed(fake: FakeProvider) -> None:
    """The fake also streams (for the proxy's tests): OpenAI chunks end with [DONE]."""
    import httpx

    r = httpx.post(
        f"{fake.openai_base_url}/chat/completions",
        json={"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
    )
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.text.rstrip().endswith("data: [DONE]")
    r = httpx.post(
        f"{fake.anthropic_base_url}/v1/messages",
        json={"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
    )
    assert "event: message_stop" in r.text


def test_responder_callable(fake: FakeProvider) -> None:
    seen: list[RecordedRequest] = []

    def respond(req: RecordedRequest) -> Reply:
        seen.append(req)
        return Reply(summary=GOOD.replace("read exporter.py", f"model={req.json['model']}"))

    fake.responder = respond
    summary = _summarizer(fake).summarize(SummaryRequest(_history(), task=TASK))
    assert "model=test-model" in summary and len(seen) == 1


def test_settings_are_validated() -> None:
    with pytest.raises(ConfigError, match="provider"):
        LLMSummarizer(None, "m", provider="cohere")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="model"):
        LLMSummarizer(None, "")
    with pytest.raises(ConfigError, match="timeout"):
        LLMSummarizer(None, "m", timeout=0)
    with pytest.raises(ConfigError, match="input_token_budget"):
        LLMSummarizer(None, "m", input_token_budget=10)


def test_defaults_and_identity() -> None:
    openai = LLMSummarizer(None, "gpt-x")
    anthropic = LLMSummarizer(None, "claude-x", provider="anthropic")
    assert openai.url == "https://api.openai.com/v1/chat/completions"
    assert anthropic.url == "https://api.anthropic.com/v1/messages"
    assert anthropic.api_key_env == "ANTHROPIC_API_KEY"
    request = SummaryRequest(_history(), task=TASK)
    assert summary_cache_key(request, openai) != summary_cache_key(request, anthropic)
    assert summary_cache_key(request, openai) == summary_cache_key(
        request, LLMSummarizer(None, "gpt-x")
    )


def test_real_trajectory_through_map_reduce_keeps_must_keep_facts(
    fake: FakeProvider, shared_data: Path
) -> None:
    """A whole mini-swe-agent run, far over a small summarizer budget: chunked, merged, and the
    facts the fake model never mentions (files, last error, task) are added from the history."""
    files = sorted((shared_data / "mini-swe-agent").glob("*.traj.json"))
    if not files:
        pytest.skip("no mini-swe-agent trajectories in ../shared/data")
    msgs = [m for m in load_messages(files[0]) if m.role != "system"]
    request = SummaryRequest(tuple(msgs), task=msgs[0].text)
    summary = _summarizer(fake, input_token_budget=16_000).summarize(request)
    assert sum("<history>" in r.user_text for r in fake.requests) >= 2
    assert "<part n=" in fake.requests[-1].user_text
    assert check_summary(summary, request) == []
    for real in final_diff_files(files[0]):
        assert real in summary
