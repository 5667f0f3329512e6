"""load_config: YAML (our keys and the seeds' blocks), CONTEXTWARDEN_* variables, code; errors
with their paths; the generated reference kept in step with the classes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwarden import Warden
from contextwarden._config import WardenConfig, config_problems, load_config
from contextwarden._config_docs import config_reference
from contextwarden._exceptions import ConfigError
from contextwarden.layers.mask import MaskConfig

DOCS = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


@pytest.fixture(autouse=True)
def _elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run in an empty folder so a developer's ./contextwarden.yaml cannot leak in."""
    monkeypatch.chdir(tmp_path)


def write(tmp_path: Path, text: str, name: str = "cw.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def problems_of(exc: pytest.ExceptionInfo[ConfigError]) -> list[str]:
    return str(exc.value).splitlines()


def test_no_file_no_env_gives_the_defaults() -> None:
    assert load_config(env={}) == WardenConfig()


def test_the_defaults_a_warden_takes_unvalidated_pass_validation_unchanged() -> None:
    defaults = Warden().config
    assert WardenConfig.model_validate(defaults.model_dump()) == defaults == load_config(env={})


def test_own_keys_load(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "model: gpt-4o\nreserve_tokens: 4096\nmask:\n  keep_recent: 2\n  exclude_tools: [read]\n"
        "compaction:\n  enabled: false\n",
    )
    config = load_config(path, env={})
    assert config.model == "gpt-4o"
    assert config.reserve_tokens == 4096
    assert config.mask.keep_recent == 2
    assert config.mask.exclude_tools == ("read",)
    assert config.mask.min_chars == MaskConfig().min_chars  # untouched keys keep defaults
    assert config.compaction.enabled is False


def test_seed_001_block(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "context_compaction:\n  enabled: true\n  max_context_tokens: 80000\n  trigger_ratio: 0.8\n"
        "  keep_recent_rounds: 3\n  require_confirmation: true\n  summary_max_length: 1000\n",
    )
    config = load_config(path, env={})
    assert config.compaction.sliding_window_size == 6  # 3 rounds of assistant + tool result
    assert config.context_window == 80_000
    assert config.trigger_ratio == 0.8
    assert config.compaction.require_confirmation is True
    assert config.compaction.summary_max_chars == 1000


@pytest.mark.parametrize("nest", [False, True])
def test_seed_004_block(tmp_path: Path, nest: bool) -> None:
    block = (
        "contextGuard:\n  enabled: false\n  maxToolResultChars: 30000\n  reserveTokens: 4096\n"
        "  truncateHeadChars: 1000\n  truncateTailChars: 500\n  contextWindowOverride: 64000\n"
    )
    if nest:  # the seed's own layout: under ``agent:`` in the host's config.yaml
        block = "agent:\n" + "".join("  " + line + "\n" for line in block.splitlines())
    config = load_config(write(tmp_path, block), env={})
    assert (config.truncate.enabled, config.window.enabled) == (False, False)
    assert config.truncate.max_chars == 30_000
    assert (config.truncate.head_chars, config.truncate.tail_chars) == (1000, 500)
    assert config.reserve_tokens == 4096
    assert config.context_window == 64_000


def test_seed_key_agreeing_with_own_key_is_fine_disagreeing_is_reported(tmp_path: Path) -> None:
    same = write(tmp_path, "context_window: 32000\ncontextGuard:\n  contextWindowOverride: 32000\n")
    assert load_config(same, env={}).context_window == 32_000
    other = write(tmp_path, "context_window: 32000\ncontextGuard:\n  contextWindowOverride: 9\n")
    with pytest.raises(ConfigError) as exc:
        load_config(other, env={})
    [line] = problems_of(exc)
    assert "contextGuard.contextWindowOverride" in line and "context_window" in line


def test_every_problem_is_reported_with_its_path(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "reserve_tokens: -5\nmask:\n  keep_recnt: 3\n  head_lines: many\n"
        "context_compaction:\n  summary_max_length: 10\n  colour: red\n  keep_recent_rounds: x\n"
        "contextGuard:\n  maxToolResultChars: 0\ncompaction:\n  strategy_order: {code: [7]}\n",
    )
    with pytest.raises(ConfigError) as exc:
        load_config(path, env={})
    lines = problems_of(exc)
    assert len(lines) == 8, lines
    assert all(line.startswith(f"{path}: ") for line in lines)
    by_path = {line.split(": ")[1]: line for line in lines}
    assert set(by_path) == {
        "reserve_tokens",
        "mask.keep_recnt",
        "mask.head_lines",
        "context_compaction.summary_max_length",
        "context_compaction.colour",
        "context_compaction.keep_recent_rounds",
        "contextGuard.maxToolResultChars",
        "compaction.strategy_order.code[0]",
    }
    assert "did you mean 'keep_recent'" in by_path["mask.keep_recnt"]
    assert "-5" in by_path["reserve_tokens"]
    assert "'many'" in by_path["mask.head_lines"]


def test_env_overrides_file_and_code_overrides_env(tmp_path: Path) -> None:
    path = write(tmp_path, "reserve_tokens: 1000\nmask: {keep_recent: 1, min_chars: 10}\n")
    env = {"CONTEXTWARDEN_RESERVE_TOKENS": "2000", "CONTEXTWARDEN_MASK__KEEP_RECENT": "2"}
    config = load_config(path, env=env)
    assert (config.reserve_tokens, config.mask.keep_recent, config.mask.min_chars) == (2000, 2, 10)
    config = load_config(path, env=env, reserve_tokens=3000, mask={"keep_recent": 3})
    assert (config.reserve_tokens, config.mask.keep_recent, config.mask.min_chars) == (3000, 3, 10)
    config = load_config(path, env=env, mask__min_chars=99)
    assert (config.mask.keep_recent, config.mask.min_chars) == (2, 99)


def test_a_config_object_replaces_its_section(tmp_path: Path) -> None:
    path = write(tmp_path, "mask: {keep_recent: 1, min_chars: 10}\n")
    config = load_config(path, env={}, mask=MaskConfig(head_lines=7))
    assert config.mask == MaskConfig(head_lines=7)


def test_env_value_forms() -> None:
    env = {
        "CONTEXTWARDEN_MASK__EXCLUDE_TOOLS": "read, grep",
        "CONTEXTWARDEN_CONTEXT_WINDOW": "",
        "CONTEXTWARDEN_COMPACTION__ENABLED": "false",
        "CONTEXTWARDEN_COMPACTION__FALLBACK_ORDER": '["importance", "incremental"]',
        "CONTEXTWARDEN_DATA_DIR": "/somewhere",  # another part's variable: not config
        "CONTEXTWARDEN_CONFIG": "",
    }
    config = load_config(env=env)
    assert config.mask.exclude_tools == ("read", "grep")
    assert config.context_window is None
    assert config.compaction.enabled is False
    assert config.compaction.fallback_order == ["importance", "incremental"]


def test_env_problems_name_the_variable() -> None:
    env = {"CONTEXTWARDEN_TRIGGER_RATIO": "2", "CONTEXTWARDEN_MASK__NOPE": "1"}
    with pytest.raises(ConfigError) as exc:
        load_config(env=env)
    lines = problems_of(exc)
    assert len(lines) == 2
    assert any(line.startswith("env CONTEXTWARDEN_TRIGGER_RATIO: ") for line in lines)
    assert any(line.startswith("env CONTEXTWARDEN_MASK__NOPE: unknown key") for line in lines)


def test_code_problems_name_the_argument() -> None:
    with pytest.raises(ConfigError, match=r"^argument thinking\.keep_recent: "):
        load_config(env={}, thinking={"keep_recent": -1})


def test_default_file_lookup(tmp_path: Path) -> None:
    write(tmp_path, "reserve_tokens: 111\n", name="contextwarden.yaml")
    assert load_config(env={}).reserve_tokens == 111
    other = write(tmp_path, "reserve_tokens: 222\n", name="other.yaml")
    assert load_config(env={"CONTEXTWARDEN_CONFIG": str(other)}).reserve_tokens == 222


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("mask: [unclosed\n", "line "),
        ("- a\n- b\n", "expected a mapping"),
        ("context_compaction: 5\n", "context_compaction: expected a mapping"),
        ("agent:\n  other: 1\n", "agent.other: unknown key"),
    ],
)
def test_malformed_files(tmp_path: Path, text: str, needle: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as exc:
        load_config(path, env={})
    assert str(path) in str(exc.value) and needle in str(exc.value)
    assert len(problems_of(exc)) == 1


def test_missing_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "absent.yaml", env={})


