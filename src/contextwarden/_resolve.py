"""What a call resolves before it runs: the model's counter, budget and cache rates, the tool
definitions checked, their tokens, the system prompt as a message.

Every table is a small LRU (a dict keeps its insertion order: a hit moves the entry to the end,
the first one goes when full), so a flood of model names, windows or tool sets never pushes out
the ones every call uses. Each belongs to one :class:`Resolver` (one per Warden).
"""

from __future__ import annotations

import json
import marshal
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ._budget import Budget
from ._config import WardenConfig
from ._messages import Message, TextBlock
from ._models import ModelRegistry
from ._policy import CacheRates, rates_for
from ._tokens import TokenCounter, counter_spec, new_counter
from .formats import check_tools

__all__ = ["Resolver"]


class Resolver:
    """A warden's resolution tables (thread-safe; the lock is never held during a count)."""

    def __init__(
        self,
        config: WardenConfig,
        counter: TokenCounter | None,
        models: ModelRegistry,
        counter_cache: int = 100_000,
    ) -> None:
        self.config = config
        self.counter_cache = counter_cache
        self.counter = counter
        self.models = models
        self._lock = threading.Lock()
        self._counters: dict[str | None, TokenCounter] = {}
        #: the counters themselves, one per counting (encoding, scale, ids): models counted
        #: alike share one, so its cache is kept once
        self._by_spec: dict[Any, TokenCounter] = {}
        self._budgets: dict[tuple[str | None, int | None], Budget] = {}
        self._rates: dict[str | None, CacheRates] = {}
        self._systems: dict[str, Message] = {}
        self._overheads: dict[tuple[str, str], int] = {}
        self._tool_sets: dict[bytes, tuple[list[Mapping[str, Any]], str]] = {}

    def _recall(self, table: dict[Any, Any], key: Any) -> Any:
        with self._lock:
            value = table.pop(key, None)
            if value is not None:
                table[key] = value
        return value

    def _remember(self, table: dict[Any, Any], key: Any, value: Any, limit: int = 64) -> None:
        with self._lock:
            table.pop(key, None)
            table[key] = value
            while len(table) > limit:
                del table[next(iter(table))]

    def counter_for(self, model: str | None = None) -> TokenCounter:
        """The counter used for ``model`` (the one given at construction, if any)."""
        if self.counter is not None:
            return self.counter
        model = model or self.config.model
        counter: TokenCounter | None = self._recall(self._counters, model)
        if counter is None:
            exact = self.config.counter == "exact"
            spec = counter_spec(model, self.models) if exact else None
            with self._lock:
                counter = self._by_spec.get(spec)
            if counter is None:
                made = new_counter(
                    model,
                    kind=self.config.counter,
                    cache_size=self.counter_cache,
                    models=self.models,
                )
                with self._lock:
                    counter = self._by_spec.setdefault(spec, made)
            self._remember(self._counters, model, counter)
        return counter

    def cache_bytes(self) -> int:
        """About how many bytes the counters' caches keep."""
        with self._lock:
            counters = list(self._by_spec.values())
        if self.counter is not None:
            counters.append(self.counter)
        total = 0
        for counter in counters:
            size = getattr(counter, "cache_bytes", None)
            total += size() if callable(size) else 0
        return total

    def budget_for(self, model: str | None = None, window: int | None = None) -> Budget | None:
        """The budget for a call, or ``None`` when no window is known (see the class doc).

        :meth:`Budget.for_config`: the reserve is ``config.reserve_tokens`` when you set it; left
        at its default it is :meth:`Budget.for_model`'s choice (8,192, but no more than a quarter
        of the window or the model's max output). Raises :class:`~contextwarden.UnknownModelError` for a model the
        registry lacks and :class:`~contextwarden.ConfigError` for a reserve that leaves no room.
        """
        model = model or self.config.model
        if window is None:
            window = self.config.context_window
        if window is None and model is None:
            return None
        budget: Budget | None = self._recall(self._budgets, (model, window))
        if budget is None:
            budget = Budget.for_config(self.config, model, window, overrides=self.models)
            self._remember(self._budgets, (model, window), budget)
        return budget

    def rates_for(self, model: str | None = None) -> CacheRates:
        """The cache rates the policy weighs optional edits at for ``model``."""
        model = model or self.config.model
        rates: CacheRates | None = self._recall(self._rates, model)
        if rates is None:
            rates = rates_for(model, self.config.policy, self.models)
            self._remember(self._rates, model, rates)
        return rates

    def with_system(self, messages: Sequence[Message], system: str | None) -> Sequence[Message]:
        """``messages`` with ``system`` prepended unless they already open with that system
        text. The prepended message is the same object every call (so warm calls stay warm)."""
        if system is None:
            return messages
        if messages and messages[0].role == "system" and messages[0].text == system:
            return messages
        msg: Message | None = self._recall(self._systems, system)
        if msg is None:
            msg = Message("system", (TextBlock(system),))
            self._remember(self._systems, system, msg, limit=32)
        return [msg, *messages]

    def call(
        self,
        messages: Sequence[Message],
        model: str | None,
        window: int | None,
        system: str | None,
        tools: Any,
    ) -> tuple[
        Sequence[Message],
        list[Mapping[str, Any]] | None,
        TokenCounter,
        Budget | None,
        int,
        CacheRates,
    ]:
        """What one call resolves, at once: its messages with ``system``, its tools (checked),
        the counter, budget, overhead (tools and reply priming) and cache rates for ``model``."""
        tools_list, tools_key = self.tools(tools)
        counter = self.counter_for(model)
        return (
            self.with_system(messages, system),
            tools_list,
            counter,
            self.budget_for(model, window),
            self.overhead(counter, tools_list, tools_key),
            self.rates_for(model),
        )

    def tools(self, tools: Any) -> tuple[list[Mapping[str, Any]] | None, str]:
        """``check_tools(tools) or None`` and the tools' JSON text (what the overhead is cached
        by). A set seen recently (the same content, by its marshal image) gives back what it gave
        then, a private read-only copy, without being checked and serialised again."""
        if not tools:
            return check_tools(tools) or None, ""
        try:
            image: bytes | None = marshal.dumps(tools, 2)
        except (ValueError, TypeError):  # not plain lists and dicts: checked every time
            image = None
        if image is not None:
            known: tuple[list[Mapping[str, Any]], str] | None = self._recall(self._tool_sets, image)
            if known is not None:
                return known
        checked = check_tools(tools) or None  # raises FormatError naming a bad definition
        if checked is None:
            return None, ""
        key = json.dumps(checked, sort_keys=True, default=str)
        if image is None:
            return checked, key
        own: list[Mapping[str, Any]] = list(marshal.loads(image))
        self._remember(self._tool_sets, image, (own, key))
        return own, key

    def overhead(self, counter: TokenCounter, tools: Any, key: str | None = None) -> int:
        """Tokens of the tool definitions and reply priming, cached by the tools' JSON text."""
        if key is None:
            key = json.dumps(list(tools), sort_keys=True, default=str) if tools else ""
        cached: int | None = self._recall(self._overheads, (counter.name, key))
        if cached is None:
            cached = counter.count_messages([], tools=list(tools) if tools else None)
            self._remember(self._overheads, (counter.name, key), cached)
        return cached
