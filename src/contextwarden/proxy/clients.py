"""Per-client state: every client of the proxy gets its own warden, body reader, summary-cache
namespace and summary breaker, so nothing one client sent can shape, or be probed from, another
client's requests.

How it works: docs/proxy.md (`contextwarden.proxy.clients`).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from typing import Any

import anyio

from ..formats._body import BodyReader
from .summaries import Breaker

__all__ = ["ClientState", "ClientTable", "ScopedCache", "client_id"]

#: Request headers that carry a client's credential.
CREDENTIAL_HEADERS = ("authorization", "x-api-key", "api-key")
#: The Gemini API's key header (or its ``key=`` query parameter, which the proxy reads as this
#: header): hashed only when present, so that other clients' ids stay what they were.
GOOGLE_KEY = "x-goog-api-key"
#: Memory a conversation's state costs per byte of its last request body, for a warden that
#: cannot count its own: measured on loopback before the state was counted by its parts,
#: conversations of 6.95 MB of tool output grew the process by 27 MB each; one more for the
#: allocator's slack and the request being read.
STATE_PER_BODY_BYTE = 5
#: What a client costs beyond what its parts count: its warden's and reader's own objects, its
#: limiter, breaker and semaphore.
CLIENT_BYTES = 64 << 10
#: Bodies one client's body reader keeps (one per conversation).
READER_CONVERSATIONS = 64


def client_id(headers: Iterable[tuple[bytes, bytes]], key: bytes) -> str:
    """A short keyed hash of the credential headers (all of them, in a fixed order): equal for
    one credential, unrelated across credentials, and not the credential."""
    mac = hmac.new(key, digestmod=hashlib.sha256)
    names = (*CREDENTIAL_HEADERS, GOOGLE_KEY)
    found: dict[str, list[bytes]] = {}
    for k, v in headers:
        name = k.decode("latin-1").lower()
        if name in names:
            found.setdefault(name, []).append(v)
    for name in names:
        value = b"\x00".join(found[name]).decode("latin-1") if name in found else None
        if name == GOOGLE_KEY and value is None:
            continue
        mac.update(name.encode() + b"\x01")
        if value is not None:
            mac.update(value.strip().encode("utf-8", "surrogateescape"))
        mac.update(b"\x02")
    return mac.hexdigest()[:24]


class ScopedCache(MutableMapping[str, str]):
    """One client's view of the shared summary cache: its keys carry the client id, so a
    summary written for one client is never found by another."""

    def __init__(self, cache: MutableMapping[str, str], scope: str) -> None:
        self._cache = cache
        self._prefix = f"client:{scope}:"

    def __getitem__(self, key: str) -> str:
        return self._cache[self._prefix + key]

    def __setitem__(self, key: str, value: str) -> None:
        self._cache[self._prefix + key] = value

    def __delitem__(self, key: str) -> None:
        del self._cache[self._prefix + key]

    def __iter__(self) -> Iterator[str]:
        n = len(self._prefix)
        return (k[n:] for k in list(self._cache) if k.startswith(self._prefix))

    def __len__(self) -> int:
        return sum(1 for _ in self)


class ClientState:
    """One client's warden and everything else that holds what it sent."""

    def __init__(
        self,
        cid: str,
        warden: Any,
        breaker: Breaker,
        concurrency: int,
        reader_bytes: int,
        summary_slots: int = 8,
    ) -> None:
        self.id = cid
        self.warden = warden
        self.bodies = BodyReader(max_conversations=READER_CONVERSATIONS, max_bytes=reader_bytes)
        self._unread = 0  # turns of the slots bodies the warden did not run on are counted in
        self.breaker = breaker
        self.limiter = anyio.CapacityLimiter(concurrency)
        self.summary_slots = threading.BoundedSemaphore(summary_slots)
        #: conversation id -> the bytes of its last body times STATE_PER_BODY_BYTE (what a
        #: warden that cannot count its own is estimated at), least recently used first
        self.conversations: OrderedDict[str, int] = OrderedDict()
        self.bytes = 0
        self.used = time.monotonic()


