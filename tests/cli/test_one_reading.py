"""One reading of a session for every command: the same file through count, inspect, replay,
compact and sessions gives the same model, window, assumptions and reader warnings, and nothing
internal leaks into any output."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextwarden.cli.app import app
from contextwarden.transcripts._common import FORMATS

runner = CliRunner()
HERE = Path(__file__).resolve().parent.parent / "data"

#: Real recordings (and the documented-format fixtures) of agents with different habits: a
#: known model with a recorded window, a local model in several runs, no model at all, a
#: misspelt model, a reader's warning about a damaged line.
FILES = [
    "recordings/codex/raze-codex-session.jsonl",
    "recordings/aider/mozgoslav.aider.chat.history.md",
    "recordings/swe-agent/pydicom-1458.traj",
    "recordings/openhands/ui-export-demo1.json",
    "recordings/claude-code/python-to-rust-port.jsonl",
    "transcripts/cline/1737000000000/api_conversation_history.json",
    "transcripts/gemini-cli/session-2026-08-02T09-00-0b9d7e42.jsonl",
    "transcripts/bad-json-line.jsonl",
]


def _json(args: list[str]) -> tuple[list[dict[str, Any]], str]:
    """The runs a command's JSON describes, and what it wrote to stderr."""
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    return (data["runs"] if isinstance(data.get("runs"), list) else [data]), result.stderr


def _seen(run: dict[str, Any]) -> tuple[Any, ...]:
    return run["model"], run["window"], tuple(run["assumed"]), tuple(run["warnings"])


@pytest.mark.parametrize("name", FILES)
def test_every_command_reads_a_file_alike(name: str, tmp_path: Path) -> None:
    path = HERE / name
    counted, stderr = _json(["count", str(path)])
    inspected, stderr_inspect = _json(["inspect", str(path)])
    compacted, stderr_compact = _json(["compact", str(path), "-o", str(tmp_path / "out.json")])
    assert [_seen(r) for r in inspected] == [_seen(r) for r in counted]
    assert _seen(compacted[0]) == _seen(counted[-1])  # compact writes the last run
    assert stderr == stderr_inspect == stderr_compact
    played = [r for r in counted if r["by_role"].get("assistant", {}).get("messages")]
    if played:
        replayed, stderr_replay = _json(["replay", str(path)])
        assert [_seen(r) for r in replayed] == [_seen(r) for r in played]
        assert stderr_replay == stderr
    listed = runner.invoke(app, ["sessions", str(path), "--json", "--no-estimate", "--no-cache"])
    assert listed.exit_code == 0, listed.output
    for session, run in zip(json.loads(listed.stdout)["sessions"], counted, strict=True):
        assert (session["model"] or "unknown", session["window"]) == (run["model"], run["window"])
        assert session["assumed"] == ("; ".join(run["assumed"]) or None)
        assert tuple(session["warnings"]) == tuple(run["warnings"])
    # every note is said once on stderr, labelled the same way by every command
    for run in counted:
        for note in run["warnings"]:
            assert stderr.count(f"warning: {path}: {note}\n") == 1
        if run["assumed"]:
            assert stderr.count(f"assumed: {path}: {'; '.join(run['assumed'])}\n") == 1


@pytest.mark.parametrize("name", FILES)
def test_nothing_internal_in_any_output(name: str, tmp_path: Path) -> None:
    path = HERE / name
    for out in (tmp_path / "out.json", tmp_path / "out.jsonl"):
        result = runner.invoke(app, ["compact", str(path), "-o", str(out), "--window", "32000"])
        assert result.exit_code == 0, result.output
        assert "_cw_" not in out.read_text("utf-8")
    result = runner.invoke(app, ["replay", str(path), "--json"])
    assert "_cw_" not in result.stdout


@pytest.mark.parametrize(
    ("model", "read_as", "priced"),
    [
        ("claude_4_5_opus", "claude-opus-4-5", True),  # Cline's spelling
        ("gpt4o", "gpt-4o", True),
        ("openrouter/anthropic/claude-sonnet-4.5", None, True),  # a routing prefix: itself
        ("ollama/llama3.1:8b", None, False),  # a local server: billed at 0
    ],
)
def test_a_model_named_a_little_off_is_read_as_the_model_it_is(
    model: str, read_as: str | None, priced: bool
) -> None:
    path = HERE / FILES[0]
    runs, stderr = _json(["replay", str(path), "--model", model])
    t = runs[0]["totals"]
    if read_as is not None:
        assert f"model {model!r} read as {read_as}" in stderr
    if priced:
        assert t["billed_cost_without"] > 0 and runs[0]["priced"]
    else:
        assert f"model {model!r} runs locally (ollama): billed at $0" in stderr
        assert t["billed_cost_without"] == 0 == t["billed_cost_with"]
        text = runner.invoke(app, ["replay", str(path), "--model", model])
        assert "no bill: " in text.stdout and "(a local model)" in text.stdout


def test_swe_agent_shorthand_is_the_model_swe_agent_meant() -> None:
    """SWE-agent's ``gpt4`` is gpt-4-1106-preview: GPT-4 Turbo's 128k window and price."""
    path = HERE / "recordings/swe-agent/pydicom-1458.traj"
    runs, _ = _json(["replay", str(path), "--model", "gpt4"])
    assert runs[0]["window"] == 128_000 and runs[0]["input_price_per_mtok"] == 10.0
    assert runs[0]["totals"]["invalid_requests"] == 0


