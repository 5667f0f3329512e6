"""Serving the proxy on uvicorn (the ``proxy`` extra): :func:`app_for` and :func:`run`, and the
HTTP/1.1 protocol it serves with, uvicorn's h11 protocol with a deadline for a request's headers.

How it works: docs/proxy.md (`contextwarden.proxy.server`).
"""

from __future__ import annotations

import asyncio
import functools
import os
import secrets
import socket
import uuid
from collections.abc import Callable
from typing import Any, cast

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from .app import CONFIG_ENV, create_app, tune_gc
from .config import ProxyConfig
from .logs import LOG_FORMAT_ENV, LogFormat, configure_logging
from .metrics import RUN_ENV

__all__ = ["DeadlineH11Protocol", "app_for", "protocol", "run"]


class DeadlineH11Protocol(H11Protocol):
    """:class:`H11Protocol` closing a connection that has not sent a whole request head within
    ``header_timeout`` seconds (give uvicorn :func:`protocol`, which sets it)."""

    def __init__(self, *args: Any, header_timeout: float = 10.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout = header_timeout
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
        # Nagle off: asyncio turns it off only for sockets made with proto IPPROTO_TCP, and the
        # socket uvicorn binds for its worker processes has proto 0; a response written in two
        # parts would then wait for the client's delayed ACK (about 40 ms a request)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
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


def protocol(header_timeout: float) -> Callable[..., DeadlineH11Protocol]:
    """uvicorn's ``http=``: :class:`DeadlineH11Protocol` with this header deadline (a partial,
    which pickles: worker processes get the same deadline)."""
    return functools.partial(DeadlineH11Protocol, header_timeout=header_timeout)


def app_for(
    settings: ProxyConfig, workers: int = 1, log_format: LogFormat = "json"
) -> tuple[Any, ProxyConfig]:
    """What uvicorn serves for ``settings``, and the settings it serves: the app itself, or with
    ``workers`` > 1 the factory each worker process calls by name (it rebuilds the app from the
    settings, passed as JSON in ``$CONTEXTWARDEN_PROXY_CONFIG_JSON``, with a client key they share,
    and sums its counters with the others' through the store they share under one run id).
    Sets up the proxy's log lines in ``log_format``. Raises
    :class:`~contextwarden.ContextWardenError` for a config the warden cannot use."""
    configure_logging(log_format)
    if workers <= 1:
        return create_app(settings), settings
    if settings.client_key is None:  # the workers must agree on who is who
        settings = settings.model_copy(update={"client_key": secrets.token_hex(32)})
    os.environ[RUN_ENV] = uuid.uuid4().hex
    os.environ[LOG_FORMAT_ENV] = log_format
    # exclude_unset: the warden tells defaults from explicit settings (e.g. reserve_tokens)
    os.environ[CONFIG_ENV] = settings.model_dump_json(exclude_unset=True)
    return "contextwarden.proxy.app:app_from_env", settings


def run(app: Any, settings: ProxyConfig, workers: int = 1) -> None:
    """Serve ``app`` (from :func:`app_for`) in the foreground until interrupted (this process
    collects garbage as a proxy does: :func:`~.app.tune_gc`; each worker process does the
    same)."""
    if workers <= 1:
        tune_gc()
    # uvicorn's access log would duplicate our JSON line; its Server/Date headers would duplicate
    # the upstream's, which pass through.
    uvicorn.run(
        app,
        factory=workers > 1,
        workers=workers if workers > 1 else None,
        host=settings.host,
        port=settings.port,
        access_log=False,
        server_header=False,
        date_header=False,
        log_level="warning",
        # uvicorn calls ``http`` as it would a protocol class
        http=cast("type[asyncio.Protocol]", protocol(settings.header_timeout)),
    )
