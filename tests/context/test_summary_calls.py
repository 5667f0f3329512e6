"""One compaction asks the configured summarizer once: a strategy that would chain several
summaries (incremental chunks) gets the embedded one for the rest, a later compaction updates
the earlier summary from the new span instead of summarising everything again, and a large fixed
part (a client's system prompt and tools) does not make every call a compaction."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_continuity import openai_steps  # noqa: E402

from contextwarden import Warden, WardenConfig  # noqa: E402
from contextwarden.testing import FakeSummarizer  # noqa: E402


def test_a_compaction_asks_the_summarizer_once_even_for_chained_chunks() -> None:
    # chunks of two turns: the incremental strategy alone would chain one summary per chunk
    cfg = WardenConfig.model_validate(
        {
            "compaction": {
                "chunk_turns": 2,
                "strategy_order": {"code": ["incremental"], "unknown": ["incremental"]},
            }
        }
    )
    llm = FakeSummarizer()
    warden = Warden(cfg, summarizer=llm)
    compactions = 0
    for history in openai_steps("Fix the failing test in tests/test_io.py", 40):
        before = len(llm.calls)
        _, result = warden.transform_openai(history, model="gpt-4o", window=32_000)
        assert len(llm.calls) - before <= 1
        compactions += result.compaction is not None
    assert compactions >= 2


def client_steps(fixed_words: int, steps: int, growth_lines: int) -> list[list[dict[str, Any]]]:
    """A client with a large fixed part (a system prompt of ``fixed_words`` words standing for
    Claude Code's system prompt and tools) whose agent reads a new file every step and writes
    prose about it (which no mask removes)."""
    system = " ".join(f"rule{i % 89} applies" for i in range(fixed_words))
    history: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": "Port the parser in src/parse.py to the new API"},
    ]
    out = []
    for k in range(steps):
        out.append([dict(m) for m in history])
        notes = " ".join(f"step {k} finding {j} about parse_{k}_{j}" for j in range(growth_lines))
        history.append(
            {
                "role": "assistant",
                "content": notes,
                "tool_calls": [
                    {
                        "id": f"c{k}",
                        "type": "function",
                        "function": {
                            "name": "bash",
                            "arguments": json.dumps({"cmd": f"cat src/m{k}.py"}),
                        },
                    }
                ],
            }
        )
        history.append({"role": "tool", "tool_call_id": f"c{k}", "content": f"ok {k}"})
    return out


@pytest.mark.parametrize(("window", "most"), [(32_000, 7), (128_000, 4)])
def test_a_large_fixed_part_does_not_make_every_call_a_compaction(window: int, most: int) -> None:
    """About 19k tokens of system prompt and tools, about 5.7k tokens of growth a step, 40
    steps, an LLM summarizer: before the cost model, 38 of 40 calls compacted at 32k (the
    cool-down, a tenth of the window, was smaller than a step's growth), and at 128k each
    compaction asked two summaries and kept the second. Now at most ceil(40 / summary_spacing)
    compactions, one summary call each, each later summary updating the one before."""
    llm = FakeSummarizer()
    warden = Warden(summarizer=llm)
    compactions = 0
    warnings = 0
    for history in client_steps(5_400, 40, 400):
        _, result = warden.transform_openai(history, model="claude-sonnet-4-5", window=window)
        compactions += result.compaction is not None
        warnings += sum(1 for e in result.events if e.kind == "warning" and e.layer == "policy")
    assert 1 <= compactions <= most
    assert len(llm.calls) == compactions
    assert all(r.previous_summary for r in llm.calls[1:])
    assert warnings <= 1  # said once, when the room is too small for the summaries' spacing


def test_an_optional_mask_is_not_made_just_before_a_compaction_would_rewrite_everything() -> None:
    """Masking pays over the calls to come; with a compaction a few calls away (which rewrites
    the request anyway) rewriting the cached prefix to save a little costs more than it saves."""
    from contextwarden._policy import CacheRates, PolicyConfig, edit_pays

    rates = CacheRates(read=0.1, write=1.25, ttl_s=300, caching=True)
    cfg = PolicyConfig()
    # 12k tokens removed, a 26k suffix rewritten, 40 calls so far (20 to come)
    assert edit_pays(12_000, 26_000, 6_000, 40, rates, cfg)
    assert not edit_pays(12_000, 26_000, 6_000, 40, rates, cfg, calls_left=4)
    assert edit_pays(12_000, 26_000, 6_000, 40, rates, cfg, calls_left=40)
