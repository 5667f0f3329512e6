"""At the model's own window, where nothing must be cut, masks still pay: a mask of the long
outputs the agent has already acted on rewrites little more than their stubs (the newer
messages are written anyway), so on real recorded sessions replayed at claude-sonnet-4-5's
200k window and Anthropic's cache prices (reads 0.1x, writes 1.25x) the bill falls, no session
costs more than 1% over sending everything, and the file reads the agent may still edit by
quoting them stay whole."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from shared_data import SHARED_DATA  # noqa: E402

from contextwarden import load_transcript, replay  # noqa: E402

MODEL = "claude-sonnet-4-5"
SESSIONS = sorted((SHARED_DATA / "mini-swe-agent").glob("*.json"))


@pytest.mark.skipif(not SESSIONS, reason=f"no mini-swe-agent recordings under {SHARED_DATA}")
@pytest.mark.parametrize("path", SESSIONS, ids=[p.name.split("__", 1)[-1] for p in SESSIONS])
def test_masks_at_the_model_window_pay_on_real_sessions(path: Path) -> None:
    messages = load_transcript(path).messages
    report = replay(messages, model=MODEL, pricing="anthropic")
    totals = report.totals
    assert report.window == 200_000 and totals.compactions == 0
    without, with_ = totals.payable_billed_cost_without, totals.billed_cost_with_on_payable
    assert without is not None and with_ is not None
    # sessions of 78 to 131 calls: each saves (a mask kept off the six newest results rewrote
    # them all, a bet too large for 1% of the bill before about call 95: none was made)
    assert with_ < 0.97 * without, f"{path.name}: {with_ / without:.3f} of sending everything"
    assert totals.invalid_requests == 0
