"""``contextwarden replay`` and ``compact`` through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextwarden._tokens import get_counter
from contextwarden._transcripts import load_transcript
from contextwarden.cli import app

DEMO = Path(__file__).resolve().parents[2] / "examples" / "data" / "demo-session.traj.json"

runner = CliRunner()

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_json_is_exactly_one_object(openai_file: Path) -> None:
    result = runner.invoke(
        app, ["replay", str(openai_file), "--model", "gpt-4o", "--window", "16000", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)  # fails on anything but one JSON document
    assert result.stdout.count("\n") == 1
    totals = data["totals"]
    assert {"input_tokens_without", "input_tokens_with", "saved_ratio"} <= set(totals)
    assert {"compactions", "invalid_requests"} <= set(totals)
    assert len(data["calls"]) == 31 and totals["invalid_requests"] == 0
    assert totals["input_tokens_with"] < totals["input_tokens_without"]
    assert sum(c["tokens_with"] for c in data["calls"]) == totals["input_tokens_with"]


def test_table_and_plot_in_a_new_folder(openai_file: Path, tmp_path: Path) -> None:
    plot = tmp_path / "new" / "deeper" / "replay.png"
    result = runner.invoke(
        app,
        ["replay", str(openai_file), "-m", "gpt-4o", "-w", "16000", "--plot", str(plot)],
    )
    assert result.exit_code == 0, result.output
    assert "Totals" in result.stdout and "saves" in result.stdout
    assert plot.read_bytes()[:8] == PNG_MAGIC


def test_anthropic_file(anthropic_file: Path) -> None:
    args = ["replay", str(anthropic_file), "-m", "claude-sonnet-4-5", "-w", "16000", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["provider"] == "anthropic" and data["totals"]["invalid_requests"] == 0


def test_config_switches_compaction_off(openai_file: Path) -> None:
    Path("cw.yaml").write_text("compaction: {enabled: false}\n")
    args = ["replay", str(openai_file), "-m", "gpt-4o", "-w", "16000", "--json", "-c", "cw.yaml"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["totals"]["compactions"] == 0


def test_compact_writes_the_input_format(openai_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "compacted" / "session.json"
    args = ["compact", str(openai_file), "-m", "gpt-4o", "-w", "16000", "-o", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    before = load_transcript(openai_file)
    after = load_transcript(out)
    assert after.format == before.format == "openai"
    assert isinstance(json.loads(out.read_text()), list)  # a JSON list in, a JSON list out
    counter = get_counter("gpt-4o")
    assert counter.count_messages(after.messages) <= 16000 < counter.count_messages(before.messages)
    assert after.messages[0] == before.messages[0]


def test_compact_refuses_to_overwrite_its_input(openai_file: Path) -> None:
    args = ["compact", str(openai_file), "-m", "gpt-4o", "-o", str(openai_file)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "overwrite" in result.stderr


@pytest.mark.skipif(not DEMO.is_file(), reason="examples/data/demo-session.traj.json not present")
def test_the_readme_demo(tmp_path: Path) -> None:
    """What `make demo` runs, on the shipped recording: it saves, and no request is invalid."""
    plot = tmp_path / "out" / "demo.png"
    args = ["replay", str(DEMO), "--model", "deepseek-chat", "--window", "32000"]
    result = runner.invoke(app, [*args, "--plot", str(plot), "--json"])
    assert result.exit_code == 0, result.output
    totals = json.loads(result.stdout)["totals"]
    assert totals["invalid_requests"] == 0 and totals["saved_ratio"] > 0
    assert plot.read_bytes()[:8] == PNG_MAGIC
