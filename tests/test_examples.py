"""Every runnable example in examples/ runs, offline, and finishes its task."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import contextwarden

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SRC = Path(contextwarden.__file__).resolve().parents[1]
SCRIPTS = sorted(p for p in EXAMPLES.glob("*.py") if not p.name.startswith("_"))


def test_there_are_examples() -> None:
    assert {p.name for p in SCRIPTS} >= {"openai_loop.py", "anthropic_loop.py"}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_example_runs_offline(script: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    # the contextwarden these tests import, whatever the working directory
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,  # examples must not depend on the working directory
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "answer: Read 30 files" in done.stdout
    summary = re.search(r"\(([\d,]+) saved, (\d+) warden events\)", done.stdout)
    assert summary, done.stdout
    saved, events = int(summary[1].replace(",", "")), int(summary[2])
    assert saved > 0  # the warden had work to do: the history outgrew the window
    assert events > 0
    # each event is printed as it happens, naming the call
    assert len(re.findall(r"^call \d+: contextwarden ", done.stdout, re.M)) == events
