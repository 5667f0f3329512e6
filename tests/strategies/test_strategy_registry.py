"""One registry: built-ins and user strategies register the same way."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from contextwarden import Message
from contextwarden.strategies import (
    StrategyContext,
    StrategyOutcome,
    get_strategy,
    register_strategy,
    sliding_window,
    strategy_names,
    unregister_strategy,
)


@pytest.fixture
def cleanup() -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        if name in strategy_names():
            unregister_strategy(name)


def test_builtins_are_registered() -> None:
    assert {"sliding_window", "importance", "key_events", "incremental", "full_summary"} <= set(
        strategy_names()
    )
    assert get_strategy("sliding_window") is sliding_window


def test_decorator_and_call_forms(cleanup: list[str]) -> None:
    @register_strategy("test_noop")
    def noop(messages: Sequence[Message], ctx: StrategyContext) -> StrategyOutcome | None:
        return None

    cleanup.append("test_noop")
    assert get_strategy("test_noop") is noop
    register_strategy("test_noop2", noop)
    cleanup.append("test_noop2")
    assert get_strategy("test_noop2") is noop


def test_taken_names_need_replace(cleanup: list[str]) -> None:
    def a(messages: Sequence[Message], ctx: StrategyContext) -> None:
        return None

    def b(messages: Sequence[Message], ctx: StrategyContext) -> None:
        return None

    register_strategy("test_taken", a)
    cleanup.append("test_taken")
    register_strategy("test_taken", a)  # the same function again is fine
    with pytest.raises(ValueError, match="already registered"):
        register_strategy("test_taken", b)
    register_strategy("test_taken", b, replace=True)
    assert get_strategy("test_taken") is b


def test_bad_names_and_unknown_lookups() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        register_strategy("", sliding_window)
    with pytest.raises(TypeError, match="callable"):
        register_strategy("test_x", 3)  # type: ignore[call-overload]
    with pytest.raises(KeyError, match="no strategy named 'nope'.*sliding_window"):
        get_strategy("nope")
    with pytest.raises(KeyError, match="nope"):
        unregister_strategy("nope")
