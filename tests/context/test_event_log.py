"""Each event is logged at warning level on the ``contextwarden`` logger to whatever handler the
application has configured by then, and to Python's last resort when it removed every handler;
a warden left silent (only the package's ``NullHandler``) logs nothing anywhere."""

from __future__ import annotations

import logging

import pytest

from contextwarden._events import Event, emit, logger


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_handler_added_between_events_hears_the_next() -> None:
    events: list[Event] = []
    emit(events, Event("masked", "mask", 3, detail="first"))
    handler = _Records()
    logger.addHandler(handler)
    try:
        emit(events, Event("masked", "mask", 4, detail="second"))
    finally:
        logger.removeHandler(handler)
    assert [e.detail for e in events] == ["first", "second"]
    assert [r.getMessage() for r in handler.records] == [events[1].describe()]
    assert handler.records[0].levelno == logging.WARNING


def test_a_handler_on_the_root_logger_hears_events() -> None:
    root = logging.getLogger()
    handler = _Records()
    root.addHandler(handler)
    try:
        emit([], Event("dropped", "pending", 7, detail="unanswered"))
    finally:
        root.removeHandler(handler)
    assert [r.name for r in handler.records] == ["contextwarden"]


def test_without_any_handler_the_last_resort_prints(capsys: pytest.CaptureFixture[str]) -> None:
    kept = logger.handlers[:]
    for h in kept:
        logger.removeHandler(h)
    root = logging.getLogger()
    rooted = root.handlers[:]
    for h in rooted:
        root.removeHandler(h)
    try:
        emit([], Event("masked", "mask", 1, detail="nobody listens"))
    finally:
        for h in kept:
            logger.addHandler(h)
        for h in rooted:
            root.addHandler(h)
    assert "nobody listens" in capsys.readouterr().err


def test_a_disabled_logger_hears_nothing() -> None:
    handler = _Records()
    logger.addHandler(handler)
    logger.disabled = True
    try:
        emit([], Event("masked", "mask", 1))
    finally:
        logger.disabled = False
        logger.removeHandler(handler)
    assert handler.records == []
