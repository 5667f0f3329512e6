"""``contextwarden count`` and ``inspect``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextwarden._tokens import get_counter
from contextwarden._transcripts import load_transcript
from contextwarden.cli import app

runner = CliRunner()


def test_count_json_adds_up_to_the_exact_total(openai_file: Path) -> None:
    result = runner.invoke(app, ["count", str(openai_file), "--model", "gpt-4o", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    messages = load_transcript(openai_file).messages
    assert data["total"] == get_counter("gpt-4o").count_messages(messages)
    assert sum(k["tokens"] for k in data["by_kind"].values()) == data["total"]
    assert data["by_role"]["tool"]["messages"] == 30
    assert data["by_kind"]["tool_call"]["blocks"] == 30


def test_count_prints_both_tables(openai_file: Path) -> None:
    result = runner.invoke(app, ["count", str(openai_file)])
    assert result.exit_code == 0, result.output
    for needle in ("Tokens by role", "Tokens by block kind", "tool_result", "assistant"):
        assert needle in result.stdout


def test_inspect_largest_and_budget(openai_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTWARDEN_RESERVE_TOKENS", "1000")
    result = runner.invoke(
        app, ["inspect", str(openai_file), "--model", "gpt-4o", "--window", "4000", "--top", "3"]
    )
    assert result.exit_code == 0, result.output
    assert "The 3 largest messages" in result.stdout
    assert "over the window" in result.stdout and "over the limit" in result.stdout


def test_inspect_reserve_larger_than_window_is_one_line(openai_file: Path) -> None:
    result = runner.invoke(app, ["inspect", str(openai_file), "--model", "gpt-4o", "-w", "4000"])
    assert result.exit_code == 1 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and "reserve" in result.stderr


def test_inspect_under_budget(openai_file: Path) -> None:
    result = runner.invoke(app, ["inspect", str(openai_file), "--model", "gpt-4o"])
    assert result.exit_code == 0, result.output
    assert "128,000" in result.stdout and "over the" not in result.stdout


def test_inspect_needs_a_model_when_the_file_names_none(openai_file: Path) -> None:
    result = runner.invoke(app, ["inspect", str(openai_file)])
    assert result.exit_code == 1
    assert len(result.stderr.strip().splitlines()) == 1 and "--model" in result.stderr


def test_real_recording_counts(shared_data: Path) -> None:
    path = shared_data / "claude-code" / "python-to-rust-port.jsonl"
    result = runner.invoke(app, ["count", str(path), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["format"] == "claude-code" and data["total"] > 0