class ClientTable:
    """The bounded table of :class:`ClientState` (see docs/proxy.md). ``make_warden(cid)``
    builds a new client's warden. Thread-safe."""

    def __init__(
        self,
        make_warden: Callable[[str], Any],
        *,
        key: bytes | None = None,
        max_clients: int = 1024,
        max_state_bytes: int = 512 << 20,
        client_state_bytes: int = 512 << 20,
        client_concurrency: int = 64,
        summary_concurrency: int = 8,
        breaker: Callable[[], Breaker] = Breaker,
    ) -> None:
        self._make_warden = make_warden
        self.key = key if key is not None else os.urandom(32)
        self.max_clients = max_clients
        self.max_state_bytes = max_state_bytes
        self.client_state_bytes = client_state_bytes
        self.client_concurrency = client_concurrency
        self.summary_concurrency = summary_concurrency
        self._breaker = breaker
        self._clients: OrderedDict[str, ClientState] = OrderedDict()
        self._lock = threading.Lock()
        self.bytes = 0
        self.evicted_clients = 0
        self.evicted_conversations = 0

    def __len__(self) -> int:
        return len(self._clients)

    def get(self, cid: str) -> ClientState:
        """The client's state, made on its first request; the least recently used client goes
        when the table is full."""
        with self._lock:
            state = self._clients.get(cid)
            if state is not None:
                self._clients.move_to_end(cid)
                state.used = time.monotonic()
                return state
        # outside the lock: building a warden may take a few milliseconds
        warden = self._make_warden(cid)
        reader = max(1 << 20, self.client_state_bytes // 4)
        fresh = ClientState(
            cid, warden, self._breaker(), self.client_concurrency, reader, self.summary_concurrency
        )
        with self._lock:
            state = self._clients.get(cid)
            if state is None:
                state = self._clients[cid] = fresh
            self._clients.move_to_end(cid)
            while len(self._clients) > self.max_clients:
                self._drop(next(iter(self._clients)))
            return state

    def account(self, state: ClientState, conversation: str, body_bytes: int) -> None:
        """Record that ``conversation`` of ``state`` was last seen with a body of
        ``body_bytes``, count what the client keeps now, then bring the client within its quota
        and the table within its budget. A body the warden did not run on (no
        ``conversation``) may still be held by the client's body reader: it is counted in one
        of as many slots as the reader keeps."""
        if not conversation:
            conversation = f"unread:{state._unread % READER_CONVERSATIONS}"
            state._unread += 1
        size = body_bytes * STATE_PER_BODY_BYTE
        with self._lock:
            if self._clients.get(state.id) is not state:
                return  # dropped meanwhile: nothing of it is kept any more
            state.conversations.pop(conversation, None)
            state.conversations[conversation] = size
            self._measure(state)
            limit = getattr(state.warden, "max_conversations", None) or 512
            while len(state.conversations) > limit:
                self._forget_oldest(state)
            while state.bytes > self.client_state_bytes and len(state.conversations) > 1:
                self._forget_oldest(state)
            while self.bytes > self.max_state_bytes:
                victim = next((c for c in self._clients if c != state.id), None)
                if victim is None:
                    break
                self._drop(victim)
            if self.bytes > self.max_state_bytes:
                while state.bytes > self.max_state_bytes and len(state.conversations) > 1:
                    self._forget_oldest(state)

    def _measure(self, state: ClientState) -> None:
        """Count what ``state`` keeps now (see docs/proxy.md)."""
        held = held_bytes(state)
        self.bytes += held - state.bytes
        state.bytes = held

    def _forget_oldest(self, state: ClientState) -> None:
        conversation, _ = state.conversations.popitem(last=False)
        self.evicted_conversations += 1
        forget(state.warden, conversation)
        state.bodies.clear()  # it may hold that conversation's body too (re-read when needed)
        self._measure(state)

    def _drop(self, cid: str) -> None:
        state = self._clients.pop(cid)
        self.bytes -= state.bytes
        self.evicted_clients += 1
        state.bodies.clear()

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {
                "clients": len(self._clients),
                "state_bytes": self.bytes,
                "evicted_clients": self.evicted_clients,
                "evicted_conversations": self.evicted_conversations,
            }


def held_bytes(state: ClientState) -> int:
    """What a client keeps alive, as its parts count it (see docs/proxy.md)."""
    inner = getattr(state.warden, "_warden", state.warden)  # the overflow adapter wraps it
    measure = getattr(inner, "state_bytes", None)
    if not callable(measure):
        return state.bodies.kept_bytes + sum(state.conversations.values())
    return CLIENT_BYTES + state.bodies.kept_bytes + int(measure())


def forget(warden: Any, conversation: str) -> None:
    """Make ``warden`` drop what it keeps of ``conversation`` (its ``#n`` branches are separate
    ids, each accounted on its own), when it can (the built-in warden's ``forget``; the
    overflow adapter's wrapped warden); any other keeps it, bounded by its own limits."""
    inner = getattr(warden, "_warden", warden)  # the overflow adapter wraps the warden
    method = getattr(inner, "forget", None)
    if callable(method):
        method(conversation)
