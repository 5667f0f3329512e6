"""The clients conformance suite runs only when asked (``CW_CLIENTS=1``, as
``tests/clients/run.sh`` does): it installs and drives real agents for minutes."""

from __future__ import annotations

import os

import pytest

ENABLED = os.environ.get("CW_CLIENTS") == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if ENABLED:
        return
    # not skipped but left out: the suite is its own CI step (make clients, which installs the
    # pinned clients and runs it with CW_CLIENTS=1), not a test missing something here
    left = [item for item in items if item.get_closest_marker("clients") is not None]
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = [item for item in items if item.get_closest_marker("clients") is None]
