"""Strategies by name: the built-ins, and your own passed to the Warden that uses them (no
process-wide registry)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from contextwarden import ConfigError, Message, Warden, WardenConfig, load_config
from contextwarden._compaction import Compactor
from contextwarden.strategies import (
    BUILTIN_STRATEGIES,
    StrategyContext,
    StrategyOutcome,
    sliding_window,
)
from contextwarden.strategies.base import Layout, summary_request
from contextwarden.testing import ConversationBuilder


def test_builtins_are_named() -> None:
    assert set(BUILTIN_STRATEGIES) == {
        "sliding_window",
        "importance",
        "key_events",
        "incremental",
        "full_summary",
    }
    assert BUILTIN_STRATEGIES["sliding_window"] is sliding_window
    with pytest.raises(TypeError):
        BUILTIN_STRATEGIES["mine"] = sliding_window  # type: ignore[index]


def _history(steps: int = 40) -> list[Message]:
    b = ConversationBuilder().system("You are a coding agent.").user("Fix the parser bug")
    for i in range(steps):
        b.bash(f"cat src/file_{i}.py", "\n".join(f"line {j} of file {i} " * 4 for j in range(30)))
    return b.build()


def test_a_strategy_of_your_own_runs_through_the_warden_that_has_it() -> None:
    seen: list[int] = []

    def all_but_recent(messages: Sequence[Message], ctx: StrategyContext) -> StrategyOutcome | None:
        seen.append(len(messages))
        layout = Layout.of(messages)
        body = layout.body()
        elided = layout.indices(body[:-4])
        if not elided:
            return None
        return StrategyOutcome("all_but_recent", elided, (summary_request(messages, elided, ctx),))

    config = WardenConfig.model_validate(
        {
            "target_ratio": 0.5,
            "compaction": {"strategy_order": {}, "fallback_order": ["all_but_recent"]},
        }
    )
    warden = Warden(config, strategies={"all_but_recent": all_but_recent})
    result = warden.transform(_history(), model="gpt-4o", window=12_000)
    assert seen and result.compaction is not None
    assert result.compaction.strategy.startswith("all_but_recent")
    # another warden does not know it: the name is a config error there
    with pytest.raises(ConfigError, match="unknown strategy 'all_but_recent'"):
        Warden(config)


def test_a_warden_built_from_a_file_configures_the_compactor_it_is_given(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "contextwarden.yaml"
    path.write_text("compaction:\n  summary_max_chars: 900\n")
    warden = Warden(load_config(path), compactor=Compactor())
    assert isinstance(warden.compactor, Compactor)
    assert warden.compactor.config.summary_max_chars == 900
    # a compactor built with its own config keeps it
    own = Compactor(WardenConfig.model_validate({}).compaction)
    assert Warden(load_config(path), compactor=own).compactor is own


def test_the_summarizer_section_builds_the_wardens_summarizer(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from contextwarden.summarizers.llm import LLMSummarizer

    config = WardenConfig.model_validate(
        {
            "summarizer": {
                "provider": "openai",
                "model": "gpt-4o-mini",
                "base_url": "http://127.0.0.1:9/v1",
                "api_key_env": "CW_TEST_SUMMARY_KEY",
            }
        }
    )
    monkeypatch.delenv("CW_TEST_SUMMARY_KEY", raising=False)
    with pytest.raises(ConfigError, match="CW_TEST_SUMMARY_KEY"):
        Warden(config)
    monkeypatch.setenv("CW_TEST_SUMMARY_KEY", "sk-test")
    warden = Warden(config)
    assert isinstance(warden.compactor, Compactor)
    assert isinstance(warden.compactor.summarizer, LLMSummarizer)
