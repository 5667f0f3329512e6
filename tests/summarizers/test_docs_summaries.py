"""docs/summaries.md: its Python examples run as written, against a local fake provider in place
of the local model server the page shows (``http://127.0.0.1:8765``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fake_provider import FakeProvider

from contextwarden.summarizers._prompt import SYSTEM_PROMPT

DOC = Path(__file__).resolve().parents[2] / "docs" / "summaries.md"
TEXT = DOC.read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, re.DOTALL)
PLACEHOLDER = "http://127.0.0.1:8765"


def test_the_page_has_examples() -> None:
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_example_runs(
    code: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LOCAL_LLM_KEY", raising=False)
    with FakeProvider() as fake:
        exec(compile(code.replace(PLACEHOLDER, fake.url), str(DOC), "exec"), {"__name__": "doc"})
        out = capsys.readouterr().out
        assert out.strip()  # every example prints what it shows
        if PLACEHOLDER in code:
            assert fake.requests, "the example did not reach the server it names"
            key = "sk-the-clients-own" if "client_headers" in code else "not-needed"
            assert all(r.headers.get("authorization") == f"Bearer {key}" for r in fake.requests)
            assert all("cookie" not in r.headers for r in fake.requests)


def test_the_example_outputs_shown_are_the_real_ones(capsys: pytest.CaptureFixture[str]) -> None:
    block = next(b for b in BLOCKS if "in_play" in b)
    exec(compile(block, str(DOC), "exec"), {"__name__": "doc"})
    out = capsys.readouterr().out
    for shown in re.findall(r"^# (- .+|\(recall .+)$", block, re.M):
        assert shown in out


def test_the_page_describes_the_prompt_it_ships() -> None:
    for tag in ("<completed>", "<remaining>", "<current_state>", "<notes>"):
        assert tag in SYSTEM_PROMPT and tag in TEXT
    assert "functions, classes and tests" in SYSTEM_PROMPT
