"""Fixtures for the CLI tests: small recorded sessions written to temp files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from contextwarden._messages import Message
from contextwarden.formats import to_anthropic, to_openai
from contextwarden.testing import ConversationBuilder


def build_session(steps: int = 30, size: int = 1_500) -> list[Message]:
    b = (
        ConversationBuilder()
        .system("You are a careful coding agent.")
        .user("Fix the failing test in src/app.py.")
    )
    for i in range(steps):
        out = "\n".join(f"src/module_{i}.py:{j}: value = {j * 3 + i}" for j in range(size // 30))
        b.tool_loop("bash", {"command": f"grep -n value src/module_{i}.py"}, out, text=f"Step {i}.")
    b.assistant("Done.")
    return b.build()


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No developer config or CONTEXTWARDEN_* variable leaks into a test, nor a terminal size
    (test runners such as pytest-xdist set COLUMNS): output goes to a pipe, as in a script."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    for name in list(os.environ):
        if name.startswith("CONTEXTWARDEN_") and name != "CONTEXTWARDEN_DATA_DIR":
            monkeypatch.delenv(name)


@pytest.fixture
def openai_file(tmp_path: Path) -> Path:
    path = tmp_path / "session.json"
    path.write_text(json.dumps(to_openai(build_session())), encoding="utf-8")
    return path


@pytest.fixture
def anthropic_file(tmp_path: Path) -> Path:
    system, messages = to_anthropic(build_session())
    path = tmp_path / "session.anthropic.json"
    path.write_text(json.dumps({"system": system, "messages": messages}), encoding="utf-8")
    return path


@pytest.fixture
def malformed_file(tmp_path: Path) -> Path:
    path = tmp_path / "broken.json"
    path.write_text('[{"role": "user", "content": "hi"}, {"role": "assistant", "content": 7}]')
    return path
