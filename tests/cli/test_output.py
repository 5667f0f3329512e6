"""What the commands write and say: compact's output format for agent logs, unwritable plot
paths, ordinals, empty sessions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import contextwarden
from contextwarden import ContextWardenError, from_openai, load_transcript, replay
from contextwarden.cli import app
from contextwarden.cli._tables import ordinal
from contextwarden.formats import validate_anthropic, validate_openai

runner = CliRunner()


@pytest.mark.parametrize(
    ("n", "text"),
    [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"), (12, "12th"), (13, "13th")]
    + [(21, "21st"), (22, "22nd"), (23, "23rd"), (101, "101st"), (111, "111th"), (112, "112th")],
)
def test_ordinals(n: int, text: str) -> None:
    assert ordinal(n) == text


def test_replay_table_title_uses_ordinals(openai_file: Path) -> None:
    args = ["replay", str(openai_file), "-m", "gpt-4o", "-w", "16000", "--every", "2"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "every 2nd" in result.stdout and "2th" not in result.stdout


@pytest.mark.parametrize(
    ("recording", "model"),
    [
        ("pi/large-session.jsonl", "claude-sonnet-4-6"),
        ("openhands/fastjson2-2775.output.jsonl", "gpt-4o"),
    ],
)
def test_compact_writes_an_agent_log_as_jsonl_when_asked(
    shared_data: Path, tmp_path: Path, recording: str, model: str
) -> None:
    """An agent's own log cannot be written back in its format: with -o *.jsonl it becomes one
    OpenAI message a line (not pretty-printed JSON), and the command says so."""
    source = shared_data / recording
    out = tmp_path / "out.jsonl"
    args = ["compact", str(source), "--model", model, "--window", "64000", "-o", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "OpenAI chat messages, JSONL" in result.stdout
    assert "not written back" in result.stdout
    lines = out.read_text(encoding="utf-8").splitlines()
    messages = [json.loads(line) for line in lines]
    assert len(messages) > 1 and all(isinstance(m, dict) and "role" in m for m in messages)
    assert validate_openai(messages) == []
    assert from_openai(messages)  # reads back as messages
    again = load_transcript(out)
    assert again.format == "openai-jsonl" and len(again.messages) == len(messages)


def test_compact_writes_a_pi_session_as_anthropic_json_otherwise(
    shared_data: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.json"
    source = shared_data / "pi" / "large-session.jsonl"
    args = ["compact", str(source), "--model", "claude-sonnet-4-6", "-w", "64000", "-o", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "Anthropic messages, JSON" in result.stdout
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert validate_anthropic(doc.get("system"), doc["messages"]) == []


def test_compact_keeps_a_provider_file_in_its_format(openai_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    args = ["compact", str(openai_file), "--model", "gpt-4o", "-w", "8000", "-o", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "(OpenAI chat messages, JSON)" in result.stdout
    assert isinstance(json.loads(out.read_text(encoding="utf-8")), list)


def test_a_plot_path_no_one_can_write_is_one_line(openai_file: Path) -> None:
    """Permission bits say yes (root), the file system says no: still one line, no traceback."""
    if not Path("/proc/self").is_dir():
        pytest.skip("no /proc")
    args = ["replay", str(openai_file), "-m", "gpt-4o", "-w", "16000", "--plot", "/proc/x.png"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --plot /proc/x.png: cannot write it")
    assert "Traceback" not in result.output


def test_plot_replay_names_the_path_it_cannot_write(openai_file: Path) -> None:
    pytest.importorskip("matplotlib")
    if not Path("/proc/self").is_dir():
        pytest.skip("no /proc")
    from contextwarden._plot import plot_replay

    report = replay(load_transcript(openai_file).messages, model="gpt-4o", window=16_000)
    with pytest.raises(ContextWardenError, match=r"/proc/x\.png: cannot write the plot"):
        plot_replay(report, "/proc/x.png")


def test_an_empty_session_is_said_so(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text("[]", encoding="utf-8")
    result = runner.invoke(app, ["count", str(path)])
    assert result.exit_code == 0, result.output
    assert "no messages" in result.stderr and str(path) in result.stderr


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("cut.jsonl", '{"role": "user", "content": "hi'),
        ("cut-newline.jsonl", '{"role": "user", "content": "hi\n'),
        ("cut.json", '[{"role": "user", "content": "hi"}'),
        ("cut-pi.jsonl", '{"type": "session", "id": "s1", "timestamp": "2026-01-01T00:'),
    ],
    ids=["jsonl", "jsonl-newline", "json", "pi"],
)
def test_a_truncated_one_line_file_is_reported_at_line_1(
    tmp_path: Path, name: str, text: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    result = runner.invoke(app, ["count", str(path)])
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{path}, line 1:" in lines[0], lines


SRC = Path(contextwarden.__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    """The real entry point (``python -m contextwarden``), as a user runs it."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-m", "contextwarden", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["inspect", "FILE", "--window", "0"], "'--window'"),
        (["count", "FILE", "--bogus"], "No such option: --bogus"),
        (["count"], "Missing argument"),
        (["replay", "FILE", "--model", "gpt-4o", "--window", "abc"], "'--window'"),
        (["no-such-command"], "No such command 'no-such-command'"),
    ],
    ids=["bad-value", "unknown-option", "missing-file", "not-an-int", "unknown-command"],
)
def test_a_usage_error_is_one_line(openai_file: Path, args: list[str], needle: str) -> None:
    done = _run(*[str(openai_file) if a == "FILE" else a for a in args])
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and needle in lines[0] and "--help" in lines[0]
    assert done.stdout == ""


def test_the_entry_point_runs_a_command_and_prints_the_version(openai_file: Path) -> None:
    done = _run("count", str(openai_file), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["messages"] == 63
    version = _run("--version")
    assert version.returncode == 0 and version.stdout.strip() == (
        f"contextwarden {contextwarden.__version__}"
    )
    bare = _run()
    assert bare.returncode == 0 and "Usage: contextwarden" in bare.stdout


def test_inspect_warns_when_the_fixed_part_leaves_no_room_for_summaries(tmp_path: Path) -> None:
    """A system prompt and tools of about 19k tokens at a 32k window (Claude Code's size at a
    local model's window): inspect says so, as the warden warns once, and its JSON says
    ``tight``; the same session at 200k has room."""
    from contextwarden.testing import ConversationBuilder

    b = ConversationBuilder().system("You are a careful coding agent.").user("Fix src/app.py.")
    for i in range(8):  # about 2,000 tokens a call
        out = "\n".join(f"src/module_{i}.py:{j}: value = {j * 3 + i}" for j in range(200))
        b.tool_loop("bash", {"command": f"grep -n value src/module_{i}.py"}, out, text=f"Step {i}.")
    messages = b.build()
    big = contextwarden.system("Tool rule: pass arguments as JSON. " * 2_400)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(contextwarden.to_openai([big, *messages])))
    args = ["inspect", str(path), "-m", "gpt-4o", "-w", "32000"]
    shown = runner.invoke(app, args)
    assert shown.exit_code == 0, shown.output
    assert "warning:" in shown.stdout and "a summary buys fewer than 6 calls" in shown.stdout
    as_json = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert as_json["tight"] is True and as_json["fixed"] > 15_000
    wide = json.loads(runner.invoke(app, [*args[:-2], "-w", "200000", "--json"]).stdout)
    assert wide["tight"] is False and "warning" not in wide
