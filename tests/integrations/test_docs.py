"""docs/integrations.md: every Python example runs as written (offline), so none can drift.

An example whose framework is not installed is skipped, naming the package.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
#: top-level modules an example may need, and the package that provides each
FRAMEWORKS = {
    "agents": "openai-agents",
    "langchain": "langchain",
    "autogen_core": "autogen-core",
    "minisweagent": "mini-swe-agent",
    "litellm": "litellm",
    "pydantic_ai": "pydantic-ai-slim",
    "crewai": "crewai",
    "google.adk": "google-adk",
}


def test_every_framework_has_an_example() -> None:
    assert len(BLOCKS) >= 4
    for module in FRAMEWORKS:
        assert any(re.search(rf"^from {module}[ .]", b, re.M) for b in BLOCKS), module


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_example_runs(code: str, capsys: pytest.CaptureFixture[str]) -> None:
    for module, package in FRAMEWORKS.items():
        if re.search(rf"^from {module}[ .]", code, re.M) and not importlib.util.find_spec(module):
            pytest.skip(f"{package} is not installed")
    exec(compile(code, str(DOC), "exec"), {"__name__": "__docs__"})
    out = capsys.readouterr().out.strip()
    assert out  # every example prints what it shows
    numbers = [int(n) for n in re.findall(r"\d+", out)]
    assert numbers and all(n >= 0 for n in numbers)
