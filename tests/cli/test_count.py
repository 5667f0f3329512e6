"""``contextwarden count`` and ``inspect``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextwarden import Warden
from contextwarden._budget import reply_tokens
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
    Path("contextwarden.yaml").write_text("reserve_tokens: 8192\n", encoding="utf-8")
    result = runner.invoke(app, ["inspect", str(openai_file), "--model", "gpt-4o", "-w", "4000"])
    assert result.exit_code == 1 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert "reserve_tokens (8,192)" in result.stderr and "Budget." not in result.stderr


@pytest.mark.parametrize("window", [1_000, 8_000, 32_000, 200_000])
def test_inspect_shows_the_budget_the_warden_uses(openai_file: Path, window: int) -> None:
    """A small window is accepted (the default reserve shrinks to fit), and the limit and
    trigger shown are the warden's own for the next call: the reserve fitted to the session's
    replies, so inspect and replay agree."""
    result = runner.invoke(
        app, ["inspect", str(openai_file), "--model", "deepseek-chat", "-w", str(window)]
    )
    assert result.exit_code == 0, result.output
    default = Warden().budget_for("deepseek-chat", window)
    assert default is not None
    counter = get_counter("deepseek-chat")
    longest = max(
        reply_tokens(counter.count_message(m), m.usage)
        for m in load_transcript(openai_file).messages
        if m.role == "assistant"
    )
    budget = default.for_reply(longest)
    assert f"limit : {budget.limit:,}" in result.stdout
    assert f"trigger | {budget.trigger:,}" in result.stdout
    if window == 32_000:  # a quarter of the window by default; these replies need less
        assert default.limit == 24_000 < budget.limit


def test_inspect_at_32k_agrees_with_replay(openai_file: Path) -> None:
    args = [str(openai_file), "--model", "deepseek-chat", "--window", "32000"]
    replayed = runner.invoke(app, ["replay", *args, "--json"])
    assert replayed.exit_code == 0, replayed.output
    limit = json.loads(replayed.stdout)["limit"]
    inspected = runner.invoke(app, ["inspect", *args])
    assert inspected.exit_code == 0, inspected.output
    assert f"limit : {limit:,}" in inspected.stdout


def test_count_with_an_unknown_model_says_what_it_assumed(openai_file: Path) -> None:
    result = runner.invoke(app, ["count", str(openai_file), "--model", "no-such-model", "--json"])
    assert result.exit_code == 0, result.output
    assert "no-such-model" in result.stderr and "o200k_base" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert json.loads(result.stdout)["tokenizer"] == "o200k_base"


def test_count_with_a_known_model_warns_about_nothing(openai_file: Path) -> None:
    result = runner.invoke(app, ["count", str(openai_file), "--model", "gpt-4o"])
    assert result.exit_code == 0, result.output
    assert result.stderr == ""


def test_piped_tables_do_not_wrap_or_break_words(openai_file: Path) -> None:
    """Out of a terminal (a pipe, a file) tables are laid out wide: no row is broken across
    lines and no word is cut, whatever the terminal's width."""
    result = runner.invoke(app, ["inspect", str(openai_file), "--model", "gpt-4o", "--top", "5"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    rows = [line for line in lines if line.startswith("│") and line.rstrip().endswith("│")]
    assert rows, result.stdout
    assert max(len(line) for line in lines) > 80  # not squeezed into 80 columns
    starts = [line for line in lines if "tool" in line and "│" in line]
    assert all(line.rstrip().endswith("│") for line in starts)
    assert "slidin" not in result.stdout  # no word split over two lines
    assert "Step 29." in result.stdout or "src/module_" in result.stdout


def test_no_progress_bar_in_a_pipe(openai_file: Path) -> None:
    for command in ("count", "inspect"):
        result = runner.invoke(app, [command, str(openai_file), "--model", "gpt-4o"])
        assert result.exit_code == 0, result.output
        assert "eta" not in result.stderr and "counting" not in result.stderr
        assert result.stderr == ""


def test_version() -> None:
    import contextwarden

    for flag in ("--version", "-V"):
        result = runner.invoke(app, [flag])
        assert result.exit_code == 0, result.output
        assert result.stdout.strip() == f"contextwarden {contextwarden.__version__}"
    assert contextwarden.__version__[0].isdigit()


def test_inspect_under_budget(openai_file: Path) -> None:
    result = runner.invoke(app, ["inspect", str(openai_file), "--model", "gpt-4o"])
    assert result.exit_code == 0, result.output
    assert "128,000" in result.stdout and "over the" not in result.stdout


def test_inspect_of_a_file_naming_no_model_says_what_it_assumed(openai_file: Path) -> None:
    result = runner.invoke(app, ["inspect", str(openai_file)])
    assert result.exit_code == 0, result.output
    assert result.stderr.strip().splitlines() == [
        f"assumed: {openai_file}: the recording names no model: counted with o200k_base, "
        "window 128,000 assumed, no price: no bill"
    ]
    assert "window 128,000" in result.stdout


def test_real_recording_counts(shared_data: Path) -> None:
    path = shared_data / "claude-code" / "python-to-rust-port.jsonl"
    result = runner.invoke(app, ["count", str(path), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["format"] == "claude-code" and data["total"] > 0
