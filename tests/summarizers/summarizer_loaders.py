"""Load real trajectories as Message lists for the summarizer tests."""

from __future__ import annotations

import json
import re
from pathlib import Path

from contextwarden import Message
from contextwarden._transcripts import load_transcript


def load_messages(path: Path) -> list[Message]:
    """The messages of a trajectory file, through the library's own loader (mini-swe-agent's
    closing ``exit`` message is not a message)."""
    return list(load_transcript(path).messages)


def final_diff_files(path: Path) -> list[str]:
    """Files a mini-swe-agent run's submitted git diff really changed (its last message)."""
    data = json.loads(path.read_text())
    text = data["messages"][-1].get("content") or ""
    return re.findall(r"^diff --git a/(\S+)", text, re.M)
