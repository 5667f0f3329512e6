"""Forwarding one request to the upstream and streaming its answer back, byte for byte.

How it works: docs/proxy.md (`contextwarden.proxy.forward`).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field

import httpx
from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from .errors import ErrorKind, Provider, error_body, error_sse, status_for
from .stats import CLIENT_LEFT, CLIENT_LEFT_STATUS, RequestRecord

__all__ = [
    "HOP_BY_HOP",
    "Exchange",
    "UpstreamResponse",
    "broke",
    "encoded",
    "error_response",
    "failed",
    "forward",
    "relay",
    "request_headers",
    "response_headers",
    "unreached",
]

#: RFC 9110 7.6.1 connection-specific headers, never forwarded in either direction.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
#: Request headers the proxy sets or owns: host/content-length are recomputed for the new body, and
#: the proxy's own token never leaves the proxy.
_DROP_REQUEST = HOP_BY_HOP | {"host", "content-length", "x-contextwarden-token"}

Finish = Callable[[RequestRecord], Awaitable[None]]


@dataclass
class Exchange:
    """One request as the proxy answers it: its ``record``, whose error shape the proxy's own
    answers take (``provider``), when it started, the headers added to its reply, and
    ``finish``, handed the record exactly once, when the answer is over."""

    record: RequestRecord
    provider: Provider
    started: float
    finish: Finish
    extra_headers: dict[str, str] = field(default_factory=dict)

    def answered(self, status: int) -> None:
        """The status line is known: its status and how long it took."""
        self.record.status = status
        self.record.headers_ms = (time.perf_counter() - self.started) * 1000

    async def done(self) -> None:
        """The record given its latency and handed to ``finish``."""
        self.record.latency_ms = (time.perf_counter() - self.started) * 1000
        await self.finish(self.record)

    async def client_left(self) -> Response:
        """The client went away before its answer: one log line, nothing more."""
        self.record.status, self.record.error = CLIENT_LEFT_STATUS, CLIENT_LEFT
        await self.done()
        return Response(status_code=CLIENT_LEFT_STATUS)  # nobody is left to read it


def _hop_names(raw: list[tuple[bytes, bytes]]) -> frozenset[str]:
    """The fixed hop-by-hop names plus those the message's ``Connection`` header lists."""
    listed = {
        token.strip().lower()
        for k, v in raw
        if k.lower() == b"connection"
        for token in v.decode("latin-1").split(",")
    }
    return HOP_BY_HOP | listed


def request_headers(
    raw: Iterable[tuple[bytes, bytes]], *, keep_length: bool = False
) -> list[tuple[bytes, bytes]]:
    """The client's headers to send upstream: all of them (auth included, in order, repeated ones
    kept) except hop-by-hop ones (and any the ``Connection`` header names), ``Host``,
    ``X-Contextwarden-Token`` and, unless ``keep_length``, ``Content-Length``."""
    items = list(raw)
    drop = _hop_names(items) | (
        _DROP_REQUEST - {"content-length"} if keep_length else _DROP_REQUEST
    )
    return [(k, v) for k, v in items if k.lower().decode("latin-1") not in drop]


def response_headers(raw: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The upstream's headers to send back: all but hop-by-hop ones (and any ``Connection``
    names); ``Content-Length`` and ``Content-Encoding`` stay, as the body is relayed raw."""
    items = list(raw)
    drop = _hop_names(items)
    return [(k, v) for k, v in items if k.lower().decode("latin-1") not in drop]


def encoded(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    """``headers`` as ASGI raw headers (lower-case names)."""
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]


def error_response(
    provider: Provider, kind: ErrorKind, message: str, headers: dict[str, str] | None = None
) -> Response:
    """A proxy-made error (401/502/504/500) in the provider's JSON error format."""
    return JSONResponse(
        error_body(provider, kind, message), status_code=status_for(kind), headers=headers
    )


