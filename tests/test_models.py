"""Model registry: lookup by name and by prefix, user overrides, clear errors."""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextwarden._config import WardenConfig, load_config
from contextwarden._exceptions import ConfigError, UnknownModelError
from contextwarden._model_overrides import ModelOverride, apply_model_overrides, registry_for
from contextwarden._models import (
    _BUILTIN,
    PRICES_AS_OF,
    ModelInfo,
    ModelRegistry,
    assume_model,
    context_window,
    known_models,
    local_server,
    model_info,
)
from contextwarden._tokens import ExactCounter, get_counter
from contextwarden._warden import Warden


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


@pytest.mark.parametrize("query", ["foo", "gpt-4oo", "o", "claude", ""])
def test_unknown_models_get_a_clear_error(query: str) -> None:
    with pytest.raises(UnknownModelError) as info:
        context_window(query)
    assert str(info.value) == (
        f"unknown model {query!r}: not in the registry nor its price snapshot; give its "
        "context window: pass window=... (--window on the command line, or a models: entry in "
        "the config)"
    )
    assert "register_model" not in str(info.value)  # no Python advice: the CLI shows it too


@pytest.mark.parametrize(
    ("query", "window", "price"),
    [
        # newer than the hand-written table: found in the maintained source's catalog
        ("gpt-5.4", 1_050_000, 2.5),
        ("gpt-5.5", 1_000_000, 5.0),
        ("claude-opus-4-8", 1_000_000, 5.0),
        ("glm-5.2", 1_000_000, 1.4),
        ("gpt-4.5-preview", None, None),  # a real model: listed, not mistaken for gpt-4
    ],
)
def test_the_price_snapshot_catalog_knows_newer_models(
    query: str, window: int | None, price: float | None
) -> None:
    info = model_info(query)
    assert info.name != "gpt-4" and "genai-prices" in info.source
    if window is not None:
        assert info.context_window == window and info.input_price_per_mtok == price


@pytest.mark.parametrize(
    ("query", "family"),
    [
        ("gpt-5.9", "gpt-5"),
        ("gpt-5.9-mini", "gpt-5-mini"),
        ("claude-opus-4-9", "claude-opus-4-8"),  # the newest of the claude-opus-4 family
        ("claude-opus-4-9-20270101", "claude-opus-4-8"),
        ("glm-5.9", "glm-5"),
    ],
)
def test_unknown_models_are_assumed_to_be_like_their_family(query: str, family: str) -> None:
    with pytest.raises(UnknownModelError):
        model_info(query)
    info, note = assume_model(query)
    known = model_info(family)
    assert info.context_window == known.context_window
    assert info.input_price_per_mtok == known.input_price_per_mtok
    assert note is not None and repr(query) in note and family in note


def test_a_recorded_window_replaces_the_registry_figure() -> None:
    info, note = assume_model("gpt-5.4", 258_400)  # what Codex records
    assert info.context_window == 258_400 and note is None
    info, note = assume_model("no-such-model-x", 64_000)
    assert info.context_window == 64_000 and info.input_price_per_mtok is None
    assert note is not None and "no price" in note and "assumed" not in note.split(",")[-1]


def test_a_recording_without_a_model_is_replayable() -> None:
    info, note = assume_model(None)
    assert info.context_window == 128_000 and info.encoding == "o200k_base"
    assert note == (
        "the recording names no model: counted with o200k_base, window 128,000 assumed, "
        "no price: no bill"
    )


def test_importing_the_package_does_not_build_the_registry() -> None:
    code = "import sys, contextwarden; print('contextwarden._models' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False"]


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
    # GPT-5's 400k keep 128k for the output: the API takes at most 272k of input
    assert context_window("gpt-5") == context_window("gpt-5-codex") == 272_000
    assert context_window("gpt-5.2") == 272_000  # from the catalog's 400k, the same rule
    assert context_window("gpt-5-pro") == 128_000  # 272k of its 400k for the output
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
        # the window is the most input a request may hold; it holds the output too, but for
        # gpt-5-pro, whose 272k of output come on top of its 128k of input (400k in all)
        if name != "gpt-5-pro":
            assert info.max_output_tokens <= info.context_window, name
        if info.provider in ("openai", "anthropic", "google", "deepseek", "mistral"):
            assert info.input_price_per_mtok is not None, name
            assert info.output_price_per_mtok is not None or name.startswith("text-embedding")
        assert model_info(name) is info


