"""Files of provider message lists: OpenAI chat JSON / JSONL, an Anthropic
``{"system", "messages"}`` object, and mini-swe-agent's ``.traj.json`` (OpenAI messages ending
in a ``role: "exit"`` record, kept in ``meta["exit"]``).

The messages go through :mod:`contextwarden.formats` unchanged, so
:func:`~contextwarden._transcripts.save_transcript` writes them back as they were; keys beside
``messages`` / ``tools`` are kept in ``meta["fields"]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._messages import freeze
from ..formats import from_anthropic, from_openai
from ._common import Loc, Record, Transcript, as_str

__all__ = [
    "anthropic_block",
    "looks_anthropic",
    "parse_anthropic",
    "parse_mini_swe_agent",
    "parse_openai",
    "parse_openai_jsonl",
]

_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})
_OPENAI_ROLES = frozenset({"system", "developer", "tool", "function"})


def anthropic_block(block: Any) -> bool:
    """Whether a content block is spelled only as Anthropic spells it (tool traffic, thinking,
    an image with a ``source``)."""
    kind = block.get("type") if isinstance(block, dict) else None
    return kind in _ANTHROPIC_BLOCKS or (kind == "image" and "source" in block)


def looks_anthropic(doc: Mapping[str, Any]) -> bool:
    """Whether a ``{"messages": [...]}`` object is in Anthropic's form rather than OpenAI's.

    Anthropic puts the system prompt beside the messages and spells tool traffic as content
    blocks; OpenAI has ``system``/``tool`` roles and ``tool_calls``. Plain user/assistant text
    reads the same in both, and is taken as OpenAI.
    """
    if "system" in doc:
        return True
    tools = doc.get("tools")
    if isinstance(tools, list) and any(isinstance(t, dict) and "input_schema" in t for t in tools):
        return True
    for msg in doc.get("messages") or ():
        if not isinstance(msg, dict):
            continue
        if msg.get("role") in _OPENAI_ROLES or "tool_calls" in msg or "function_call" in msg:
            return False
        content = msg.get("content")
        if isinstance(content, list) and any(map(anthropic_block, content)):
            return True
    return False


def parse_openai(doc: Any, path: Path, shown: str) -> Transcript:
    """A JSON list of OpenAI chat messages, or ``{"messages": [...], "tools"?: [...], ...}``."""
    loc = Loc(shown)
    meta: dict[str, Any] = {}
    tools: tuple[Mapping[str, Any], ...] = ()
    if isinstance(doc, dict):
        raw = loc.get(doc, "messages", list, "")
        tools = _tools(doc, loc)
        meta["container"] = "object"
        meta["fields"] = {k: v for k, v in doc.items() if k not in ("messages", "tools")}
    else:
        raw = loc.check(doc, list, "document")
    messages = loc.convert(from_openai, raw)
    model = meta.get("fields", {}).get("model")
    return Transcript(messages, "openai", str(path), as_str(model), tools, freeze(meta))


def parse_openai_jsonl(records: Sequence[Record], path: Path, shown: str) -> Transcript:
    """One OpenAI chat message per line."""
    lines = [r.line for r in records]
    messages = Loc(shown).convert(from_openai, [r.value for r in records], lines)
    return Transcript(messages, "openai-jsonl", str(path))


def parse_anthropic(doc: Any, path: Path, shown: str) -> Transcript:
    """``{"system"?: str | blocks, "messages": [...], "tools"?: [...], ...}``."""
    loc = Loc(shown)
    doc = loc.check(doc, dict, "document")
    raw = loc.get(doc, "messages", list, "")
    system = doc.get("system")
    messages = loc.convert(lambda m: from_anthropic(m, system), raw)
    fields = {k: v for k, v in doc.items() if k not in ("system", "messages", "tools")}
    model, meta = as_str(fields.get("model")), {"fields": fields}
    return Transcript(messages, "anthropic", str(path), model, _tools(doc, loc), freeze(meta))


def parse_mini_swe_agent(doc: Any, path: Path, shown: str) -> Transcript:
    """A mini-swe-agent trajectory: ``info`` + OpenAI messages ending in an ``exit`` record."""
    loc = Loc(shown)
    doc = loc.check(doc, dict, "document")
    raw = loc.get(doc, "messages", list, "")
    info = loc.opt(doc, "info", dict, "") or {}
    meta: dict[str, Any] = {
        "info": info,
        "fields": {k: v for k, v in doc.items() if k not in ("info", "messages")},
    }
    if raw and isinstance(raw[-1], dict) and raw[-1].get("role") == "exit":
        meta["exit"] = raw[-1]
        raw = raw[:-1]
    if "instance_id" in doc:
        meta["instance_id"] = doc["instance_id"]
    config = info.get("config")
    model_cfg = config.get("model") if isinstance(config, dict) else None
    model = as_str(model_cfg.get("model_name")) if isinstance(model_cfg, dict) else None
    messages = loc.convert(from_openai, raw)
    return Transcript(messages, "mini-swe-agent", str(path), model, (), freeze(meta))


def _tools(doc: Mapping[str, Any], loc: Loc) -> tuple[Mapping[str, Any], ...]:
    tools = loc.opt(doc, "tools", list, "")
    return tuple(loc.check(t, dict, f"tools[{i}]") for i, t in enumerate(tools or ()))
