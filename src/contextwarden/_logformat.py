"""Log lines with their time and level, for the stdlib :mod:`logging`: one JSON object a line
(what a log collector parses) or one line of text (what a person reads).

:class:`JsonFormatter` writes ``{"time": ..., "level": ..., "logger": ..., "message": ...}``; a
message that is itself a JSON object (the proxy logs each request as one) is merged into the
line rather than quoted in it, so every line is one flat object. An exception's traceback goes
in ``"exception"``. :func:`log_formatter` picks one by name; wiring a handler is the
application's (the proxy's ``configure_logging``).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Literal

__all__ = ["JsonFormatter", "LogFormat", "log_formatter"]

LogFormat = Literal["json", "text"]

#: ISO 8601 in UTC with milliseconds: sorts as text, and says its zone.
_TIME = "%Y-%m-%dT%H:%M:%S"


def _when(record: logging.LogRecord) -> str:
    return time.strftime(_TIME, time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"


class JsonFormatter(logging.Formatter):
    """One JSON object a line (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        line: dict[str, Any] = {
            "time": _when(record),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        fields = _json_object(message)
        if fields is None:
            line["message"] = message
        else:  # the line's own keys stay: a field of the message does not overwrite them
            line.update({k: v for k, v in fields.items() if k not in line})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def _json_object(message: str) -> dict[str, Any] | None:
    if not message.startswith("{"):
        return None
    try:
        value = json.loads(message)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class _TextFormatter(logging.Formatter):
    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 (logging's name)
        return _when(record)


def log_formatter(kind: LogFormat = "json") -> logging.Formatter:
    """The formatter for ``kind``: :class:`JsonFormatter`, or text lines
    ``2026-11-28T09:27:26.123Z INFO contextwarden.proxy message``."""
    if kind == "json":
        return JsonFormatter()
    if kind == "text":
        return _TextFormatter("%(asctime)s %(levelname)s %(name)s %(message)s")
    raise ValueError(f"log format must be 'json' or 'text', got {kind!r}")
