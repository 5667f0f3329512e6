"""``GET /stats`` (JSON) and ``GET /metrics`` (Prometheus text format) of the proxy, and the
publishing of a worker's counters to the store the workers share (:class:`~.stats.SharedStats`).

How it works: docs/proxy.md (`contextwarden.proxy.metrics`).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any, Protocol

import anyio
import anyio.to_thread
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .clients import ClientTable
from .forward import error_response
from .stats import ProxyStats, SharedStats

__all__ = ["COUNTERS", "GAUGES", "RUN_ENV", "Observed", "metrics_text", "observing", "publishing"]

#: Names the run whose workers sum their counters (set by ``contextwarden proxy --workers N``
#: for its worker processes).
RUN_ENV = "CONTEXTWARDEN_PROXY_RUN"

#: Seconds between two publications of a worker's counters, when it has news.
PUBLISH_EVERY_S = 1.0

#: ``/stats`` counters, each the metric ``contextwarden_<key>_total``: its help
COUNTERS: dict[str, str] = {
    "requests": "Requests served, all routes.",
    "transformed": "Chat requests the warden ran on.",
    "skipped": "Chat requests forwarded as sent (the log says why).",
    "warden_errors": "Chat requests the warden raised on (forwarded as sent).",
    "unbounded": "Requests for a model of unknown window, not bounded.",
    "tokens_before": "Input tokens of the requests as the clients sent them.",
    "tokens_after": "Input tokens of the requests as forwarded.",
    "billed_before": "Input as sent, at cache prices, in input-token equivalents.",
    "billed_after": "Input as forwarded, at cache prices, in input-token equivalents.",
    "cost_usd_before": "USD of the requests as sent (models with a known price).",
    "cost_usd_after": "USD of the requests as forwarded and of the summary calls.",
    "compactions": "Compactions made.",
    "llm_summaries": "Compaction summaries an LLM wrote.",
    "extractive_summaries": "Compaction summaries written offline.",
    "errors": "Responses with a status of 400 or more.",
    "context_overflows": "Requests over the window even when reduced.",
    "stream_failures": "Streams broken after their status line.",
    "client_disconnects": "Clients gone before their answer.",
    "upstream_timeouts": "Requests the upstream did not answer in time.",
    "upstream_unreachable": "Requests for which the upstream could not be reached.",
    "summary_calls": "Summary calls made to an LLM.",
    "summary_input_tokens": "Input tokens of the summary calls.",
    "summary_output_tokens": "Output tokens of the summary calls.",
    "summary_failed_calls": "Summary calls that failed.",
    "summary_failures": "Requests whose summary failed (the reason is logged).",
    "summary_breaker_open": "Requests that found the summary breaker open.",
    "summary_pool_full": "Requests that found the summary pool busy.",
    "recall_offered": "Requests offered the recall tool.",
    "recall_calls": "Recall calls answered by the proxy.",
    "recall_unknown_refs": "Recall calls naming an unknown reference.",
    "recall_rounds": "Extra upstream rounds the recall calls took.",
    "evicted_clients": "Clients whose state was dropped for room.",
    "evicted_conversations": "Conversations dropped for room.",
}

#: ``/stats`` key -> (metric name without ``contextwarden_``, help)
GAUGES: dict[str, tuple[str, str]] = {
    "clients": ("clients", "Clients whose state is held."),
    "state_bytes": ("state_bytes", "Bytes of conversation state held."),
    "buffered_bytes": ("buffered_bytes", "Bytes of request bodies held now (this process)."),
    "workers": ("workers", "Worker processes these figures sum."),
    "started_at": ("start_time_seconds", "When the earliest worker started, epoch seconds."),
    "uptime_s": ("uptime_seconds", "Seconds since then."),
}

#: ``/stats`` table -> (metric name, label, help)
TABLES: dict[str, tuple[str, str, str]] = {
    "by_route": ("route_requests", "route", "Requests by route."),
    "by_status": ("responses", "status", "Responses by HTTP status."),
    "by_model": ("model_requests", "model", "Requests by model (the most recent 100 models)."),
}


class Observed(Protocol):
    """What the app state gives these endpoints."""

    stats: ProxyStats
    clients: ClientTable
    buffered: int
    shared: SharedStats | None

    @property
    def pools_busy(self) -> list[int]: ...

    def authorized(self, request: Request) -> bool: ...


def _own(proxy: Observed) -> dict[str, Any]:
    return proxy.stats.snapshot() | proxy.clients.snapshot()


def current(proxy: Observed) -> dict[str, Any]:
    """The figures ``/stats`` shows (blocking when a store is shared: call in a thread)."""
    own = _own(proxy)
    if proxy.shared is None:
        out = own | {"workers": 1}
    else:
        proxy.shared.publish(own)
        out = proxy.shared.gather(own)
    return out | {"buffered_bytes": proxy.buffered, "pools_busy": list(proxy.pools_busy)}


class _Figures:
    """A prometheus_client collector over one set of figures."""

    def __init__(self, figures: dict[str, Any]) -> None:
        self.figures = figures

    def collect(self) -> Iterator[Metric]:
        f = self.figures
        for key, text in COUNTERS.items():
            if key in f:
                yield CounterMetricFamily(f"contextwarden_{key}", text, value=float(f[key]))
        for key, (name, text) in GAUGES.items():
            if key in f:
                yield GaugeMetricFamily(f"contextwarden_{name}", text, value=float(f[key]))
        for key, (name, label, text) in TABLES.items():
            family = CounterMetricFamily(f"contextwarden_{name}", text, labels=[label])
            for value, count in sorted(f.get(key, {}).items()):
                family.add_metric([str(value)], float(count))
            yield family
        calls = CounterMetricFamily(
            "contextwarden_summary_model_calls", "Summary calls by model.", labels=["model"]
        )
        tokens = CounterMetricFamily(
            "contextwarden_summary_model_tokens",
            "Summary call tokens by model and direction.",
            labels=["model", "direction"],
        )
        for model, entry in sorted(f.get("summaries_by_model", {}).items()):
            calls.add_metric([model], float(entry.get("calls", 0)))
            tokens.add_metric([model, "input"], float(entry.get("input_tokens", 0)))
            tokens.add_metric([model, "output"], float(entry.get("output_tokens", 0)))
        yield calls
        yield tokens


def metrics_text(figures: dict[str, Any]) -> bytes:
    """``figures`` (a ``/stats`` answer) in the Prometheus text exposition format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Figures(figures))
    return generate_latest(registry)


