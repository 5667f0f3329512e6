"""SummaryBudget on its own: one deadline for every summary of a compaction, a cap on calls, the
breaker counted once per compaction; with a summarizer that knows nothing of meters."""

from __future__ import annotations

import pytest

from contextwarden import SummarizerError
from contextwarden.proxy.summaries import Breaker, SummaryBudget


class Plain:
    name = "plain"
    config_id = "plain:v1"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.calls = 0

    def summarize(self, request: object) -> str:
        self.calls += 1
        if self.fail:
            raise SummarizerError("down")
        return "<completed>x</completed>"

    async def asummarize(self, request: object) -> str:
        return self.summarize(request)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_summaries_of_one_compaction_share_one_deadline() -> None:
    clock, inner = Clock(), Plain()
    budget = SummaryBudget(inner, Breaker(), timeout_s=4, max_calls=10, clock=clock)
    assert budget.name == "plain" and budget.config_id == "plain:v1"  # cache keys unchanged
    budget.summarize(None)
    clock.now += 3.9
    budget.summarize(None)  # still within the first call's 4 s
    clock.now += 0.2
    with pytest.raises(SummarizerError, match="deadline"):
        budget.summarize(None)
    assert inner.calls == 2


def test_calls_are_capped_and_counted() -> None:
    inner = Plain()
    budget = SummaryBudget(inner, Breaker(), timeout_s=60, max_calls=2)
    budget.summarize(None)
    budget.summarize(None)
    with pytest.raises(SummarizerError, match="2 summary calls"):
        budget.summarize(None)
    assert inner.calls == 2 and budget.calls.calls == 2


def test_the_breaker_counts_compactions_not_calls() -> None:
    breaker = Breaker(failures=2, cooldown_s=60)

    def failed_compaction() -> None:
        budget = SummaryBudget(Plain(fail=True), breaker, timeout_s=60, max_calls=10)
        for _ in range(3):  # three failed summaries in one compaction count once
            with pytest.raises(SummarizerError):
                budget.summarize(None)
        budget.settle()

    failed_compaction()
    assert not breaker.is_open()
    failed_compaction()
    assert breaker.is_open()
    inner = Plain()
    budget = SummaryBudget(inner, breaker, timeout_s=60, max_calls=10)
    with pytest.raises(SummarizerError, match="breaker"):
        budget.summarize(None)
    assert inner.calls == 0 and budget.calls.breaker_open
    breaker.succeeded()
    assert budget.summarize(None)
