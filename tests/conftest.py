"""Shared fixtures: where the real recorded trajectories live (see shared_data.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from shared_data import SHARED_DATA, trajectory_files

# Scripts the tests start (the benchmarks' smoke tests) read the same recordings.
os.environ.setdefault("CONTEXTWARDEN_SHARED_DATA", str(SHARED_DATA))

__all__ = ["SHARED_DATA", "trajectory_files"]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder of real trajectories (the repository's own unless CONTEXTWARDEN_SHARED_DATA
    names another); skips the test when that folder is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real trajectories not present at {SHARED_DATA} (CONTEXTWARDEN_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(autouse=True)
def _data_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point the session store at a temp folder so tests never touch the user's data dir."""
    monkeypatch.setenv("CONTEXTWARDEN_DATA_DIR", str(tmp_path_factory.mktemp("cwdata")))


# Hypothesis: one profile sets how many examples every property test draws (a test asks for
# fewer only where one example is a whole session). No per-example deadline (a shared core can
# stall any example). By default the examples are derived from each test's name, so the suite
# takes the same time on every run; HYPOTHESIS_PROFILE=explore draws ten times as many, new ones
# each run (and keeps failures in .hypothesis/).
settings.register_profile(
    "steady", max_examples=50, deadline=None, derandomize=True, database=None, print_blob=True
)
settings.register_profile("explore", max_examples=500, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "steady"))


@pytest.fixture(autouse=True, scope="session")
def _one_tls_context_per_setting() -> Iterator[None]:
    """httpx builds a TLS context from certifi's bundle for every client it makes (50 ms; the
    module-level ``httpx.get``/``post`` and each SDK client make one). The tests make hundreds,
    all plain HTTP on loopback: each kind of context is built once and shared, as one
    long-lived client would share it."""
    import functools

    from httpx._transports import default

    made = default.create_ssl_context
    default.create_ssl_context = functools.cache(made)  # type: ignore[assignment]
    yield
    default.create_ssl_context = made
