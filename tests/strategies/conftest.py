"""Fixtures for the strategy tests: a context factory over the public test doubles."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from contextwarden._budget import Budget
from contextwarden._config import CompactionConfig
from contextwarden.strategies import StrategyContext
from contextwarden.testing import FakeSummarizer, FixedCounter

MakeCtx = Callable[..., StrategyContext]  # the make_ctx fixture (conftest.py)


@pytest.fixture
def make_ctx() -> MakeCtx:
    """``make_ctx(window=..., **config)``: a StrategyContext with a 4-chars-a-token counter,
    a fake summarizer and the config knobs given."""

    def make(window: int = 100_000, reserve: int = 0, **config: Any) -> StrategyContext:
        return StrategyContext(
            budget=Budget(window, reserve=reserve),
            counter=FixedCounter(per_message=4),
            summarizer=FakeSummarizer(),
            config=CompactionConfig.model_validate(config),
        )

    return make
