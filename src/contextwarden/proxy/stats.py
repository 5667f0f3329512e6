"""Counters behind ``GET /stats`` and ``GET /metrics``: kept in memory per process, reset when
the process restarts; the worker processes of one ``contextwarden proxy --workers N`` that share
a store (the SQLite file or Redis) publish theirs there and each answers with the sum
(:class:`SharedStats`).

How it works: docs/proxy.md (`contextwarden.proxy.stats`).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass, field, fields
from functools import reduce
from typing import Any, Literal

from .._billing import ANTHROPIC_READ, ANTHROPIC_WRITE, CachePricing, PromptRequest, bill_after
from .recall import add_usage

__all__ = [
    "CLIENT_LEFT",
    "CLIENT_LEFT_STATUS",
    "CONTEXT_OVERFLOW",
    "STREAM_FAILED",
    "CLIP",
    "MODEL_TABLE",
    "WARDEN_ERROR",
    "ProxyStats",
    "RequestRecord",
    "Route",
    "SharedStats",
    "clip",
    "combine",
]

#: Which wire format served a request (:mod:`.wire`), or plain forwarding.
Route = Literal["openai", "anthropic", "count_tokens", "responses", "gemini", "passthrough"]

#: Longest text a log field or a ``/stats`` key carries: a client controls the model name and the
#: path, and a 2 MB model name must not become a 2 MB log line.
CLIP = 200
#: Models ``/stats`` keeps a count for, least recently seen dropped first: a client choosing a new
#: model name on every request must not grow the process without bound.
MODEL_TABLE = 100

#: The ``error`` of a request whose client went away before the proxy could answer, and the
#: status recorded for it (nginx's "client closed request"; never sent, not counted in errors).
CLIENT_LEFT = "client_disconnected"
CLIENT_LEFT_STATUS = 499
#: The ``error`` values of a stream that broke or stalled after its status line went out (or
#: whose later recall round the upstream refused: :mod:`.recall_rounds`).
STREAM_FAILED = frozenset({"upstream_broken", "upstream_timeout", "recall_round_failed"})
#: The ``error`` of a request answered with the provider's context-length error (400).
CONTEXT_OVERFLOW = "context_overflow"
#: The ``skipped`` reason of a body the warden raised on: forwarded unchanged, counted apart.
WARDEN_ERROR = "warden_error"


@dataclass
class RequestRecord:
    """What the proxy knows about one request once it is over; also the structured log line.

    Never holds headers or bodies (auth headers and prompts stay out of logs and stats).
    """

    method: str
    path: str
    route: Route
    model: str | None = None
    stream: bool = False
    status: int = 0
    tokens_before: int | None = None
    tokens_after: int | None = None
    compacted: int = 0
    strategy: str | None = None
    summarizer: str | None = None
    skipped: str | None = None
    warning: str | None = None
    error: str | None = None
    transform_ms: float = 0.0
    headers_ms: float = 0.0
    latency_ms: float = 0.0
    summary_calls: int = 0
    summary_input_tokens: int = 0
    summary_output_tokens: int = 0
    summary_failed_calls: int = 0
    #: model -> [calls, input tokens, output tokens]
    summary_models: dict[str, list[int]] = field(default_factory=dict)
    breaker_open: bool = False
    summary_pool_full: bool = False
    #: the recall tool was offered; its calls the proxy answered, those naming a reference the
    #: conversation does not keep, and the extra upstream calls they took
    recall_offered: bool = False
    recall_calls: int = 0
    recall_unknown: int = 0
    recall_rounds: int = 0
    #: the warden's log this request continued (empty: none), and whether the warden added an
    #: edit to it on this request (the provider's cached prefix is then rewritten)
    conversation: str = ""
    edited: bool = False
    #: why the last failed summary call of this request failed (the extractive summary was used)
    summary_failure: str | None = None
    #: the oldest messages the client dropped from the history, put back (it goes on)
    restored: int = 0

    def as_log(self) -> dict[str, Any]:
        """The JSON object logged for this request (only fields that carry information; text
        fields clipped to :data:`CLIP` characters)."""
        out: dict[str, Any] = {
            "method": clip(self.method),
            "path": clip(self.path),
            "route": self.route,
            "status": self.status,
            "latency_ms": round(self.latency_ms, 2),
        }
        if self.model is not None:
            out["model"] = clip(self.model)
        if self.route != "passthrough":
            out |= {
                "stream": self.stream,
                "tokens_before": self.tokens_before,
                "tokens_after": self.tokens_after,
                "compacted": self.compacted,
            }
            if self.restored:
                out["restored"] = self.restored
            _texts(out, compaction=self.strategy, summarizer=self.summarizer)
            out["transform_ms"] = round(self.transform_ms, 2)
            if self.summary_calls:
                out["summary_calls"] = self.summary_calls
                out["summary_input_tokens"] = self.summary_input_tokens
                out["summary_output_tokens"] = self.summary_output_tokens
                if self.summary_failed_calls:
                    out["summary_failed_calls"] = self.summary_failed_calls
            _texts(out, summary_failure=self.summary_failure)
            if self.breaker_open:
                out["summary_breaker_open"] = True
            if self.summary_pool_full:
                out["summary_pool_full"] = True
            if self.recall_offered:
                out["recall_calls"] = self.recall_calls
                out["recall_unknown"] = self.recall_unknown
                out["recall_rounds"] = self.recall_rounds
        out["headers_ms"] = round(self.headers_ms, 2)
        return _texts(out, skipped=self.skipped, warning=self.warning, error=self.error)


def _texts(out: dict[str, Any], **texts: str | None) -> dict[str, Any]:
    """``out`` with each of ``texts`` that is not empty, clipped to :data:`CLIP` characters."""
    out.update((key, clip(text)) for key, text in texts.items() if text)
    return out


def clip(text: str, limit: int = CLIP) -> str:
    """``text`` cut to ``limit`` characters, marked with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: Conversations whose previous request the bill remembers, least recently seen dropped first.
