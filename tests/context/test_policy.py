"""When an optional edit is made: it pays back within the calls a session can be expected to
still make, and a cut over the trigger waits for the hard limit when it would not pay before it
(issue 21: never dearer than sending everything)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from test_continuity import openai_steps  # noqa: E402

from contextwarden import Warden, WardenConfig  # noqa: E402
from contextwarden._policy import (  # noqa: E402
    CacheRates,
    Ledger,
    PolicyConfig,
    cheaper_at_limit,
    edit_pays,
)

RATES = CacheRates(read=0.1, write=1.25, ttl_s=300, caching=True)


def test_an_optional_edit_pays_back_within_as_many_calls_as_made_so_far() -> None:
    # 8k tokens removed, 10k rewritten: 0.8k saved a call against 11.5k once, 14 calls to pay
    args = (8_000, 10_000, 0)
    assert not edit_pays(*args, 10, RATES, PolicyConfig())  # 10 calls to come: not made
    assert edit_pays(*args, 14, RATES, PolicyConfig())  # 14 to come
    assert edit_pays(*args, 10, RATES, PolicyConfig(horizon=20))  # a known horizon
    # never over more calls than the next compaction is away
    assert not edit_pays(*args, 40, RATES, PolicyConfig(), calls_left=10)


def test_a_bet_is_made_only_when_losing_it_costs_under_the_loss_cap() -> None:
    """If the session ends right after the edit, the rewrite it paid (less the reads it saved
    on that call) must be covered by what earlier edits saved plus 1% of the raw bill."""
    args = (8_000, 10_000, 0, 40, RATES, PolicyConfig())
    loss = 10_000 * RATES.rewrite - 8_000 * RATES.read  # 10.7k
    assert edit_pays(*args)  # no ledger: the payback test alone
    covered = loss / 0.01
    assert not edit_pays(*args, ledger=Ledger(raw=covered * 0.95, ours=covered * 0.95))
    assert edit_pays(*args, ledger=Ledger(raw=covered * 1.05, ours=covered * 1.05))
    assert edit_pays(*args, ledger=Ledger(raw=200_000, ours=200_000 - loss))  # banked


def test_what_else_an_edit_costs_counts() -> None:
    assert edit_pays(8_000, 10_000, 0, 40, RATES, PolicyConfig())
    assert not edit_pays(8_000, 10_000, 0, 40, RATES, PolicyConfig(), extra_cost=50_000)


WINDOW = 128_000
#: trigger 38.4k, target 25.6k, hard limit 127k: room for many calls (3.5k each) between them;
#: and a long session to come (horizon); no masks, so that what is weighed is the cut alone
#: (optional masks of the outputs the agent has acted on would keep the request far below)
SPREAD: dict[str, Any] = {
    "mask": {"enabled": False},
    "trigger_ratio": 0.3,
    "target_ratio": 0.2,
    "reserve_tokens": 1_000,
    "policy": {"horizon": 20, "loss_cap": 1.0},
}
#: the same with the default loss cap: a cut before the hard limit is a bet it rarely covers
CAREFUL: dict[str, Any] = {**SPREAD, "policy": {"horizon": 20}}


def run(model: str, config: dict[str, Any]) -> list[tuple[int, int, bool, int]]:
    """``(tokens before, tokens sent, compacted, messages the request shares with the previous
    one)`` per call of a growing agent history."""
    warden = Warden(WardenConfig.model_validate(config))
    out = []
    previous: list[dict[str, Any]] = []
    for history in openai_steps("Fix the failing test in tests/test_io.py", 40):
        request, result = warden.transform_openai(history, model=model, window=WINDOW)
        shared = 0
        while shared < min(len(request), len(previous)) and request[shared] == previous[shared]:
            shared += 1
        out.append(
            (result.tokens_before, result.tokens_after, result.compaction is not None, shared)
        )
        previous = request
    return out


def first_cut(calls: list[tuple[int, int, bool, int]]) -> int:
    return next(i for i, call in enumerate(calls) if call[2])


def budget(model: str) -> Any:
    return Warden(WardenConfig.model_validate(SPREAD)).budget_for(model, WINDOW)


def test_a_cut_over_the_trigger_is_made_when_it_pays_back_and_the_bet_is_covered() -> None:
    """Cutting before the hard limit is a bet (the whole history could still be sent): made at
    the trigger when it pays back and losing it is covered (here a loss cap of the whole bill),
    else it waits for the limit, where the cut is due anyway."""
    calls = run("gpt-4o", SPREAD)  # cache reads weighed at 0.1x the input price
    first = first_cut(calls)
    trigger = budget("gpt-4o").trigger
    assert calls[first - 1][0] <= trigger < calls[first][0]  # the first request over it
    careful = run("gpt-4o", CAREFUL)
    limit = budget("gpt-4o").limit
    assert not any(compacted for *_, compacted, _ in careful)
    assert all(sent == before for before, sent, *_ in careful if before <= limit)


def test_with_cheap_cache_reads_a_cut_waits_while_the_session_may_end_first() -> None:
    """At 2% cache reads, cutting rewrites more than reading the long request again saves
    over the few calls a session is counted on to make: the requests over the trigger go
    whole, each the previous one and the new messages, until the hard limit is near enough
    to be reached before the session is expected to end; then the cut is made."""
    limits = budget("deepseek-v4-flash")
    short = {**SPREAD, "policy": {"loss_cap": 1.0}}  # as many calls again as made so far
    calls = run("deepseek-v4-flash", short)
    first = first_cut(calls)
    waited = [i for i, c in enumerate(calls[:first]) if c[0] > limits.trigger]
    assert len(waited) >= 5
    for i in waited:
        before, sent, _, shared = calls[i]
        assert sent == before and shared == 2 + 2 * (i - 1)  # system, task, 2 a step
    # the first request over the hard limit is the one cut, and what is sent fits it
    assert calls[first - 1][0] <= limits.limit and calls[first][1] <= limits.limit


def test_a_session_expected_to_reach_the_hard_limit_is_cut_where_cuts_cost_least() -> None:
    """Counted on for 20 more calls, the session reaches the hard limit: the cut comes anyway.
    Cutting each time at the limit spaces the rewrites out and reads more between them. At 2%
    cache reads that costs less per call, and the cut waits for the limit; at 10% reads with
    the trigger at 60% of the window, cutting at the trigger costs less, and it is made there."""
    cheap = run("deepseek-v4-flash", SPREAD)
    cut = first_cut(cheap)
    limit = budget("deepseek-v4-flash").limit
    assert cheap[cut - 1][0] <= limit < cheap[cut][0]
    near = {**SPREAD, "trigger_ratio": 0.6}
    dear = run("gpt-4o", near)
    trigger = Warden(WardenConfig.model_validate(near)).budget_for("gpt-4o", WINDOW).trigger
    cut = first_cut(dear)
    assert dear[cut - 1][0] <= trigger < dear[cut][0]


def test_cutting_at_the_limit_costs_less_with_cheap_reads_or_cuts_close_together() -> None:
    cheap = CacheRates(read=0.02, write=1.25, ttl_s=300, caching=True)
    # target 25.6k, 3.5k tokens a call: cuts at a 38.4k trigger come every 4 calls
    assert cheaper_at_limit(25_600, 38_400, 127_000, 3_500, cheap)
    assert cheaper_at_limit(25_600, 38_400, 127_000, 3_500, RATES)
    # at a 76.8k trigger every 15 calls: at 10% reads, reading 50k more a call costs more
    assert cheaper_at_limit(25_600, 76_800, 127_000, 3_500, cheap)
    assert not cheaper_at_limit(25_600, 76_800, 127_000, 3_500, RATES)
    # a close call (cutting at the limit 3% cheaper) cuts early
    assert not cheaper_at_limit(6_400, 12_000, 14_500, 380, RATES)
    # no room between the trigger and the limit, or no growth: nothing to wait for
    assert not cheaper_at_limit(25_600, 76_800, 76_800, 3_500, cheap)
    assert not cheaper_at_limit(25_600, 76_800, 127_000, 0, cheap)


def test_the_summarizer_calls_a_compaction_would_pay_for_make_it_wait() -> None:
    """With an LLM summarizer a compaction also pays for its summary calls (each reads about
    what it replaces): where the embedded summarizer lets gpt-4o compact at the trigger, the
    LLM one waits (meanwhile masking pays), in a session that may end before the hard limit."""
    from contextwarden.testing import FakeSummarizer

    short = {**SPREAD, "policy": {"loss_cap": 1.0}}  # counted on for as many calls again as made
    limits = budget("gpt-4o")

    def first_compaction(summarizer: Any) -> int:
        warden = Warden(WardenConfig.model_validate(short), summarizer=summarizer)
        steps = openai_steps("Fix the failing test in tests/test_io.py", 40)
        for n, history in enumerate(steps):
            _, result = warden.transform_openai(history, model="gpt-4o", window=WINDOW)
            assert result.tokens_after <= limits.limit
            if result.compaction is not None:
                return n
        return len(steps)

    assert first_compaction(FakeSummarizer()) > first_compaction(None)


def steps(window: int, model: str, **options: Any) -> list[tuple[int, int, bool, Any]]:
    """``(tokens before, tokens sent, compacted, budget)`` per call of a growing history run
    with the default config at ``window``, masks aside (what is weighed is the cut)."""
    warden = Warden(WardenConfig.model_validate({"mask": {"enabled": False}}))
    out = []
    for history in openai_steps("Fix the failing test in tests/test_io.py", 40):
        _, result = warden.transform_openai(history, model=model, window=window, **options)
        out.append(
            (
                result.tokens_before,
                result.tokens_after,
                result.compaction is not None,
                result.budget,
            )
        )
    return out


def test_a_request_that_leaves_the_replies_their_room_is_not_cut_for_a_larger_reserve() -> None:
    """The default reserve at 32k is a quarter of the window (8,000 tokens), but this agent's
    replies (writing a file at most) take under 1,600: the reserve is fitted to them (a
    quarter more than the longest), and at 2% cache reads the requests go whole up to that limit, not the default one. A request
    that states its output limit (``max_tokens``) keeps that room instead."""
    default = Warden().budget_for("deepseek-v4-flash", 32_000)
    assert default is not None and default.limit == default.trigger == 24_000
    calls = steps(32_000, "deepseek-v4-flash")
    cut = next(i for i, c in enumerate(calls) if c[2])
    fitted = calls[cut][3]
    assert 1_024 <= fitted.reserve <= 2_000 and fitted.limit == 32_000 - fitted.reserve
    assert calls[cut - 1][0] > default.limit  # sent whole past the default limit
    assert all(sent == before for before, sent, _, _ in calls[:cut])
    assert calls[cut - 1][0] <= fitted.limit < calls[cut][0]  # cut where the room runs out
    # the request's own output limit: the reserve it asks for
    asked = steps(32_000, "deepseek-v4-flash", max_tokens=6_000)
    cut = next(i for i, c in enumerate(asked) if c[2])
    assert asked[cut][3].limit == 26_000
    assert asked[cut - 1][0] <= 26_000 < asked[cut][0]
    assert all(budget.limit == 26_000 for *_, budget in asked)
