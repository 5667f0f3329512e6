"""What a :class:`~contextwarden.Warden` is made of, built once from its arguments: the config
(validated), the compaction hook, the model registry, the resolver of counters and budgets,
and the table of conversations.

It is reached through :mod:`contextwarden.context`'s names on first use, so that
``from contextwarden import Warden`` does not load the config models, the compaction engine
or the summarizers: the first ``Warden()`` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import contextwarden.summarizers as summarizers

from .._compaction import Compactor
from .._config import WardenConfig
from .._exceptions import ConfigError
from .._model_overrides import registry_for
from .._models import ModelRegistry
from .._resolve import Resolver
from .._tokens import TokenCounter
from .hook import HookCaller
from .result import CompactionHook
from .table import ConversationTable

if TYPE_CHECKING:
    from ..store.logs import LogStore

__all__ = ["Parts", "build_parts", "rebuilder", "summary_calls"]


class Parts(NamedTuple):
    """A warden's parts (see the module docstring)."""

    config: WardenConfig
    compactor: CompactionHook | None
    models: ModelRegistry
    hook: HookCaller | None
    resolve: Resolver
    table: ConversationTable


def build_parts(
    config: WardenConfig | None,
    counter: TokenCounter | None,
    compactor: CompactionHook | None,
    summarizer: Any,
    strategies: Mapping[str, Any] | None,
    log_store: LogStore | None,
    counter_cache: int,
    models: ModelRegistry | None,
    max_state_bytes: int | None,
) -> Parts:
    """The parts :class:`~contextwarden.Warden` documents for these arguments;
    :class:`ConfigError` when ``config`` is not a :class:`WardenConfig`."""
    # the defaults pass validation (tests check): constructing them skips pydantic's schema builds
    cfg = config if config is not None else WardenConfig.model_construct()
    if not isinstance(cfg, WardenConfig):
        raise ConfigError(f"config must be a WardenConfig, got {type(cfg).__name__}")
    hook = _hook(cfg, compactor, summarizer, strategies)
    registry = registry_for(cfg, models)
    return Parts(
        cfg,
        hook,
        registry,
        HookCaller(hook) if hook is not None else None,
        Resolver(cfg, counter, registry, counter_cache),
        ConversationTable(cfg, log_store, max_state_bytes),
    )


def _hook(
    config: WardenConfig, hook: CompactionHook | None, summarizer: Any, strategies: Any
) -> CompactionHook | None:
    """The compaction hook a warden of ``config`` calls: ``hook`` (bound to the config's
    compaction section when it takes one), else the built-in engine with ``summarizer`` (the
    configured one by default; an LLM's client loads only then) and ``strategies``; None with
    compaction off."""
    if hook is not None:
        bind = getattr(hook, "bind", None)
        return bind(config.compaction) if bind is not None else hook
    if not config.compaction.enabled:
        return None
    if summarizer is None and config.summarizer.provider != "extractive":
        summarizer = summarizers.build_summarizer(
            config.summarizer, max_chars=config.compaction.summary_max_chars
        )
    return Compactor(config.compaction, summarizer=summarizer, strategies=strategies)


def rebuilder(config: WardenConfig, hook: CompactionHook | None) -> HookCaller:
    """The recovery after a context overflow: a full summary with a hint in the system prompt,
    written by ``hook``'s summarizer when it is the built-in engine."""
    base = hook if isinstance(hook, Compactor) else None
    cfg = config.compaction.model_copy(update={"strategy_order": {}, "fallback_order": []})
    return HookCaller(
        Compactor(cfg, summarizer=base.summarizer if base is not None else None, hint_system=True)
    )


def summary_calls(hook: CompactionHook | None, summarizer: Any) -> int:
    """The summarizer calls a compaction now would pay for: one with an LLM summarizer
    (``summarizer`` for this call, else the hook's), 0 with the embedded extractive one or a
    compaction hook of the caller's."""
    if not isinstance(hook, Compactor):
        return 0
    used = summarizer if summarizer is not None else hook.summarizer
    if isinstance(used, summarizers.ExtractiveSummarizer):
        return 0
    return 1
