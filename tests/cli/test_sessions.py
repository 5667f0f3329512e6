"""``contextwarden sessions`` on a home folder laid out as each agent keeps its sessions."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from shared_data import SHARED_DATA
from typer.testing import CliRunner

from contextwarden.cli import app
from contextwarden.transcripts.inventory import find_session_files, summarize_files

runner = CliRunner()
DATA = Path(__file__).resolve().parents[1] / "data" / "transcripts"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CLINE_TASKS = ".config/Code/User/globalStorage/saoudrizwan.claude-dev/tasks"


def lay_out_home(home: Path, *, real: bool) -> dict[str, str]:
    """Copy sessions where each agent keeps them; returns {agent: file name}."""
    gemini = home / ".gemini/tmp/c0ffee12/chats"
    gemini.mkdir(parents=True)
    for f in (DATA / "gemini-cli").glob("session-*"):
        shutil.copy(f, gemini / f.name)
    shutil.copytree(DATA / "cline" / "1737000000000", home / CLINE_TASKS / "1737000000000")
    placed = {"gemini-cli": "session-*", "cline": "api_conversation_history.json"}
    if real:
        copies = {
            "claude-code": (
                "claude-code/python-to-rust-port.jsonl",
                ".claude/projects/-w-p/c7d3d95c.jsonl",
            ),
            "codex": (
                "codex/raze-codex-session.jsonl",
                ".codex/sessions/2026/03/12/rollout-2026-03-12T15-10-41-019ce299.jsonl",
            ),
            "pi": ("pi-based/gjc-youtube-transcript.jsonl", ".pi/agent/sessions/--w--/s1.jsonl"),
        }
        for agent, (source, target) in copies.items():
            (home / target).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(SHARED_DATA / source, home / target)
            placed[agent] = Path(target).name
    # not sessions: left alone
    (home / ".claude/settings.json").parent.mkdir(parents=True, exist_ok=True)
    (home / ".claude/settings.json").write_text("{}")
    return placed


def run(home: Path, *args: str) -> dict[str, Any]:
    result = runner.invoke(
        app, ["sessions", *args, "--json", "--workers", "1"], env={"HOME": str(home)}
    )
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_finds_the_sessions_where_each_agent_keeps_them(tmp_path: Path) -> None:
    lay_out_home(tmp_path, real=False)
    found = find_session_files(home=tmp_path)
    names = sorted(p.name for p in found)
    assert names == [
        "api_conversation_history.json",
        "session-2025-09-18T10-12-7f3c2a10.json",
        "session-2026-08-02T09-00-0b9d7e42.jsonl",
    ]


def test_lists_every_session_with_its_cost(shared_data: Path, tmp_path: Path) -> None:
    lay_out_home(tmp_path, real=True)
    data = run(tmp_path)
    assert data["unreadable"] == []
    by_agent = {s["agent"]: s for s in data["sessions"]}
    assert set(by_agent) == {"claude-code", "codex", "pi", "gemini-cli", "cline"}
    assert sum(1 for s in data["sessions"] if s["agent"] == "gemini-cli") == 2
    for s in data["sessions"]:
        assert s["calls"] > 0 and s["tokens"] > 0 and s["model"]
        assert s["billed"] is not None and s["billed"] > 0, s
        assert s["contextwarden"] is not None, s
        assert s["billed_basis"] == "recorded-usage"  # every one of these records its usage
    codex = by_agent["codex"]
    assert codex["model"] == "gpt-5.4" and codex["window"] == 258_400 and codex["calls"] == 18
    # the figures agree with a replay of the same file at the same window
    replayed = runner.invoke(
        app, ["replay", str(SHARED_DATA / "codex/raze-codex-session.jsonl"), "--json"]
    )
    totals = json.loads(replayed.stdout)["totals"]
    assert codex["billed"] == pytest.approx(totals["payable_billed_cost_without"])
    assert codex["contextwarden"] == pytest.approx(totals["billed_cost_with_on_payable"])
    # totals per day and agent add up
    for group in data["totals"]:
        members = [
            s for s in data["sessions"] if s["day"] == group["day"] and s["agent"] == group["agent"]
        ]
        assert group["sessions"] == len(members)
        assert group["billed"] == pytest.approx(sum(s["billed"] for s in members))
    assert data["billed"] == pytest.approx(sum(s["billed"] for s in data["sessions"]))


def test_no_estimate_skips_the_replay_and_a_folder_can_be_given(tmp_path: Path) -> None:
    lay_out_home(tmp_path / "home", real=False)
    data = run(tmp_path / "elsewhere-home", str(tmp_path / "home"), "--no-estimate")
    assert len(data["sessions"]) == 3 and data["contextwarden"] is None
    assert all(s["contextwarden"] is None and s["billed"] for s in data["sessions"])


def test_an_unreadable_file_is_reported_not_fatal(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copy(DATA / "gemini-cli" / "session-2025-09-18T10-12-7f3c2a10.json", folder)
    (folder / "notes.json").write_text('{"conversation": []}')
    data = run(tmp_path, str(folder), "--no-estimate")
    assert len(data["sessions"]) == 1
    (bad,) = data["unreadable"]
    assert bad["path"].endswith("notes.json") and "unrecognised transcript format" in bad["error"]
    table = runner.invoke(
        app, ["sessions", str(folder), "--no-estimate"], env={"HOME": str(tmp_path)}
    )
    assert table.exit_code == 0 and "skipped:" in table.stderr and "notes.json" in table.stderr


def test_text_report_and_plot(tmp_path: Path) -> None:
    lay_out_home(tmp_path, real=False)
    target = tmp_path / "out" / "spend.png"
    result = runner.invoke(
        app,
        ["sessions", "--plot", str(target), "--workers", "1"],
        env={"HOME": str(tmp_path), "COLUMNS": "80"},
    )
    assert result.exit_code == 0, result.output
    assert target.read_bytes()[:8] == PNG_MAGIC
    lines = result.stdout.splitlines()
    assert max(len(x) for x in lines) <= 80
    assert "gemini-cli" in result.stdout and "cline" in result.stdout
    assert "Per day and agent" in result.stdout and "3 sessions, billed $" in result.stdout
    assert "reading sessions" not in result.stdout + result.stderr  # no bar off a terminal


def test_workers_and_the_cache_give_the_same_figures(tmp_path: Path) -> None:
    lay_out_home(tmp_path, real=False)
    files = find_session_files(home=tmp_path)
    cache = tmp_path / "cache.json"
    one = summarize_files(files, workers=1)
    two = summarize_files(files, workers=2, cache=cache)
    assert one == two
    seen: list[Path] = []
    again = summarize_files(files, workers=2, cache=cache, on_done=lambda p, _: seen.append(p))
    assert again == one and sorted(seen) == sorted(files)
    # a changed file is read again
    target = next(f for f in files if f.suffix == ".jsonl")
    target.write_text(target.read_text() + "\n", encoding="utf-8")
    assert summarize_files(files, workers=1, cache=cache) == one


def test_a_missing_folder_is_a_usage_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["sessions", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "no such file or folder" in result.stderr


def test_billed_and_with_contextwarden_compare_the_same_calls() -> None:
    """An estimated bill is the replay's payable baseline, the calls contextwarden's column is
    billed on, whether or not the replay runs: tool definitions counted, a call payable when
    it leaves its reply the warden's room. The OpenHands export's tools once made its estimated
    bill ($0.0176) look cheaper than contextwarden's ($0.0177) on the same requests."""
    from contextwarden.transcripts.inventory import summarize_file

    folder = Path(__file__).resolve().parents[1] / "data" / "recordings"
    checked = 0
    for path in sorted(folder.rglob("*")):
        if not path.is_file():
            continue
        quick = {(s.path, s.run): s for s in summarize_file(path, estimate=False)}
        for full in summarize_file(path):
            if full.error or full.billed_basis != "estimated" or full.contextwarden is None:
                continue
            assert full.billed is not None
            assert quick[full.path, full.run].billed == pytest.approx(full.billed, rel=1e-9)
            # an optional edit is a bet of at most loss_cap (1%) of the bill so far
            assert full.contextwarden <= full.billed * 1.01 + 1e-12, full.path
            checked += 1
    assert checked >= 5