def test_an_unknown_model_is_one_rule_everywhere(tmp_path: Path) -> None:
    """Warned once, a stated default window, no bill and the reason: in every command."""
    path = HERE / "recordings/swe-agent/pydicom-1458.traj"
    note = (
        f"assumed: {path}: model 'no-such-model' is not in the registry: counted with "
        "o200k_base, window 128,000 assumed, no price: no bill\n"
    )
    for args in (
        ["count"],
        ["inspect"],
        ["replay"],
        ["compact", "-o", str(tmp_path / "out.json")],
    ):
        result = runner.invoke(app, [args[0], str(path), "--model", "no-such-model", *args[1:]])
        assert result.exit_code == 0, result.output
        assert result.stderr == note, args
    replayed = runner.invoke(app, ["replay", str(path), "--model", "no-such-model"])
    assert "no bill: no price known for no-such-model" in replayed.stdout


# -- help ------------------------------------------------------------------------------------
COMMANDS = ["count", "inspect", "replay", "compact", "sessions"]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_reads_as_written(command: str) -> None:
    wide = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"}, terminal_width=200)
    assert wide.exit_code == 0
    text = wide.stdout
    for option in ("--model MODEL", "--window TOKENS", "--format FORMAT", "--json "):
        assert option in text, option
    assert "<bool>" not in text and "<str>" not in text
    flat = " ".join(text.split())
    for name in FORMATS:
        assert name in flat
    assert max(len(line) for line in text.splitlines()) > 100  # the terminal's width, not 80
    # a paragraph is reflowed, never cut where the source file's line ended
    assert not re.search(r"[a-z,]\n\n[a-z]", text)


def test_the_command_list_shows_whole_sentences() -> None:
    text = runner.invoke(app, ["--help"]).stdout
    listed = text.split("Commands:")[1].splitlines()
    assert not any(line.rstrip().endswith("...") for line in listed)
    assert "<bool>" not in text


def test_sessions_in_a_pipe_cut_no_name(tmp_path: Path) -> None:
    result = runner.invoke(app, ["sessions", str(HERE / "recordings/aider"), "--no-cache"])
    assert result.exit_code == 0, result.output
    assert "…" not in result.stdout
    assert "lm_studio/qwen3.6-35b-a3b-uncensored-hauhaucs-aggressive" in result.stdout
    assert "mozgoslav.aider.chat.history.md (run 3/3)" in result.stdout


def test_one_is_singular(tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_text(
        json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    )
    count = runner.invoke(app, ["count", str(path), "--model", "gpt-4o"]).stdout
    assert "2 messages" in count
    replayed = runner.invoke(app, ["replay", str(path), "--model", "gpt-4o"]).stdout
    assert ": 1 call (" in replayed and "1 calls" not in replayed


def test_a_recorded_bill_is_one_figure_in_the_calls_the_totals_and_the_headline() -> None:
    """A Codex session records every call's usage: the report bills on it, and the calls'
    bills, the totals and the headline give the same dollars (the plot draws the calls)."""
    path = HERE / "recordings/codex/raze-codex-session.jsonl"
    runs, _ = _json(["replay", str(path)])
    data = runs[0]
    t, calls = data["totals"], data["calls"]
    assert t["baseline"] == "recorded-usage" and t["not_payable_without"] == 0
    assert t["billed_cost_without"] == pytest.approx(t["recorded_billed_cost"])
    assert t["billed_cost_without"] == pytest.approx(t["payable_billed_cost_without"])
    assert sum(c["billed_cost_without"] for c in calls) == pytest.approx(t["billed_cost_without"])
    assert sum(c["billed_cost_with"] for c in calls) == pytest.approx(t["billed_cost_with"])
    for c in calls:  # contextwarden changes the recorded bill by what it changes in the estimate
        change = c["estimated_cost_with"] - c["estimated_cost_without"]
        assert c["billed_cost_with"] - c["recorded_cost"] == pytest.approx(change)
    text = runner.invoke(app, ["replay", str(path)]).stdout
    money = f"${t['billed_cost_without']:,.4f} -> ${t['billed_cost_with']:,.4f}"
    assert money in text.strip().splitlines()[-1]
    row = next(line for line in text.splitlines() if "billed input cost, whole session" in line)
    assert f"${t['billed_cost_without']:,.4f}" in row and f"${t['billed_cost_with']:,.4f}" in row


def test_a_session_folder_is_read_by_every_command(tmp_path: Path) -> None:
    # an OpenHands SDK conversation folder (events/event-<index>-<id>.json) is one session, for
    # count, inspect, replay and compact as for sessions
    lines = (HERE / "transcripts" / "openhands-sdk" / "goal-events.jsonl").read_text("utf-8")
    folder = tmp_path / "conversations" / "e18b827d3440425a"
    (folder / "events").mkdir(parents=True)
    for index, line in enumerate(lines.splitlines()):
        event = json.loads(line)
        (folder / "events" / f"event-{index:05d}-{event['id']}.json").write_text(line)
    counted, _ = _json(["count", str(folder)])
    inspected, _ = _json(["inspect", str(folder)])
    replayed, _ = _json(["replay", str(folder)])
    compacted, _ = _json(["compact", str(folder), "-o", str(tmp_path / "out.json")])
    assert counted[0]["messages"] > 0
    assert {_seen(r) for r in (*counted, *inspected, *replayed, *compacted)} == {_seen(counted[0])}
    missing = runner.invoke(app, ["count", str(tmp_path / "conversations")])
    assert missing.exit_code == 2 and "not a file" in missing.stderr
