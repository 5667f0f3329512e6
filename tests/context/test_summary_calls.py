"""One compaction asks the configured summarizer a bounded number of times: strategies that
would chain many summaries (incremental chunks, then the full summary) get the embedded one for
the rest, and every compaction still lands."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_continuity import openai_steps  # noqa: E402

from contextwarden import Warden, WardenConfig  # noqa: E402
from contextwarden.testing import FakeSummarizer  # noqa: E402


@pytest.mark.parametrize("limit", [0, 1, 2])
def test_a_compaction_asks_the_summarizer_at_most_max_summary_calls_times(limit: int) -> None:
    # chunks of two turns: the incremental strategy alone would chain one summary per chunk
    cfg = WardenConfig.model_validate(
        {
            "compaction": {
                "max_summary_calls": limit,
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
        assert len(llm.calls) - before <= limit
        compactions += result.compaction is not None
    assert compactions >= 2


def test_without_a_bound_the_same_compaction_chains_more_summaries() -> None:
    cfg = WardenConfig.model_validate(
        {
            "compaction": {
                "max_summary_calls": 100,
                "chunk_turns": 2,
                "strategy_order": {"code": ["incremental"], "unknown": ["incremental"]},
            }
        }
    )
    llm = FakeSummarizer()
    warden = Warden(cfg, summarizer=llm)
    most = 0
    for history in openai_steps("Fix the failing test in tests/test_io.py", 40):
        before = len(llm.calls)
        warden.transform_openai(history, model="gpt-4o", window=32_000)
        most = max(most, len(llm.calls) - before)
    assert most > 2  # what the bound prevents


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