@given(
    name=st.sampled_from(sorted(_BUILTIN)),
    sep=st.sampled_from(["-", ":", "@", "_"]),
    suffix=st.text(alphabet="0123456789abcdefv", min_size=1, max_size=12),
)
def test_any_suffixed_snapshot_resolves_to_that_model_or_a_more_specific_one(
    name: str, sep: str, suffix: str
) -> None:
    query = f"{name}{sep}{suffix}"
    if re.fullmatch(r"claude-(opus|sonnet|haiku)-\d+", name) and re.fullmatch(
        r"-[1-9]\d?", sep + suffix
    ):
        # A newer minor version of a Claude family, not a snapshot of its first model: it is
        # listed itself, or taken for the newest model of that family.
        try:
            assert model_info(query).name.startswith(name)
        except UnknownModelError:
            info, note = assume_model(query)
            assert note is not None
            like = re.search(r"assumed to be like (\S+) ", note)
            assert like is not None and like.group(1).startswith(name)
            assert info.input_price_per_mtok == model_info(like.group(1)).input_price_per_mtok
        return
    resolved = model_info(query).name
    assert resolved.startswith(name)


def test_a_registry_adds_and_overrides_for_itself_only() -> None:
    models = ModelRegistry()
    mine = ModelInfo("acme-coder", "other", 65_536, 4_096, "cl100k_base", 1.0, 2.0)
    assert models.register(mine) is mine
    assert models.info("acme-coder") is mine
    assert models.find("acme/acme-coder-2025-01-01") is mine
    assert model_info("acme-coder", models) is mine  # a registry is an overrides table
    assert "acme-coder" in models.known() and "acme-coder" not in known_models()
    assert models.find("gpt-4o") is _BUILTIN["gpt-4o"]
    with pytest.raises(UnknownModelError):
        model_info("acme-coder")  # nobody else sees it
    counter = get_counter("acme-coder", models=models)
    assert isinstance(counter, ExactCounter) and counter.encoding == "cl100k_base"

    bigger = ModelInfo("claude-sonnet-4-5", "anthropic", 1_000_000, 64_000, "o200k_base", 3, 15)
    models.register(bigger)
    assert models.context_window("claude-sonnet-4-5-20250929") == 1_000_000
    assert context_window("claude-sonnet-4-5-20250929") == 200_000
    assert list(models) == ["acme-coder", "claude-sonnet-4-5"] and len(models) == 2
    assert models["ACME-Coder"] is mine  # keyed by normalised name


def test_unregister_restores_the_builtin() -> None:
    models = ModelRegistry([ModelInfo("gpt-4o", "openai", 64_000, 1_000)])
    assert models.context_window("gpt-4o") == 64_000
    models.unregister("gpt-4o")
    assert models.context_window("gpt-4o") == 128_000
    with pytest.raises(UnknownModelError, match="was not registered"):
        models.unregister("gpt-4o")
    with pytest.raises(ConfigError, match="expects a ModelInfo"):
        models.register({"name": "x"})  # type: ignore[arg-type]


def test_a_warden_holds_its_registry_with_its_config_on_top() -> None:
    models = ModelRegistry([ModelInfo("acme-coder", "other", 65_536, 4_096, "cl100k_base")])
    config = WardenConfig.model_validate(
        {
            "models": {
                "acme-coder": {"max_output_tokens": 1_000},
                "gpt-4o": {"context_window": 9_000},
            }
        }
    )
    warden = Warden(config, models=models)
    assert warden.models.info("acme-coder").max_output_tokens == 1_000  # built on the registry's
    assert warden.models.info("acme-coder").context_window == 65_536
    assert warden.budget_for("gpt-4o") is not None and warden.budget_for("gpt-4o").window == 9_000
    counter = warden.counter_for("acme-coder")
    assert isinstance(counter, ExactCounter) and counter.encoding == "cl100k_base"
    # the registry given is left as it was; another warden does not see the config's models
    assert models.info("acme-coder").max_output_tokens == 4_096 and "gpt-4o" not in models
    assert Warden(models=models).models.context_window("gpt-4o") == 128_000
    with pytest.raises(ConfigError, match=r"models\.acme-coder\.context_window: required"):
        registry_for(config)  # without the registry, acme-coder is a model nobody knows


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