def test_empty_file_is_the_defaults(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, ""), env={}) == WardenConfig()


def test_every_layer_can_be_switched_off(tmp_path: Path) -> None:
    sections = ["truncate", "mask", "thinking", "window", "compaction"]
    path = write(tmp_path, "".join(f"{name}: {{enabled: false}}\n" for name in sections))
    config = load_config(path, env={})
    assert all(getattr(config, name).enabled is False for name in sections)


def test_config_problems_lists_or_is_empty(tmp_path: Path) -> None:
    assert config_problems(write(tmp_path, "mask: {keep_recent: 2}\n")) == []
    bad = write(tmp_path, "mask: {keep_recent: -2}\nwindow: {enabled: maybe}\n")
    assert len(config_problems(bad)) == 2


def test_input_is_not_mutated(tmp_path: Path) -> None:
    env = {"CONTEXTWARDEN_MASK__KEEP_RECENT": "2"}
    section = {"min_chars": 5}
    load_config(env=env, mask=section)
    assert env == {"CONTEXTWARDEN_MASK__KEEP_RECENT": "2"} and section == {"min_chars": 5}


@settings(max_examples=40, deadline=None)
@given(
    file_value=st.integers(0, 10**6),
    env_value=st.none() | st.integers(0, 10**6),
    code_value=st.none() | st.integers(0, 10**6),
)
def test_later_layers_win(
    tmp_path_factory: pytest.TempPathFactory,
    file_value: int,
    env_value: int | None,
    code_value: int | None,
) -> None:
    path = tmp_path_factory.mktemp("cfg") / "cw.yaml"
    path.write_text(f"contextGuard:\n  reserveTokens: {file_value}\n", encoding="utf-8")
    env = {} if env_value is None else {"CONTEXTWARDEN_RESERVE_TOKENS": str(env_value)}
    kwargs = {} if code_value is None else {"reserve_tokens": code_value}
    expected = next(v for v in (code_value, env_value, file_value) if v is not None)
    assert load_config(path, env=env, **kwargs).reserve_tokens == expected


