"""The proxy as a Starlette ASGI app: ``create_app(config)``; run it with uvicorn.

Routes:

* ``POST /v1/chat/completions`` (OpenAI), ``POST /v1/messages`` and
  ``POST /v1/messages/count_tokens`` (Anthropic): the warden reduces ``messages`` (and ``system``),
  everything else in the body is forwarded as sent; the reply streams back untouched with
  ``X-Contextwarden-Tokens-Before``, ``-Tokens-After``, ``-Compacted`` (messages a new compaction
  replaced, 0 if none) and, when one applied, ``-Compaction`` (its strategy) and
  ``-Summarizer`` (who wrote its summary) headers; ``X-Contextwarden-Warning: unknown_model: ...`` when the model's
  window is unknown (lossless layers only), or ``X-Contextwarden-Skipped: <reason>: <detail>``
  when the body was forwarded unchanged (see :mod:`contextwarden.proxy.transform`).
* ``POST /v1/responses`` (OpenAI Responses API): ``input`` and ``instructions`` through the same
  guard, the same headers; see :mod:`contextwarden.proxy.responses`.
* ``GET /stats``: JSON counters (:class:`~contextwarden.proxy.stats.ProxyStats`).
* anything else, any method: forwarded as is.

Auth headers (``Authorization``, ``x-api-key``, ``api-key``, ...) are forwarded and never logged or
stored. With ``config.token`` set, every request (``/stats`` too) must carry
``X-Contextwarden-Token: <token>`` (or ``Bearer <token>``), else 401; that header is not forwarded.
One JSON line per request goes to the ``contextwarden.proxy`` logger at INFO.
"""

from __future__ import annotations

import hmac
import itertools
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from http.cookiejar import CookieJar, CookiePolicy
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .._exceptions import ContextOverflowError
from .._warden import takes_keyword
from .config import ProxyConfig
from .errors import Provider, context_length_message, provider_for_path
from .forward import error_response, forward, request_headers
from .responses import RESPONSES_PATHS, responses_endpoint
from .stats import (
    CLIENT_LEFT,
    CLIENT_LEFT_STATUS,
    CONTEXT_OVERFLOW,
    WARDEN_ERROR,
    ProxyStats,
    RequestRecord,
)
from .stats import Route as RouteName
from .transform import Api, BodyOutcome, BodyWarden, transform_body
from .warden import build_cache, build_warden, request_summarizer

__all__ = ["CONFIG_ENV", "app_from_env", "app_stats", "configure_logging", "create_app"]

logger = logging.getLogger("contextwarden.proxy")

#: Upstream connection pools (see :attr:`_Proxy.client`); ``max_connections`` is shared out.
POOLS = 8

_CHAT_PATHS: dict[str, RouteName] = {
    "/v1/chat/completions": "openai",
    "/chat/completions": "openai",
    "/v1/messages": "anthropic",
    "/v1/messages/count_tokens": "count_tokens",
}