# -- cache prices -------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]
PRICED = sorted(name for name, info in _BUILTIN.items() if info.input_price_per_mtok is not None)
ANTHROPIC = sorted(name for name, info in _BUILTIN.items() if info.provider == "anthropic")
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@pytest.mark.parametrize("name", sorted(_BUILTIN))
def test_every_model_says_where_its_figures_come_from(name: str) -> None:
    info = _BUILTIN[name]
    assert info.source.strip(), name
    assert ISO_DATE.match(info.as_of), info.as_of
    assert dt.date.fromisoformat(info.as_of) <= dt.date.fromisoformat(PRICES_AS_OF)
    if info.input_price_per_mtok is None:
        assert info.caching == "none" and "open weights" in info.source
    else:
        assert "genai-prices" in info.source or "api-docs.deepseek.com" in info.source


@pytest.mark.parametrize("name", PRICED)
def test_every_priced_model_has_cache_prices(name: str) -> None:
    info = _BUILTIN[name]
    price = info.input_price_per_mtok
    assert price is not None
    read, write = info.cache_read_price_per_mtok, info.cache_write_price_per_mtok
    assert read is not None and write is not None, name
    if info.caching == "none":
        # nothing is cached: every prompt token costs the input price, and there is no TTL
        assert read == write == price
        assert info.cache_ttl_s is None and info.cache_write_1h_price_per_mtok is None
    else:
        assert 0 < read < price, name  # a hit is always cheaper than a miss
        assert write >= price, name  # a write is never cheaper than a miss
        assert info.cache_ttl_s is not None and info.cache_ttl_s >= 300
        assert info.cache_read_ratio == pytest.approx(read / price)
        assert info.cache_write_ratio == pytest.approx(write / price)


@pytest.mark.parametrize("name", ANTHROPIC)
def test_anthropic_ratios_are_the_ones_its_pricing_page_states(name: str) -> None:
    info = _BUILTIN[name]
    assert info.caching == "breakpoints" and info.cache_ttl_s == 300
    if name == "claude-3-haiku":
        # the one exception Anthropic lists: $0.25 input, $0.30 write, $0.03 hit, $0.50 1h write
        ratios = (0.12, 1.2, 2.0)
    else:
        ratios = (0.1, 1.25, 2.0)  # hits 0.1x, 5-minute writes 1.25x, 1-hour writes 2x
    price = info.input_price_per_mtok
    assert price is not None and info.cache_write_1h_price_per_mtok is not None
    assert info.cache_read_ratio == pytest.approx(ratios[0])
    assert info.cache_write_ratio == pytest.approx(ratios[1])
    assert info.cache_write_1h_price_per_mtok / price == pytest.approx(ratios[2])


@pytest.mark.parametrize(
    ("name", "read_ratio", "caching", "ttl_s", "minimum"),
    [
        ("claude-sonnet-4-5", 0.1, "breakpoints", 300, 1024),
        ("claude-opus-4-1", 0.1, "breakpoints", 300, 1024),
        ("claude-opus-4-5", 0.1, "breakpoints", 300, 4096),
        ("claude-haiku-4-5", 0.1, "breakpoints", 300, 4096),
        ("claude-3-5-haiku", 0.1, "breakpoints", 300, 2048),
        ("gpt-4o", 0.5, "automatic", 300, 1024),
        ("gpt-4o-mini", 0.5, "automatic", 300, 1024),
        ("gpt-4.1", 0.25, "automatic", 300, 1024),
        ("gpt-5", 0.1, "automatic", 300, 1024),
        ("o4-mini", 0.25, "automatic", 300, 1024),
        ("deepseek-chat", 0.1, "automatic", 3600, 64),
        ("deepseek-reasoner", 0.1, "automatic", 3600, 64),
        ("gemini-2.5-pro", 0.1, "automatic", 300, 2048),
        ("gemini-2.5-flash", 0.1, "automatic", 300, 2048),
        ("gemini-3-pro-preview", 0.1, "automatic", 300, 4096),
        ("mistral-medium", 0.1, "automatic", 300, 0),
    ],
)
def test_cache_figures_match_the_provider_pages(
    name: str, read_ratio: float, caching: str, ttl_s: float, minimum: int
) -> None:
    info = model_info(name)
    assert info.cache_read_ratio == pytest.approx(read_ratio)
    assert info.caching == caching
    assert info.cache_ttl_s == ttl_s
    assert info.min_cacheable_tokens == minimum
    if caching == "automatic":
        assert info.cache_write_ratio == 1.0  # writes are not billed extra
        assert info.cache_write_1h_price_per_mtok is None


