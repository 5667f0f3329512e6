"""The proxy's log lines: one a line on stderr, each with its time (UTC, ISO 8601, milliseconds)
and level, as JSON objects (the default: a log shipper reads them as they are) or as text for a
terminal (``contextwarden proxy --log-format text``).

How it works: docs/proxy.md (`contextwarden.proxy.logs`).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Literal

__all__ = ["LOG_FORMAT_ENV", "LogFormat", "configure_logging", "log_request", "logger"]

LogFormat = Literal["json", "text"]

#: Carries ``--log-format`` to worker processes (``--workers N``), which set up their own logging.
LOG_FORMAT_ENV = "CONTEXTWARDEN_PROXY_LOG_FORMAT"

logger = logging.getLogger("contextwarden.proxy")


def _time(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = getattr(record, "fields", None)
    return dict(fields) if isinstance(fields, dict) else {"message": record.getMessage()}


class JsonLines(logging.Formatter):
    """``{"time": ..., "level": "info", ...fields}``; an exception's traceback in ``exc``."""

    def format(self, record: logging.LogRecord) -> str:
        out = {"time": _time(record), "level": record.levelname.lower()} | _fields(record)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, separators=(",", ":"), ensure_ascii=False, default=str)


class TextLines(logging.Formatter):
    """``2026-11-28T09:50:00.123Z INFO POST /v1/messages status=200 ...``: a request's method
    and path first, then its other fields as ``key=value``."""

    def format(self, record: logging.LogRecord) -> str:
        fields = _fields(record)
        head = [_time(record), record.levelname]
        if "method" in fields and "path" in fields:
            head += [str(fields.pop("method")), str(fields.pop("path"))]
        message = fields.pop("message", None)
        if message is not None:
            head.append(str(message))
        head += [f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in fields.items()]
        line = " ".join(head)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure_logging(log_format: LogFormat = "json", level: int = logging.INFO) -> None:
    """Log ``contextwarden.proxy`` at ``level`` on stderr in ``log_format``, unless the
    application gave that logger a handler of its own (used by ``contextwarden proxy`` and its
    worker processes; a library user's own logging setup is left alone)."""
    if logger.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TextLines() if log_format == "text" else JsonLines())
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False


def log_request(fields: dict[str, Any], *, warning: bool = False) -> None:
    """One request's line (at WARNING when it failed in a way an operator should see). The
    record's message is the fields as JSON, for a handler the application set up itself."""
    level = logging.WARNING if warning else logging.INFO
    if logger.isEnabledFor(level):
        message = json.dumps(fields, separators=(",", ":"), ensure_ascii=False)
        logger.log(level, message, extra={"fields": fields})
