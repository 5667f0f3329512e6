"""Budget: thresholds, validation, and construction from the registry."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from contextwarden._budget import DEFAULT_RESERVE, Budget, reply_tokens
from contextwarden._exceptions import ConfigError, UnknownModelError


def test_defaults_follow_the_seeds() -> None:
    b = Budget(200_000)
    assert (b.reserve, b.trigger_ratio, b.target_ratio) == (8_192, 0.75, 0.5)
    assert b.limit == 200_000 - 8_192  # seed 004: budget = window - reserve
    assert b.trigger == 150_000  # seed 000: window * 0.75
    assert b.target == 100_000


def test_trigger_is_capped_at_the_hard_limit() -> None:
    b = Budget(16_000, reserve=8_192)  # window * 0.75 = 12,000 > limit 7,808
    assert b.limit == 7_808
    assert b.trigger == 7_808
    assert b.target == 5_205  # the target keeps its share of the trigger: 7,808 * 0.5 / 0.75


def test_used_remaining_over() -> None:
    b = Budget(100_000, reserve=10_000, trigger_ratio=0.8, target_ratio=0.4)
    assert b.used(25_000) == 0.25
    assert b.used(150_000) == 1.5
    assert b.remaining(30_000) == 60_000
    assert b.remaining(95_000) == -5_000
    assert not b.over(80_000) and b.over(80_001)
    assert not b.over_limit(90_000) and b.over_limit(90_001)
    assert b.excess(30_000) == 0
    assert b.excess(85_000) == 45_000
    with pytest.raises(ValueError, match="tokens must be an int >= 0"):
        b.used(-1)


@given(
    window=st.integers(min_value=1, max_value=10_000_000),
    reserve=st.integers(min_value=0, max_value=10_000_000),
    trigger=st.floats(min_value=0.01, max_value=1.0),
    target=st.floats(min_value=0.01, max_value=1.0),
    tokens=st.integers(min_value=0, max_value=20_000_000),
)
def test_thresholds_are_ordered(
    window: int, reserve: int, trigger: float, target: float, tokens: int
) -> None:
    assume(reserve < window and target <= trigger)
    b = Budget(window, reserve, trigger, target)
    assert 0 <= b.target <= b.trigger <= b.limit <= b.window
    assert b.over_limit(tokens) <= b.over(tokens)  # over the limit implies over the trigger
    assert b.remaining(tokens) + tokens == b.limit
    assert b.excess(tokens) == max(0, tokens - b.target)
    assert math.isclose(b.used(tokens), tokens / window)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"window": 0}, "window must be an int >= 1"),
        ({"window": 1.5}, "window must be an int"),
        ({"window": True}, "window must be an int"),
        ({"window": 8_000}, r"reserve \(8,192\) must be smaller than window \(8,000\)"),
        ({"window": 10_000, "reserve": -1}, "reserve must be an int >= 0"),
        ({"window": 10_000, "reserve": 10_000}, "must be smaller than window"),
        ({"window": 100_000, "trigger_ratio": 0}, r"trigger_ratio must be a number in \(0, 1\]"),
        ({"window": 100_000, "trigger_ratio": 1.2}, "trigger_ratio"),
        ({"window": 100_000, "target_ratio": -0.1}, "target_ratio"),
        ({"window": 100_000, "target_ratio": 0.8}, "must not exceed trigger_ratio"),
    ],
)
def test_bad_budgets_are_refused_with_the_field(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Budget(**kwargs)  # type: ignore[arg-type]


def test_budget_is_immutable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Budget(100_000).window = 5  # type: ignore[misc]


def test_for_model_uses_the_registry() -> None:
    b = Budget.for_model("claude-sonnet-4-5-20250929")
    assert (b.window, b.reserve) == (200_000, DEFAULT_RESERVE)
    assert Budget.for_model("claude-3-haiku").reserve == 4_096  # its max output is 4,096
    assert Budget.for_model("gpt-4").reserve == 2_048  # a quarter of an 8,192 window
    assert Budget.for_model("gpt-4o", 50_000).window == 50_000
    assert Budget.for_model("unknown-model", 64_000).reserve == DEFAULT_RESERVE
    assert Budget.for_model(None, 20_000).reserve == 5_000
    custom = Budget.for_model("gpt-4o", reserve=1_000, trigger_ratio=0.9, target_ratio=0.6)
    assert (custom.reserve, custom.trigger_ratio, custom.target_ratio) == (1_000, 0.9, 0.6)
    with pytest.raises(UnknownModelError, match="give its context window"):
        Budget.for_model("unknown-model")


# -- the reply's reserve ------------------------------------------------------------------------


def test_a_default_reserve_is_fitted_to_the_longest_reply() -> None:
    b = Budget.for_model("gpt-4o", 32_000)  # default reserve: a quarter of the window
    assert b.reserve == 8_000
    assert b.for_reply(0) is b  # no reply yet: the default
    assert b.for_reply(300).reserve == 1_024  # at least MIN_REPLY_ROOM
    assert b.for_reply(2_000).reserve == 2_500  # a quarter more than the longest
    assert b.for_reply(7_000).reserve == 8_000  # never more than the default
    fitted = b.for_reply(2_000)
    assert (fitted.limit, fitted.trigger) == (29_500, 24_000)  # the trigger stays where it was


def test_an_explicit_reserve_is_kept_and_raised_only_by_the_requests_limit() -> None:
    b = Budget.for_model("gpt-4o", 32_000, reserve=3_000)
    assert b.for_reply(200) is b
    assert b.for_reply(200, max_tokens=2_000) is b  # the larger of the two
    assert b.for_reply(200, max_tokens=5_000).reserve == 5_000
    assert Budget(32_000, reserve=3_000).for_reply(200) == Budget(32_000, reserve=3_000)


def test_the_requests_output_limit_is_the_reserve_up_to_half_the_window() -> None:
    b = Budget.for_model("claude-sonnet-4-5", 200_000)
    assert b.for_reply(500, max_tokens=32_000).reserve == 32_000  # Claude Code's default
    assert b.for_reply(500, max_tokens=64).reserve == 64  # the provider checks no more
    assert Budget.for_model("gpt-4o", 32_000).for_reply(0, max_tokens=64_000).reserve == 16_000


@given(
    window=st.integers(4_000, 2_000_000),
    longest=st.integers(0, 100_000),
    more=st.integers(0, 100_000),
    max_tokens=st.none() | st.integers(1, 3_000_000),
)
def test_a_fitted_reserve_is_bounded_and_grows_with_the_replies(
    window: int, longest: int, more: int, max_tokens: int | None
) -> None:
    b = Budget.for_model("gpt-4o", window)
    fitted = b.for_reply(longest, max_tokens)
    assert 0 < fitted.reserve < window and fitted.window == window
    assert fitted.trigger <= b.trigger and fitted.target <= fitted.trigger <= fitted.limit
    if max_tokens is None:
        assert fitted.reserve <= b.reserve
        assert fitted.reserve >= min(b.reserve, 1_024, max(longest, 1))
        assert fitted.reserve >= min(b.reserve, longest)  # the longest reply still fits
        if longest > 0:  # none yet keeps the default: nothing to fit it to
            assert b.for_reply(longest + more).reserve >= fitted.reserve
    else:
        assert fitted.reserve == min(max_tokens, window // 2)


def test_a_reply_takes_its_recorded_output_when_the_history_keeps_less() -> None:
    assert reply_tokens(120, None) == 120
    assert reply_tokens(120, {"input_tokens": 9_000, "output_tokens": 3_000}) == 3_000
    assert reply_tokens(120, {"prompt_tokens": 9_000, "completion_tokens": 40}) == 120
    assert reply_tokens(120, {"input": 5, "output": 100, "thoughts": 900}) == 1_000  # Gemini
    assert reply_tokens(120, {"output_tokens": True}) == 120  # not a count
