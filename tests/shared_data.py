"""Where the real recorded trajectories live (read-only, outside the repo).

A plain module (not a conftest) so any test can import it: ``from shared_data import SHARED_DATA``.
"""

from __future__ import annotations

import os
from pathlib import Path

SHARED_DATA = Path(
    os.environ.get(
        "CONTEXTWARDEN_SHARED_DATA",
        Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories",
    )
)


def trajectory_files() -> list[Path]:
    """Every recorded trajectory file, sorted (empty when the shared data is absent)."""
    if not SHARED_DATA.is_dir():
        return []
    return sorted(p for p in SHARED_DATA.rglob("*") if p.is_file())
