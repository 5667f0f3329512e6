"""Counters behind ``GET /stats``: per process, in memory, reset when the process restarts.

Several proxy processes share the summary cache, not these counters: scrape each process.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Literal

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
    "clip",
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
            out["stream"] = self.stream
            out["tokens_before"] = self.tokens_before
            out["tokens_after"] = self.tokens_after
            out["compacted"] = self.compacted
            if self.strategy:
                out["compaction"] = clip(self.strategy)
            if self.summarizer:
                out["summarizer"] = clip(self.summarizer)
            out["transform_ms"] = round(self.transform_ms, 2)
            if self.summary_calls:
                out["summary_calls"] = self.summary_calls
                out["summary_input_tokens"] = self.summary_input_tokens
                out["summary_output_tokens"] = self.summary_output_tokens
                if self.summary_failed_calls:
                    out["summary_failed_calls"] = self.summary_failed_calls
            if self.breaker_open:
                out["summary_breaker_open"] = True
            if self.summary_pool_full:
                out["summary_pool_full"] = True
            if self.recall_offered:
                out["recall_calls"] = self.recall_calls
                out["recall_unknown"] = self.recall_unknown
                out["recall_rounds"] = self.recall_rounds
        out["headers_ms"] = round(self.headers_ms, 2)
        if self.skipped:
            out["skipped"] = clip(self.skipped)
        if self.warning:
            out["warning"] = clip(self.warning)
        if self.error:
            out["error"] = clip(self.error)
        return out


def clip(text: str, limit: int = CLIP) -> str:
    """``text`` cut to ``limit`` characters, marked with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class ProxyStats:
    """Running totals. :meth:`record` is called once per finished request (thread-safe)."""

    started_at: float = field(default_factory=time.time)
    requests: int = 0
    transformed: int = 0
    skipped: int = 0
    warden_errors: int = 0
    unbounded: int = 0
    #: conversations the cost model warned that their fixed part leaves the history little room
    tight_rooms: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
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
            if rec.model is not None:
                self._count_model(clip(rec.model))
            if rec.tokens_before is not None and rec.tokens_after is not None:
                self.transformed += 1
                self.tokens_before += rec.tokens_before
                self.tokens_after += rec.tokens_after
            if rec.skipped:
                self.skipped += 1
                if rec.skipped == WARDEN_ERROR:
                    self.warden_errors += 1
            if rec.warning == "unknown_model":
                self.unbounded += 1
            elif rec.warning and rec.warning.startswith("tight_room"):
                self.tight_rooms += 1  # a conversation whose fixed part leaves little room
            if rec.compacted:
                self.compactions += 1
            if rec.summarizer:  # who wrote a new compaction's summary
                if rec.summarizer.startswith("llm:"):
                    self.llm_summaries += 1
                else:
                    self.extractive_summaries += 1
            if rec.summary_calls:
                self.summary_calls += rec.summary_calls
                self.summary_input_tokens += rec.summary_input_tokens
                self.summary_output_tokens += rec.summary_output_tokens
                self.summary_failed_calls += rec.summary_failed_calls
                for model, (calls, tokens_in, tokens_out) in rec.summary_models.items():
                    entry = self.summaries_by_model.pop(clip(model), None) or {
                        "calls": 0,
                        "input_tokens": 0,
                        "output_tokens": 0,
                    }
                    entry["calls"] += calls
                    entry["input_tokens"] += tokens_in
                    entry["output_tokens"] += tokens_out
                    self.summaries_by_model[clip(model)] = entry
                while len(self.summaries_by_model) > MODEL_TABLE:
                    self.summaries_by_model.popitem(last=False)
            if rec.breaker_open:
                self.summary_breaker_open += 1
            if rec.summary_pool_full:
                self.summary_pool_full += 1
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
            if rec.error == CONTEXT_OVERFLOW:
                self.context_overflows += 1
            if rec.error == "upstream_timeout":
                self.upstream_timeouts += 1
            elif rec.error == "upstream_unreachable":
                self.upstream_unreachable += 1

    def _count_model(self, model: str) -> None:
        self.by_model[model] = self.by_model.pop(model, 0) + 1  # re-inserted: most recent last
        while len(self.by_model) > MODEL_TABLE:
            self.by_model.popitem(last=False)

    def snapshot(self) -> dict[str, Any]:
        """The ``/stats`` JSON: totals, tokens saved, and uptime in seconds."""
        with self._lock:
            return {
                "requests": self.requests,
                "transformed": self.transformed,
                "skipped": self.skipped,
                "warden_errors": self.warden_errors,
                "unbounded": self.unbounded,
                "tight_room_warnings": self.tight_rooms,
                "tokens_before": self.tokens_before,
                "tokens_after": self.tokens_after,
                "tokens_saved": self.tokens_before - self.tokens_after,
                # what the upstream bills as input: the requests forwarded and the summary calls
                "input_tokens_billed": self.tokens_after + self.summary_input_tokens,
                "tokens_saved_net": self.tokens_before
                - self.tokens_after
                - self.summary_input_tokens,
                "compactions": self.compactions,
                "llm_summaries": self.llm_summaries,
                "extractive_summaries": self.extractive_summaries,
                "errors": self.errors,
                "context_overflows": self.context_overflows,
                "stream_failures": self.stream_failures,
                "client_disconnects": self.client_disconnects,
                "upstream_timeouts": self.upstream_timeouts,
                "upstream_unreachable": self.upstream_unreachable,
                "summary_calls": self.summary_calls,
                "summary_input_tokens": self.summary_input_tokens,
                "summary_output_tokens": self.summary_output_tokens,
                "summary_failed_calls": self.summary_failed_calls,
                "summary_breaker_open": self.summary_breaker_open,
                "summary_pool_full": self.summary_pool_full,
                "recall_offered": self.recall_offered,
                "recall_calls": self.recall_calls,
                "recall_unknown_refs": self.recall_unknown_refs,
                "recall_rounds": self.recall_rounds,
                "summaries_by_model": {
                    k: dict(v) for k, v in sorted(self.summaries_by_model.items())
                },
                "by_route": dict(sorted(self.by_route.items())),
                "by_status": dict(sorted(self.by_status.items())),
                "by_model": dict(sorted(self.by_model.items())),
                "started_at": self.started_at,
                "uptime_s": round(time.time() - self.started_at, 3),
            }