class UpstreamResponse(StreamingResponse):
    """Relays an open httpx response. Closes it and calls ``finish`` exactly once, before the end
    of the body goes out, so a client that has read the whole reply finds it in ``/stats`` and the
    log; or when the client goes away mid-stream. With a ``Content-Length`` the end is the chunk
    that completes it (the client stops reading there), else the terminating empty chunk.
    ``sized=False``: the body is not the upstream's as sent (its ``Content-Length`` is not it)."""

    def __init__(
        self,
        upstream: httpx.Response,
        body: AsyncGenerator[bytes, None],
        raw_headers: list[tuple[bytes, bytes]],
        finish: Callable[[], Awaitable[None]],
        *,
        sized: bool = True,
    ) -> None:
        super().__init__(body, status_code=upstream.status_code)
        self.raw_headers = raw_headers
        self._body = body
        self._upstream = upstream
        self._finish = finish
        self._finished = False
        length = upstream.headers.get("content-length", "")
        self._length = int(length) if sized and length.isdigit() else None

    async def _complete(self) -> None:
        if not self._finished:
            self._finished = True
            await self._upstream.aclose()
            await self._finish()

    async def stream_response(self, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        sent = 0
        async for chunk in self._body:
            sent += len(chunk)
            if self._length is not None and sent >= self._length:
                await self._complete()
                await send({"type": "http.response.body", "body": chunk, "more_body": False})
                await self._body.aclose()
                return
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await self._complete()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._complete()


async def forward(
    client: httpx.AsyncClient,
    exchange: Exchange,
    *,
    method: str,
    url: str,
    headers: list[tuple[bytes, bytes]],
    content: bytes | AsyncIterator[bytes] | None,
) -> Response:
    """Send the request upstream and return a response that streams the answer back (the
    exchange done when it is over, or failed before it began)."""
    request = client.build_request(method, url, headers=headers, content=content)
    try:
        upstream = await client.send(request, stream=True)
    except ClientDisconnect:  # an upload streamed through, and its client went away mid-way
        return await exchange.client_left()
    except httpx.TransportError as exc:
        return await failed(exchange, exc)
    return relay(upstream, exchange)


def relay(upstream: httpx.Response, exchange: Exchange) -> Response:
    """The response relaying the open ``upstream`` answer to the client, raw, with the
    exchange's headers; the exchange done when it is over."""
    exchange.answered(upstream.status_code)
    record = exchange.record
    out_headers = response_headers(upstream.headers.raw) + encoded(exchange.extra_headers)
    is_sse = upstream.headers.get("content-type", "").startswith("text/event-stream")

    async def body() -> AsyncGenerator[bytes, None]:
        try:
            async for chunk in upstream.aiter_raw():
                yield chunk
        except httpx.TransportError as exc:
            record.error, kind, message = broke(exc)
            if is_sse:
                yield error_sse(exchange.provider, kind, message)

    return UpstreamResponse(upstream, body(), out_headers, exchange.done)


def broke(exc: httpx.TransportError) -> tuple[str, ErrorKind, str]:
    """``(record error, kind, message)`` for an upstream stream that failed after its status
    line went out."""
    if isinstance(exc, httpx.TimeoutException):
        return "upstream_timeout", "timeout", "the upstream stopped sending (timed out)"
    return "upstream_broken", "unreachable", f"the upstream stream broke: {type(exc).__name__}"


def unreached(exc: httpx.TransportError) -> tuple[str, ErrorKind, str]:
    """``(record error, kind, message)`` for an upstream that timed out or could not be reached
    before it answered. The exception names the failure class only: its text can carry the
    upstream URL."""
    if isinstance(exc, httpx.TimeoutException):
        return "upstream_timeout", "timeout", f"did not answer in time ({type(exc).__name__})"
    return "upstream_unreachable", "unreachable", f"could not be reached ({type(exc).__name__})"


async def failed(exchange: Exchange, exc: httpx.TransportError) -> Response:
    """The proxy's own error for an upstream that timed out or could not be reached (the
    exchange done)."""
    exchange.record.error, kind, what = unreached(exc)
    exchange.answered(status_for(kind))
    await exchange.done()
    message = f"contextwarden proxy: the upstream {what}"
    return error_response(exchange.provider, kind, message, exchange.extra_headers)