@pytest.mark.parametrize(
    "name",
    ["gpt-4-turbo", "gpt-3.5-turbo", "gpt-5-pro", "o3-pro", "gemini-2.0-flash", "mistral-large"],
)
def test_models_without_prompt_caching(name: str) -> None:
    info = model_info(name)
    assert info.caching == "none" and info.cache_read_ratio == info.cache_write_ratio == 1.0
    assert info.cached_cost(1_000, 2_000, 3_000) == pytest.approx(info.cost(6_000))


def test_deepseek_chat_carries_the_v32_prices_not_the_sources_stale_ones() -> None:
    info = model_info("deepseek/deepseek-chat")
    assert (info.input_price_per_mtok, info.cache_read_price_per_mtok) == (0.28, 0.028)
    assert info.output_price_per_mtok == 0.42
    assert "api-docs.deepseek.com" in info.source and info.as_of == "2025-09-29"
    assert model_info("deepseek-reasoner").cache_read_price_per_mtok == 0.028


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("anthropic/claude-haiku-4.5", "claude-haiku-4-5"),
        ("us.anthropic.claude-opus-4-5-20251101-v1:0", "claude-opus-4-5"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("openai/gpt-5-2025-08-07", "gpt-5"),
        ("deepseek-v3", "deepseek-chat"),
        ("deepseek-v4-flash-1017", "deepseek-v4-flash"),
    ],
)
def test_dated_and_routed_names_get_the_cache_prices_of_their_model(query: str, name: str) -> None:
    info = model_info(query)
    assert info is _BUILTIN[name]
    assert info.cache_read_price_per_mtok is not None


def test_cached_cost_arithmetic() -> None:
    sonnet = model_info("claude-sonnet-4-5")  # 3 in, 0.30 read, 3.75 write, 15 out
    assert sonnet.cached_cost(1_000_000, 0) == pytest.approx(0.30)
    assert sonnet.cached_cost(0, 1_000_000) == pytest.approx(3.75)
    assert sonnet.cached_cost(1_000_000, 1_000_000, 1_000_000, 1_000_000) == pytest.approx(
        0.30 + 3.75 + 3.0 + 15.0
    )
    # an agent call: 90k tokens read from the cache, 8k written after them, 500 out
    assert sonnet.cached_cost(90_000, 8_000, output_tokens=500) == pytest.approx(
        (90_000 * 0.30 + 8_000 * 3.75 + 500 * 15.0) / 1e6
    )
    gpt = model_info("gpt-4o")  # 2.50 in, 1.25 read, writes at the input price
    assert gpt.cached_cost(100_000, 20_000) == pytest.approx((100_000 * 1.25 + 20_000 * 2.5) / 1e6)
    assert model_info("deepseek-chat").cached_cost(1_000_000, 0) == pytest.approx(0.028)
    # unknown prices give None, but only when a count needs them
    llama = model_info("llama-3.3-70b")
    assert llama.cached_cost(10, 10) is None and llama.cached_cost(0, 0) == 0.0
    embedding = model_info("text-embedding-3-small")
    assert embedding.cached_cost(0, 0, 100) is not None
    assert embedding.cached_cost(0, 0, 100, output_tokens=1) is None
    with pytest.raises(ValueError, match="written_tokens must be an int >= 0, got -1"):
        sonnet.cached_cost(0, -1)
    with pytest.raises(ValueError, match="cached_tokens must be an int >= 0, got 1.5"):
        sonnet.cached_cost(1.5, 0)  # type: ignore[arg-type]


