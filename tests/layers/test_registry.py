"""The layer registry: built-ins registered the same way as your own."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from contextwarden._messages import Message
from contextwarden.layers import (
    BUILTIN_LAYERS,
    LayerContext,
    LayerResult,
    get_layer,
    layer_names,
    mask_tool_results,
    register_layer,
    sliding_window,
    unregister_layer,
)


def noop(messages: Sequence[Message], ctx: LayerContext) -> LayerResult:
    return LayerResult(tuple(messages))


def test_builtins_in_order_with_their_stage() -> None:
    assert tuple(layer_names(builtin=True)) == BUILTIN_LAYERS
    assert layer_names("guard", builtin=True) == ["window"]
    assert get_layer("mask").function is mask_tool_results
    assert get_layer("window").function is sliding_window


def test_register_and_unregister_your_own() -> None:
    spec = register_layer("test-noop", noop)
    try:
        assert spec.stage == "lossless" and not spec.builtin
        assert layer_names(builtin=False) == ["test-noop"]
        with pytest.raises(ValueError, match="already registered"):
            register_layer("test-noop", noop)
        register_layer("test-noop", noop, stage="guard", replace=True)
        assert layer_names("guard", builtin=False) == ["test-noop"]
    finally:
        unregister_layer("test-noop")
    assert layer_names(builtin=False) == []


def test_builtins_cannot_be_replaced_or_removed_and_errors_are_clear() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_layer("mask", noop, replace=True)
    with pytest.raises(ValueError, match="cannot be unregistered"):
        unregister_layer("truncate")
    with pytest.raises(ValueError, match="stage"):
        register_layer("x", noop, stage="sometimes")  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="known: truncate"):
        get_layer("nope")