LEDGER_SIZE = 10_000

#: The cache prices of a model the registry does not price, by the API it was asked on:
#: Anthropic's (reads 0.1x, writes 1.25x, 5 minutes), else OpenAI's (reads 0.1x as gpt-5 bills,
#: writes at the input price). The bill is then in input-token equivalents only, no dollars.
_ANTHROPIC_RATIOS = CachePricing.ratios(1.0, ANTHROPIC_READ, ANTHROPIC_WRITE)
_OPENAI_RATIOS = CachePricing.ratios(1.0, 0.1, 1.0)

#: ``(model, route) -> (prices, whether they are the model's own)``
Pricing = Callable[[str | None, Route], tuple[CachePricing, bool]]


def registry_pricing(models: Any = None) -> Pricing:
    """Prices from the model registry (``models``: a config's ``models:`` overrides), or the
    API's usual cache ratios for a model it does not price."""

    def price(model: str | None, route: Route) -> tuple[CachePricing, bool]:
        known = CachePricing.for_model(model, models) if model else None
        if known is not None and known.input_per_mtok > 0:
            return known, True
        return (_ANTHROPIC_RATIOS if route == "anthropic" else _OPENAI_RATIOS), False

    return price


def _bill(
    previous: tuple[float, int] | None, total: int, at: float, pricing: CachePricing
) -> tuple[float, float]:
    """``(input-token equivalents, USD)`` of a request of ``total`` tokens sent at ``at`` that
    extends ``previous`` (its time and tokens; ``None``: it extends nothing), by
    :func:`~contextwarden._billing.bill_after`."""
    if previous is None:
        bill = bill_after(None, PromptRequest(("new",), (total,), at=at), pricing)
    else:
        then, kept = previous
        bill = bill_after(
            PromptRequest(("kept",), (kept,), at=then),
            PromptRequest(("kept", "new"), (kept, total - kept), at=at),
            pricing,
        )
    return bill.cost / pricing.input_per_mtok * 1_000_000, bill.cost