class _Proxy:
    """The app's state: config, warden, counters and the pooled upstream client."""

    def __init__(
        self, config: ProxyConfig, warden: BodyWarden, cache: MutableMapping[str, str] | None
    ) -> None:
        self.config = config
        self.warden = _OverflowPassing(warden)
        # a warden of the caller's own (create_app(warden=...)) may not take a summarizer
        self.per_request_summaries = takes_keyword(
            getattr(warden, "transform_openai", None), "summarizer"
        )
        self.cache = cache
        self.stats = ProxyStats()
        self._clients: list[httpx.AsyncClient] = []
        self._turn = itertools.count()
        self._token = config.token.encode("utf-8") if config.token else None

    @property
    def client(self) -> httpx.AsyncClient:
        """An upstream client, in turn from a few pools. httpcore scans every connection of a
        pool (and polls each idle one's socket) whenever a request starts or ends, in time that
        grows faster than the pool: under many agents at once that scan was the largest cost of
        relaying. Several smaller pools hold as many keep-alive connections, scanned a few at a
        time."""
        if not self._clients:
            # Made on first use so they belong to the serving event loop.
            pools = min(POOLS, self.config.max_connections)
            per_pool = self.config.max_connections // pools  # no more than max_connections
            self._clients = [self._new_client(per_pool) for _ in range(pools)]
        return self._clients[next(self._turn) % len(self._clients)]

    def _new_client(self, per_pool: int) -> httpx.AsyncClient:
        cfg = self.config
        client = httpx.AsyncClient(
            timeout=httpx.Timeout(cfg.timeout, connect=cfg.connect_timeout),
            limits=httpx.Limits(
                max_connections=per_pool,
                max_keepalive_connections=per_pool,
            ),
            follow_redirects=False,  # a redirect is the client's to follow, as without us
            # One client serves every caller: a cookie one upstream reply sets (Cloudflare's
            # __cf_bm...) must reach that caller only, never ride along on another's request.
            cookies=CookieJar(policy=_NoCookies()),
        )
        # httpx adds Accept, Accept-Encoding and User-Agent to every request it sends. The
        # upstream must see the client's own: the reply is relayed raw, so an encoding the
        # client did not ask for would reach it still encoded.
        for name in ("accept", "accept-encoding", "user-agent"):
            del client.headers[name]
        return client

    async def aclose(self) -> None:
        clients, self._clients = self._clients, []
        for client in clients:
            await client.aclose()
        close = getattr(self.cache, "close", None)
        if callable(close):
            close()

    def authorized(self, request: Request) -> bool:
        if self._token is None:
            return True
        given = request.headers.get("x-contextwarden-token", "")
        if given[:7].lower() == "bearer ":
            given = given[7:]
        return hmac.compare_digest(given.strip().encode("utf-8"), self._token)

    async def finish(self, record: RequestRecord) -> None:
        self.stats.record(record)
        logger.info(json.dumps(record.as_log(), separators=(",", ":")))

    async def deny(self, record: RequestRecord, provider: Provider, started: float) -> Response:
        record.status, record.error = 401, "bad_proxy_token"
        record.latency_ms = (time.perf_counter() - started) * 1000
        await self.finish(record)
        return error_response(
            provider, "unauthorized", "contextwarden proxy: missing or wrong X-Contextwarden-Token"
        )

    async def read_body(self, request: Request) -> bytes | None:
        """The request body, or None as soon as it is known to pass ``max_body_bytes``: from its
        ``Content-Length`` before reading a byte, else once the chunks read pass it (the rest is
        never held; the server discards it)."""
        limit = self.config.max_body_bytes
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            return None
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    async def too_large(
        self, record: RequestRecord, provider: Provider, started: float
    ) -> Response:
        record.status, record.error = 413, "body_too_large"
        record.latency_ms = (time.perf_counter() - started) * 1000
        await self.finish(record)
        limit = self.config.max_body_bytes
        return error_response(
            provider,
            "too_large",
            f"contextwarden proxy: the request body is over the limit of {limit:,} bytes "
            "(--max-body-bytes)",
        )

    async def overflow(
        self, record: RequestRecord, provider: Provider, started: float, exc: ContextOverflowError
    ) -> Response:
        record.status, record.error = 400, CONTEXT_OVERFLOW
        record.latency_ms = record.transform_ms = (time.perf_counter() - started) * 1000
        await self.finish(record)
        message = context_length_message(provider, exc.tokens, exc.limit)
        return error_response(provider, "context_length", message)

    async def client_left(self, record: RequestRecord, started: float) -> Response:
        """The client went away before its body was read: one log line, nothing forwarded."""
        record.status, record.error = CLIENT_LEFT_STATUS, CLIENT_LEFT
        record.latency_ms = (time.perf_counter() - started) * 1000
        await self.finish(record)
        return Response(status_code=CLIENT_LEFT_STATUS)  # nobody is left to read it

    def summarizer_for(self, request: Request, api: Api) -> Callable[[str | None], Any] | None:
        """The summarizer factory for this request (see :func:`request_summarizer`)."""
        if not self.per_request_summaries:
            return None
        return request_summarizer(self.config, request.headers, api)

    async def stats_endpoint(self, request: Request) -> Response:
        if not self.authorized(request):
            return error_response(
                "openai", "unauthorized", "missing or wrong X-Contextwarden-Token"
            )
        return JSONResponse(self.stats.snapshot())

    async def chat(self, request: Request) -> Response:
        started = time.perf_counter()
        path = request.url.path
        route = _CHAT_PATHS[path]
        provider = provider_for_path(path)
        record = RequestRecord(request.method, path, route)
        if not self.authorized(request):
            return await self.deny(record, provider, started)
        try:
            raw = await self.read_body(request)
        except ClientDisconnect:
            return await self.client_left(record, started)
        if raw is None:
            return await self.too_large(record, provider, started)
        api: Api = "openai" if route == "openai" else "anthropic"
        extra: dict[str, str] = {}
        if request.headers.get("content-encoding", "identity").lower() != "identity":
            body, extra["X-Contextwarden-Skipped"] = raw, "encoded_body"
            record.skipped = "encoded_body"
        else:
            try:
                outcome = await run_in_threadpool(
                    transform_body,
                    self.warden,
                    api,
                    raw,
                    window_cap=self.config.window,
                    window_override=self.config.warden.context_window,
                    cache_breakpoints=self.config.cache_breakpoints and route == "anthropic",
                    summarizer_for=self.summarizer_for(request, api),
                )
            except _Overflow as overflow:
                return await self.overflow(record, provider, started, overflow.error)
            except Exception as exc:
                # The warden could not read this body (an input nobody foresaw, or a bug of ours).
                # A drop-in proxy must not fail a call that would have worked without it: the body
                # goes upstream as sent, and the upstream judges it as it would without us.
                logger.warning(
                    "contextwarden proxy: the warden failed on %s (%s); forwarded unchanged",
                    path,
                    type(exc).__name__,
                    exc_info=True,
                )
                outcome = BodyOutcome(
                    raw, False, skipped=WARDEN_ERROR, detail=f"{type(exc).__name__} in the warden"
                )
            body = outcome.body
            record.model, record.stream = outcome.model, outcome.stream
            record.tokens_before, record.tokens_after = outcome.tokens_before, outcome.tokens_after
            record.compacted, record.strategy = outcome.compacted, outcome.strategy
            record.summarizer = outcome.summarizer
            record.skipped = outcome.skipped
            record.warning = outcome.warning.split(":", 1)[0] if outcome.warning else None
            record.transform_ms = (time.perf_counter() - started) * 1000
            extra = _outcome_headers(outcome)
        return await forward(
            self.client,
            method=request.method,
            url=self.config.upstream_url(_raw_path(request), request.url.query),
            headers=request_headers(request.headers.raw),
            content=body,
            provider=provider,
            record=record,
            started=started,
            extra_headers=extra,
            finish=self.finish,
        )

    async def passthrough(self, request: Request) -> Response:
        started = time.perf_counter()
        path = request.url.path
        provider = provider_for_path(path)
        record = RequestRecord(request.method, path, "passthrough")
        if not self.authorized(request):
            return await self.deny(record, provider, started)
        has_body = "content-length" in request.headers or "transfer-encoding" in request.headers
        content: AsyncIterator[bytes] | None = request.stream() if has_body else None
        return await forward(
            self.client,
            method=request.method,
            url=self.config.upstream_url(_raw_path(request), request.url.query),
            headers=request_headers(request.headers.raw, keep_length=True),
            content=content,
            provider=provider,
            record=record,
            started=started,
            extra_headers={},
            finish=self.finish,
        )


