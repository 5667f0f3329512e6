"""Bad files, bad config, unknown models: one clear red line each, exit 1 or 2, no traceback."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

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


def test_unknown_model_without_window_is_replayed_on_a_stated_assumption(
    openai_file: Path,
) -> None:
    result = runner.invoke(
        app, ["replay", str(openai_file), "--model", "no-such-model-q"], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    assert f"assumed: {openai_file}: model 'no-such-model-q' is not in the registry" in (
        result.stderr
    )
    assert "window 128,000 assumed" in result.stderr and "register_model" not in result.output


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


# -- output paths: checked before any work, one red line, exit 2 --------------------------------


def _one_error_line(result: object, *needles: str) -> str:
    res: Any = result
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ") and all(n in lines[0] for n in needles), lines[0]
    return str(lines[0])


REPLAY = ["replay", "--model", "gpt-4o", "--window", "16000"]


def test_plot_with_another_suffix(openai_file: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, [*REPLAY[:1], str(openai_file), *REPLAY[1:], "--plot", "p.txt"])
    _one_error_line(result, "--plot p.txt", "must end in .png")
    assert not (tmp_path / "p.txt").exists()


def test_plot_a_directory(openai_file: Path, tmp_path: Path) -> None:
    (tmp_path / "plots").mkdir()
    for target in ("plots", "dir.png"):
        (tmp_path / "dir.png").mkdir(exist_ok=True)
        result = runner.invoke(app, [REPLAY[0], str(openai_file), *REPLAY[1:], "--plot", target])
        _one_error_line(result, f"--plot {target}", "is a directory")


def test_plot_without_suffix_writes_and_reports_the_same_path(
    openai_file: Path, tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    result = runner.invoke(app, [REPLAY[0], str(openai_file), *REPLAY[1:], "--plot", "out"])
    assert result.exit_code == 0, result.output
    assert "plot written to out.png" in result.stdout
    assert (tmp_path / "out.png").is_file() and not (tmp_path / "out").exists()


def test_plot_where_no_folder_can_be(openai_file: Path) -> None:
    result = runner.invoke(
        app, [REPLAY[0], str(openai_file), *REPLAY[1:], "--plot", f"{openai_file}/x.png"]
    )
    _one_error_line(result, "cannot create its folder")


COMPACT = ["--model", "gpt-4o", "--window", "8000"]


def test_compact_output_is_a_directory(openai_file: Path, tmp_path: Path) -> None:
    (tmp_path / "outdir").mkdir()
    result = runner.invoke(app, ["compact", str(openai_file), *COMPACT, "-o", "outdir"])
    _one_error_line(result, "-o outdir", "is a directory")


@pytest.mark.parametrize("link", ["same", "hard", "symbolic"])
def test_compact_output_is_the_input(openai_file: Path, tmp_path: Path, link: str) -> None:
    original = openai_file.read_bytes()
    target = openai_file
    if link == "hard":
        target = tmp_path / "alias.json"
        os.link(openai_file, target)
    elif link == "symbolic":
        target = tmp_path / "alias.json"
        target.symlink_to(openai_file)
    result = runner.invoke(app, ["compact", str(openai_file), *COMPACT, "-o", str(target)])
    _one_error_line(result, "is the input file")
    assert openai_file.read_bytes() == original  # untouched


def test_compact_output_where_no_folder_can_be(openai_file: Path) -> None:
    result = runner.invoke(
        app, ["compact", str(openai_file), *COMPACT, "-o", f"{openai_file}/o.json"]
    )
    _one_error_line(result, "cannot create its folder")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through any permission bits")
def test_compact_output_in_a_read_only_folder(openai_file: Path, tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        result = runner.invoke(app, ["compact", str(openai_file), *COMPACT, "-o", "ro/out.json"])
        _one_error_line(result, "-o ro/out.json", "not writable")
    finally:
        folder.chmod(0o700)


def test_compact_output_that_cannot_be_written(openai_file: Path, tmp_path: Path) -> None:
    """A write that fails past the checks (here /dev/full: the disk is full) is one line too."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    result = runner.invoke(app, ["compact", str(openai_file), *COMPACT, "-o", "/dev/full"])
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: -o /dev/full: cannot write it")