def test_reference_names_every_setting() -> None:
    text = config_reference()
    for name, info in WardenConfig.model_fields.items():
        assert f"`{name}`" in text
        sub = info.annotation
        for field in getattr(sub, "model_fields", {}):
            env = f"CONTEXTWARDEN_{name.upper()}__{field.upper()}"
            assert env in text, env


def test_committed_reference_is_current() -> None:
    if not DOCS.is_file():
        pytest.fail(
            f"{DOCS} is missing: python -m contextwarden config docs > docs/configuration.md"
        )
    assert DOCS.read_text(encoding="utf-8") == config_reference(), (
        "docs/configuration.md is stale: run python -m contextwarden config docs > "
        "docs/configuration.md"
    )


SEED_001_EXAMPLE = """\
# config.yaml
context_compaction:
  enabled: true                    # comments as in the seed
  max_context_tokens: 80000
  trigger_ratio: 0.8
  keep_recent_rounds: 2
  require_confirmation: true
  summary_max_length: 1000
"""

SEED_004_EXAMPLE = """\
agent:
  contextGuard:
    enabled: true
    maxToolResultChars: 50000
    reserveTokens: 8192
    truncateHeadChars: 2000
    truncateTailChars: 2000
    contextWindowOverride: null
"""


@pytest.mark.parametrize("text", [SEED_001_EXAMPLE, SEED_004_EXAMPLE], ids=["seed001", "seed004"])
def test_the_seeds_own_examples_load(tmp_path: Path, text: str) -> None:
    assert config_problems(write(tmp_path, text)) == []
    both = write(tmp_path, SEED_001_EXAMPLE + SEED_004_EXAMPLE.replace("# config.yaml\n", ""))
    config = load_config(both, env={})
    assert (config.context_window, config.reserve_tokens) == (80_000, 8192)