class _Overflow(Exception):
    """Carries the warden's :class:`ContextOverflowError` past :func:`transform_body`, which
    forwards unchanged whatever the warden reports it cannot handle, up to the app."""

    def __init__(self, error: ContextOverflowError) -> None:
        super().__init__(str(error))
        self.error = error


class _OverflowPassing:
    """The warden, with :class:`ContextOverflowError` raised as :class:`_Overflow`: a request
    that cannot be brought within the window is answered here, never sent oversize."""

    def __init__(self, warden: BodyWarden) -> None:
        self._warden = warden

    def transform_openai(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self._warden.transform_openai(*args, **kwargs)
        except ContextOverflowError as exc:
            raise _Overflow(exc) from exc

    def transform_anthropic(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self._warden.transform_anthropic(*args, **kwargs)
        except ContextOverflowError as exc:
            raise _Overflow(exc) from exc


class _NoCookies(CookiePolicy):
    """A cookie policy that neither stores nor sends anything: ``Set-Cookie`` and ``Cookie``
    headers pass through the proxy between one client and the upstream as plain headers."""

    netscape = True
    rfc2965 = False
    hide_cookie2 = False

    def set_ok(self, cookie: Any, request: Any) -> bool:
        return False

    def return_ok(self, cookie: Any, request: Any) -> bool:
        return False

    def domain_return_ok(self, domain: str, request: Any) -> bool:
        return False

    def path_return_ok(self, path: str, request: Any) -> bool:
        return False


class _AnyMethod:
    """An ASGI endpoint for a request handler: Starlette routes a plain ASGI app for every method
    (a function endpoint would default to GET only)."""

    def __init__(self, handler: Callable[[Request], Awaitable[Response]]) -> None:
        self.handler = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await self.handler(Request(scope, receive))
        await response(scope, receive, send)


def _outcome_headers(outcome: BodyOutcome) -> dict[str, str]:
    """The ``X-Contextwarden-*`` response headers describing what the warden did."""
    headers: dict[str, str] = {}
    if outcome.warning:
        headers["X-Contextwarden-Warning"] = _header_text(outcome.warning)
    if outcome.skipped:
        reason = f"{outcome.skipped}: {outcome.detail}" if outcome.detail else outcome.skipped
        headers["X-Contextwarden-Skipped"] = _header_text(reason)
        return headers
    headers["X-Contextwarden-Tokens-Before"] = str(outcome.tokens_before)
    headers["X-Contextwarden-Tokens-After"] = str(outcome.tokens_after)
    headers["X-Contextwarden-Compacted"] = str(outcome.compacted)
    if outcome.strategy:
        headers["X-Contextwarden-Compaction"] = _header_text(outcome.strategy)
    if outcome.summarizer:
        headers["X-Contextwarden-Summarizer"] = _header_text(outcome.summarizer)
    return headers


def _raw_path(request: Request) -> str:
    """The path as the client sent it (percent-escapes kept: ``%2F`` must not become ``/``)."""
    raw = request.scope.get("raw_path")
    return raw.decode("latin-1") if isinstance(raw, bytes) and raw else request.url.path


def _header_text(text: str, limit: int = 300) -> str:
    """One line of printable ASCII, at most ``limit`` characters (a header value must be)."""
    clean = "".join(c if 32 <= ord(c) < 127 else " " for c in text)
    return clean[:limit]


def create_app(
    config: ProxyConfig,
    *,
    warden: BodyWarden | None = None,
    cache: MutableMapping[str, str] | None = None,
) -> Starlette:
    """The proxy app for ``config``.

    By default it builds a :class:`~contextwarden.Warden` from ``config.warden`` whose compactor
    caches summaries in ``cache``, itself built from ``config`` (SQLite file by default, Redis when
    ``config.cache == "redis"``). Pass ``warden`` to use your own (``cache`` is then only closed at
    shutdown). The upstream client and the cache are closed when the app shuts down.
    """
    if warden is None:
        if cache is None:
            cache = build_cache(config)
        warden = build_warden(config, cache)
    proxy = _Proxy(config, warden, cache)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await proxy.aclose()

    routes = [Route("/stats", proxy.stats_endpoint, methods=["GET"])]
    routes += [Route(p, proxy.chat, methods=["POST"]) for p in _CHAT_PATHS]
    respond = responses_endpoint(proxy, warden)  # the Responses API: proxy/responses.py
    routes += [Route(p, respond, methods=["POST"]) for p in RESPONSES_PATHS]
    routes.append(Route("/{path:path}", _AnyMethod(proxy.passthrough)))
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.proxy = proxy
    return app


#: Environment variable carrying a ProxyConfig (JSON) to worker processes (``--workers``).
CONFIG_ENV = "CONTEXTWARDEN_PROXY_CONFIG_JSON"


def app_from_env() -> Starlette:
    """The app for a worker process started by uvicorn with ``--workers N``: the config comes as
    JSON in ``$CONTEXTWARDEN_PROXY_CONFIG_JSON`` (set by ``contextwarden proxy``)."""
    import os

    raw = os.environ.get(CONFIG_ENV)
    if not raw:
        raise RuntimeError(f"{CONFIG_ENV} is not set: start workers with `contextwarden proxy`")
    configure_logging()
    return create_app(ProxyConfig.model_validate_json(raw))


def configure_logging() -> None:
    """One JSON object a line on stderr for the ``contextwarden.proxy`` logger, unless the
    application configured that logger itself (used by ``contextwarden proxy`` and its workers)."""
    import sys

    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


def app_stats(app: Any) -> ProxyStats:
    """The :class:`ProxyStats` of an app made by :func:`create_app`."""
    proxy: _Proxy = app.state.proxy
    return proxy.stats
