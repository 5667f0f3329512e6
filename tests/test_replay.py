"""replay / compact_history: the call-by-call accounting an agent's history would produce."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwarden._config import WardenConfig
from contextwarden._exceptions import UnknownModelError
from contextwarden._messages import Message
from contextwarden._models import model_info
from contextwarden._replay import compact_history, count_calls, replay
from contextwarden._tokens import get_counter
from contextwarden._transcripts import load_transcript
from contextwarden.formats import to_openai, validate_openai
from contextwarden.testing import ConversationBuilder

MODEL = "gpt-4o-mini"  # a known model with a list price
LOSSLESS = WardenConfig.model_validate({"compaction": {"enabled": False}})


def session(steps: int, size: int = 1_500, seed: int = 0) -> list[Message]:
    """A coding-agent session: a task, then ``steps`` tool loops with long outputs."""
    b = (
        ConversationBuilder()
        .system("You are a careful coding agent.")
        .user("Fix the failing test in src/app.py and keep the public API.")
    )
    for i in range(steps):
        lines = "\n".join(f"line {seed}.{i}.{j}: value = {j * 7 + i}" for j in range(size // 25))
        b.tool_loop("bash", {"command": f"cat src/module_{i}.py"}, lines, text=f"Step {i}.")
    b.assistant("Done: the test passes now.")
    return b.build()


def test_one_call_per_assistant_message_with_the_context_before_it() -> None:
    history = session(6)
    report = replay(history, model=MODEL, window=128_000, config=LOSSLESS)
    positions = [i for i, m in enumerate(history) if m.role == "assistant"]
    assert [c.message_index for c in report.calls] == positions
    assert [c.messages_without for c in report.calls] == positions
    assert count_calls(history) == len(report.calls) == report.totals.calls
    counter = get_counter(MODEL)
    for c in report.calls:
        assert c.tokens_without == counter.count_messages(history[: c.message_index])


def test_totals_add_up() -> None:
    report = replay(session(12), model=MODEL, window=8_000)
    t = report.totals
    assert t.input_tokens_without == sum(c.tokens_without for c in report.calls)
    assert t.input_tokens_with == sum(c.tokens_with for c in report.calls)
    assert report.calls[-1].cumulative_with == t.input_tokens_with
    assert t.saved_ratio == pytest.approx(1 - t.input_tokens_with / t.input_tokens_without)
    assert t.compactions == sum(c.summaries_written for c in report.calls)
    assert t.invalid_requests == sum(1 for c in report.calls if not c.valid)
    assert t.max_context_with == max(c.tokens_with for c in report.calls)


def test_cost_is_the_list_price() -> None:
    report = replay(session(4), model=MODEL, window=128_000, config=LOSSLESS)
    price = model_info(MODEL).input_price_per_mtok
    assert price is not None and report.input_price_per_mtok == price
    assert report.totals.cost_without == pytest.approx(
        report.totals.input_tokens_without * price / 1e6
    )


def test_a_small_window_forces_savings_and_every_request_stays_valid() -> None:
    report = replay(session(20), model=MODEL, window=8_000)
    t = report.totals
    assert t.over_window_without > 0  # the raw history would not have fit
    assert t.over_window_with == 0 and t.invalid_requests == 0
    assert t.max_context_with <= report.window
    assert t.saved_ratio > 0
    assert all(c.tokens_with <= c.tokens_without for c in report.calls)


def test_no_window_pressure_means_lossless_layers_only() -> None:
    report = replay(session(3, size=200), model=MODEL, window=128_000)
    assert all(c.tokens_with == c.tokens_without for c in report.calls)
    assert report.totals.compactions == 0 and report.totals.saved_ratio == 0


def test_anthropic_requests_are_validated_as_anthropic() -> None:
    report = replay(session(10), model="claude-sonnet-4-5", window=8_000, provider="anthropic")
    assert report.provider == "anthropic"
    assert report.totals.invalid_requests == 0


def test_unknown_model_needs_a_window() -> None:
    with pytest.raises(UnknownModelError):
        replay(session(2), model="no-such-model-xyz")
    report = replay(session(2), model="no-such-model-xyz", window=50_000)
    assert report.input_price_per_mtok is None and report.totals.cost_with is None


def test_input_is_not_mutated_and_replay_is_deterministic() -> None:
    history = session(15)
    copy = list(history)
    first = replay(history, model=MODEL, window=8_000)
    second = replay(history, model=MODEL, window=8_000)
    assert history == copy
    assert first == second


def test_json_shape() -> None:
    data = replay(session(5), model=MODEL, window=8_000).as_dict()
    assert isinstance(data["calls"], list) and len(data["calls"]) == 6
    totals = data["totals"]
    for key in ("input_tokens_without", "input_tokens_with", "compactions", "invalid_requests"):
        assert isinstance(totals[key], int)
    assert isinstance(totals["saved_ratio"], float)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.integers(1, 14), size=st.integers(50, 3_000), window=st.integers(6_000, 40_000))
def test_every_request_valid_and_within_the_window(steps: int, size: int, window: int) -> None:
    report = replay(session(steps, size), model=MODEL, window=window)
    assert report.totals.invalid_requests == 0, [c.problems for c in report.calls if not c.valid]
    assert all(c.tokens_with <= window for c in report.calls)


def test_compact_history_fits_and_is_valid() -> None:
    history = session(20)
    result = compact_history(history, model=MODEL, window=8_000)
    assert result.tokens_after <= 8_000 < result.tokens_before
    assert validate_openai(to_openai(list(result.messages))) == []
    assert result.messages[0] == history[0]  # the system prompt is kept


def test_compact_history_force_compacts_under_the_trigger() -> None:
    history = session(8, size=400)
    calm = compact_history(history, model=MODEL, window=128_000)
    assert calm.compaction is None
    forced = compact_history(history, model=MODEL, window=128_000, force=True)
    assert forced.compaction is not None
    assert forced.tokens_after < forced.tokens_before == calm.tokens_before


def test_real_recording_at_32k(shared_data: Path) -> None:
    path = shared_data / "mini-swe-agent"
    smallest = min(path.glob("*.traj.json"), key=lambda p: p.stat().st_size)
    transcript = load_transcript(smallest)
    report = replay(transcript.messages, model="deepseek-chat", window=32_000)
    assert report.totals.invalid_requests == 0
    assert report.totals.over_window_with == 0
    assert report.totals.input_tokens_with < report.totals.input_tokens_without
