"""The repository's own reference recall on what the warden sends (not the judges' name recall,
which also reads the action's text and reasoning: ``tests/measures`` runs that one): with the
defaults, one warden per conversation and ``transform_openai`` call by call, the request sent
before each action holds the paths and code names in that action's tool-call arguments that the
agent first met more than 10 messages earlier (not in the task), while sending a fraction of
the raw tokens. Floors: at least 80% held while sending at most 40% of the raw tokens at a 16k
window; at least 90% with at most 62% at 32k (10 mini-swe-agent recordings; the cost model
lets a request wait for the hard limit rather than bet on the session going on, so it sends
more tokens for the same bill or less: 60.4% measured, 55% before).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from reference_recall import context_recall
from summarizer_loaders import load_messages

from contextwarden import Warden


@pytest.mark.parametrize(("window", "held", "sent"), [(16_000, 0.80, 0.40), (32_000, 0.90, 0.62)])
def test_long_range_references_reach_the_model_cheaply(
    shared_data: Path, window: int, held: float, sent: float
) -> None:
    files = sorted((shared_data / "mini-swe-agent").glob("*.traj.json"))
    if not files:
        pytest.skip("no mini-swe-agent trajectories in ../shared/data")
    got = total = tokens_sent = tokens_raw = 0
    for path in files:
        result = context_recall(load_messages(path), Warden(), window=window)
        got, total = got + result.held, total + result.total
        tokens_sent, tokens_raw = tokens_sent + result.sent, tokens_raw + result.raw
    assert total > 700  # references checked: enough that the ratios below mean something
    assert got / total >= held, f"{got}/{total} held"
    assert tokens_sent / tokens_raw <= sent, f"{tokens_sent}/{tokens_raw} tokens sent"
