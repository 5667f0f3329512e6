"""Model registry: lookup by name and by prefix, user overrides, clear errors."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwarden._exceptions import ConfigError, UnknownModelError
from contextwarden._models import (
    _BUILTIN,
    ModelInfo,
    context_window,
    known_models,
    model_info,
    register_model,
    unregister_model,
)
from contextwarden._tokens import ExactCounter, get_counter


@pytest.fixture
def registered() -> Iterator[list[str]]:
    """Names registered by a test; unregistered afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        unregister_model(name)


@pytest.mark.parametrize(
    ("query", "resolved"),
    [
        ("gpt-4o", "gpt-4o"),
        ("GPT-4o", "gpt-4o"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-2024-05-13", "gpt-4o-2024-05-13"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("openai/gpt-4o", "gpt-4o"),
        ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"),
        ("gpt-4-0613", "gpt-4"),
        ("gpt-4-turbo-2024-04-09", "gpt-4-turbo"),
        ("o3-2025-04-16", "o3"),
        ("o3-mini-2025-01-31", "o3-mini"),
        ("gpt-5-2025-08-07", "gpt-5"),
        ("gpt-5.1-codex-mini", "gpt-5.1-codex-mini"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-sonnet-4-0", "claude-sonnet-4"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-opus-4-20250514", "claude-opus-4"),
        ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
        ("claude-3-7-sonnet-latest", "claude-3-7-sonnet"),
        ("anthropic/claude-3.5-sonnet", "claude-3-5-sonnet"),
        ("openrouter/anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"),
        ("anthropic.claude-3-5-sonnet-20241022-v2:0", "claude-3-5-sonnet"),
        ("us.anthropic.claude-3-7-sonnet-20250219-v1:0", "claude-3-7-sonnet"),
        ("claude-3-5-sonnet-v2@20241022", "claude-3-5-sonnet"),
        ("models/gemini-2.5-pro", "gemini-2.5-pro"),
        ("gemini-2.5-flash-preview-05-20", "gemini-2.5-flash"),
        ("gemini-2.5-flash-lite-preview-06-17", "gemini-2.5-flash-lite"),
        ("gemini-1.5-pro-002", "gemini-1.5-pro"),
        ("deepseek/deepseek-chat", "deepseek-chat"),
        ("deepseek-reasoner", "deepseek-reasoner"),
        ("Qwen/Qwen2.5-72B-Instruct", "qwen2.5-72b-instruct"),
        ("qwen3-235b-a22b-instruct-2507", "qwen3-235b-a22b-instruct-2507"),
        ("qwen3-235b-a22b-fp8", "qwen3-235b-a22b"),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama-3.3-70b"),
        ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama-4-scout"),
        ("llama3.1:8b", "llama-3.1-8b"),
        ("mistral-large-2411", "mistral-large"),
        ("mistral-large-latest", "mistral-large"),
        ("codestral-2501", "codestral"),
    ],
)
def test_names_resolve_exactly_or_by_prefix(query: str, resolved: str) -> None:
    assert model_info(query).name == resolved
    assert context_window(query) == _BUILTIN[resolved].context_window


@pytest.mark.parametrize("query", ["foo", "gpt-4.5-preview", "gpt-4oo", "o", "claude", ""])
def test_unknown_models_get_a_clear_error(query: str) -> None:
    with pytest.raises(UnknownModelError) as info:
        context_window(query)
    assert str(info.value) == (
        f"unknown model {query!r}: pass window=... or register it with register_model(...)"
    )


def test_the_override_wins_and_is_validated() -> None:
    assert context_window("foo", 32_000) == 32_000
    assert context_window("gpt-4o", 50_000) == 50_000
    assert context_window(None, 1) == 1
    with pytest.raises(UnknownModelError, match="no model given"):
        context_window(None)
    for bad in (0, -5, 1.5, True, "8000"):
        with pytest.raises(ConfigError, match="window must be a positive int"):
            context_window("gpt-4o", bad)  # type: ignore[arg-type]


def test_known_windows_of_each_provider() -> None:
    assert context_window("gpt-4o") == 128_000
    assert context_window("gpt-4.1") == 1_047_576
    assert context_window("gpt-5") == 400_000
    assert context_window("claude-sonnet-4-5") == 200_000
    assert context_window("gemini-2.5-pro") == 1_048_576
    assert context_window("deepseek-chat") == 128_000
    assert context_window("qwen3-coder-480b-a35b-instruct") == 262_144
    assert context_window("llama-3.1-70b") == 131_072
    assert context_window("codestral") == 262_144
    providers = {info.provider for info in _BUILTIN.values()}
    assert providers >= {"openai", "anthropic", "google", "deepseek", "qwen", "meta", "mistral"}


def test_registry_is_consistent() -> None:
    assert known_models() == sorted(known_models())
    for name, info in _BUILTIN.items():
        assert name == info.name == name.lower()
        assert info.max_output_tokens <= info.context_window, name
        if info.provider in ("openai", "anthropic", "google", "deepseek", "mistral"):
            assert info.input_price_per_mtok is not None, name
        assert model_info(name) is info


@settings(max_examples=100, deadline=None)
@given(
    name=st.sampled_from(sorted(_BUILTIN)),
    sep=st.sampled_from(["-", ":", "@", "_"]),
    suffix=st.text(alphabet="0123456789abcdefv", min_size=1, max_size=12),
)
def test_any_suffixed_snapshot_resolves_to_that_model_or_a_more_specific_one(
    name: str, sep: str, suffix: str
) -> None:
    resolved = model_info(f"{name}{sep}{suffix}").name
    assert resolved.startswith(name)


def test_register_model_adds_and_overrides(registered: list[str]) -> None:
    mine = ModelInfo("acme-coder", "other", 65_536, 4_096, "cl100k_base", 1.0, 2.0)
    register_model(mine)
    registered.append("acme-coder")
    assert model_info("acme-coder") is mine
    assert model_info("acme/acme-coder-2025-01-01") is mine
    assert "acme-coder" in known_models()
    counter = get_counter("acme-coder")
    assert isinstance(counter, ExactCounter) and counter.encoding == "cl100k_base"

    bigger = ModelInfo("claude-sonnet-4-5", "anthropic", 1_000_000, 64_000, "o200k_base", 3, 15)
    register_model(bigger)
    registered.append("claude-sonnet-4-5")
    assert context_window("claude-sonnet-4-5-20250929") == 1_000_000


def test_unregister_restores_the_builtin() -> None:
    register_model(ModelInfo("gpt-4o", "openai", 64_000, 1_000))
    assert context_window("gpt-4o") == 64_000
    unregister_model("gpt-4o")
    assert context_window("gpt-4o") == 128_000
    with pytest.raises(UnknownModelError, match="was not registered"):
        unregister_model("gpt-4o")
    with pytest.raises(ConfigError, match="expects a ModelInfo"):
        register_model({"name": "x"})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"name": " "}, "name"),
        ({"context_window": 0}, "context_window"),
        ({"context_window": 10.5}, "context_window"),
        ({"max_output_tokens": -1}, "max_output_tokens"),
        ({"encoding": "p50k_base"}, "encoding"),
        ({"input_price_per_mtok": -1.0}, "input_price_per_mtok"),
        ({"output_price_per_mtok": "free"}, "output_price_per_mtok"),
    ],
)
def test_model_info_is_validated(changes: dict[str, object], field: str) -> None:
    fields: dict[str, object] = {
        "name": "m",
        "provider": "other",
        "context_window": 1000,
        "max_output_tokens": 100,
    }
    fields.update(changes)
    with pytest.raises(ConfigError, match=field):
        ModelInfo(**fields)  # type: ignore[arg-type]


def test_cost_uses_list_prices() -> None:
    info = model_info("claude-sonnet-4-5")
    assert info.cost(1_000_000, 1_000_000) == pytest.approx(3.0 + 15.0)
    assert info.cost(2_000) == pytest.approx(0.006)
    assert model_info("llama-3.3-70b").cost(1000, 1000) is None
    # an input price alone prices input tokens; output tokens then need the missing price
    input_only = dataclasses.replace(info, output_price_per_mtok=None)
    assert input_only.cost(2_000) == pytest.approx(0.006)
    assert input_only.cost(2_000, 10) is None
