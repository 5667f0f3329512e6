"""Bad files, bad config, unknown models: one clear red line each, exit 1 or 2, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextwarden.cli import app

runner = CliRunner()

COMMANDS = [
    ["count"],
    ["inspect", "--model", "gpt-4o"],
    ["replay", "--model", "gpt-4o", "--window", "16000"],
    ["compact", "--model", "gpt-4o", "-o", "out.json"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_missing_file(command: list[str], tmp_path: Path) -> None:
    result = runner.invoke(app, [command[0], str(tmp_path / "nope.json"), *command[1:]])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [f"error: {tmp_path / 'nope.json'}: no such file"]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_malformed_file(command: list[str], malformed_file: Path) -> None:
    result = runner.invoke(app, [command[0], str(malformed_file), *command[1:]])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {malformed_file}")
    assert (
        "Traceback" not in result.output
        and result.exception is None
        or isinstance(result.exception, SystemExit)
    )


@pytest.mark.parametrize("command", COMMANDS[1:], ids=lambda c: c[0])
def test_bad_config_lists_every_problem(command: list[str], openai_file: Path) -> None:
    config = Path("bad.yaml")
    config.write_text("mask: {keep_recent: -1}\ncontextGuard: {reserveTokens: lots}\n")
    args = [command[0], str(openai_file), *command[1:], "--config", str(config)]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2, lines
    assert all(line.startswith("error: bad.yaml: ") for line in lines)


def test_unknown_model_without_window(openai_file: Path) -> None:
    result = runner.invoke(app, ["replay", str(openai_file), "--model", "no-such-model-q"])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "no-such-model-q" in lines[0]


def test_bad_env_variable(openai_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTWARDEN_TRIGGER_RATIO", "high")
    result = runner.invoke(app, ["replay", str(openai_file), "--model", "gpt-4o"])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: env CONTEXTWARDEN_TRIGGER_RATIO: ")


def test_proxy_is_forwarded_lazily() -> None:
    result = runner.invoke(app, ["proxy", "--help"])
    # either the proxy's own help, or one line saying how to install it
    assert (
        result.exit_code == 0
        and "proxy" in result.stdout.lower()
        or (result.exit_code == 1 and len(result.stderr.strip().splitlines()) == 1)
    )
