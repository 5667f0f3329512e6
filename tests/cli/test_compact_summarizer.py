"""``contextwarden compact --config cw.yaml`` with an LLM summarizer: the configured server is
asked, with the configured key, and the compacted history holds its summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from summarizers.fake_provider import FakeProvider
from typer.testing import CliRunner

from contextwarden.cli import app
from contextwarden.formats import to_openai
from contextwarden.testing import ConversationBuilder

runner = CliRunner()


def build_session(steps: int) -> list:  # type: ignore[type-arg]
    b = ConversationBuilder().system("You are a coding agent.").user("Fix src/app.py.")
    for i in range(steps):
        out = "\n".join(f"src/module_{i}.py:{j}: value = {j * 3 + i}" for j in range(50))
        b.tool_loop("bash", {"command": f"grep -n value src/module_{i}.py"}, out, text=f"Step {i}.")
    b.assistant("Done.")
    return b.build()


@pytest.mark.parametrize("via", ["config", "option"])
def test_compact_asks_the_configured_server_with_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, via: str
) -> None:
    history = tmp_path / "session.json"
    history.write_text(json.dumps(to_openai(build_session(steps=60))), encoding="utf-8")
    monkeypatch.setenv("CW_TEST_KEY", "sk-from-env")
    out = tmp_path / "compacted.json"
    with FakeProvider() as fake:
        config = tmp_path / "cw.yaml"
        lines = [
            "summarizer:",
            f"  base_url: {fake.openai_base_url}",
            "  api_key_env: CW_TEST_KEY",
            "  timeout_s: 20",
        ]
        if via == "config":
            lines += ["  provider: openai", "  model: fake-summary-model"]
        config.write_text("\n".join(lines) + "\n", encoding="utf-8")
        args = ["compact", str(history), "--config", str(config), "--model", "gpt-4o"]
        args += ["--window", "16000", "-o", str(out)]
        if via == "option":
            args += ["--summarizer", "openai:fake-summary-model"]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        asked = [r for r in fake.requests if r.provider == "openai"]
    assert asked, "the configured summarizer was not asked"
    assert all(r.headers.get("authorization") == "Bearer sk-from-env" for r in asked)
    assert asked[0].json["model"] == "fake-summary-model"
    compacted = json.loads(out.read_text(encoding="utf-8"))
    assert "Fake summary #" in json.dumps(compacted)