@given(
    name=st.sampled_from(PRICED),
    cached=st.integers(0, 2_000_000),
    written=st.integers(0, 2_000_000),
    uncached=st.integers(0, 2_000_000),
    output=st.integers(0, 100_000),
)
def test_cached_cost_invariants(
    name: str, cached: int, written: int, uncached: int, output: int
) -> None:
    info = _BUILTIN[name]
    if output and info.output_price_per_mtok is None:
        assert info.cached_cost(cached, written, uncached, output) is None
        return
    billed = info.cached_cost(cached, written, uncached, output)
    listed = info.cost(cached + written + uncached, output)
    assert billed is not None and listed is not None
    # nothing cached: the list price exactly
    assert info.cached_cost(0, 0, uncached, output) == pytest.approx(info.cost(uncached, output))
    # a read never costs more than a miss, a write never less
    assert info.cached_cost(cached, 0, uncached, output) <= listed + 1e-12  # type: ignore[operator]
    assert (
        info.cached_cost(0, written, uncached, output)
        >= info.cost(  # type: ignore[operator]
            uncached, output
        )
        + info.cost(written)
        - 1e-12
    )  # type: ignore[operator]
    # linear in each count
    assert billed == pytest.approx(
        info.cached_cost(cached, 0)
        + info.cached_cost(0, written)  # type: ignore[operator]
        + info.cost(uncached, output),
        rel=1e-9,
        abs=1e-12,
    )


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"cache_read_price_per_mtok": -0.1}, "cache_read_price_per_mtok"),
        ({"cache_write_price_per_mtok": "x"}, "cache_write_price_per_mtok"),
        ({"cache_write_1h_price_per_mtok": True}, "cache_write_1h_price_per_mtok"),
        ({"cache_ttl_s": 0}, "cache_ttl_s"),
        ({"min_cacheable_tokens": -1}, "min_cacheable_tokens"),
        ({"min_cacheable_tokens": 1.5}, "min_cacheable_tokens"),
        ({"caching": "sometimes"}, "caching"),
        ({"provider": "acme"}, "provider"),
        ({"source": None}, "source"),
    ],
)
def test_cache_fields_are_validated(changes: dict[str, object], field: str) -> None:
    base = {"name": "m", "provider": "other", "context_window": 1000, "max_output_tokens": 100}
    with pytest.raises(ConfigError, match=rf"ModelInfo\('m'\)\.{field} must be"):
        ModelInfo(**{**base, **changes})  # type: ignore[arg-type]


# -- the shipped snapshot -----------------------------------------------------------------------


