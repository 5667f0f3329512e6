"""Summary calls made for one request, in plain view and within bounds.

How it works: docs/proxy.md (`contextwarden.proxy.summaries`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .._exceptions import SummarizerError
from .._warden import takes_keyword

__all__ = ["Breaker", "SummaryBudget", "SummaryCalls"]

logger = logging.getLogger("contextwarden.proxy")


class Breaker:
    """Opens after ``failures`` compactions in a row had no summary written; stays open
    ``cooldown_s`` seconds. A success closes it and resets the count."""

    def __init__(self, failures: int = 3, cooldown_s: float = 300.0) -> None:
        self.failures = failures
        self.cooldown_s = cooldown_s
        self._row = 0
        self._open_until = 0.0
        self._lock = threading.Lock()

    def is_open(self, now: float | None = None) -> bool:
        with self._lock:
            return (time.monotonic() if now is None else now) < self._open_until

    def failed(self) -> None:
        with self._lock:
            self._row += 1
            if self._row >= self.failures:
                self._open_until = time.monotonic() + self.cooldown_s
                self._row = 0

    def succeeded(self) -> None:
        with self._lock:
            self._row = 0
            self._open_until = 0.0


@dataclass
class SummaryCalls:
    """The summary calls of one request: how many, their tokens, the models asked."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    failed_calls: int = 0
    #: model -> [calls, input tokens, output tokens]
    models: dict[str, list[int]] = field(default_factory=dict)
    breaker_open: bool = False
    pool_full: bool = False
    #: why the last summary that was not written failed (its exception, in one line)
    failure: str | None = None


class SummaryBudget:
    """The summarizer of one request's compaction, ``inner``, behind a shared deadline, a call
    cap, a meter and the client's breaker (see docs/proxy.md). ``name`` and
    ``config_id`` are the inner summarizer's, so cached summaries stay keyed as they were."""

    def __init__(
        self,
        inner: Any,
        breaker: Breaker,
        *,
        timeout_s: float,
        max_calls: int,
        slots: threading.Semaphore | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.inner = inner
        self.breaker = breaker
        self.slots = slots
        self.timeout_s = timeout_s
        self.max_calls = max_calls
        self.calls = SummaryCalls()
        self._clock = clock
        self._deadline: float | None = None
        self._lock = threading.Lock()
        self._failed = 0
        self._written = 0
        self._metered = takes_keyword(getattr(inner, "summarize", None), "meter")
        self.name: str = str(getattr(inner, "name", "summarizer"))
        config_id = getattr(inner, "config_id", None)
        if config_id is not None:
            self.config_id = str(config_id)

    # -- SummaryMeter -------------------------------------------------------------------------
    def start(self) -> None:
        with self._lock:
            if self.calls.calls >= self.max_calls:
                raise SummarizerError(
                    f"{self.name}: this compaction made its {self.max_calls} summary calls "
                    "(the proxy's summary_max_calls)"
                )
            self.calls.calls += 1

    def done(self, model: str, input_tokens: int, output_tokens: int, status: int) -> None:
        with self._lock:
            c = self.calls
            c.input_tokens += input_tokens
            c.output_tokens += output_tokens
            entry = c.models.setdefault(model, [0, 0, 0])
            entry[0] += 1
            entry[1] += input_tokens
            entry[2] += output_tokens
            if not 200 <= status < 300:
                c.failed_calls += 1

    # -- Summarizer ---------------------------------------------------------------------------
    def _begin(self) -> float:
        if self.breaker.is_open():
            with self._lock:
                self.calls.breaker_open = True
            raise SummarizerError(
                f"{self.name}: summaries failed repeatedly for this client; the extractive "
                "summary is used until the breaker's cool-down ends"
            )
        with self._lock:
            if self._deadline is None:
                self._deadline = self._clock() + self.timeout_s
            deadline = self._deadline
        if deadline <= self._clock():
            raise SummarizerError(
                f"{self.name}: this compaction's summary deadline (timeout_s={self.timeout_s:g}) "
                "has passed"
            )
        return deadline

    def settle(self) -> None:
        """Tell the client's breaker how this request's summaries went (once it is over): a
        failure when some were asked for and none was written, a success when one was."""
        with self._lock:
            failed, written = self._failed, self._written
            self._failed = self._written = 0
        if written:
            self.breaker.succeeded()
        elif failed:
            self.breaker.failed()

    def _failing(self, exc: BaseException, failed_before: int) -> None:
        """Note why a summary was not written; a call that failed after a 2xx answer (a reply
        that is no usable summary, a deadline) counts as a failed call too."""
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())
        with self._lock:
            self.calls.failure = reason
            if self.calls.failed_calls == failed_before:
                self.calls.failed_calls += 1
        logger.warning(
            "summary failed",
            extra={
                "fields": {"message": "summary_failed", "summarizer": self.name, "reason": reason}
            },
        )

    @contextmanager
    def _call(self) -> Iterator[float]:
        """One summary: the breaker and the deadline checked, a slot of the client's taken (or
        an error at once when none is free), and how it went counted; yields the deadline."""
        deadline = self._begin()
        if self.slots is not None and not self.slots.acquire(blocking=False):
            with self._lock:
                self.calls.pool_full = True
            raise SummarizerError(
                f"{self.name}: this client's summary pool is busy (the proxy's "
                "client_summary_concurrency); the extractive summary is used"
            )
        failed_before = self.calls.failed_calls
        try:
            yield deadline
        except Exception as exc:
            with self._lock:
                self._failed += 1
            self._failing(exc, failed_before)
            raise
        else:
            with self._lock:
                self._written += 1
        finally:
            if self.slots is not None:
                self.slots.release()

    def summarize(self, request: Any) -> str:
        with self._call() as deadline:
            if self._metered:
                return str(self.inner.summarize(request, deadline=deadline, meter=self))
            self.start()
            return str(self.inner.summarize(request))

    async def asummarize(self, request: Any) -> str:
        with self._call() as deadline:
            if self._metered:
                return str(await self.inner.asummarize(request, deadline=deadline, meter=self))
            self.start()
            return str(await self.inner.asummarize(request))
