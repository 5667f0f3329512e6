"""LLMSummarizer's ``timeout`` is one deadline for a whole summary, retries included: servers
that stall, trickle their body or keep asking to retry later cannot hold the caller longer.

Timings are checked against the deadline plus a generous margin (the machine is shared and
slow), never tightly: what matters is that the wait is bounded by the deadline and not by the
server (a trickled body here would take 10+ seconds, a stalled one 30).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import time
from collections.abc import Iterator

import pytest
from fake_provider import FakeProvider, Reply, openai_completion

from contextwarden import SummarizerError
from contextwarden.summarizers import LLMSummarizer, SummaryRequest
from contextwarden.testing import ConversationBuilder

TASK = "Rename the config loader's env prefix"
GOOD = (
    "<completed>\n- read loader.py\n</completed>\n<remaining>\n- rename\n</remaining>\n"
    "<current_state>\n- nothing changed\n</current_state>\n<notes>\n- none\n</notes>"
)
#: Slack on top of a deadline for thread start-up, loopback I/O and a loaded machine.
MARGIN_S = 1.5


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        yield server


def _request() -> SummaryRequest:
    b = ConversationBuilder().user(TASK)
    b.read("src/loader.py", "PREFIX = 'APP_'\ndef load(env):\n    return env\n" * 8)
    for i in range(3):
        b.bash(f"pytest tests/test_loader.py -k case{i}", f"case {i} passed")
    return SummaryRequest(b.messages, task=TASK)


def _llm(fake: FakeProvider, provider: str = "openai", **kw: object) -> LLMSummarizer:
    base = fake.openai_base_url if provider == "openai" else fake.anthropic_base_url
    return LLMSummarizer(base, "test-model", provider=provider, **kw)  # type: ignore[arg-type]


def _timed_failure(run: object) -> tuple[float, str]:
    start = time.monotonic()
    with pytest.raises(SummarizerError) as info:
        if asyncio.iscoroutine(run):
            asyncio.run(run)
        else:
            run()  # type: ignore[operator]
    return time.monotonic() - start, str(info.value)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_trickled_body_is_cut_off_at_the_deadline(fake: FakeProvider, provider: str) -> None:
    # ~700 bytes, 8 every 0.15 s: more than 12 s to arrive, and never a gap a read timeout sees
    fake.queue(Reply(summary=GOOD, trickle=0.15))
    llm = _llm(fake, provider, timeout=1.0, max_retries=0)
    elapsed, message = _timed_failure(lambda: llm.summarize(_request()))
    assert elapsed < 1.0 + MARGIN_S
    assert "within timeout=1s" in message
    assert len(fake.requests) == 1


def test_a_trickled_body_is_cut_off_async(fake: FakeProvider) -> None:
    fake.queue(Reply(summary=GOOD, trickle=0.15))
    llm = _llm(fake, "anthropic", timeout=1.0, max_retries=2)
    elapsed, message = _timed_failure(llm.asummarize(_request()))
    assert elapsed < 1.0 + MARGIN_S
    assert "within timeout=1s" in message


def test_a_server_that_never_answers_holds_the_caller_one_deadline_not_one_per_retry(
    fake: FakeProvider,
) -> None:
    # per-request timeouts used to add up: 4 attempts x 2 s + backoff waits
    fake.queue(*[Reply(delay=30.0, summary=GOOD)] * 4)
    llm = _llm(fake, timeout=2.0, max_retries=3)
    elapsed, message = _timed_failure(lambda: llm.summarize(_request()))
    assert elapsed < 2.0 + MARGIN_S
    assert "retries included" in message


def test_a_server_that_never_answers_async(fake: FakeProvider) -> None:
    fake.queue(*[Reply(delay=30.0, summary=GOOD)] * 4)
    llm = _llm(fake, timeout=1.0, max_retries=3)
    elapsed, _ = _timed_failure(llm.asummarize(_request()))
    assert elapsed < 1.0 + MARGIN_S


def test_a_retry_after_beyond_the_deadline_is_not_waited_for(fake: FakeProvider) -> None:
    fake.queue(
        Reply(status=429, json={"error": {"message": "slow down"}}, headers={"retry-after": "20"}),
        Reply(summary=GOOD),
    )
    llm = _llm(fake, timeout=2.0, max_retries=3)  # real sleeps
    elapsed, message = _timed_failure(lambda: llm.summarize(_request()))
    assert elapsed < 1.0 + MARGIN_S  # gave up at once: the wait alone would pass the deadline
    assert "HTTP 429" in message and "would pass the deadline" in message
    assert len(fake.requests) == 1


def test_a_short_retry_after_within_the_deadline_is_honoured(fake: FakeProvider) -> None:
    fake.queue(Reply(status=429, json={}, headers={"retry-after": "0.3"}), Reply(summary=GOOD))
    start = time.monotonic()
    summary = _llm(fake, timeout=5.0).summarize(_request())
    assert time.monotonic() - start >= 0.3
    assert "read loader.py" in summary and len(fake.requests) == 2


def test_attempt_timeout_leaves_room_for_a_retry(fake: FakeProvider) -> None:
    fake.queue(Reply(delay=30.0, summary=GOOD), Reply(summary=GOOD))
    start = time.monotonic()
    summary = _llm(fake, timeout=5.0, attempt_timeout=0.5).summarize(_request())
    assert time.monotonic() - start < 5.0
    assert "read loader.py" in summary and len(fake.requests) == 2


def test_a_trickle_within_the_deadline_is_read_whole(fake: FakeProvider) -> None:
    # slow but finishing in time is a success, not a timeout
    fake.queue(Reply(summary=GOOD, trickle=0.005))
    summary = _llm(fake, timeout=20.0).summarize(_request())
    assert "read loader.py" in summary


def test_a_compressed_body_read_in_chunks_is_decoded_once(fake: FakeProvider) -> None:
    body = gzip.compress(json.dumps(openai_completion(GOOD)).encode())
    fake.queue(Reply(raw=body, headers={"content-encoding": "gzip"}))
    assert "read loader.py" in _llm(fake, timeout=5.0).summarize(_request())


def test_a_corrupt_compressed_body_is_a_summarizer_error(fake: FakeProvider) -> None:
    fake.queue(Reply(raw=b"not gzip at all", headers={"content-encoding": "gzip"}))
    with pytest.raises(SummarizerError, match="could not be decoded"):
        _llm(fake, timeout=5.0, max_retries=0).summarize(_request())
