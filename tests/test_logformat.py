"""Log lines carry their time and level: one JSON object a line, or text."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest

from contextwarden._logformat import log_formatter


@pytest.fixture
def capture() -> Iterator[tuple[logging.Logger, io.StringIO, logging.StreamHandler[io.StringIO]]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    log = logging.getLogger("contextwarden.test-logformat")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    yield log, stream, handler
    log.removeHandler(handler)


def test_json_lines_have_time_level_and_merge_a_json_message(capture: tuple) -> None:
    log, stream, handler = capture
    handler.setFormatter(log_formatter("json"))
    log.info(json.dumps({"path": "/v1/chat/completions", "status": 200, "level": "spoofed"}))
    log.warning("the summary failed: %s", "HTTP 404")
    try:
        raise ValueError("bad body")
    except ValueError:
        log.exception("request failed")
    first, second, third = (json.loads(line) for line in stream.getvalue().splitlines())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["time"])
    assert first["level"] == "info" and first["logger"] == "contextwarden.test-logformat"
    assert (first["path"], first["status"]) == ("/v1/chat/completions", 200)
    assert "message" not in first
    assert second["level"] == "warning" and second["message"] == "the summary failed: HTTP 404"
    assert third["level"] == "error" and "ValueError: bad body" in third["exception"]


def test_text_lines_start_with_time_and_level(capture: tuple) -> None:
    log, stream, handler = capture
    handler.setFormatter(log_formatter("text"))
    log.warning("over the limit")
    (line,) = stream.getvalue().splitlines()
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z WARNING contextwarden\.test-logformat over the limit",
        line,
    )


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="'json' or 'text', got 'xml'"):
        log_formatter("xml")  # type: ignore[arg-type]
