"""Load real trajectories as Message lists for these tests.

Prefers the library's own loader (``contextwarden._transcripts.load_transcript``), then
``contextwarden.formats.from_openai``; until those exist, a minimal OpenAI-chat reader good
enough for mini-swe-agent files (text, tool calls, tool results) is used.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from contextwarden import Message, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock


def _minimal_from_openai(raw: list[dict[str, Any]]) -> list[Message]:
    out: list[Message] = []
    for m in raw:
        role = m["role"]
        content = m.get("content")
        text = content if isinstance(content, str) else "".join(
            p.get("text", "") for p in content or [] if isinstance(p, dict)
        )
        if role == "tool":
            out.append(Message("tool", (ToolResultBlock(m["tool_call_id"], text),)))
            continue
        blocks: list[Any] = []
        if m.get("reasoning_content"):
            blocks.append(ThinkingBlock(m["reasoning_content"]))
        if text:
            blocks.append(TextBlock(text))
        for tc in m.get("tool_calls") or []:
            fn = tc["function"]
            blocks.append(ToolCallBlock(tc["id"], fn["name"], fn.get("arguments") or "{}"))
        out.append(Message(role, tuple(blocks)))
    return out


def load_messages(path: Path) -> list[Message]:
    """The messages of a trajectory file (mini-swe-agent's ``exit`` message skipped)."""
    try:
        from contextwarden._transcripts import load_transcript  # type: ignore[attr-defined]
    except ImportError:
        load_transcript = None
    if load_transcript is not None:
        try:
            return list(load_transcript(path).messages)
        except ImportError:  # the loader is there but its format adapters are not yet
            pass
    data = json.loads(path.read_text())
    raw = [m for m in data["messages"] if m.get("role") != "exit"]
    try:
        from contextwarden.formats import from_openai  # type: ignore[attr-defined]
    except ImportError:
        return _minimal_from_openai(raw)
    cleaned = [{k: v for k, v in m.items() if k != "extra"} for m in raw]
    return list(from_openai(cleaned))


def final_diff_files(path: Path) -> list[str]:
    """Files the mini-swe-agent run's submitted git diff really changed."""
    import re

    data = json.loads(path.read_text())
    last = data["messages"][-1]
    text = last.get("content") or ""
    return re.findall(r"^diff --git a/(\S+)", text, re.M)
