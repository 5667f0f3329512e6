"""The ``summarizer:`` config section (YAML, environment, code), build_summarizer, and the
CLI's ``--summarizer PROVIDER:MODEL`` shortcut."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_provider import FakeProvider

from contextwarden import ConfigError
from contextwarden._config import WardenConfig, load_config
from contextwarden.cli._common import config_for
from contextwarden.summarizers import (
    ExtractiveSummarizer,
    LLMSummarizer,
    SummarizerConfig,
    SummaryRequest,
    build_summarizer,
    parse_summarizer_spec,
)
from contextwarden.testing import ConversationBuilder


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        yield server


def test_default_is_the_extractive_summarizer_and_needs_no_key() -> None:
    config = WardenConfig()
    assert config.summarizer.provider == "extractive"
    assert isinstance(build_summarizer(config.summarizer, env={}), ExtractiveSummarizer)


def test_yaml_env_and_code_each_set_it_and_later_layers_win(tmp_path: Path) -> None:
    path = tmp_path / "cw.yaml"
    path.write_text(
        "summarizer:\n  provider: openai\n  model: small-model\n"
        "  base_url: http://127.0.0.1:9/v1\n  api_key_env: MY_KEY\n  timeout_s: 7.5\n"
    )
    from_file = load_config(path, env={}).summarizer
    assert (
        from_file.provider,
        from_file.model,
        from_file.base_url,
        from_file.api_key_env,
        from_file.timeout_s,
        from_file.max_retries,
    ) == ("openai", "small-model", "http://127.0.0.1:9/v1", "MY_KEY", 7.5, 2)
    env = {
        "CONTEXTWARDEN_SUMMARIZER__MODEL": "env-model",
        "CONTEXTWARDEN_SUMMARIZER__MAX_RETRIES": "0",
    }
    from_env = load_config(path, env=env).summarizer
    assert (from_env.model, from_env.max_retries, from_env.api_key_env) == (
        "env-model",
        0,
        "MY_KEY",
    )
    from_code = load_config(
        path, env=env, summarizer={"provider": "anthropic", "model": "code-model"}
    ).summarizer
    assert (from_code.provider, from_code.model, from_code.timeout_s) == (
        "anthropic",
        "code-model",
        7.5,
    )
    whole = load_config(path, env=env, summarizer=SummarizerConfig()).summarizer
    assert whole == SummarizerConfig()  # a whole section replaces what the file said


def test_env_alone_selects_an_llm() -> None:
    config = load_config(
        None,
        env={
            "CONTEXTWARDEN_SUMMARIZER__PROVIDER": "anthropic",
            "CONTEXTWARDEN_SUMMARIZER__MODEL": "claude-haiku-4-5",
        },
    )
    assert config.summarizer.key_env == "ANTHROPIC_API_KEY"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"CONTEXTWARDEN_SUMMARIZER__PROVIDER": "openai"},
            "env CONTEXTWARDEN_SUMMARIZER__PROVIDER: provider 'openai' needs a model",
        ),
        (
            {"CONTEXTWARDEN_SUMMARIZER__PROVIDER": "cohere"},
            "CONTEXTWARDEN_SUMMARIZER__PROVIDER: Input should be 'extractive', 'openai', "
            "'anthropic', 'responses' or 'gemini'",
        ),
        (
            {"CONTEXTWARDEN_SUMMARIZER__BASE_URL": "localhost:8080"},
            "CONTEXTWARDEN_SUMMARIZER__BASE_URL: must start with http:// or https://, got "
            "'localhost:8080'",
        ),
        (
            {"CONTEXTWARDEN_SUMMARIZER__TIMEOUT_S": "0"},
            "CONTEXTWARDEN_SUMMARIZER__TIMEOUT_S: Input should be greater than 0",
        ),
        (
            {"CONTEXTWARDEN_SUMMARIZER__MODLE": "x"},
            "CONTEXTWARDEN_SUMMARIZER__MODLE: unknown key; did you mean 'model'?",
        ),
    ],
)
def test_bad_settings_name_where_they_came_from(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, env=env)
    assert message in str(info.value)


def test_an_llm_without_its_key_is_refused_naming_the_variable() -> None:
    config = SummarizerConfig(provider="openai", model="m", api_key_env="TEAM_LLM_KEY")
    with pytest.raises(ConfigError, match=r"\$TEAM_LLM_KEY, which is not set"):
        build_summarizer(config, env={"OPENAI_API_KEY": "sk-other"})
    with pytest.raises(ConfigError, match=r"\$ANTHROPIC_API_KEY"):
        build_summarizer(SummarizerConfig(provider="anthropic", model="m"), env={})


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_built_summarizer_asks_the_configured_server_with_the_configured_key(
    fake: FakeProvider, provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAM_LLM_KEY", "sk-team-123")
    base = fake.openai_base_url if provider == "openai" else fake.anthropic_base_url
    config = SummarizerConfig(
        provider=provider,
        model="summary-model",  # type: ignore[arg-type]
        base_url=base,
        api_key_env="TEAM_LLM_KEY",
        timeout_s=9,
        max_retries=1,
    )
    summarizer = build_summarizer(config, max_chars=1500)
    assert isinstance(summarizer, LLMSummarizer)
    assert (summarizer.timeout, summarizer.max_retries, summarizer.max_chars) == (9, 1, 1500)
    task = "Make the parser accept trailing commas"
    b = ConversationBuilder().user(task).read("src/parser.py", "def parse(s):\n    ...\n" * 30)
    b.bash("pytest tests/test_parser.py", "1 failed: test_trailing_comma", returncode=1)
    summary = summarizer.summarize(SummaryRequest(b.messages, task=task))
    assert "Fake summary #1" in summary
    sent = fake.requests[0]
    assert sent.json["model"] == "summary-model"
    if provider == "openai":
        assert sent.path == "/v1/chat/completions"
        assert sent.headers["authorization"] == "Bearer sk-team-123"
    else:
        assert sent.path == "/v1/messages"
        assert sent.headers["x-api-key"] == "sk-team-123"


@pytest.mark.parametrize(
    ("spec", "settings"),
    [
        ("extractive", {"provider": "extractive"}),
        ("openai:gpt-4o-mini", {"provider": "openai", "model": "gpt-4o-mini"}),
        ("Anthropic:claude-haiku-4-5", {"provider": "anthropic", "model": "claude-haiku-4-5"}),
        # model names may hold colons themselves (Ollama tags)
        ("openai:qwen2.5:7b", {"provider": "openai", "model": "qwen2.5:7b"}),
    ],
)
def test_cli_spec(spec: str, settings: dict[str, str]) -> None:
    assert parse_summarizer_spec(spec) == settings


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("cohere:command", "unknown provider 'cohere'"),
        ("openai", "openai needs a model, as openai:MODEL"),
        ("openai:", "openai needs a model"),
        ("extractive:big", "extractive takes no model"),
    ],
)
def test_cli_spec_errors(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_summarizer_spec(spec)


def test_cli_option_overrides_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CONTEXTWARDEN_CONFIG", raising=False)
    path = tmp_path / "cw.yaml"
    path.write_text(
        "summarizer:\n  provider: openai\n  model: big\n  base_url: http://127.0.0.1:9/v1\n"
    )
    assert config_for(path).summarizer.model == "big"
    cfg = config_for(path, summarizer="openai:small")
    assert (cfg.summarizer.model, cfg.summarizer.base_url) == ("small", "http://127.0.0.1:9/v1")
    assert config_for(path, summarizer="extractive").summarizer.provider == "extractive"
