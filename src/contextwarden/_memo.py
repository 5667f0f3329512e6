"""A memo of pure functions' results, owned by the object that uses it (never module state).

A warden call reads the same texts several times: the masks it renders name what the agent
typed before each result, and a compaction reads the facts of the whole history and of the
span replaced, the code in play, the edits, the task type. What it derives from one text (a
shell command's effects, the findings of an assistant's prose, the code names of a tool output)
is a pure function of that text, so a :class:`Memo` keeps it: each call of a
:class:`~contextwarden.Warden` holds one (:attr:`~contextwarden.layers.base.LayerContext.memo`,
passed to the compaction it runs; it ends with the call, so what one client sent never answers
another client's lookup faster), and a compaction or an analysis given none makes one for
itself.

Bounded in entries and in bytes: the size of an entry is estimated as the characters of its key
plus those of its value (``size(value)`` when given, else the key's length again) plus a fixed
overhead, and the least recently used entries are forgotten first. A text longer than a quarter
of the budget is computed and not kept, and so is one shorter than ``min_chars`` (looking it up
would cost about what computing it does). Thread-safe; results are computed outside the lock (two
threads may both compute one: the functions are pure, the results equal). Results are shared:
treat them as read-only.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

__all__ = ["CALL_BYTES", "CALL_ENTRIES", "ENTRY_OVERHEAD", "Memo"]

_T = TypeVar("_T")

#: Bytes an entry costs beyond its texts (the key tuple, the dict slot, the value's objects).
ENTRY_OVERHEAD = 200
#: Bounds of what one warden call (and the compaction it runs) keeps of what it read.
CALL_ENTRIES = 1 << 16
CALL_BYTES = 64 << 20


def _chars(key: Any) -> int:
    if isinstance(key, str):
        return len(key)
    if isinstance(key, tuple):
        return sum(_chars(k) for k in key)
    return 0


class Memo:
    """Results of pure functions by ``(function, argument)``; see the module docstring."""

    __slots__ = ("_data", "_lock", "bytes", "max_bytes", "max_entries", "min_chars")

    def __init__(
        self, max_entries: int = 8192, max_bytes: int = 8 << 20, min_chars: int = 48
    ) -> None:
        if max_entries < 1 or max_bytes < 1:
            raise ValueError("a Memo holds at least one entry and one byte")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.min_chars = min_chars
        self._data: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.bytes = 0

    def __call__(
        self,
        fn: Callable[[Any], _T],
        arg: Hashable,
        size: Callable[[_T], int] | None = None,
        *,
        costly: bool = False,
    ) -> _T:
        """``fn(arg)``, computed once while it is remembered. ``arg`` is a text or a tuple of
        texts (what the entry's size is estimated from); ``size(result)`` estimates the
        result's characters (default: as many as the argument's). ``costly``: kept however
        short the text (``fn`` costs more than a lookup even then)."""
        if not costly and type(arg) is str and len(arg) < self.min_chars:
            return fn(arg)
        key = (fn, arg)
        found = self._lookup(key)
        if found:
            return found[0]  # type: ignore[no-any-return]
        value = fn(arg)
        chars = _chars(arg)
        self._keep(key, value, chars + (size(value) if size is not None else chars))
        return value

    def _lookup(self, key: Hashable) -> tuple[Any] | tuple[()]:
        """``(value,)`` remembered under ``key`` (now the most recent), else ``()``."""
        with self._lock:
            hit = self._data.get(key)
            if hit is None:
                return ()
            self._data.move_to_end(key)
            return (hit[0],)

    def keep(self, key: Hashable, compute: Callable[[], _T], size: Callable[[_T], int]) -> _T:
        """The value remembered under ``key`` (a tuple naming what it is, texts included), else
        ``compute()``, remembered with an estimated size of ``size(value)`` characters."""
        found = self._lookup(key)
        if found:
            return found[0]  # type: ignore[no-any-return]
        value = compute()
        self._keep(key, value, _chars(key) + size(value))
        return value

    def _keep(self, key: Any, value: Any, chars: int) -> None:
        cost = chars + ENTRY_OVERHEAD
        if cost * 4 > self.max_bytes:
            return
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            self._data[key] = (value, cost)
            self.bytes += cost
            while len(self._data) > self.max_entries or self.bytes > self.max_bytes:
                _, (_, gone) = self._data.popitem(last=False)
                self.bytes -= gone
