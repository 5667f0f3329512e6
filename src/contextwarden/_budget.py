"""Budget: how many tokens a request may use in a model's window, and when to act.

Three thresholds:

``limit = window - reserve``
    The hard limit. A request over it either is rejected by the provider or leaves the reply
    less room than reserved. The reserve is the request's own output limit when it states one
    (``max_tokens``: the provider refuses a prompt that leaves less), else, unless set
    explicitly, fitted to the agent's replies (:meth:`Budget.for_reply`): a quarter more than
    the longest so far, at least :data:`MIN_REPLY_ROOM`, at most the default (8,192, the
    model's max output or a quarter of the window, whichever is least).
``trigger = min(limit, max(window * trigger_ratio, fixed + (limit - fixed) * trigger_ratio))``
    Where lossy compaction starts (``window * 0.75`` by default). ``fixed`` is the part of the
    request no edit removes (system prompt, tools, task, pins; 0 until the conversation
    states it): the trigger leaves the history the same share of the room the fixed part
    leaves under the limit as it would of a whole window. Capped at the limit.
``target = min(trigger, max(min(window * target_ratio, trigger * share), fixed + (trigger - fixed) * share))``
    Where compaction aims to land (``share = target_ratio / trigger_ratio``), so that a cut
    buys ``(trigger - target) / growth`` calls before the next one (see :mod:`._policy`).

All three are in the counter's tokens (see :mod:`contextwarden._tokens`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ._exceptions import ConfigError
from ._models import ModelInfo, context_window, find_model

__all__ = ["Budget", "BudgetSettings", "reply_tokens"]

#: Tokens kept free for the reply by default.
DEFAULT_RESERVE = 8_192
#: A reserve fitted to the agent's replies lets the next reply be this much longer than the
#: longest so far.
REPLY_MARGIN = 1.25
#: The least room a reserve fitted to the agent's replies keeps.
MIN_REPLY_ROOM = 1_024
#: The most a target ratio is raised to keep ``min_target`` tokens on a small window: a cut
#: still leaves room for many calls before the next one.
RAISED_TARGET_RATIO = 0.4


class BudgetSettings(Protocol):
    """The config fields a budget reads (a :class:`~contextwarden.WardenConfig` has them)."""

    @property
    def reserve_tokens(self) -> int: ...
    @property
    def trigger_ratio(self) -> float: ...
    @property
    def target_ratio(self) -> float: ...
    @property
    def min_target_tokens(self) -> int: ...
    @property
    def model_fields_set(self) -> set[str]: ...


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"Budget.{name} must be an int >= {minimum}, got {value!r}")
    return value


def _check_ratio(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise ConfigError(f"Budget.{name} must be a number in (0, 1], got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Budget:
    """A model's token budget.

    Args:
        window: the context window in tokens (must be > 0).
        reserve: tokens kept free for the reply; default 8,192. Must be smaller
            than ``window``.
        trigger_ratio: lossy compaction starts above ``window * trigger_ratio`` (capped at
            the hard limit); default 0.75. In (0, 1].
        target_ratio: compaction aims for ``window * target_ratio``; default 0.5. In (0, 1]
            and at most ``trigger_ratio``.

    Raises :class:`ConfigError` naming the field when a value is out of range.
    """

    window: int
    reserve: int = DEFAULT_RESERVE
    trigger_ratio: float = 0.75
    target_ratio: float = 0.5
    #: the reserve is a default, which :meth:`for_reply` may fit to the agent's replies
    fits_replies: bool = field(default=False, compare=False)
    #: the tokens of the request no edit removes (system prompt, tools, task, pins)
    fixed: int = 0
    #: the hard limit: ``window - reserve``
    limit: int = field(init=False, repr=False, compare=False)
    #: compaction starts above this (see the module docstring)
    trigger: int = field(init=False, repr=False, compare=False)
    #: compaction aims at or below this (see the module docstring)
    target: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_int("window", self.window, 1)
        _check_int("reserve", self.reserve, 0)
        if self.reserve >= self.window:
            raise ConfigError(
                f"Budget.reserve ({self.reserve:,}) must be smaller than window "
                f"({self.window:,}): nothing would be left for the request"
            )
        start = _check_ratio("trigger_ratio", self.trigger_ratio)
        aim = _check_ratio("target_ratio", self.target_ratio)
        if aim > start:
            raise ConfigError(
                f"Budget.target_ratio ({aim}) must not exceed trigger_ratio ({start}): "
                "compaction would end above the point that starts it"
            )
        # the thresholds are read on every call: worked out once (see the module docstring)
        window, fixed, limit = self.window, self.fixed, self.window - self.reserve
        trigger = min(limit, max(int(window * start), fixed + int(max(limit - fixed, 0) * start)))
        share = aim / start
        room = fixed + int(max(trigger - fixed, 0) * share)
        target = min(trigger, max(min(int(window * aim), int(trigger * share)), room))
        for name, value in (("limit", limit), ("trigger", trigger), ("target", target)):
            object.__setattr__(self, name, value)

    @classmethod
    def for_model(
        cls,
        model: str | None,
        window: int | None = None,
        *,
        reserve: int | None = None,
        trigger_ratio: float = 0.75,
        target_ratio: float = 0.5,
        overrides: Mapping[str, ModelInfo] | None = None,
        min_target: int = 0,
    ) -> Budget:
        """The budget for ``model``, its window from the registry unless ``window`` is given.

        ``min_target``: the tokens a compaction should keep where the window allows. On a
        window where ``target_ratio`` leaves fewer, the ratio rises towards them, up to
        :data:`RAISED_TARGET_RATIO` (and never above ``trigger_ratio``): the recent work an
        agent goes on from (the files it is editing, the last outputs) takes about as many
        tokens on a small window as on a large one.

        ``reserve`` defaults to the smallest of 8,192, the model's max output tokens (when
        the registry knows the model: no reply can be longer) and a quarter of the window
        (so a small window such as gpt-4's 8,192 keeps room for the request). Raises
        :class:`UnknownModelError` for an unknown model without ``window`` and
        :class:`ConfigError` for a model that is not a name or a window that is not an int.
        """
        if model is not None and not isinstance(model, str):
            raise ConfigError(f"model must be a model name (str), got {type(model).__name__}")
        size = context_window(model, window, overrides)
        if reserve is None:
            reserve = min(DEFAULT_RESERVE, size // 4)
            info = find_model(model, overrides) if model is not None else None
            if info is not None:
                reserve = min(reserve, info.max_output_tokens)
            fits = True
        else:
            fits = False
        if min_target > 0:
            raised = min(RAISED_TARGET_RATIO, min_target / size, trigger_ratio)
            target_ratio = max(target_ratio, raised)
        return cls(size, reserve, trigger_ratio, target_ratio, fits)

    @classmethod
    def for_config(
        cls,
        config: BudgetSettings,
        model: str | None,
        window: int | None = None,
        *,
        overrides: Mapping[str, ModelInfo] | None = None,
    ) -> Budget:
        """The budget a warden with ``config`` uses for ``model`` (and ``window``, which wins
        over the model's): the one computation the warden, ``replay``, ``inspect`` and the proxy
        share.

        A ``reserve_tokens`` the config sets explicitly is kept (a :class:`ConfigError` naming
        it when it leaves no room in the window); left at its default, the reserve is
        :meth:`for_model`'s choice, so a small window keeps room for the request.
        """
        explicit = "reserve_tokens" in config.model_fields_set
        if explicit:
            size = context_window(model, window, overrides)
            if config.reserve_tokens >= size:
                raise ConfigError(
                    f"reserve_tokens ({config.reserve_tokens:,}) must be smaller than the "
                    f"context window ({size:,}): nothing would be left for the request"
                )
        return cls.for_model(
            model,
            window,
            reserve=config.reserve_tokens if explicit else None,
            trigger_ratio=config.trigger_ratio,
            target_ratio=config.target_ratio,
            overrides=overrides,
            min_target=config.min_target_tokens,
        )

    def for_reply(
        self, longest: int, max_tokens: int | None = None, *, fixed: int | None = None
    ) -> Budget:
        """This budget with the reserve the next reply needs (and, given ``fixed``, for a
        conversation whose system prompt, tools, task and pins take ``fixed`` tokens: the
        trigger and the target move into the room they leave).

        ``max_tokens``: the output limit the request gives the provider, which refuses a
        prompt that leaves less room (Anthropic's "input length and max_tokens exceed context
        limit", OpenAI's "maximum context length"); it is the reserve, or raises an explicit
        one, up to half the window. Without it, a default reserve (:attr:`fits_replies`) is
        fitted to ``longest``, the longest reply of the conversation so far (0: none yet):
        :data:`REPLY_MARGIN` times it, at least :data:`MIN_REPLY_ROOM`, at most the default.
        A request that leaves the agent's replies the room they have needed is not cut for
        want of more; an explicit reserve is kept as it is."""
        room = self.reserve
        if max_tokens is not None and max_tokens > 0:
            room = max_tokens if self.fits_replies else max(self.reserve, max_tokens)
            room = min(room, self.window // 2)
        elif self.fits_replies and longest > 0:
            room = min(self.reserve, max(MIN_REPLY_ROOM, math.ceil(longest * REPLY_MARGIN)))
        fixed = self.fixed if fixed is None else _tokens(fixed)
        if room == self.reserve and fixed == self.fixed:
            return self
        return replace(self, reserve=room, fixed=fixed)

    def used(self, tokens: int) -> float:
        """The fraction of the window ``tokens`` fill (may exceed 1.0)."""
        return _tokens(tokens) / self.window

    def remaining(self, tokens: int) -> int:
        """Tokens left under the hard limit; negative by as much as ``tokens`` is over it."""
        return self.limit - _tokens(tokens)

    def over(self, tokens: int) -> bool:
        """Whether ``tokens`` is above the trigger (time to compact)."""
        return _tokens(tokens) > self.trigger

    def over_limit(self, tokens: int) -> bool:
        """Whether ``tokens`` is above the hard limit (the request must shrink)."""
        return _tokens(tokens) > self.limit

    def excess(self, tokens: int) -> int:
        """Tokens to remove to reach the target (0 when already at or below it)."""
        return max(0, _tokens(tokens) - self.target)


def reply_tokens(counted: int, usage: Mapping[str, Any] | None) -> int:
    """The room a reply took in the window: ``counted``, its tokens as the history holds it, or
    its recorded output when larger (reasoning the history does not keep: Anthropic and
    OpenAI ``output_tokens``, ``completion_tokens``, pi's and Gemini CLI's ``output`` plus
    ``thoughts``)."""
    if not isinstance(usage, Mapping):
        return counted
    out = 0
    for key in ("output_tokens", "completion_tokens", "output"):
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            out = value
            break
    thoughts = usage.get("thoughts")
    if isinstance(thoughts, int) and not isinstance(thoughts, bool):
        out += thoughts
    return max(counted, out)


def _tokens(tokens: int) -> int:
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise ValueError(f"tokens must be an int >= 0, got {tokens!r}")
    return tokens
