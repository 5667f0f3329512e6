"""WardenConfig: every knob, with the seeds' defaults, and :func:`load_config`, which reads it
from YAML (our keys and the seeds' blocks), ``CONTEXTWARDEN_*`` environment variables and code.

The reference in ``docs/configuration.md`` is generated from these classes
(``python -m contextwarden config docs``); a test keeps it in step.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple, TypeVar, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ._exceptions import ConfigError
from ._model_overrides import ModelOverride
from ._sections import PolicyConfig, TaskConfig
from .layers.config import MaskConfig, ThinkingConfig, TruncateConfig, WindowConfig
from .summarizers.config import SummarizerConfig

__all__ = ["CompactionConfig", "WardenConfig", "config_problems", "load_config"]

TaskType = Literal["code", "analysis", "conversation", "mixed", "unknown"]
#: A strategy name: a built-in (sliding_window, importance, key_events, incremental,
#: full_summary) or one passed to the warden with ``strategies=``.
StrategyName = str


def _default_strategy_order() -> dict[TaskType, list[StrategyName]]:
    """The strategy order per task type (a function, so mypy sees the Literal types)."""
    return {
        "code": ["sliding_window", "key_events", "incremental"],
        "analysis": ["sliding_window", "importance", "incremental"],
        "conversation": ["sliding_window", "importance", "incremental"],
        "mixed": ["sliding_window", "incremental", "importance"],
        "unknown": ["sliding_window", "importance", "incremental"],
    }


class CompactionConfig(BaseModel):
    """Lossy compaction when the lossless layers are not enough."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    enabled: bool = Field(
        True, description="Compact with summaries when over the trigger. Default: true."
    )
    sliding_window_size: int = Field(
        9,
        ge=1,
        description="Sliding-window compaction keeps this many recent messages (4 user/tool + 5 "
        "assistant). Default: 9.",
    )
    importance_threshold: float = Field(
        3.0, description="Importance scoring keeps messages scoring at least this. Default: 3.0."
    )
    keep_recent_low: int = Field(
        5, ge=0, description="Low-scoring / non-key messages kept as recent context. Default: 5."
    )
    chunk_turns: int = Field(
        20, ge=1, description="Incremental summaries: turns per chunk. Default: 20."
    )
    turn_threshold: int = Field(
        200, ge=1, description="Compact after this many turns whatever the tokens. Default: 200."
    )
    summary_marker: str = Field(
        "!!!SUMMARY!!!",
        description="The model writing this asks for a compaction. Default: !!!SUMMARY!!!.",
    )
    summary_max_chars: int = Field(
        6_000,
        ge=200,
        description="A summary is capped at this many characters, and kept clearly smaller "
        "than what it replaces. Default: 6000.",
    )
    recent_memories: int = Field(
        10, ge=0, description="The full summary keeps this many recent memories. Default: 10."
    )
    require_confirmation: bool = Field(
        False,
        description="Ask the confirmation callback before a lossy compaction. Default: false.",
    )
    on_refusal: Literal["drop_oldest", "new_session", "raise"] = Field(
        "drop_oldest", description="What to do when the user refuses. Default: drop_oldest."
    )
    strategy_order: dict[TaskType, list[StrategyName]] = Field(
        default_factory=_default_strategy_order,
        description="Strategy order per detected task type.",
    )
    fallback_order: list[StrategyName] = Field(
        default_factory=lambda: ["sliding_window", "importance", "key_events", "incremental"],
        description="Fixed order tried when the adaptive order fails.",
    )


M = TypeVar("M", bound=BaseModel)


def _defaults(cls: type[M]) -> Callable[[], M]:
    """A default factory for a sub-config that mypy can type without the pydantic plugin."""
    return lambda: cls.model_construct()


