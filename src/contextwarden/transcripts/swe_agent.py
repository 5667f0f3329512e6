"""SWE-agent trajectories, ``<instance>.traj``: ``history`` is the message list the agent
sent (demonstrations included), with ``tool_calls`` and ``tool`` results in newer versions
(a call id used again is made unique). The model is ``replay_config.agent.model.name``, else
the one SWE-agent 0.x named the run's folder after; ``info.model_stats`` goes to ``meta``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .._messages import Block, Message, TextBlock, ToolCallBlock, ToolResultBlock, freeze
from ._common import Loc, Transcript, as_str, merge_user_runs, pair_calls, unique_call_ids

__all__ = ["is_swe_agent", "parse_swe_agent"]


def is_swe_agent(doc: Any) -> bool:
    """Whether a JSON document looks like a SWE-agent trajectory."""
    return isinstance(doc, dict) and isinstance(doc.get("history"), list) and "trajectory" in doc


def parse_swe_agent(doc: Any, path: Path, shown: str) -> Transcript:
    """Read a SWE-agent ``.traj``."""
    loc = Loc(shown)
    doc = loc.check(doc, dict, "document")
    history = loc.get(doc, "history", list, "")
    meta: dict[str, Any] = {}
    info = doc.get("info")
    if isinstance(info, dict) and isinstance(info.get("model_stats"), dict):
        meta["model_stats"] = info["model_stats"]
    messages: list[Message] = []
    for i, entry in enumerate(history):
        at = Loc(shown, index=i)
        entry = at.check(entry, dict, "")
        role = at.get(entry, "role", str, "")
        content = _text(entry.get("content"))
        if role == "system":
            messages.append(Message("system", (TextBlock(content),)))
        elif role == "user":
            messages.append(Message("user", (TextBlock(content),)))
        elif role == "assistant":
            blocks: list[Block] = [TextBlock(content)] if content else []
            for j, call in enumerate(entry.get("tool_calls") or ()):
                call = at.check(call, dict, f"tool_calls[{j}]")
                fn: dict[str, Any] = (
                    call["function"] if isinstance(call.get("function"), dict) else {}
                )
                args = fn.get("arguments", "{}")
                blocks.append(
                    ToolCallBlock(
                        str(call.get("id")),
                        str(fn.get("name", "")),
                        args if isinstance(args, str) else json.dumps(args),
                    )
                )
            messages.append(Message("assistant", tuple(blocks)))
        elif role == "tool":
            ids = entry.get("tool_call_ids") or [entry.get("tool_call_id")]
            results = tuple(ToolResultBlock(str(x), content) for x in ids if x is not None)
            messages.append(
                Message("tool", results) if results else Message("user", (TextBlock(content),))
            )
        else:
            at.fail("role", f"unknown role {role!r} (expected system, user, assistant or tool)")
    model = _model(doc.get("replay_config")) or _run_folder_model(path)
    kept = merge_user_runs(pair_calls(unique_call_ids(messages, meta), meta))
    return Transcript(kept, "swe-agent", str(path), model, (), freeze(meta))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else str(content)


def _model(config: Any) -> str | None:
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            return None
    agent = config.get("agent") if isinstance(config, dict) else None
    model = agent.get("model") if isinstance(agent, dict) else None
    if isinstance(model, dict):
        return as_str(model.get("name") or model.get("model_name"))
    return None


#: SWE-agent 0.x names a run's folder ``<model>__<data>__<config>__t-<temp>__p-<top p>__...``.
_RUN_FOLDER = re.compile(r"^(?P<model>[^_][^/]*?)__.+__t-[\d.]+__p-[\d.]+__")


def _run_folder_model(path: Path) -> str | None:
    """The model SWE-agent 0.x named the run's folder after (``gpt4``), when the file sits in
    such a folder and records no model itself."""
    match = _RUN_FOLDER.match(path.parent.name)
    return match.group("model") if match else None