def observing(proxy: Observed) -> dict[str, Any]:
    """``{path: GET handler}`` for ``/stats`` and ``/metrics`` (both behind the proxy's token)."""

    def guarded(render: Callable[[dict[str, Any]], Response]) -> Any:
        async def endpoint(request: Request) -> Response:
            if not proxy.authorized(request):
                message = "missing or wrong X-Contextwarden-Token"
                return error_response("openai", "unauthorized", message)
            return render(await anyio.to_thread.run_sync(current, proxy))

        return endpoint

    def prometheus(figures: dict[str, Any]) -> Response:
        return Response(metrics_text(figures), media_type=CONTENT_TYPE_LATEST)

    return {"/stats": guarded(JSONResponse), "/metrics": guarded(prometheus)}


def shared_stats(store: Any) -> SharedStats | None:
    """The run's shared counters when this process is one of a run's workers and ``store``
    (the summary cache) is shared between processes; None otherwise."""
    run = os.environ.get(RUN_ENV)
    if not run or store is None or isinstance(store, dict):
        return None
    return SharedStats(store, run)


@asynccontextmanager
async def publishing(proxy: Observed) -> AsyncIterator[None]:
    """While the app runs: the worker's counters to the shared store about once a second when
    they changed; withdrawn at shutdown (nothing without a shared store)."""
    shared = proxy.shared
    if shared is None:
        yield
        return
    seen = -1

    async def loop() -> None:
        nonlocal seen
        while True:
            await anyio.sleep(PUBLISH_EVERY_S)
            if proxy.stats.requests != seen:
                seen = proxy.stats.requests
                await anyio.to_thread.run_sync(shared.publish, _own(proxy))

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(loop)
            try:
                yield
            finally:
                group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(shared.withdraw)
