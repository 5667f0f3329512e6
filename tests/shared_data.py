"""Where the real recorded agent sessions the tests read live.

By default the small set shipped in ``tests/data/recordings`` (real sessions of mini-swe-agent,
pi, Claude Code and OpenHands; sources and licences in its README), so every clone runs the same
real-data tests. ``CONTEXTWARDEN_SHARED_DATA=/path/to/trajectories`` points them at a larger
folder of the same layout (one sub-folder per agent) instead.

A plain module (not a conftest) so any test can import it: ``from shared_data import SHARED_DATA``.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The recordings shipped with the repository.
REPO_RECORDINGS = Path(__file__).resolve().parent / "data" / "recordings"

SHARED_DATA = Path(os.environ.get("CONTEXTWARDEN_SHARED_DATA") or REPO_RECORDINGS)

#: Chinese prose (written for these tests) for the tokenizer's non-Latin checks.
CHINESE_TEXTS = Path(__file__).resolve().parent / "data" / "chinese"

#: Files in the folder that are not recordings.
_NOT_RECORDINGS = frozenset({"README.md", "LICENSE", ".gitattributes"})


def trajectory_files() -> list[Path]:
    """Every recorded trajectory file, sorted (empty when the folder is absent)."""
    if not SHARED_DATA.is_dir():
        return []
    return sorted(
        p for p in SHARED_DATA.rglob("*") if p.is_file() and p.name not in _NOT_RECORDINGS
    )
