"""Where conversations' edit logs are kept, so that any process continues any conversation.

A :class:`~contextwarden.Warden` given a :class:`LogStore` writes each conversation's record
after every call and reads it before the next (after a restart, or from another worker). The
history hashes and the edits are lists that only grow (``log.history``, ``log.edits``), the
rest one small value (``log``): :meth:`LogStore.save` appends what is new since the writer's
last save, or writes the lists whole when another writer came between. :class:`SQLiteLogStore`,
:class:`RedisLogStore` and :class:`MemoryLogStore` open their store."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .kv import KeyValueStore, MemoryStore, RedisStore, Scoped, SQLiteStore

__all__ = [
    "LogStore",
    "MemoryLogStore",
    "RedisLogStore",
    "SQLiteLogStore",
    "Written",
    "dumps",
    "loads",
]

#: The record's fields kept as lists that only grow; everything else is the header.
_LISTS = ("history", "edits")


def dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def loads(data: bytes | str) -> Mapping[str, Any] | None:
    """The record in ``data``; None (with nothing raised) when it is not one: a record this
    version cannot read is a conversation to start anew, not an error for the caller."""
    try:
        record = json.loads(data)
    except ValueError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("history"), list):
        return None
    return record


@dataclass(frozen=True)
class Written:
    """What a writer last saved of one conversation: the header's ``generation`` (new at each
    whole write) and the length of each list, from which its next save appends."""

    generation: str
    lengths: tuple[int, int]


class LogStore:
    """Conversations' records in ``store`` (see the module docstring)."""

    def __init__(self, store: KeyValueStore) -> None:
        self.store = store

    def scoped(self, scope: str) -> LogStore:
        """This store seen through ``scope``: one client's conversations are never read or
        written under another's keys."""
        return LogStore(Scoped(self.store, scope))

    def get_log(self, key: str, *, whole: bool = True) -> Mapping[str, Any] | None:
        """The stored record of ``key``, None when there is none or it is not readable; without
        ``whole``, its header alone (the counters: no history, no edits)."""
        header = self.store.get("log", key)
        loaded = loads(header) if header is not None else None
        if loaded is None or not whole:
            return loaded
        record = dict(loaded)
        lengths = record.get("lengths")
        if not isinstance(lengths, list) or len(lengths) != len(_LISTS):
            return None
        for name, length in zip(_LISTS, lengths, strict=True):
            items = self.store.items(f"log.{name}", key)
            if len(items) < length:
                return None  # the lists of another layout, or cut short
            try:
                # items past the header's length are a writer's, between its two writes
                record[name] = [json.loads(item) for item in items[:length]]
            except ValueError:
                return None
        return record

    @staticmethod
    def restored(record: Mapping[str, Any]) -> Written:
        """What a writer that restored ``record`` (read whole) has written of it."""
        lengths = (len(record["history"]), len(record["edits"]))
        return Written(str(record.get("generation")), lengths)

    def save(self, key: str, record: Mapping[str, Any], written: Written | None = None) -> Written:
        """Store ``record``: only what its lists gained since ``written`` (this writer's last
        save of ``key``) when the stored header is still that save's; else the lists whole.
        Returns what to pass next time."""
        lists = [v if isinstance(v := record.get(name), list) else [] for name in _LISTS]
        stored = self.store.get("log", key) if written is not None else None
        current = loads(stored) if stored is not None else None
        same = (
            written is not None
            and current is not None
            and current.get("generation") == written.generation
            and all(len(items) >= n for items, n in zip(lists, written.lengths, strict=True))
        )
        starts = written.lengths if same and written is not None else (0, 0)
        generation = written.generation if same and written is not None else secrets.token_hex(8)
        for name, items, start in zip(_LISTS, lists, starts, strict=True):
            # appended even when empty: a store that expires keys keeps the lists as long as
            # the header
            self.store.append(f"log.{name}", key, [dumps(i) for i in items[start:]], start)
        lengths = (len(lists[0]), len(lists[1]))
        header = {k: v for k, v in record.items() if k not in _LISTS}
        # the header is written last: a reader finds lists at least as long as it says
        header.update(history=[], generation=generation, lengths=list(lengths))
        self.store.put("log", key, dumps(header))
        return Written(generation, lengths)


class MemoryLogStore(LogStore):
    """A log store in this process's memory (tests, or to share logs between wardens)."""

    def __init__(self) -> None:
        super().__init__(MemoryStore())


class SQLiteLogStore(LogStore):
    """Logs in one SQLite file (the file may be a session store's or a summary cache's)."""

    def __init__(self, path: str | Path, *, timeout: float = 10.0) -> None:
        self.path = Path(path)
        self.sqlite = SQLiteStore(self.path, timeout=timeout, what="log store")
        super().__init__(self.sqlite)

    def close(self) -> None:
        self.sqlite.close()


class RedisLogStore(LogStore):
    """Logs in Redis under ``prefix`` (``contextwarden:log:KEY`` and its lists); ``ttl_s`` lets
    Redis expire idle conversations. ``url`` (``redis://host:6379/0``) or a ready ``client``
    with the ``redis.Redis`` API."""

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Any = None,
        prefix: str = "contextwarden:",
        ttl_s: int | None = 7 * 24 * 3600,
    ) -> None:
        self.redis = RedisStore(url, client=client, prefix=prefix, ttl_s=ttl_s, what="log store")
        super().__init__(self.redis)
