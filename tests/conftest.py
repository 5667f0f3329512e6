"""Shared fixtures: where the real recorded trajectories live (read-only, outside the repo)."""

from __future__ import annotations

from pathlib import Path

import pytest
from shared_data import SHARED_DATA, trajectory_files

__all__ = ["SHARED_DATA", "trajectory_files"]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder of real trajectories; skips the test when it is absent (a user's machine)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real trajectories not present at {SHARED_DATA} (../shared/data)")
    return SHARED_DATA


@pytest.fixture(autouse=True)
def _data_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point the session store at a temp folder so tests never touch the user's data dir."""
    monkeypatch.setenv("CONTEXTWARDEN_DATA_DIR", str(tmp_path_factory.mktemp("cwdata")))