def test_snapshot_matches_the_pinned_genai_prices() -> None:
    if importlib.util.find_spec("genai_prices") is None:
        pytest.skip("genai-prices is not installed (pip install -e '.[dev]')")
    script = ROOT / "scripts" / "refresh_prices.py"
    out = subprocess.run(
        [sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_snapshot_is_package_data() -> None:
    # hatch ships every file under src/contextwarden; the registry reads it as a resource
    snapshot = ROOT / "src" / "contextwarden" / "data" / "prices.json"
    assert snapshot.is_file()
    assert PRICES_AS_OF in snapshot.read_text(encoding="utf-8")
    tracked = subprocess.run(
        ["git", "check-ignore", "-q", str(snapshot)], cwd=ROOT, capture_output=True
    )
    if tracked.returncode == 128:
        pytest.skip("not a git checkout")
    assert tracked.returncode == 1  # not ignored, so hatch includes it in the wheel


# -- overrides from configuration ---------------------------------------------------------------


def test_overrides_from_yaml_change_a_builtin_and_add_a_model(tmp_path: Path) -> None:
    path = tmp_path / "contextwarden.yaml"
    path.write_text(
        "models:\n"
        "  claude-sonnet-4-5:\n"
        "    context_window: 1000000\n"
        "    cache_read_price_per_mtok: 0.25\n"
        "  acme/acme-coder:\n"
        "    context_window: 65536\n"
        "    input_price_per_mtok: 1.0\n"
        "    cache_read_price_per_mtok: 0.2\n"
        "    caching: automatic\n"
        "    cache_ttl_s: 600\n",
        encoding="utf-8",
    )
    table = apply_model_overrides(load_config(path, env={}))
    assert set(table) == {"claude-sonnet-4-5", "acme-coder"}

    sonnet = model_info("claude-sonnet-4-5-20250929", overrides=table)
    assert sonnet.context_window == 1_000_000 and sonnet.cache_read_price_per_mtok == 0.25
    builtin = _BUILTIN["claude-sonnet-4-5"]
    assert sonnet.cache_write_price_per_mtok == builtin.cache_write_price_per_mtok  # kept
    assert sonnet.input_price_per_mtok == builtin.input_price_per_mtok
    assert (
        sonnet.source
        == "config models.claude-sonnet-4-5: cache_read_price_per_mtok, context_window"
    )
    assert context_window("claude-sonnet-4-5", overrides=table) == 1_000_000

    acme = model_info("acme-coder-2026-01-01", overrides=table)
    # no output limit given: the window, so the output reserve is not capped to nothing
    assert (acme.provider, acme.context_window, acme.max_output_tokens) == ("other", 65_536, 65_536)
    assert acme.cached_cost(1_000_000, 0, 1_000_000) == pytest.approx(1.2)
    assert acme.caching == "automatic" and acme.cache_ttl_s == 600

    # nothing leaks into the process-wide registry
    assert context_window("claude-sonnet-4-5") == 200_000
    with pytest.raises(UnknownModelError):
        model_info("acme-coder")


_OVERRIDABLE = {
    "context_window": st.integers(1, 10_000_000),
    "max_output_tokens": st.integers(0, 1_000_000),
    "input_price_per_mtok": st.floats(0, 1_000, allow_nan=False),
    "cache_read_price_per_mtok": st.floats(0, 1_000, allow_nan=False),
    "cache_write_price_per_mtok": st.floats(0, 1_000, allow_nan=False),
    "cache_ttl_s": st.floats(1, 86_400, allow_nan=False),
    "min_cacheable_tokens": st.integers(0, 100_000),
    "caching": st.sampled_from(["automatic", "breakpoints", "none"]),
}


@given(
    name=st.sampled_from(sorted(_BUILTIN)),
    changes=st.fixed_dictionaries({}, optional=_OVERRIDABLE),
)
def test_an_override_changes_exactly_the_fields_it_sets(
    name: str, changes: dict[str, object]
) -> None:
    before = dataclasses.asdict(_BUILTIN[name])
    info = apply_model_overrides({name: changes})[name]
    after = dataclasses.asdict(info)
    for field, value in after.items():
        if field in changes:
            assert value == changes[field]
        elif field != "source":
            assert value == before[field], field
    assert (info.source == before["source"]) == (not changes)
    assert dataclasses.asdict(_BUILTIN[name]) == before  # the registry is untouched


def test_overrides_accept_the_mapping_and_objects() -> None:
    table = apply_model_overrides({"gpt-4o": ModelOverride(cache_ttl_s=3600)})
    assert table["gpt-4o"].cache_ttl_s == 3600
    assert table["gpt-4o"].cache_read_price_per_mtok == _BUILTIN["gpt-4o"].cache_read_price_per_mtok
    assert apply_model_overrides(WardenConfig()) == {}
    unchanged = apply_model_overrides({"gpt-4o": {}})["gpt-4o"]
    assert unchanged == _BUILTIN["gpt-4o"]


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        (
            "models:\n  gpt-4o:\n    cache_read_price_per_mtok: -1\n",
            "models.gpt-4o.cache_read_price_per_mtok: Input should be greater than or equal to 0",
        ),
        ("models:\n  gpt-4o:\n    cache_ttl: 60\n", "models.gpt-4o.cache_ttl: unknown key"),
        (
            "models:\n  gpt-4o:\n    caching: sometimes\n",
            "models.gpt-4o.caching: Input should be 'automatic', 'breakpoints' or 'none'",
        ),
        ("models: [gpt-4o]\n", "models: Input should be a valid dictionary"),
    ],
)
def test_bad_overrides_in_yaml_name_the_field(tmp_path: Path, yaml_text: str, message: str) -> None:
    path = tmp_path / "contextwarden.yaml"
    path.write_text(yaml_text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert f"{path}: {message}" in str(info.value)


@pytest.mark.parametrize(
    ("models", "message"),
    [
        (
            {"acme-coder": {"input_price_per_mtok": 1.0}},
            "models.acme-coder.context_window: required",
        ),
        (
            {"gpt-4o": {"context_window": 0}},
            "models.gpt-4o.context_window: Input should be greater",
        ),
        ({"gpt-4o": {"max_output": 5}}, "models.gpt-4o.max_output: Extra inputs are not permitted"),
        ({" ": {}}, "models: a model name must be a non-empty string, got ' '"),
        ({"gpt-4o": 5}, "models.gpt-4o: Input should be a valid dictionary"),
    ],
)
def test_bad_overrides_raise_config_error_naming_the_field(
    models: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        apply_model_overrides(models)  # type: ignore[arg-type]


def test_overrides_need_a_mapping() -> None:
    with pytest.raises(ConfigError, match="models: expected a mapping of model name to settings"):
        apply_model_overrides(42)  # type: ignore[arg-type]


# -- docs/prices.md -----------------------------------------------------------------------------

PRICES_DOC = ROOT / "docs" / "prices.md"
DOC_BLOCKS = re.findall(r"```python\n(.*?)```", PRICES_DOC.read_text(encoding="utf-8"), re.DOTALL)


def test_prices_doc_has_examples() -> None:
    assert len(DOC_BLOCKS) >= 2


@pytest.mark.parametrize("code", DOC_BLOCKS, ids=[f"block{i}" for i in range(len(DOC_BLOCKS))])
def test_prices_doc_block_runs(
    code: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(PRICES_DOC), "exec"), {"__name__": "__prices_doc__"})
    assert capsys.readouterr().out.strip()


def test_prices_doc_table_is_current() -> None:
    spec = importlib.util.spec_from_file_location(
        "refresh_prices", ROOT / "scripts" / "refresh_prices.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    text = PRICES_DOC.read_text(encoding="utf-8")
    assert script.doc_table_in(text) == script.render_table(), (
        "docs/prices.md's table is stale: run python scripts/refresh_prices.py --docs"
    )
    for name in PRICED:
        assert f"| `{name}` |" in text, name


@pytest.mark.parametrize(
    ("query", "meant"),
    [
        ("claude_4_5_opus", "claude-opus-4-5"),  # Cline's spelling
        ("claude-4-5-sonnet", "claude-sonnet-4-5"),
        ("gpt4o", "gpt-4o"),
        ("gpt4o-mini", "gpt-4o-mini"),
        ("GPT_4o", "gpt-4o"),
    ],
)
def test_another_spelling_of_a_known_model_is_that_model(query: str, meant: str) -> None:
    info, note = assume_model(query)
    known = model_info(meant)
    assert (info.context_window, info.input_price_per_mtok) == (
        known.context_window,
        known.input_price_per_mtok,
    )
    assert note == f"model {query!r} read as {meant}"


@pytest.mark.parametrize("query", ["gpt4", "gpt-4-1106-preview", "gpt-4-0125-preview"])
def test_gpt_4_turbo_previews_are_gpt_4_turbo_not_gpt_4(query: str) -> None:
    """SWE-agent's ``gpt4`` is gpt-4-1106-preview: 128k tokens at GPT-4 Turbo's price, not the
    8k gpt-4 a prefix match would give."""
    assert model_info(query).name == "gpt-4-turbo"
    assert model_info(query).context_window == 128_000


@pytest.mark.parametrize(
    ("query", "server"),
    [
        ("lm_studio/qwen3.6-35b-a3b", "lm_studio"),
        ("ollama/llama3.1:8b", "ollama"),
        ("ollama_chat/qwen3:32b", "ollama_chat"),
        ("hosted_vllm/meta-llama/Llama-3.3-70B-Instruct", "hosted_vllm"),
        ("llama.cpp/model.gguf", "llama.cpp"),
    ],
)
def test_a_local_model_is_billed_at_zero_and_said_to_be_local(query: str, server: str) -> None:
    assert local_server(query) == server
    info, note = assume_model(query)
    assert info.input_price_per_mtok == 0 and info.caching == "none"
    assert note is not None and f"runs locally ({server}): billed at $0" in note
    assert info.cached_cost(1000, 1000, 1000) == 0


@given(st.sampled_from(["openai", "anthropic", "openrouter", "deepseek", "models"]))
def test_a_provider_is_not_a_local_server(prefix: str) -> None:
    assert local_server(f"{prefix}/gpt-4o") is None
    assert assume_model(f"{prefix}/gpt-4o") == (model_info("gpt-4o"), None)
