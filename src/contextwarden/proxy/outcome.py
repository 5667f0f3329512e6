"""What the proxy tells about a request it handled: the ``X-Contextwarden-*`` response headers,
the request's record (the log line and ``/stats``), and the checks on its path."""

from __future__ import annotations

import logging
import time
from urllib.parse import unquote

from starlette.requests import Request

from .stats import WARDEN_ERROR, RequestRecord
from .summaries import SummaryBudget
from .transform import BodyOutcome

logger = logging.getLogger("contextwarden.proxy")

__all__ = ["climbs", "fill_record", "header_text", "outcome_headers", "raw_path", "unread"]


def unread(raw: bytes, path: str, exc: Exception) -> BodyOutcome:
    """The outcome of a body the warden failed on (an input nobody foresaw, or a bug of ours):
    a drop-in proxy must not fail a call that would have worked without it, so the body goes
    upstream as sent and the upstream judges it. Logged with the traceback."""
    logger.warning(
        "contextwarden proxy: the warden failed on %s (%s); forwarded unchanged",
        path,
        type(exc).__name__,
        exc_info=True,
    )
    return BodyOutcome(
        raw, False, skipped=WARDEN_ERROR, detail=f"{type(exc).__name__} in the warden"
    )


def fill_record(
    record: RequestRecord, outcome: BodyOutcome, budgets: list[SummaryBudget], started: float
) -> None:
    """What the warden did and the summary calls it made, into the request's record."""
    record.model, record.stream = outcome.model, outcome.stream
    record.tokens_before, record.tokens_after = outcome.tokens_before, outcome.tokens_after
    record.compacted, record.strategy = outcome.compacted, outcome.strategy
    record.summarizer = outcome.summarizer
    record.conversation, record.edited = outcome.conversation, outcome.edited
    record.restored = outcome.restored
    record.skipped = outcome.skipped
    record.warning = outcome.warning.split(":", 1)[0] if outcome.warning else None
    record.transform_ms = (time.perf_counter() - started) * 1000
    for budget in budgets:
        budget.settle()
        calls = budget.calls
        record.summary_calls += calls.calls
        record.summary_input_tokens += calls.input_tokens
        record.summary_output_tokens += calls.output_tokens
        record.summary_failed_calls += calls.failed_calls
        record.breaker_open = record.breaker_open or calls.breaker_open
        record.summary_pool_full = record.summary_pool_full or calls.pool_full
        record.summary_failure = calls.failure or record.summary_failure
        for model, counts in calls.models.items():
            entry = record.summary_models.setdefault(model, [0, 0, 0])
            for i, n in enumerate(counts):
                entry[i] += n


def climbs(request: Request) -> bool:
    """Whether the path holds a ``.`` or ``..`` segment, plainly or percent-encoded (the
    upstream client would resolve it: ``/v1/chat/completions/../../admin`` is ``/v1/admin``)."""
    path = raw_path(request)
    for _ in range(3):  # %252e: decoded twice by some servers
        segments = path.replace("\\", "/").split("/")
        if any(seg in (".", "..") for seg in segments):
            return True
        decoded = unquote(path)
        if decoded == path:
            return False
        path = decoded
    return True


def outcome_headers(outcome: BodyOutcome, record: RequestRecord | None = None) -> dict[str, str]:
    """The ``X-Contextwarden-*`` response headers describing what the warden did, and the
    summary calls it made for this request (``record``'s), if any."""
    headers: dict[str, str] = {}
    if record is not None and (
        record.summary_calls or record.breaker_open or record.summary_pool_full
    ):
        headers["X-Contextwarden-Summary-Calls"] = str(record.summary_calls)
        headers["X-Contextwarden-Summary-Input-Tokens"] = str(record.summary_input_tokens)
        headers["X-Contextwarden-Summary-Output-Tokens"] = str(record.summary_output_tokens)
        if record.summary_models:
            headers["X-Contextwarden-Summary-Model"] = header_text(",".join(record.summary_models))
        if record.breaker_open:
            headers["X-Contextwarden-Summary-Breaker"] = "open"
        if record.summary_pool_full:
            headers["X-Contextwarden-Summary-Pool"] = "full"
    if outcome.warning:
        headers["X-Contextwarden-Warning"] = header_text(outcome.warning)
    if outcome.skipped:
        reason = f"{outcome.skipped}: {outcome.detail}" if outcome.detail else outcome.skipped
        headers["X-Contextwarden-Skipped"] = header_text(reason)
        return headers
    headers["X-Contextwarden-Tokens-Before"] = str(outcome.tokens_before)
    headers["X-Contextwarden-Tokens-After"] = str(outcome.tokens_after)
    headers["X-Contextwarden-Compacted"] = str(outcome.compacted)
    if outcome.restored:
        headers["X-Contextwarden-Restored"] = str(outcome.restored)
    if outcome.strategy:
        headers["X-Contextwarden-Compaction"] = header_text(outcome.strategy)
    if outcome.summarizer:
        headers["X-Contextwarden-Summarizer"] = header_text(outcome.summarizer)
    return headers


def raw_path(request: Request) -> str:
    """The path as the client sent it (percent-escapes kept: ``%2F`` must not become ``/``)."""
    raw = request.scope.get("raw_path")
    return raw.decode("latin-1") if isinstance(raw, bytes) and raw else request.url.path


def header_text(text: str, limit: int = 300) -> str:
    """One line of printable ASCII, at most ``limit`` characters (a header value must be)."""
    clean = "".join(c if 32 <= ord(c) < 127 else " " for c in text)
    return clean[:limit]
