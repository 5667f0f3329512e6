"""What every framework hook shares: building its Warden, importing its framework."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

from .._config import WardenConfig
from .._warden import TransformResult, Warden
from ..formats._common import limit_value
from ..recall import answer_max_chars, recall_answer

__all__ = [
    "Regrouped",
    "WardenHook",
    "answer_recall",
    "hook_warden",
    "model_name",
    "output_limit",
    "require",
]


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise an :class:`ImportError` naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"this integration needs the {module!r} package: pip install 'contextwarden[{extra}]'"
        ) from exc


def hook_warden(
    config: WardenConfig | None, model: str | None, window: int | None, summarizer: Any = None
) -> Warden:
    """The one Warden a hook keeps for its lifetime (one log per conversation inside it).

    ``model`` and ``window`` override the config's own ``model`` / ``context_window``;
    ``summarizer`` writes its compactions' summaries (default: the config's).
    """
    if config is not None and not isinstance(config, WardenConfig):
        raise TypeError(f"config must be a WardenConfig, got {type(config).__name__}")
    if model is not None and type(model) is not str:
        raise TypeError(f"model must be a string, got {type(model).__name__}")
    if window is not None and (type(window) is not int or window <= 0):
        raise ValueError(f"window must be a positive int, got {window!r}")
    base = config if config is not None else WardenConfig.model_validate({})
    given = {"model": model, "context_window": window}
    changes = {k: v for k, v in given.items() if v is not None}
    if changes:
        base = base.model_copy(update=changes)
    return Warden(base, summarizer=summarizer)


class WardenHook:
    """A hook's Warden (:func:`hook_warden`) and ``last_result``, the latest call's
    :class:`~contextwarden.TransformResult`. ``model`` names the tokenizer and (without
    ``window``) the registry's window (default: the framework's model name, else
    ``config.model``); ``window`` overrides the window; ``config`` is the
    :class:`~contextwarden.WardenConfig`. One hook keeps one Warden (one log per conversation)."""

    def __init__(
        self,
        model: str | None = None,
        window: int | None = None,
        config: WardenConfig | None = None,
    ) -> None:
        super().__init__()  # a framework base class after this one (litellm's CustomLogger)
        self.warden: Warden = hook_warden(config, model, window)
        self._model = model
        self.last_result: TransformResult | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self._model!r})"


def model_name(
    model: Any, attrs: tuple[str, ...] = ("model_name", "model", "model_id")
) -> str | None:
    """The model name a framework's model object carries (the first of ``attrs`` that is a
    non-empty string), if any."""
    for attr in attrs:
        name = getattr(model, attr, None)
        if isinstance(name, str) and name:
            return name
    return None


def output_limit(*sources: Any) -> int | None:
    """The reply's output limit a framework's model or settings give the provider: the first
    ``max_tokens`` / ``max_completion_tokens`` / ``max_output_tokens`` that is a whole number
    above 0, read as an attribute or a mapping key of each of ``sources`` in turn (None for
    none: the warden fits the reserve to the replies)."""
    for source in sources:
        if source is None:
            continue
        for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
            value = source.get(key) if isinstance(source, Mapping) else getattr(source, key, None)
            limit = limit_value(value)
            if limit is not None:
                return limit
    return None


def answer_recall(
    warden: Warden, result: TransformResult | None, ref: str, spent: int = 0
) -> tuple[str, bool]:
    """The answer to a recall of ``ref`` in the conversation of ``result`` (the hook's latest
    call), and whether it is an error: the originals within the room the request leaves
    (``spent``: characters of answers already added), or why there are none."""
    found = None
    if result is not None and ref:
        try:
            found = warden.recall(result.conversation, ref)
        except KeyError:
            found = None
    budget, tokens = (result.budget, result.tokens_after) if result else (None, 0)
    return recall_answer(ref, found, max_chars=answer_max_chars(budget, tokens, spent))


class Regrouped:
    """The framework's messages made again from the warden's output, in ``out``: runs of
    request parts (:meth:`part`, from original ``source``; -1: a part the warden wrote) and
    whole model turns (:meth:`turn`). A run that is exactly one original's parts (the same
    objects, in order) is that original; any other is ``rebuild(base, parts)``, ``base`` the
    original of a run from one source (-1: the last original), None for a run from several."""

    def __init__(self, originals: Sequence[Any], rebuild: Callable[[Any, list[Any]], Any]):
        self.originals, self.rebuild = originals, rebuild
        self.out: list[Any] = []
        self._parts: list[Any] = []
        self._sources: set[int] = set()

    def part(self, source: int, part: Any) -> None:
        self._sources.add(source)
        self._parts.append(part)

    def turn(self, message: Any) -> None:
        self.flush()
        self.out.append(message)

    def flush(self) -> None:
        parts, sources = self._parts, self._sources
        if not parts:
            return
        base = self.originals[next(iter(sources))] if len(sources) == 1 else None
        same = list(base.parts or ()) if base is not None else []
        if len(same) == len(parts) and all(a is b for a, b in zip(same, parts, strict=True)):
            self.out.append(base)
        else:
            self.out.append(self.rebuild(base, list(parts)))
        self._parts, self._sources = [], set()
