"""The judges' measures (``../shared/measures/measures.py``, imported by path and used as it
is) on real recordings with ``Warden()`` defaults: every request valid, every figure computed,
and floors that a real regression would cross (not today's figures)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from shared_data import SHARED_DATA

#: beside the shared data, else beside the repository (``../shared/measures``)
MEASURES = Path(
    os.environ.get("CONTEXTWARDEN_MEASURES")
    or next(
        (
            p
            for p in (
                SHARED_DATA.parent.parent / "measures" / "measures.py",
                Path(__file__).resolve().parents[3] / "shared" / "measures" / "measures.py",
            )
            if p.exists()
        ),
        SHARED_DATA.parent.parent / "measures" / "measures.py",
    )
)


@pytest.fixture(scope="module")
def measures() -> ModuleType:
    if not MEASURES.exists():
        pytest.skip(f"the judges' measures are not at {MEASURES}")
    pytest.importorskip("bpe_openai")
    spec = importlib.util.spec_from_file_location("judged_measures", MEASURES)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _recording(pattern: str) -> list[dict[str, Any]]:
    from bench._recordings import load_recording

    files = sorted(p for p in SHARED_DATA.rglob("*") if p.is_file() and pattern in str(p))
    if not files:
        pytest.skip(f"no recording matching {pattern!r} under {SHARED_DATA}")
    return list(load_recording(files[0]).messages)


def _run(m: ModuleType, msgs: list[dict[str, Any]], window: int) -> dict[str, Any]:
    reqs = m.requests(msgs, m._contextwarden(window, "gpt-4o")())
    raw = [list(msgs[:k]) for k in m.calls(msgs)]
    enc = m._encoder()
    return {
        "reqs": reqs,
        "raw": m.billed(raw, enc),
        "sent": m.billed(reqs, enc),
        "names": m.name_recall(msgs, reqs),
        "edits": m.edit_recall(msgs, reqs),
    }


@pytest.mark.parametrize("window", [16_000, 32_000])
def test_mini_swe_agent_recording(measures: ModuleType, window: int) -> None:
    msgs = _recording("mini-swe-agent/deepseek_chat_test_1-100__django__django-15695")
    got = _run(measures, msgs, window)
    reqs = got["reqs"]
    assert len(reqs) == len(measures.calls(msgs)) > 50
    assert all(measures.orphans(r) == 0 for r in reqs)
    (raw_tok, raw_cost), (tok, cost) = got["raw"], got["sent"]
    assert 0 < tok < raw_tok and 0 < cost < raw_cost
    held, wanted = got["names"]
    assert wanted > 20 and 0 <= held <= wanted
    # a floor under what the defaults hold (91% at 16k, 95% at 32k): the names index of the
    # summaries and the masks' names lines losing ground is a regression
    assert held / wanted >= 0.75
    # the raw history holds every name, and sends every token
    raw_reqs = [list(msgs[:k]) for k in measures.calls(msgs)]
    assert measures.name_recall(msgs, raw_reqs) == (wanted, wanted)


def test_pi_recording_edit_recall(measures: ModuleType) -> None:
    # its first 300 messages (of 892): 123 edits to recall at 32k, and the raw bill, which the
    # measures compute by dumping every message of every request, takes 6 s instead of 30 s
    msgs = _recording("pi/large-session")[:300]
    got = _run(measures, msgs, 32_000)
    assert all(measures.orphans(r) == 0 for r in got["reqs"])
    held, wanted = got["edits"]
    assert wanted > 50 and 0 <= held <= wanted
    assert held / wanted >= 0.5  # 58% today
    names_held, names_wanted = got["names"]
    assert names_held / names_wanted >= 0.8  # 96% today
    (raw_tok, raw_cost), (tok, cost) = got["raw"], got["sent"]
    assert tok < raw_tok and cost < raw_cost