@dataclass
class ProxyStats:
    """Running totals. :meth:`record` is called once per finished request (thread-safe).
    ``pricing`` prices a request's input (default: :func:`registry_pricing`)."""

    started_at: float = field(default_factory=time.time)
    requests: int = 0
    transformed: int = 0
    skipped: int = 0
    warden_errors: int = 0
    unbounded: int = 0
    #: conversations the cost model warned that their fixed part leaves the history little room
    tight_room_warnings: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    billed_before: float = 0.0
    billed_after: float = 0.0
    cost_usd_before: float = 0.0
    cost_usd_after: float = 0.0
    compactions: int = 0
    llm_summaries: int = 0
    extractive_summaries: int = 0
    errors: int = 0
    context_overflows: int = 0
    stream_failures: int = 0
    client_disconnects: int = 0
    upstream_timeouts: int = 0
    upstream_unreachable: int = 0
    summary_calls: int = 0
    summary_input_tokens: int = 0
    summary_output_tokens: int = 0
    summary_failed_calls: int = 0
    summary_failures: int = 0
    summary_breaker_open: int = 0
    summary_pool_full: int = 0
    recall_offered: int = 0
    recall_calls: int = 0
    recall_unknown_refs: int = 0
    recall_rounds: int = 0
    summaries_by_model: OrderedDict[str, dict[str, int]] = field(default_factory=OrderedDict)
    by_route: dict[str, int] = field(default_factory=dict)
    by_status: dict[str, int] = field(default_factory=dict)
    by_model: OrderedDict[str, int] = field(default_factory=OrderedDict)
    pricing: Pricing = field(default_factory=registry_pricing, repr=False, compare=False)
    #: conversation -> (time, tokens as the client sent them, tokens as forwarded)
    _ledger: OrderedDict[str, tuple[float, int, int]] = field(
        default_factory=OrderedDict, repr=False, compare=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record(self, rec: RequestRecord) -> None:
        """Add one finished request. ``errors`` counts every status >= 400 the client received,
        whether the upstream or the proxy produced it; a stream that broke or stalled after a
        2xx status line counts in ``stream_failures`` instead, a client that left before the
        answer in ``client_disconnects``."""
        with self._lock:
            self.requests += 1
            self.by_route[rec.route] = self.by_route.get(rec.route, 0) + 1
            key = str(rec.status)
            self.by_status[key] = self.by_status.get(key, 0) + 1
            if rec.model is not None:  # re-inserted: most recent last
                model = clip(rec.model)
                self.by_model[model] = self.by_model.pop(model, 0) + 1
                while len(self.by_model) > MODEL_TABLE:
                    self.by_model.popitem(last=False)
            if rec.tokens_before is not None and rec.tokens_after is not None:
                self.transformed += 1
                self.tokens_before += rec.tokens_before
                self.tokens_after += rec.tokens_after
                self._bill(rec, rec.tokens_before, rec.tokens_after)
            self.skipped += bool(rec.skipped)
            self.warden_errors += rec.skipped == WARDEN_ERROR
            self.unbounded += rec.warning == "unknown_model"
            self.tight_room_warnings += (rec.warning or "").startswith("tight_room")
            self.compactions += bool(rec.compacted)
            if rec.summarizer:  # who wrote a new compaction's summary
                if rec.summarizer.startswith("llm:"):
                    self.llm_summaries += 1
                else:
                    self.extractive_summaries += 1
            self.summary_failures += bool(rec.summary_failure)
            self.summary_calls += rec.summary_calls
            self.summary_input_tokens += rec.summary_input_tokens
            self.summary_output_tokens += rec.summary_output_tokens
            self.summary_failed_calls += rec.summary_failed_calls
            for model, (calls, tokens_in, tokens_out) in rec.summary_models.items():
                entry = self.summaries_by_model.pop(clip(model), None) or dict.fromkeys(
                    ("calls", "input_tokens", "output_tokens"), 0
                )
                entry["calls"] += calls
                entry["input_tokens"] += tokens_in
                entry["output_tokens"] += tokens_out
                self.summaries_by_model[clip(model)] = entry
                prices, own = self.pricing(model, rec.route)
                if own:
                    self.cost_usd_after += prices.cost(0, 0, tokens_in)
            while len(self.summaries_by_model) > MODEL_TABLE:
                self.summaries_by_model.popitem(last=False)
            self.summary_breaker_open += rec.breaker_open
            self.summary_pool_full += rec.summary_pool_full
            self.recall_offered += rec.recall_offered
            self.recall_calls += rec.recall_calls
            self.recall_unknown_refs += rec.recall_unknown
            self.recall_rounds += rec.recall_rounds
            if rec.error == CLIENT_LEFT:
                self.client_disconnects += 1
            elif rec.status >= 400:
                self.errors += 1
            elif rec.error in STREAM_FAILED:  # the status line said 200; the body did not finish
                self.stream_failures += 1
            self.context_overflows += rec.error == CONTEXT_OVERFLOW
            self.upstream_timeouts += rec.error == "upstream_timeout"
            self.upstream_unreachable += rec.error == "upstream_unreachable"

    def _bill(self, rec: RequestRecord, before: int, after: int) -> None:
        """The request's input at cache prices, as the client sent it and as forwarded (see
        docs/proxy.md), and the conversation's entry moved up to this request."""
        prices, own = self.pricing(rec.model, rec.route)
        now = time.time()
        last = self._ledger.pop(rec.conversation, None) if rec.conversation else None
        grew = last is not None and before >= last[1]
        kept = last is not None and not rec.edited and after >= last[2]
        tokens, usd = _bill((last[0], last[1]) if last and grew else None, before, now, prices)
        self.billed_before += tokens
        self.cost_usd_before += usd if own else 0.0
        tokens, usd = _bill((last[0], last[2]) if last and kept else None, after, now, prices)
        self.billed_after += tokens
        self.cost_usd_after += usd if own else 0.0
        if rec.conversation:
            self._ledger[rec.conversation] = (now, before, after)
            while len(self._ledger) > LEDGER_SIZE:
                self._ledger.popitem(last=False)

    def snapshot(self) -> dict[str, Any]:
        """The ``/stats`` JSON of this process: every counter, the tables sorted, and the
        figures :func:`with_totals` derives."""
        with self._lock:
            out: dict[str, Any] = {}
            for f in fields(self):
                value = getattr(self, f.name)
                if f.name.startswith("_") or f.name == "pricing":
                    continue
                if isinstance(value, dict):
                    value = {k: dict(v) if isinstance(v, dict) else v for k, v in value.items()}
                    value = dict(sorted(value.items()))
                elif isinstance(value, float) and f.name != "started_at":
                    value = round(value, 6)
                out[f.name] = value
        return with_totals(out)


def with_totals(stats: dict[str, Any]) -> dict[str, Any]:
    """``stats`` with the figures derived from its counters (one process's or a sum):

    * ``tokens_saved``: tokens the client would have sent minus those forwarded;
    * ``input_tokens_billed``: the forwarded input at cache prices (``billed_after``, in
      input-token equivalents: a cached token counts at its read price over the input price)
      plus the summary calls' input, at the input price;
    * ``tokens_saved_net``: ``billed_before`` (the client's own requests at cache prices) minus
      ``input_tokens_billed``, and ``billed_saved_pct`` that as a share of ``billed_before``;
    * ``uptime_s`` since ``started_at``.
    """
    billed = stats["billed_after"] + stats["summary_input_tokens"]
    net = stats["billed_before"] - billed
    before = stats["billed_before"]
    return stats | {
        "tokens_saved": stats["tokens_before"] - stats["tokens_after"],
        "input_tokens_billed": round(billed),
        "tokens_saved_net": round(net),
        "billed_saved_pct": round(100 * net / before, 1) if before else 0.0,
        "uptime_s": round(time.time() - stats["started_at"], 3),
    }


def combine(snapshots: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The sum of several processes' :meth:`ProxyStats.snapshot` answers (counters and tables
    added, the earliest ``started_at``, the derived figures made again from the sums), with
    ``workers``: how many were summed."""
    parts = list(snapshots)
    total: dict[str, Any] = reduce(add_usage, parts, {})
    total["started_at"] = min(p["started_at"] for p in parts)
    total["workers"] = len(parts)
    return with_totals(total)


logger = logging.getLogger("contextwarden.proxy")


class SharedStats:
    """The counters of the worker processes of one proxy run, in a store they share.

    Each worker writes its snapshot under ``cw-stats/<run>/<pid>`` (:meth:`publish`: the
    proxy does so about once a second when it has news, and on ``/stats``); :meth:`gather`
    sums those of its run. ``run`` names the run (``contextwarden proxy`` sets it for its
    workers in ``$CONTEXTWARDEN_PROXY_RUN``), so that a restarted proxy starts from zero. A
    store that fails is logged once and the process's own counters answer.
    """

    PREFIX = "cw-stats/"

    def __init__(self, store: MutableMapping[str, str], run: str, worker: str | None = None):
        self.store = store
        self.run = run
        self.key = f"{self.PREFIX}{run}/{worker or os.getpid()}"
        self._warned = False

    def publish(self, snapshot: dict[str, Any]) -> None:
        try:
            self.store[self.key] = json.dumps(snapshot, separators=(",", ":"))
        except Exception as exc:  # the store is down: /stats answers for this process alone
            self._warn(exc)

    def withdraw(self) -> None:
        """Take this worker's entry out of the store (at shutdown: the run is over)."""
        try:
            del self.store[self.key]
        except KeyError:
            pass
        except Exception as exc:
            self._warn(exc)

    def gather(self, own: dict[str, Any]) -> dict[str, Any]:
        """The run's totals, this worker's counters as ``own`` (fresher than its entry)."""
        parts = [own]
        prefix = f"{self.PREFIX}{self.run}/"
        try:
            for key in list(self.store):
                if key.startswith(prefix) and key != self.key:
                    try:
                        parts.append(json.loads(self.store[key]))
                    except (KeyError, ValueError):
                        continue  # gone or half-written meanwhile
        except Exception as exc:
            self._warn(exc)
        return combine(parts)

    def _warn(self, exc: Exception) -> None:
        if not self._warned:
            self._warned = True
            logger.warning(
                "stats store unavailable; /stats counts this process only",
                extra={"fields": {"message": "stats_store_unavailable", "error": clip(str(exc))}},
            )
