"""The proxy as a Starlette ASGI app: ``create_app(config)``; run it with uvicorn.

How it works: docs/proxy.md (`contextwarden.proxy.app`).
"""

from __future__ import annotations

import gc
import hmac
import os
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import httpx
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .._exceptions import ContextOverflowError
from .._model_overrides import registry_for
from .._warden import takes_keyword
from .clients import ClientState, ClientTable, client_id
from .config import ProxyConfig
from .errors import ErrorKind, context_length_message, provider_for_path, status_for
from .forward import Exchange, Finish, error_response, forward, request_headers
from .logs import LOG_FORMAT_ENV, configure_logging, log_request, logger
from .metrics import observing, publishing, shared_stats
from .outcome import climbs, fill_record, outcome_headers, raw_path, unread
from .recall_rounds import Answer, Rounds, answerer, forward_recall, recall_body
from .stats import CONTEXT_OVERFLOW, ProxyStats, RequestRecord, clip, registry_pricing
from .summaries import Breaker, SummaryBudget
from .transform import BodyOutcome, BodyWarden, transform_body
from .warden import WardenFactory, build_cache, build_log_store, request_summarizer
from .wire import Wire, wire_for

_T = TypeVar("_T")

__all__ = ["CONFIG_ENV", "GC_THRESHOLDS", "app_from_env", "create_app", "tune_gc"]

#: Upstream connection pools (see :meth:`_Proxy.pool`); ``max_connections`` is shared out.
POOLS = 8
#: The ``skipped`` reason of a POST to a path no wire format serves.
UNSUPPORTED_ROUTE = "unsupported_route"
#: Paths the proxy warns about forwarding untouched (one warning each).
UNSUPPORTED_PATHS = 100
#: What the path of a model call (as opposed to files, batches, models lists) holds, in the
#: APIs the proxy may stand in front of: chat, completions, messages, responses, Gemini's and
#: Vertex's ``:generateContent``/``:predict``/``:countTokens``, Bedrock's ``converse`` and
#: ``invoke``.
_MODEL_CALL = re.compile(
    r"complet|messages|responses|generat|chat|predict|converse|invoke|token", re.I
)


