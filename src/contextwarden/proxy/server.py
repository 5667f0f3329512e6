"""The HTTP/1.1 protocol the proxy serves with: uvicorn's h11 protocol with a deadline for a
request's headers.

uvicorn closes an idle keep-alive connection, but a connection that trickles a header line now
and then is never closed: a thousand of them hold a thousand sockets and buffers for good. Here a
connection has ``header_timeout`` seconds, from when it opens or its previous response ends, to
send a whole request head; then it is closed. (A slow body is the app's to cut: see
``body_timeout`` in :class:`~contextwarden.proxy.ProxyConfig`.)

:func:`tune_gc` sets the garbage collector of a proxy process (``contextwarden proxy`` calls
it, never the library).
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["GC_THRESHOLDS", "DeadlineH11Protocol", "tune_gc"]

#: The proxy process's collector thresholds (CPython's are 700, 10, 10). A request body of
#: thousands of messages makes hundreds of thousands of objects that live as long as their
#: conversation, and each collection of the older generations walks every one of them again:
#: with the defaults, a third of the CPU time of a body of 100,000 tiny messages. The state is
#: freed by reference counting (the conversations hold no cycles), so collecting less often
#: costs no memory that the state budget does not count.
GC_THRESHOLDS = (50_000, 20, 100)


def tune_gc() -> None:
    """Move what start-up made out of the collector's sight (:func:`gc.freeze`) and collect
    less often (:data:`GC_THRESHOLDS`): for the process that serves the proxy only."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


class DeadlineH11Protocol(H11Protocol):
    """:class:`H11Protocol` with a header deadline of :attr:`header_timeout` seconds (set once
    per process, before serving: ``contextwarden proxy`` sets it from the config)."""

    header_timeout: float = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.header_timeout, self._head_late)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.transport.is_closing():
            self._disarm()
        elif self.conn.their_state is h11.IDLE:
            self._arm()  # a head under way (or the next one): the deadline runs
        else:
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._disarm()
            self._arm()  # the next request's head: the same deadline

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)
