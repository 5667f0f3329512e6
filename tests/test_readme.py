"""The Python examples of the README and of every page in docs/ run as written (offline), so
they cannot drift; the README's quick start shows a real reduction."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Pages whose examples have a runner of their own, with the fake LLM server or frameworks they
#: need: tests/summarizers/test_docs_summaries.py, tests/integrations/test_docs.py.
OWN_RUNNER = {"summaries.md", "integrations.md"}
PAGES = [
    ROOT / "README.md",
    *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name not in OWN_RUNNER),
]
BLOCKS = [
    (page, i, code)
    for page in PAGES
    for i, code in enumerate(
        re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)
    )
]


def _config_file_for(page: Path, code: str) -> None:
    """A block that reads ./contextwarden.yaml without writing it reads the page's own YAML
    example, shown above it: save that example where the block looks."""
    if "contextwarden.yaml" in code and "write_text" not in code:
        yaml_blocks = re.findall(r"```yaml\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)
        assert yaml_blocks, f"{page.name}: the example reads contextwarden.yaml; show one"
        Path("contextwarden.yaml").write_text(yaml_blocks[0], encoding="utf-8")


README_BLOCKS = [code for page, _, code in BLOCKS if page.name == "README.md"]


def test_readme_has_examples() -> None:
    assert len(README_BLOCKS) >= 3


@pytest.mark.parametrize(
    "page,code", [(p, c) for p, _, c in BLOCKS], ids=[f"{p.name}-{i}" for p, i, _ in BLOCKS]
)
def test_doc_block_runs(
    page: Path,
    code: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)  # blocks that write files write them here
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    _config_file_for(page, code)
    exec(compile(code, str(page), "exec"), {"__name__": "__doc__"})
    if page.name != "configuration.md":  # generated from the config classes: shows a set-up
        assert capsys.readouterr().out.strip()  # every example prints what it shows


def test_the_quick_start_shows_a_reduction_and_its_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(README_BLOCKS[0], "README.md", "exec"), {"__name__": "__doc__"})
    lines = capsys.readouterr().out.strip().splitlines()
    before, after = re.findall(r"([\d,]+) -> ([\d,]+) tokens", lines[0])[0]
    assert int(after.replace(",", "")) < int(before.replace(",", "")) / 2
    events = [line.strip() for line in lines[1:]]
    assert events and all(line.startswith("contextwarden ") for line in events)
    # The README shows the same first line it prints.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert lines[0] in readme