class _Proxy:
    """The app's state: config, the per-client table, counters and the upstream pools."""

    def __init__(
        self, config: ProxyConfig, warden: BodyWarden | None, cache: MutableMapping[str, str] | None
    ) -> None:
        self.config = config
        self.cache = cache
        #: the models the proxy knows (its config's ``models:`` section, then the built-in
        #: tables): the window a ``--window`` cap is compared with
        self.models = registry_for(config.warden)
        self.factory = (
            WardenFactory(config, cache, build_log_store(config)) if warden is None else None
        )
        # the caller's own warden is shared by every client (its isolation is the caller's)
        self._shared = _OverflowPassing(warden) if warden is not None else None
        self.clients = ClientTable(
            self._make_warden,
            key=config.client_key.encode("utf-8") if config.client_key else None,
            max_clients=config.max_clients,
            max_state_bytes=config.max_state_bytes,
            client_state_bytes=config.client_state_bytes,
            client_concurrency=config.client_concurrency,
            summary_concurrency=config.client_summary_concurrency,
            breaker=lambda: Breaker(
                config.summary_breaker_failures, config.summary_breaker_cooldown
            ),
        )
        # a warden of the caller's own (create_app(warden=...)) may not take a summarizer
        self.per_request_summaries = warden is None or takes_keyword(
            getattr(warden, "transform_openai", None), "summarizer"
        )
        self.stats = ProxyStats(pricing=registry_pricing(self.models))
        #: the run's counters in the store the workers share (none for a lone process)
        self.shared = shared_stats(cache)
        self._clients: list[httpx.AsyncClient] = []
        self._busy: list[int] = []
        self._token = config.token.encode("utf-8") if config.token else None
        self._transforms = anyio.CapacityLimiter(config.max_transforms)
        self.buffered = 0  # bytes of request bodies held now (the event loop's thread only)
        self._unsupported: set[str] = set()  # the paths warned about (see warn_unsupported)

    def _make_warden(self, client: str) -> Any:
        if self._shared is not None:
            return self._shared
        assert self.factory is not None
        return _OverflowPassing(self.factory(client))

    def pool(self) -> tuple[httpx.AsyncClient, Finish]:
        """The least busy upstream pool, and the :meth:`finish` of its request, which hands the
        pool's slot back. httpcore scans every connection of a pool whenever a request starts or
        ends, in time that grows faster than the pool: several smaller pools hold as many
        keep-alive connections, scanned a few at a time. Chosen by load, not in turn, so requests
        hanging in one pool never hold back the next ones while others sit idle."""
        if not self._clients:
            self.open_pools()
        i = min(range(len(self._busy)), key=self._busy.__getitem__)
        self._busy[i] += 1
        released = False

        async def finish(record: RequestRecord) -> None:
            nonlocal released
            if not released and i < len(self._busy):
                released = True
                self._busy[i] -= 1
            await self.finish(record)

        return self._clients[i], finish

    @property
    def pools_busy(self) -> list[int]:
        """Requests in flight in each upstream pool (this process)."""
        return list(self._busy)

    async def in_thread(self, state: ClientState, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` in a worker thread, at most ``client_concurrency`` of one client and
        ``max_transforms`` in all at once; a request waiting its turn holds no thread. A
        compaction stuck on a slow summarizer so holds one of its client's slots, never the
        threads other clients' requests run in."""
        async with state.limiter:
            return await anyio.to_thread.run_sync(fn, *args, limiter=self._transforms)

    def reserve(self, size: int) -> bool:
        """Count ``size`` more bytes of bodies held, unless that would pass
        ``max_buffered_bytes``."""
        if self.buffered + size > self.config.max_buffered_bytes:
            return False
        self.buffered += size
        return True

    def release(self, size: int) -> None:
        self.buffered = max(self.buffered - size, 0)

    def warm_up(self) -> None:
        """Load what the first request would (the formats, the default tokenizer) with a
        throwaway warden, so that no client's first request pays for it."""
        if self.factory is None:
            return
        body = b'{"model":"gpt-4o","messages":[{"role":"user","content":"warm up"}]}'
        try:
            transform_body(self.factory("warm-up"), "openai", body)
        except Exception:  # a start-up nicety only: the first request pays instead
            logger.debug("contextwarden proxy: warm-up failed", exc_info=True)

    def open_pools(self) -> None:
        """Make the upstream pools (at start-up, in the serving event loop), sharing one TLS
        context: each would otherwise load the CA bundle, tens of milliseconds apiece, on the
        first request."""
        if self._clients:
            return
        pools = min(POOLS, self.config.max_connections)
        per_pool = self.config.max_connections // pools  # no more than max_connections
        make_tls = getattr(httpx, "create_ssl_context", None)
        tls: Any = make_tls() if make_tls is not None else True
        self._clients = [self._new_client(per_pool, tls) for _ in range(pools)]
        self._busy = [0] * pools

    def _new_client(self, per_pool: int, tls: Any = True) -> httpx.AsyncClient:
        cfg = self.config
        client = httpx.AsyncClient(
            verify=tls,
            timeout=httpx.Timeout(cfg.timeout, connect=cfg.connect_timeout),
            limits=httpx.Limits(max_connections=per_pool, max_keepalive_connections=per_pool),
            follow_redirects=False,  # a redirect is the client's to follow, as without us
            # One client serves every caller: a cookie one upstream reply sets (Cloudflare's
            # __cf_bm...) must reach that caller only, never ride along on another's request.
            # No domain allowed: the jar neither stores nor sends one; the headers pass as sent.
            cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
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
        log_request(record.as_log(), warning=record.status >= 500 or bool(record.summary_failure))

    async def answer(
        self,
        exchange: Exchange,
        kind: ErrorKind,
        error: str,
        message: str,
        headers: dict[str, str] | None = None,
    ) -> Response:
        """The proxy's own answer to a request (the provider's error shape), logged and
        counted: ``error`` in the record, ``message`` to the client."""
        exchange.record.status, exchange.record.error = status_for(kind), error
        await exchange.done()
        return error_response(exchange.provider, kind, message, headers)

    async def checked(self, request: Request, exchange: Exchange) -> Response | None:
        """The answer to a request without the proxy's token or whose path climbs out of its
        route (see :func:`climbs`), None for one that may go on."""
        if not self.authorized(request):
            message = "contextwarden proxy: missing or wrong X-Contextwarden-Token"
            return await self.answer(exchange, "unauthorized", "bad_proxy_token", message)
        if climbs(request):
            message = (
                "contextwarden proxy: the path holds a '.' or '..' segment; send the path itself"
            )
            return await self.answer(exchange, "bad_path", "bad_path", message)
        return None

    async def read_body(self, request: Request) -> tuple[bytes | None, ErrorKind | None, int]:
        """``(body, None, held)``, or ``(None, why, held)`` as soon as it is known that the body
        cannot be taken: over ``max_body_bytes`` (``too_large``, from its ``Content-Length``
        before a byte is read, else once the chunks read pass it), over the process's budget
        for bodies held (``overloaded``), or not all there within ``body_timeout`` seconds
        (``read_timeout``). ``held`` bytes are counted in the budget until :meth:`release`."""
        limit = self.config.max_body_bytes
        declared = request.headers.get("content-length", "")
        size = 0
        held = 0
        if declared.isdigit():
            size = int(declared)
            if size > limit:
                return None, "too_large", 0
            if not self.reserve(size):
                return None, "overloaded", 0
            held = size
        chunks: list[bytes] = []
        got = 0
        try:
            with anyio.fail_after(self.config.body_timeout):
                async for chunk in request.stream():
                    got += len(chunk)
                    if got > limit:
                        return None, "too_large", held
                    if got > held:
                        if not self.reserve(got - held):
                            return None, "overloaded", held
                        held = got
                    chunks.append(chunk)
        except TimeoutError:
            return None, "read_timeout", held
        except BaseException:  # the client left (or the server stops): nothing is held now
            self.release(held)
            raise
        return b"".join(chunks), None, held

    async def refuse(self, exchange: Exchange, why: ErrorKind) -> Response:
        """The answer to a body that could not be taken (see :meth:`read_body`)."""
        cfg = self.config
        if why == "too_large":
            message = (
                f"contextwarden proxy: the request body is over the limit of "
                f"{cfg.max_body_bytes:,} bytes (--max-body-bytes)"
            )
            return await self.answer(exchange, why, "body_too_large", message)
        if why == "overloaded":
            message = (
                "contextwarden proxy: too many request bodies in flight "
                f"(max_buffered_bytes={cfg.max_buffered_bytes:,}); retry shortly"
            )
            retry = {"Retry-After": "1"}  # the SDKs retry a 503
            return await self.answer(exchange, why, "proxy_overloaded", message, retry)
        message = (
            "contextwarden proxy: the request body did not arrive within "
            f"{cfg.body_timeout:g} s (body_timeout)"
        )
        headers = {"Connection": "close"}
        return await self.answer(exchange, why, "body_timeout", message, headers)

    def summarizer_for(
        self, request: Request, wire: Wire, state: ClientState, budgets: list[SummaryBudget]
    ) -> Callable[[str | None], Any] | None:
        """The summarizer factory for this request: the one it brings (``upstream``: the
        request's model and credentials, see :func:`request_summarizer`) or the one the config
        names, behind this request's :class:`SummaryBudget` (one deadline, a call cap, the
        client's breaker, counted), which ``budgets`` collects. None when the warden's own
        (extractive) summary writes, or the warden takes no summarizer."""
        if not self.per_request_summaries:
            return None
        upstream = request_summarizer(self.config, request.headers, wire.name, request.url.query)
        configured = self.factory.summarizer if self.factory is not None else None
        if upstream is None and configured is None:
            return None
        cfg = self.config

        def make(model: str | None) -> Any:
            inner = upstream(model) if upstream is not None else configured
            if inner is None:
                return None
            budget = SummaryBudget(
                inner,
                state.breaker,
                timeout_s=cfg.warden.summarizer.timeout_s,
                max_calls=cfg.summary_max_calls,
                slots=state.summary_slots,
            )
            budgets.append(budget)
            return budget

        return make

    def client_for(self, request: Request) -> ClientState:
        """The client's state: its credential headers, or the Gemini API's ``key=`` in the
        query string."""
        headers = request.headers.raw
        key = request.query_params.get("key")
        if key and "x-goog-api-key" not in request.headers:
            headers = [*headers, (b"x-goog-api-key", key.encode("utf-8", "surrogateescape"))]
        return self.clients.get(client_id(headers, self.clients.key))

    async def route(self, request: Request) -> Response:
        """Every request but ``/stats``: a POST to a path a wire format serves goes through
        :meth:`handle`, anything else is forwarded (:meth:`passthrough`)."""
        wire = wire_for(request.url.path) if request.method == "POST" else None
        if wire is None:
            return await self.passthrough(request)
        return await self.handle(request, wire)

    async def handle(self, request: Request, wire: Wire) -> Response:
        """The one handler of every wire format: read the body, run the warden on it in a
        worker thread, then forward it (with the recall tool offered and answered when it
        shows a reference) and relay the reply."""
        record = RequestRecord(request.method, request.url.path, wire.name)
        exchange = Exchange(record, wire.provider, time.perf_counter(), self.finish)
        refused = await self.checked(request, exchange)
        if refused is not None:
            return refused
        held = 0
        try:
            try:
                raw, why, held = await self.read_body(request)
            except ClientDisconnect:
                return await exchange.client_left()
            if raw is None:
                return await self.refuse(exchange, why or "too_large")
            state = self.client_for(request)
            outcome = await self.transform(request, wire, state, raw, exchange)
            if isinstance(outcome, Response):
                return outcome
            exchange.extra_headers = outcome_headers(outcome, record)
            offered = await self.recall_offer(wire, state, outcome)
            client, exchange.finish = self.pool()
            url = self.config.upstream_url(raw_path(request), request.url.query)
            headers = request_headers(request.headers.raw)
            if offered is not None:
                body, answer = offered
                rounds = Rounds(client, url, headers, wire, body, outcome.fast_json, answer, record)
                return await forward_recall(rounds, exchange)
            return await forward(
                client,
                exchange,
                method=request.method,
                url=url,
                headers=headers,
                content=outcome.body,
            )
        finally:
            self.release(held)

    async def transform(
        self, request: Request, wire: Wire, state: ClientState, raw: bytes, exchange: Exchange
    ) -> BodyOutcome | Response:
        """The body to forward (see :func:`transform_body`), or the proxy's own answer when
        the request cannot be brought within the window or would go out invalid."""
        record, started = exchange.record, exchange.started
        if request.headers.get("content-encoding", "identity").lower() != "identity":
            outcome = BodyOutcome(raw, False, skipped="encoded_body")
        elif not callable(getattr(state.warden, wire.method, None)):
            outcome = BodyOutcome(raw, False, skipped="unsupported", detail="custom body warden")
        else:
            budgets: list[SummaryBudget] = []
            cfg = self.config
            try:
                outcome = await self.in_thread(
                    state,
                    lambda: transform_body(
                        state.warden,
                        wire,
                        raw,
                        path=request.url.path,
                        window_cap=cfg.window,
                        window_override=cfg.warden.context_window,
                        cache_breakpoints=cfg.cache_breakpoints,
                        summarizer_for=self.summarizer_for(request, wire, state, budgets),
                        bodies=state.bodies,
                        models=self.models,
                    ),
                )
            except _Overflow as overflow:
                record.transform_ms = (time.perf_counter() - started) * 1000
                error = overflow.error
                message = context_length_message(wire.provider, error.tokens, error.limit)
                return await self.answer(exchange, "context_length", CONTEXT_OVERFLOW, message)
            except Exception as exc:
                outcome = unread(raw, request.url.path, exc)
            self.clients.account(state, outcome.conversation, len(raw))
            fill_record(record, outcome, budgets, started)
            if outcome.refused is not None:
                logger.warning("%s", outcome.refused)
                refused = outcome.refused
                return await self.answer(exchange, "invalid_request", "invalid_output", refused)
            return outcome
        fill_record(record, outcome, [], started)
        return outcome

    async def recall_offer(
        self, wire: Wire, state: ClientState, outcome: BodyOutcome
    ) -> tuple[dict[str, Any], Answer] | None:
        """The forwarded body as parsed and how to answer the recall tool, when the tool is to
        be offered: ``recall_tool`` on, a route that offers it, a request the warden ran on,
        with a ``recall`` of its own, whose result shows a ``cw:`` reference or whose client
        sends tools (:func:`recall_body`)."""
        if not self.config.recall_tool or not wire.recall:
            return None
        recall = getattr(getattr(state.warden, "inner", state.warden), "recall", None)
        if outcome.skipped or not outcome.conversation or not callable(recall):
            return None
        body = recall_body(wire, outcome)
        return None if body is None else (body, answerer(recall, outcome.conversation))

    def warn_unsupported(self, path: str) -> None:
        """One warning per path (of the first :data:`UNSUPPORTED_PATHS`) that a POST went
        upstream untouched: its API is not one the proxy serves."""
        if path in self._unsupported or len(self._unsupported) >= UNSUPPORTED_PATHS:
            return
        self._unsupported.add(path)
        logger.warning(
            "contextwarden proxy: POST %s is not an API the proxy serves (chat completions, "
            "messages, responses, Gemini generateContent); forwarded unchanged, counted as "
            "skipped",
            clip(path),
        )

    async def passthrough(self, request: Request) -> Response:
        path = request.url.path
        record = RequestRecord(request.method, path, "passthrough")
        exchange = Exchange(record, provider_for_path(path), time.perf_counter(), self.finish)
        refused = await self.checked(request, exchange)
        if refused is not None:
            return refused
        if request.method == "POST" and _MODEL_CALL.search(path):
            # a model call in an API the proxy does not serve: never silently
            record.skipped = UNSUPPORTED_ROUTE
            self.warn_unsupported(path)
        has_body = "content-length" in request.headers or "transfer-encoding" in request.headers
        content: AsyncIterator[bytes] | None = request.stream() if has_body else None
        client, exchange.finish = self.pool()
        return await forward(
            client,
            exchange,
            method=request.method,
            url=self.config.upstream_url(raw_path(request), request.url.query),
            headers=request_headers(request.headers.raw, keep_length=True),
            content=content,
        )


class _Overflow(Exception):
    """Carries the warden's :class:`ContextOverflowError` past :func:`transform_body`, which
    forwards unchanged whatever the warden reports it cannot handle, up to the app."""

    def __init__(self, error: ContextOverflowError) -> None:
        super().__init__(str(error))
        self.error = error


#: The warden's calls that may raise ContextOverflowError (see :class:`_OverflowPassing`).
_WARDEN_CALLS = frozenset(
    {"transform", "transform_openai", "transform_anthropic", "transform_responses"}
)


class _OverflowPassing:
    """The warden, with :class:`ContextOverflowError` raised as :class:`_Overflow`: a request
    that cannot be brought within the window is answered here, never sent oversize."""

    def __init__(self, warden: BodyWarden) -> None:
        self._warden = warden

    @property
    def inner(self) -> BodyWarden:
        """The warden itself."""
        return self._warden

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._warden, name)
        if name not in _WARDEN_CALLS:
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return found(*args, **kwargs)
            except ContextOverflowError as exc:
                raise _Overflow(exc) from exc

        return call


class _AnyMethod:
    """An ASGI endpoint for a request handler: Starlette routes a plain ASGI app for every method
    (a function endpoint would default to GET only)."""

    def __init__(self, handler: Callable[[Request], Awaitable[Response]]) -> None:
        self.handler = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await self.handler(Request(scope, receive))
        await response(scope, receive, send)


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
    if warden is None and cache is None and config.cache != "memory":
        cache = build_cache(config)
    proxy = _Proxy(config, warden, cache)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        proxy.open_pools()
        await anyio.to_thread.run_sync(proxy.warm_up)
        try:
            async with publishing(proxy):
                yield
        finally:
            await proxy.aclose()

    routes = [Route(p, fn, methods=["GET"]) for p, fn in observing(proxy).items()]
    routes.append(Route("/{path:path}", _AnyMethod(proxy.route)))
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.proxy = proxy
    return app


#: Environment variable carrying a ProxyConfig (JSON) to worker processes (``--workers``).
CONFIG_ENV = "CONTEXTWARDEN_PROXY_CONFIG_JSON"


def app_from_env() -> Starlette:
    """The app for a worker process started by uvicorn with ``--workers N``: the config comes as
    JSON in ``$CONTEXTWARDEN_PROXY_CONFIG_JSON`` (set by ``contextwarden proxy``); the header
    deadline comes with the protocol uvicorn gives the worker (:func:`.server.protocol`)."""
    raw = os.environ.get(CONFIG_ENV)
    if not raw:
        raise RuntimeError(f"{CONFIG_ENV} is not set: start workers with `contextwarden proxy`")
    configure_logging("text" if os.environ.get(LOG_FORMAT_ENV) == "text" else "json")
    config = ProxyConfig.model_validate_json(raw)
    app = create_app(config)
    tune_gc()
    return app


#: The proxy process's collector thresholds (CPython's are 700, 10, 10). A request body of
#: thousands of messages makes hundreds of thousands of objects that live as long as their
#: conversation, and each collection of the older generations walks every one of them again:
#: with the defaults, a fifth of the CPU time of a body of 100,000 tiny messages. The state is
#: freed by reference counting (the conversations and the body reader hold no cycles), so
#: collecting less often costs no memory that the state budget does not count.
GC_THRESHOLDS = (50_000, 20, 100)


def tune_gc() -> None:
    """Move what start-up made out of the collector's sight (:func:`gc.freeze`) and collect
    less often (:data:`GC_THRESHOLDS`): for a process that serves the proxy (``contextwarden
    proxy`` and its workers), never the library's callers."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
