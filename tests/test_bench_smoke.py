"""The benchmark harness still runs: ``python -m bench --quick --only overhead`` on small
histories writes a well-formed ``overhead.json``. Speed is never asserted here (see bench/)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quick_overhead_run_writes_results(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--quick",
            "--only",
            "overhead",
            "--lengths",
            "40,80",
            "--out",
            str(tmp_path),
            "--no-report",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads((tmp_path / "overhead.json").read_text())
    assert data["quick"] is True
    rows = data["rows"]
    kinds = {r["kind"] for r in rows}
    assert "generated" in kinds
    # every history kind x setup x length was measured
    assert len(rows) == len(kinds) * len(data["setups"]) * 2
    for row in rows:
        assert row["messages"] in (40, 80)
        assert row["cold"]["n"] >= 1 and row["cold"]["p50_ms"] > 0
        assert row["warm"]["n"] >= 1 and row["warm"]["p50_ms"] > 0
        # the warden never adds tokens, and always returns a non-empty request
        assert 0 < row["tokens_after"] <= row["tokens_before"]
        assert row["messages_after"] >= 2
    assert {s["setup"] for s in data["scaling_exponents"]} == set(data["setups"])


# -- the billed replay (bench/_agent.py, bench/_senders.py, bench/_sweep.py) ------------------------
import copy  # noqa: E402
import importlib.util  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

sys.path.insert(0, str(ROOT))

from bench._agent import JUDGED, agent_calls, replay_sender  # noqa: E402

from contextwarden._billing import CachePricing  # noqa: E402
from contextwarden._tokens import get_counter  # noqa: E402
from contextwarden.formats import from_openai, validate_openai  # noqa: E402

_COUNTER = get_counter("gpt-4o")


def _agent_history(outputs: list[str], task: str = "Fix the failing test.") -> list[dict[str, Any]]:
    """system, task, then one assistant call + tool result per output."""
    out: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": task},
    ]
    for i, text in enumerate(outputs):
        cid = f"call_{i}"
        out.append(
            {
                "role": "assistant",
                "content": f"step {i}",
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"command": "ls"}'},
                    }
                ],
            }
        )
        out.append({"role": "tool", "tool_call_id": cid, "content": text})
    out.append({"role": "assistant", "content": "done"})
    return out


def _tokens(request: list[dict[str, Any]]) -> list[int]:
    return [_COUNTER.count_message(m) for m in from_openai(request)]


_outputs = st.lists(st.text(min_size=1, max_size=300), min_size=1, max_size=8)


@settings(max_examples=30, deadline=None)
@given(_outputs)
def test_raw_history_reads_all_of_the_previous_request_from_the_cache(
    outputs: list[str],
) -> None:
    history = _agent_history(outputs)
    before = copy.deepcopy(history)
    stats = replay_sender(history, lambda h: h, counter=_COUNTER, window=10**9)
    assert history == before  # the history is never mutated
    ends = agent_calls(history)
    assert len(stats.calls) == len(ends)
    expected_bill = 0.0
    previous: list[dict[str, Any]] = []
    for call, end in zip(stats.calls, ends, strict=True):
        request = history[:end]
        total = sum(_tokens(request)) + 3
        # an agent that only appends: the previous request is a prefix of this one
        cached = sum(_tokens(previous))
        assert (call.tokens, call.cached) == (total, cached)
        expected_bill += cached * 0.1 + (total - cached) * 1.25
        previous = request
    assert stats.billed(JUDGED) == pytest.approx(expected_bill)
    assert stats.invalid == 0 and stats.task_lost == 0


@settings(max_examples=20, deadline=None)
@given(_outputs)
def test_a_sender_that_rewrites_the_first_message_gets_no_cache_hit(outputs: list[str]) -> None:
    history = _agent_history(outputs)
    n = 0

    def rewrite(h: list[dict[str, Any]]) -> list[dict[str, Any]]:
        nonlocal n
        n += 1
        return [{"role": "system", "content": f"You are a coding agent ({n})."}, *h[1:]]

    stats = replay_sender(history, rewrite, counter=_COUNTER, window=10**9)
    assert stats.cached == 0
    # nothing read: every token is written at 1.25x; at plain ratios it is the token count
    assert stats.billed(JUDGED) == pytest.approx(1.25 * stats.tokens)
    plain = CachePricing.ratios(1_000_000.0, 1.0, 1.0, None, 0)
    assert stats.billed(plain) == pytest.approx(stats.tokens)


def test_orphans_windows_and_a_lost_task_are_counted() -> None:
    history = _agent_history(["x" * 4000, "y" * 4000, "z" * 4000])

    def orphan(h: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # drop the first assistant message, keep its tool result: an orphan once it is there
        return [m for m in h if m.get("content") != "step 0"]

    stats = replay_sender(history, orphan, counter=_COUNTER, window=1_500)
    assert [bool(c.problems) for c in stats.calls] == [False, True, True, True]
    assert stats.task_lost == 0
    assert stats.over_window == sum(1 for c in stats.calls if c.tokens > 1_500) > 0

    def no_task(h: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [m for m in h if m["role"] != "user"]

    assert replay_sender(history, no_task, counter=_COUNTER, window=10**9).task_lost == 4


_have_harness = importlib.util.find_spec("pydantic_ai_harness") is not None
_have_langchain = importlib.util.find_spec("langchain") is not None


@pytest.mark.skipif(not _have_harness, reason="pydantic-ai-harness not installed (bench extra)")
@settings(max_examples=25, deadline=None)
@given(_outputs, st.booleans())
def test_pydantic_ai_round_trip_is_exact(outputs: list[str], reasoning: bool) -> None:
    from bench._convert import openai_to_pai, pai_to_openai

    history = _agent_history(outputs)[:-1]
    if reasoning:
        history[2] = {**history[2], "reasoning_content": "thinking about it"}
    assert pai_to_openai(openai_to_pai(history)) == history


@pytest.mark.skipif(
    not (_have_harness and _have_langchain), reason="peers not installed (bench extra)"
)
def test_every_peer_sender_runs_an_agent_loop_and_fits_a_small_window() -> None:
    from bench._senders import PEER_SENDERS, budget

    history = _agent_history([f"line {i}\n" * 300 for i in range(12)])
    window = 8_000
    b = budget("gpt-4o", window)
    raw = replay_sender(history, lambda h: h, counter=_COUNTER, window=window)
    assert raw.calls[-1].tokens > b.trigger  # the history outgrows the budget
    for peer in PEER_SENDERS:
        stats = replay_sender(history, peer.make("gpt-4o", window), counter=_COUNTER, window=window)
        assert len(stats.calls) == len(raw.calls), peer.name
        # every peer cut something by the end, and none added tokens
        assert stats.tokens < raw.tokens, peer.name
        for call in stats.calls:
            assert call.tokens <= raw.calls[-1].tokens, peer.name


def test_warden_sender_is_valid_and_never_mutates_the_history() -> None:
    from bench._senders import warden_sender

    history = _agent_history([f"line {i}\n" * 300 for i in range(12)])
    before = copy.deepcopy(history)
    stats = replay_sender(history, warden_sender("gpt-4o", 8_000), counter=_COUNTER, window=8_000)
    assert history == before
    assert stats.invalid == 0 and stats.task_lost == 0 and stats.over_window == 0
    assert validate_openai(history[:-1]) == []


def _run_bench(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_quick_savings_run_writes_billed_rows(tmp_path: Path, shared_data: Path) -> None:
    proc = _run_bench(
        ["bench", "--quick", "--only", "savings", "--out", str(tmp_path), "--no-report"], tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads((tmp_path / "savings.json").read_text())
    rows = [r for r in data["rows"] if "error" not in r]
    assert {r["sender"] for r in rows} >= {"raw", "Warden()", "mask", "+summaries"}
    assert {r["window"] for r in rows} == set(data["windows"]) == {128_000, 32_000}
    for r in rows:
        assert r["calls"] > 0 and 0 <= r["cached"] <= r["tokens"]
        assert r["judged"] > 0 and r["usd_recorded"] > 0 and r["usd_model"] > 0
        if r["sender"] == "raw":
            assert r["judged_ratio"] == r["tokens_ratio"] == 1.0
            assert r["invalid"] == 0
    totals = [t for t in data["totals"] if t["source"] == "mini-swe-agent"]
    assert {t["sender"] for t in totals} >= {"raw", "Warden()"}
    assert "Warden() at 32,000:" in proc.stdout


def test_quick_billed_script_prints_the_targets(tmp_path: Path, shared_data: Path) -> None:
    out = tmp_path / "billed.json"
    proc = _run_bench(
        [
            "bench.billed",
            "--window",
            "32000",
            "--only",
            "django-15695",
            "--jobs",
            "1",
            "--json",
            str(out),
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "billed saving" in proc.stdout and "token saving" in proc.stdout
    data = json.loads(out.read_text())
    (cell,) = data["windows"]["32000"]
    assert cell["raw"]["tokens"] > cell["contextwarden"]["tokens"] > 0
    assert cell["raw"]["invalid"] == 0


# -- the judges' measures (bench/measures_run.py, bench/_recordings.py) ---------------------------
def test_every_recording_converts_to_a_valid_openai_chat_list(shared_data: Path) -> None:
    from bench._recordings import recordings
    from shared_data import trajectory_files

    recs = recordings(shared_data)
    assert len(recs) == len(trajectory_files())  # every recording (not the README)
    for rec in recs:
        msgs = rec.messages
        roles = [m["role"] for m in msgs]
        assert "assistant" in roles and "user" in roles, rec.name
        assert set(roles) <= {"system", "user", "assistant", "tool"}, rec.name
        # every prefix an agent would send answers each tool call it holds, in order
        open_ids: set[str] = set()
        for k, m in enumerate(msgs):
            if m["role"] == "assistant":
                assert not open_ids, f"{rec.name}: message {k} leaves calls unanswered"
                open_ids = {c["id"] for c in m.get("tool_calls") or []}
            elif m["role"] == "tool":
                assert m["tool_call_id"] in open_ids, f"{rec.name}: orphan result at {k}"
                open_ids.discard(m["tool_call_id"])


def test_measures_run_scores_the_judged_figures(tmp_path: Path, shared_data: Path) -> None:
    from bench.measures_run import MEASURES_PATH

    if not MEASURES_PATH.exists():
        pytest.skip(f"the judges' measures are not at {MEASURES_PATH}")
    proc = _run_bench(
        [
            "bench.measures_run",
            "--windows",
            "16000",
            "--only",
            "django-15695",
            "--senders",
            "contextwarden",
            "--jobs",
            "1",
            "--out",
            str(tmp_path),
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads((tmp_path / "measures.json").read_text())
    rows = {r["sender"]: r for r in data["rows"]}
    assert set(rows) == {"raw", "contextwarden"}
    raw, cw = rows["raw"], rows["contextwarden"]
    assert "error" not in cw and "error" not in raw, (cw, raw)
    assert raw["names_held"] == raw["names_wanted"] > 0 and raw["invalid"] == 0
    assert cw["invalid"] == 0 and 0 < cw["names_held"] <= cw["names_wanted"]
    assert 0 < cw["tokens"] < raw["tokens"] and 0 < cw["cost"] < raw["cost"]
    (agg,) = [a for a in data["judged"] if a["sender"] == "contextwarden"]
    assert agg["billed_saved"] == pytest.approx(1 - cw["cost"] / raw["cost"])
    assert "contextwarden" in proc.stdout


def _grid() -> Any:
    from bench import grid, measures_run

    if not measures_run.MEASURES_PATH.exists():
        pytest.skip(f"the judges' measures are not at {measures_run.MEASURES_PATH}")
    pytest.importorskip("bpe_openai")
    return grid


@settings(max_examples=20, deadline=None)
@given(_outputs, st.data())
def test_the_grid_bills_a_pause_past_the_ttl_as_a_cold_cache(
    outputs: list[str], data: st.DataObject
) -> None:
    grid = _grid()
    history = _agent_history(outputs)
    calls = [k for k, m in enumerate(history) if m["role"] == "assistant"]
    requests = [history[:k] for k in calls]
    ats = [float(t) for t in range(0, 100 * len(requests), 100)]  # within a 300 s TTL
    warm = grid.bill(requests, 0.1, 1.25)
    assert grid.bill(requests, 0.1, 1.25, ats, 300.0) == pytest.approx(warm)
    # one pause past the TTL: that request reads nothing and writes the whole of itself
    cold = data.draw(st.integers(1, len(requests) - 1)) if len(requests) > 1 else None
    if cold is None:
        return
    paused = [t + (1000.0 if i >= cold else 0.0) for i, t in enumerate(ats)]
    tokens, cost = grid.bill(requests, 0.1, 1.25, paused, 300.0)
    per_prev = grid.bill(requests[cold - 1 : cold], 0.1, 1.25)[0]  # what the cache held
    assert tokens == pytest.approx(warm[0])
    assert cost == pytest.approx(warm[1] + per_prev * (1.25 - 0.1))


def test_call_times_go_with_the_context_and_never_fall_back_to_the_clock() -> None:
    grid = _grid()
    msgs = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "more"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": "c"},
    ]
    # a fixed part prepended: the times are aligned with the end of the messages
    times = [None, 10.0, 11.0, 50.0, 51.0, None, None]
    assert grid.call_times(msgs, times[1:]) == [10.0, 50.0, 50.0]
    assert grid.call_times(msgs, []) == []
