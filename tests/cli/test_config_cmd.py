"""``contextwarden config check|docs|show`` through typer's CliRunner."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from contextwarden._config_docs import config_reference
from contextwarden.cli import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("CONTEXTWARDEN_CONFIG", "CONTEXTWARDEN_RESERVE_TOKENS"):
        monkeypatch.delenv(name, raising=False)


def test_check_ok(tmp_path: Path) -> None:
    path = tmp_path / "cw.yaml"
    path.write_text("mask: {keep_recent: 2}\ncontextGuard: {reserveTokens: 100}\n")
    result = runner.invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "ok"


def test_check_prints_one_line_per_problem(tmp_path: Path) -> None:
    path = tmp_path / "cw.yaml"
    path.write_text("mask: {keep_recent: -1, colour: red}\ntrigger_ratio: 3\n")
    result = runner.invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 3, lines
    assert all(line.startswith(f"error: {path}: ") for line in lines)
    assert "Traceback" not in result.output


def test_check_bad_yaml_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "cw.yaml"
    path.write_text("mask: {keep_recent: 2\n")
    result = runner.invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 1
    assert len(result.stderr.strip().splitlines()) == 1
    assert "invalid YAML" in result.stderr


def test_check_missing_file(tmp_path: Path) -> None:
    result = runner.invoke(app, ["config", "check", str(tmp_path / "absent.yaml")])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {tmp_path / 'absent.yaml'}: no such file"


def test_docs_prints_the_reference() -> None:
    result = runner.invoke(app, ["config", "docs"])
    assert result.exit_code == 0
    assert result.stdout == config_reference()


def test_show_applies_file_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "cw.yaml"
    path.write_text("mask: {keep_recent: 2}\n")
    monkeypatch.setenv("CONTEXTWARDEN_RESERVE_TOKENS", "123")
    result = runner.invoke(app, ["config", "show", "--config", str(path)])
    assert result.exit_code == 0, result.output
    shown = yaml.safe_load(result.stdout)
    assert shown["mask"]["keep_recent"] == 2 and shown["reserve_tokens"] == 123


def test_show_reports_bad_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTWARDEN_RESERVE_TOKENS", "lots")
    result = runner.invoke(app, ["config", "show"])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: env CONTEXTWARDEN_RESERVE_TOKENS: ")
