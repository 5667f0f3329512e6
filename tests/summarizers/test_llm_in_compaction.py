"""An LLM summarizer inside the warden, against a local fake provider: its summary lands in the
request; when it fails (an error status, a stall past its deadline, a reply missing a section)
the agent's call still goes through with the extractive summary, and an event says so."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fake_provider import FakeProvider, Reply

from contextwarden import Warden, WardenConfig
from contextwarden.summarizers import SummarizerConfig, build_summarizer
from contextwarden.testing import ConversationBuilder

TASK = "Make the CSV exporter quote fields that contain commas"
WINDOW = 12_000


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        yield server


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUMMARY_KEY", "sk-summary")


def _history() -> list[dict[str, object]]:
    b = ConversationBuilder().system("You are a coding agent.").user(TASK)
    for i in range(40):
        b.bash(
            f"sed -n '{i * 40},{i * 40 + 40}p' src/exporter_{i}.py",
            f"def export_part_{i}(rows):\n" + "    rows = [r.strip() for r in rows]\n" * 30,
        )
    from contextwarden import to_openai

    return to_openai(b.messages)


def _warden(fake: FakeProvider, provider: str = "openai", timeout_s: float = 20) -> Warden:
    base = fake.openai_base_url if provider == "openai" else fake.anthropic_base_url
    config = SummarizerConfig(
        provider=provider,
        model="summary-model",  # type: ignore[arg-type]
        base_url=base,
        api_key_env="SUMMARY_KEY",
        timeout_s=timeout_s,
        max_retries=1,
    )
    # masking old tool results would be enough for this history: leave it off, to compact
    warden_config = WardenConfig.model_validate({"mask": {"enabled": False}})
    return Warden(warden_config, summarizer=build_summarizer(config))


def _text(request: list[dict[str, object]]) -> str:
    return "\n".join(str(m.get("content")) for m in request)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_llm_summary_is_in_the_request(fake: FakeProvider, provider: str) -> None:
    request, result = _warden(fake, provider).transform_openai(
        _history(), model="gpt-4o", window=WINDOW
    )
    assert result.tokens_after <= WINDOW
    assert fake.requests and fake.requests[0].headers.get(
        "authorization" if provider == "openai" else "x-api-key", ""
    ).endswith("sk-summary")
    assert "Fake summary #" in _text(request)
    assert not [e for e in result.events if e.kind == "summarizer_failed"]


@pytest.mark.parametrize(
    ("replies", "why"),
    [
        ([Reply(status=500, json={"error": "boom"})] * 2, "HTTP 500"),
        ([Reply(status=401, json={"error": {"message": "bad key"}})], "401"),
        ([Reply(summary="<completed>\nonly this\n</completed>")] * 2, "missing <remaining>"),
        ([Reply(text="<html>gateway</html>")] * 2, "not JSON"),
    ],
)
def test_a_failed_llm_summary_falls_back_to_the_extractive_one(
    fake: FakeProvider, replies: list[Reply], why: str
) -> None:
    fake.queue(*replies * 8)  # every summary the compaction asks for fails the same way
    request, result = _warden(fake).transform_openai(_history(), model="gpt-4o", window=WINDOW)
    assert result.tokens_after <= WINDOW
    failed = [e for e in result.events if e.kind == "summarizer_failed"]
    assert failed and "llm:openai:summary-model" in failed[0].detail and why in failed[0].detail
    assert "used the extractive summary" in failed[0].detail
    text = _text(request)
    assert "Fake summary #" not in text and "<current_state>" in text
    assert any(e.kind == "context_compacted" for e in result.events)


def test_a_stalled_llm_holds_the_call_no_longer_than_its_deadline(fake: FakeProvider) -> None:
    fake.queue(*[Reply(delay=30.0)] * 8)
    warden = _warden(fake, timeout_s=1.0)
    start = time.monotonic()
    request, result = warden.transform_openai(_history(), model="gpt-4o", window=WINDOW)
    elapsed = time.monotonic() - start
    failed = [e for e in result.events if e.kind == "summarizer_failed"]
    assert failed and "within timeout=1s" in failed[0].detail
    # each summary the compaction asked for waited at most its deadline (plus a generous margin
    # for a loaded machine), not 30 s per attempt
    assert elapsed < len(fake.requests) * 1.0 + 5.0
    assert result.tokens_after <= WINDOW