class WardenConfig(BaseModel):
    """Everything the warden does, and how much. Validated once, at construction."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    model: str | None = Field(
        None, description="Model name; picks the window and tokenizer. Default: none."
    )
    context_window: int | None = Field(
        None, ge=1, description="Override the model's context window. Default: from the registry."
    )
    reserve_tokens: int = Field(
        8_192,
        ge=0,
        description="Tokens reserved for the model's output. Left unset, the smallest of 8192, "
        "a quarter of the window and the model's max output, fitted on each call to the "
        "conversation's replies (a quarter more than the longest so far, at least 1024); a "
        "request's own max_tokens replaces it (raises a value you set). Default: 8192.",
    )
    trigger_ratio: float = Field(
        0.75, gt=0, le=1, description="Lossy steps start above window*ratio. Default: 0.75."
    )
    target_ratio: float = Field(
        0.3,
        gt=0,
        le=1,
        description="Compaction and window cuts aim for window*ratio, well below the trigger, so "
        "the following calls only append (a low target means fewer, cheaper cache rewrites; "
        "0.3 measured cheapest to bill on real recordings). On a small window the ratio "
        "rises to keep min_target_tokens. Default: 0.3.",
    )
    min_target_tokens: int = Field(
        12_800,
        ge=0,
        description="The tokens a compaction should keep where the window allows: on a window "
        "where target_ratio leaves fewer, the ratio rises towards them, up to 0.4 (the recent "
        "work an agent goes on from takes about as many tokens on a 16k window as on a 128k "
        "one). 0: target_ratio alone. Default: 12800.",
    )
    counter: Literal["exact", "heuristic"] = Field(
        "exact",
        description="Token counter: exact BPE or the fast chars-based heuristic. Default: exact.",
    )
    strict: bool = Field(
        False,
        description="A structurally invalid history (a tool result without its call, a tool-call "
        "id used twice, a call left unanswered mid-history, an empty message) raises FormatError "
        "naming the message, instead of being repaired with one 'repaired' event per repair. "
        "Default: false.",
    )
    truncate: TruncateConfig = Field(default_factory=_defaults(TruncateConfig))
    mask: MaskConfig = Field(default_factory=_defaults(MaskConfig))
    policy: PolicyConfig = Field(default_factory=_defaults(PolicyConfig))
    thinking: ThinkingConfig = Field(default_factory=_defaults(ThinkingConfig))
    window: WindowConfig = Field(default_factory=_defaults(WindowConfig))
    compaction: CompactionConfig = Field(default_factory=_defaults(CompactionConfig))
    models: dict[str, ModelOverride] = Field(
        default_factory=dict,
        description="Per-model overrides of the registry (window, prices, cache prices, TTL), "
        "keyed by model name; a model the registry does not know needs context_window. The "
        "fields of an entry: docs/prices.md. Default: none.",
    )
    summarizer: SummarizerConfig = Field(default_factory=_defaults(SummarizerConfig))
    task: TaskConfig = Field(default_factory=_defaults(TaskConfig))


# --------------------------------------------------------------------------------------------
# Loading: YAML file, then CONTEXTWARDEN_* environment variables, then code. Validated once.
# --------------------------------------------------------------------------------------------

#: The file :func:`load_config` reads from the working directory when no path is given.
CONFIG_FILENAME = "contextwarden.yaml"
#: Environment variables starting with this override the file; ``__`` separates nesting levels.
ENV_PREFIX = "CONTEXTWARDEN_"
#: This variable names a config file to read when :func:`load_config` gets no path.
ENV_CONFIG_PATH = ENV_PREFIX + "CONFIG"

Path_ = tuple[str, ...]

# The seeds' own YAML blocks, read as aliases: seed key -> the WardenConfig paths it sets.
# Seed 001 (``context_compaction:``) and seed 004 (``contextGuard:``, at the top or under
# ``agent:`` as in the seed's host config).
SEED_KEYS: dict[str, dict[str, tuple[Path_, ...]]] = {
    "context_compaction": {
        "enabled": (("compaction", "enabled"),),
        "max_context_tokens": (("context_window",),),
        "trigger_ratio": (("trigger_ratio",),),
        "keep_recent_rounds": (("compaction", "sliding_window_size"),),  # see SEED_CONVERSIONS
        "require_confirmation": (("compaction", "require_confirmation"),),
        "summary_max_length": (("compaction", "summary_max_chars"),),
    },
    "contextGuard": {
        # the guard is truncation + dropping whole old turns; one switch turns both off
        "enabled": (("truncate", "enabled"), ("window", "enabled")),
        "maxToolResultChars": (("truncate", "max_chars"),),
        "reserveTokens": (("reserve_tokens",),),
        "truncateHeadChars": (("truncate", "head_chars"),),
        "truncateTailChars": (("truncate", "tail_chars"),),
        "contextWindowOverride": (("context_window",),),
    },
}


def _rounds_to_messages(value: Any) -> Any:
    """Seed 001 keeps the last N *rounds*; our sliding window counts messages. A round of an
    agent is an assistant turn and its tool results: two messages. A value that is not an
    integer passes through unchanged, for validation to report."""
    return 2 * value if isinstance(value, int) and not isinstance(value, bool) else value


#: Seed keys whose value is converted on the way in: (block, key) -> (converter, how).
SEED_CONVERSIONS: dict[tuple[str, str], tuple[Callable[[Any], Any], str]] = {
    ("context_compaction", "keep_recent_rounds"): (
        _rounds_to_messages,
        "N rounds keep 2N messages: each an assistant turn and its tool results",
    )
}


class _Leaf(NamedTuple):
    """One value set by one source: where it goes, and how the source spelled it."""

    target: Path_
    value: Any
    label: str  # e.g. "contextwarden.yaml: mask.keep_recent" or "env CONTEXTWARDEN_X"


def _model_field(model: type[BaseModel], name: str) -> type[BaseModel] | None:
    """The sub-model class behind ``model.name`` (None when the field is not a sub-model)."""
    info = model.model_fields.get(name)
    ann = info.annotation if info is not None else None
    return ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None


def model_at(path: Path_, *, field: bool = False) -> type[BaseModel] | None:
    """The model class that holds the last key of ``path`` (None when the path is unknown;
    with ``field``, also when that model has no field of the last key's name)."""
    model: type[BaseModel] | None = WardenConfig
    for name in path[:-1]:
        if model is None:
            return None
        model = _model_field(model, name)
    return None if field and model is not None and path[-1] not in model.model_fields else model


def _dotted(path: Sequence[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _flatten(
    data: Mapping[str, Any],
    prefix: Path_,
    model: type[BaseModel] | None,
    label: Callable[[Path_], str],
) -> list[_Leaf]:
    """Leaves of a nested mapping, descending only into sub-model fields (a dict-valued field
    such as ``compaction.strategy_order`` stays one leaf)."""
    leaves: list[_Leaf] = []
    for key, value in data.items():
        path = (*prefix, str(key))
        sub = _model_field(model, str(key)) if model is not None else None
        if isinstance(value, BaseModel):
            value = value.model_dump()
        if sub is not None and isinstance(value, Mapping):
            leaves.extend(_flatten(value, path, sub, label))
        else:
            leaves.append(_Leaf(path, value, label(path)))
    return leaves


def _file_leaves(data: Mapping[str, Any], source: str) -> tuple[list[_Leaf], list[str]]:
    """Leaves from a parsed YAML document (our keys plus the seeds' blocks), and the problems
    that are found before validation (unknown seed keys, one target set twice)."""
    problems: list[str] = []
    leaves: list[_Leaf] = []

    def at(path: Path_) -> str:
        return f"{source}: {_dotted(path)}"

    own = {k: v for k, v in data.items() if k not in SEED_KEYS and k != "agent"}
    leaves.extend(_flatten(own, (), WardenConfig, at))

    blocks: list[tuple[Path_, Any]] = [((name,), data[name]) for name in SEED_KEYS if name in data]
    if "agent" in data:  # seed 004 nests its block under ``agent:`` in the host's config.yaml
        agent = data["agent"]
        if not isinstance(agent, Mapping):
            problems.append(
                f"{at(('agent',))}: expected a mapping with contextGuard, got {agent!r}"
            )
        for key, value in agent.items() if isinstance(agent, Mapping) else ():
            if key == "contextGuard":
                blocks.append((("agent", "contextGuard"), value))
            else:
                label = at(("agent", str(key)))
                problems.append(f"{label}: unknown key (only agent.contextGuard is read)")
    for where, block in blocks:
        table = SEED_KEYS[where[-1]]
        if not isinstance(block, Mapping):
            problems.append(f"{at(where)}: expected a mapping, got {block!r}")
            continue
        for key, value in block.items():
            targets = table.get(str(key))
            if targets is None:
                problems.append(f"{at((*where, str(key)))}: unknown key{_suggest(str(key), table)}")
                continue
            convert = SEED_CONVERSIONS.get((where[-1], str(key)))
            for target in targets:
                holder = model_at(target, field=True)
                if holder is None:
                    # a seed knob this version has no field for: say so rather than ignore it
                    problems.append(f"{at((*where, str(key)))}: not supported by this version")
                    continue
                if value is None and holder.model_fields[target[-1]].default is None:
                    continue  # null is "not set" there (contextWindowOverride: null)
                converted = convert[0](value) if convert is not None else value
                leaves.append(_Leaf(target, converted, at((*where, str(key)))))

    # one file may spell a value twice (``context_window`` and ``contextWindowOverride``):
    # allowed when they agree, reported when they do not
    seen: dict[Path_, _Leaf] = {}
    for leaf in leaves:
        first = seen.setdefault(leaf.target, leaf)
        if first is not leaf and first.value != leaf.value:
            problems.append(
                f"{leaf.label}: conflicts with {first.label.split(': ', 1)[-1]} "
                f"({leaf.value!r} != {first.value!r}); set {_dotted(leaf.target)} once"
            )
    return leaves, problems


def _suggest(key: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(key, list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _env_value(path: Path_, raw: str) -> Any:
    """An environment string made into the value the field expects: JSON for ``[...]``/``{...}``,
    comma-separated items for list fields, empty for none; pydantic's lax mode does the rest
    (``"8192"`` -> 8192, ``"false"`` -> False)."""
    text = raw.strip()
    if text.startswith(("[", "{")):
        try:
            return json.loads(text)
        except ValueError:
            return raw  # pydantic reports it, naming the variable
    model = model_at(path)
    info = model.model_fields.get(path[-1]) if model is not None else None
    if info is not None:
        origin = get_origin(info.annotation)
        if origin in (list, tuple):
            return [item.strip() for item in text.split(",") if item.strip()]
        if (text == "" or text.lower() in ("null", "none")) and info.default is None:
            return None
    return raw


def _env_leaves(env: Mapping[str, str]) -> list[_Leaf]:
    """Leaves from ``CONTEXTWARDEN_*`` variables. ``CONTEXTWARDEN_MASK__KEEP_RECENT=3`` sets
    ``mask.keep_recent``. Variables that name no config field and have no ``__`` (such as
    ``CONTEXTWARDEN_DATA_DIR`` or ``CONTEXTWARDEN_CONFIG``) belong to other parts and are
    skipped."""
    leaves: list[_Leaf] = []
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or name == ENV_CONFIG_PATH:
            continue
        rest = name[len(ENV_PREFIX) :]
        path = tuple(part.lower() for part in rest.split("__"))
        if len(path) == 1 and path[0] not in WardenConfig.model_fields:
            continue
        leaves.append(_Leaf(path, _env_value(path, env[name]), f"env {name}"))
    return leaves


def _code_leaves(overrides: Mapping[str, Any]) -> list[_Leaf]:
    """Leaves from keyword arguments: ``reserve_tokens=4096``, ``mask={"keep_recent": 3}``
    (merged into the section), ``mask=MaskConfig(...)`` (replaces the section),
    ``mask__keep_recent=3``."""
    leaves: list[_Leaf] = []
    for key, value in overrides.items():
        path = tuple(key.split("__"))
        label = f"argument {key}"
        if isinstance(value, BaseModel):  # a whole section: replaces what the file/env set
            leaves.append(_Leaf(path, value.model_dump(), label))
            continue
        model = model_at(path)
        sub = _model_field(model, path[-1]) if model is not None else None
        if sub is not None and isinstance(value, Mapping):
            leaves.extend(_flatten(value, path, sub, lambda p: f"argument {_dotted(p)}"))
        else:
            leaves.append(_Leaf(path, value, label))
    return leaves


def _merge(layers: Iterable[list[_Leaf]]) -> tuple[dict[str, Any], dict[Path_, str]]:
    """One nested dict from the layers' leaves, later layers winning; and which source set each
    path (for error messages). A leaf replaces everything beneath it and any leaf above it."""
    chosen: dict[Path_, _Leaf] = {}
    for layer in layers:
        for leaf in layer:
            n = len(leaf.target)
            for path in [p for p in chosen if p[:n] == leaf.target or leaf.target[: len(p)] == p]:
                if path != leaf.target:
                    del chosen[path]
            chosen[leaf.target] = leaf
    nested: dict[str, Any] = {}
    for path, leaf in chosen.items():
        node = nested
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = leaf.value
    return nested, {path: leaf.label for path, leaf in chosen.items()}


def _describe(error: Mapping[str, Any], origins: Mapping[Path_, str]) -> str:
    """``<source path>: <problem>`` for one pydantic error."""
    loc: tuple[str | int, ...] = tuple(error.get("loc", ()))
    rest: tuple[str | int, ...]
    for n in range(len(loc), 0, -1):
        key = tuple(str(p) for p in loc[:n])
        if key in origins:
            label, rest = origins[key], loc[n:]
            break
    else:
        # an unknown section set only through its children (CONTEXTWARDEN_NOPE__X)
        below = [lbl for path, lbl in origins.items() if path[: len(loc)] == tuple(map(str, loc))]
        label = below[0] if below else (_dotted(loc) if loc else "config")
        rest = ()
    if rest:
        label += ("" if _dotted(rest).startswith("[") else ".") + _dotted(rest)
    kind = error.get("type", "")
    if kind == "extra_forbidden":
        model = model_at(tuple(str(p) for p in loc))
        choices = model.model_fields if model is not None else {}
        return f"{label}: unknown key{_suggest(str(loc[-1]), choices) if loc else ''}"
    message = str(error.get("msg", "invalid value"))
    if kind != "missing" and "input" in error:
        message += f", got {error['input']!r}"
    return f"{label}: {message}"


def _read_yaml(path: Path) -> Mapping[str, Any]:
    import yaml  # here: a warden built without a file does not pay for it (22 ms)

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}:" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{path}:{where} invalid YAML: {problem}") from exc
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        kind = type(data).__name__
        raise ConfigError(f"{path}: expected a mapping of settings at the top, got a {kind}")
    return data


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = os.environ,
    **overrides: Any,
) -> WardenConfig:
    """Build a :class:`WardenConfig` from three layers, each overriding the one before:

    1. the YAML file ``path`` (default: ``$CONTEXTWARDEN_CONFIG``, else ``./contextwarden.yaml``
       when it exists, else nothing). Our own keys, plus the seeds' blocks: seed 001's
       ``context_compaction:`` and seed 004's ``contextGuard:`` (top level or under ``agent:``);
    2. ``CONTEXTWARDEN_*`` variables in ``env`` (default ``os.environ``; ``None`` or ``{}`` to
       skip), ``__`` between nesting levels: ``CONTEXTWARDEN_MASK__KEEP_RECENT=3``;
    3. ``overrides``: ``reserve_tokens=4096``, ``mask={"keep_recent": 3}`` (merged),
       ``mask=MaskConfig(...)`` (replaces the section), ``mask__keep_recent=3``.

    Raises :class:`ConfigError` listing every problem at once, one ``source path: problem``
    per line, e.g. ``contextwarden.yaml: mask.keep_recent: Input should be greater than or
    equal to 0, got -1``.
    """
    env = env or {}
    problems: list[str] = []
    layers: list[list[_Leaf]] = []
    if path is None and env.get(ENV_CONFIG_PATH):
        path = env[ENV_CONFIG_PATH]
    elif path is None and Path(CONFIG_FILENAME).is_file():
        path = CONFIG_FILENAME
    if path is not None:
        file = Path(path)
        leaves, found = _file_leaves(_read_yaml(file), str(file))
        layers.append(leaves)
        problems.extend(found)
    layers.append(_env_leaves(env))
    layers.append(_code_leaves(overrides))
    nested, origins = _merge(layers)
    try:
        config = WardenConfig.model_validate(nested)
    except ValidationError as exc:
        problems.extend(_describe(err, origins) for err in exc.errors())
        config = None
    if problems:
        raise ConfigError("\n".join(dict.fromkeys(problems)))  # keep order, drop repeats
    assert config is not None
    return config


def config_problems(
    path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None
) -> list[str]:
    """Every problem in the config file ``path`` (one ``source path: problem`` string each),
    empty when it is valid. Environment variables are left out unless ``env`` is given."""
    try:
        load_config(path, env=env)
    except ConfigError as exc:
        return str(exc).splitlines()
    return []
