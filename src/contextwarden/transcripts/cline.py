"""Cline and Roo Code tasks and Cline SDK sessions (docs/sessions.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .._exceptions import FormatError
from .._messages import Block, Message, TextBlock, ToolResultBlock, freeze
from ..analysis.actions import CLINE_RESULT
from ..formats import from_anthropic
from ._common import Loc, Transcript, as_str, combine_turns, merge_user_runs, pair_calls
from .provider import anthropic_block

__all__ = ["is_cline", "parse_cline"]


def is_cline(doc: Any) -> bool:
    """Whether a JSON document is a Cline session: the SDK's ``<id>.messages.json``, or a JSON
    list of Anthropic messages (only user/assistant roles, content blocks in Anthropic's form,
    or the text-result headers Cline writes)."""
    if isinstance(doc, dict):
        return (
            isinstance(doc.get("messages"), list)
            and "sessionId" in doc
            and "version" in doc
            and ("agent" in doc or "updated_at" in doc)
        )
    if not isinstance(doc, list) or not doc:
        return False
    anthropic = False
    for m in doc:
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            return False
        if "tool_calls" in m or "tool_call_id" in m:
            return False
        content = m.get("content")
        if isinstance(content, list):
            for b in content:
                if not isinstance(b, dict):
                    return False
                if anthropic_block(b) or (
                    b.get("type") == "text" and CLINE_RESULT.match(str(b.get("text", "")))
                ):
                    anthropic = True
    return anthropic


def parse_cline(doc: Any, path: Path, shown: str) -> Transcript:
    """Read a Cline / Roo ``api_conversation_history.json`` or a Cline SDK session."""
    loc = Loc(shown)
    meta: dict[str, Any] = {}
    sdk = isinstance(doc, dict)
    raw = loc.check(doc.get("messages") if sdk else doc, list, "messages" if sdk else "document")
    api: list[dict[str, Any]] = []
    stamps: list[Any] = []
    usages: list[Any] = []
    model: str | None = None
    for i, m in enumerate(raw):
        m = Loc(shown, index=i).check(m, dict, "")
        content = m.get("content")
        if sdk and isinstance(content, list):
            # thinking with no signature is not sent back (the API refuses it)
            content = [_sdk_block(b) for b in content if not _unsigned(b)]
            if isinstance(m.get("modelInfo"), dict) and isinstance(m["modelInfo"].get("id"), str):
                model = m["modelInfo"]["id"]
                meta["provider"] = m["modelInfo"].get("provider")
        api.append({"role": m.get("role"), "content": content})
        stamps.append(m.get("ts"))
        usages.append(_sdk_usage(m.get("metrics")) if sdk else None)
    api, first = combine_turns(api)
    stamps = [stamps[i] for i in first]
    usages = [usages[i] for i in first]
    try:
        converted = list(from_anthropic(api, as_str(doc.get("system_prompt")) if sdk else None))
    except FormatError as exc:
        at = first[exc.index] if exc.index is not None and exc.index < len(first) else None
        loc.reraise(FormatError(exc.reason, index=at, field=exc.field))
    lead = converted[:1] if converted and converted[0].role == "system" else []
    out: list[Message] = list(lead)
    for msg, ts, usage in zip(converted[len(lead) :], stamps, usages, strict=True):
        msg = msg.replace(timestamp=ts) if ts is not None else msg
        if usage is not None and msg.role == "assistant":
            msg = msg.replace(usage=usage)
        if msg.role == "user" and out and out[-1].role == "assistant" and out[-1].tool_calls:
            msg = _text_results(out[-1], msg)
        out.append(msg)
    if not sdk:
        model = _task_model(path, meta)
        out = _attach_usage(path, out)
    messages = merge_user_runs(pair_calls(out, meta))
    return Transcript(messages, "cline", str(path), model, (), freeze(meta))


def _sdk_block(block: Any) -> Any:
    """A content block of the Cline SDK's session file in the Anthropic form it is sent in."""
    if not isinstance(block, dict):
        return block
    kind = block.get("type")
    if kind == "file":  # a file the user attached: sent as text, headed by its path
        path, text = block.get("path"), block.get("content")
        return {"type": "text", "text": f'<file_content path="{path}">\n{text}\n</file_content>'}
    if kind == "image" and "source" not in block and "data" in block:
        source = {"type": "base64", "media_type": block.get("mediaType"), "data": block["data"]}
        return {"type": "image", "source": source}
    if kind == "tool_result":
        out = {k: block[k] for k in ("type", "tool_use_id", "is_error") if k in block}
        content = block.get("content")
        if isinstance(content, list) and all(
            isinstance(b, dict) and b.get("type") in ("text", "image") for b in content
        ):
            out["content"] = [_sdk_block(b) for b in content]
        elif isinstance(content, str):
            out["content"] = content
        else:  # a structured output goes as its JSON text
            out["content"] = json.dumps(content, ensure_ascii=False, separators=(",", ":"))
        return out
    if kind in ("text", "thinking", "redacted_thinking", "tool_use"):
        keep = {
            "text": ("type", "text"),
            "thinking": ("type", "thinking", "signature"),
            "redacted_thinking": ("type", "data"),
            "tool_use": ("type", "id", "name", "input"),
        }[kind]
        return {k: block[k] for k in keep if k in block}
    return block


def _unsigned(block: Any) -> bool:
    return (
        isinstance(block, dict) and block.get("type") == "thinking" and not block.get("signature")
    )


def _sdk_usage(metrics: Any) -> dict[str, int] | None:
    """The provider usage the SDK records with a reply (``metrics``), in Anthropic's names."""
    if not isinstance(metrics, dict) or not isinstance(metrics.get("inputTokens"), int):
        return None
    read = metrics.get("cacheReadTokens") or 0
    written = metrics.get("cacheWriteTokens") or 0
    # the SDK's inputTokens holds the cached ones too (ai-sdk.ts prices the rest)
    fresh = max(0, metrics["inputTokens"] - read - written)
    return _usage(fresh, read, written, metrics.get("outputTokens"))


def _usage(fresh: Any, read: Any, written: Any, output: Any) -> dict[str, int]:
    return {
        "input_tokens": fresh or 0,
        "cache_read_input_tokens": read or 0,
        "cache_creation_input_tokens": written or 0,
        "output_tokens": output or 0,
    }


def _text_results(call: Message, user: Message) -> Message:
    """``user`` with the text results of ``call``'s tool calls turned into result blocks."""
    pending = list(call.tool_calls)
    results: list[Block] = []
    rest: list[Block] = []
    current: tuple[str, list[str]] | None = None

    def close() -> None:
        nonlocal current
        if current is None:
            return
        name, texts = current
        target = next((c for c in pending if c.name == name), pending[0] if pending else None)
        if target is not None:
            pending.remove(target)
            results.append(ToolResultBlock(target.id, "\n".join(texts)))
        else:
            rest.append(TextBlock("\n".join(texts)))
        current = None

    for block in user.content:
        if isinstance(block, ToolResultBlock):
            close()
            results.append(block)
            pending[:] = [c for c in pending if c.id != block.tool_call_id]
            continue
        text = block.text if isinstance(block, TextBlock) else None
        match = CLINE_RESULT.match(text) if text is not None else None
        if match is not None and text is not None:
            close()
            current = (match.group("name"), [text])
        elif (
            current is not None
            and text is not None
            and not text.startswith("<environment_details>")
        ):
            current[1].append(text)
        else:
            close()
            rest.append(block)
    close()
    if not results:
        return user
    return user.replace(role="tool", content=(*results, *rest))


def _task_model(path: Path, meta: dict[str, Any]) -> str | None:
    data = _sibling(path, "task_metadata.json")
    usage = data.get("model_usage") if isinstance(data, dict) else None
    if isinstance(usage, list) and usage and isinstance(usage[-1], dict):
        model = usage[-1].get("model_id")
        if isinstance(model, str):
            meta["provider"] = usage[-1].get("model_provider_id")
            return model
    return None


def _attach_usage(path: Path, messages: list[Message]) -> list[Message]:
    data = _sibling(path, "ui_messages.json")
    if not isinstance(data, list):
        return messages
    usages: list[dict[str, Any]] = []
    for m in data:
        if isinstance(m, dict) and m.get("say") == "api_req_started":
            try:
                info = json.loads(m.get("text") or "")
            except ValueError:
                continue
            if isinstance(info, dict) and isinstance(info.get("tokensIn"), int):
                counts = ("tokensIn", "cacheReads", "cacheWrites", "tokensOut")
                usages.append(_usage(*map(info.get, counts)))
    replies = [i for i, m in enumerate(messages) if m.role == "assistant"]
    if len(usages) != len(replies):
        return messages
    out = list(messages)
    for i, usage in zip(replies, usages, strict=True):
        out[i] = out[i].replace(usage=usage)
    return out


def _sibling(path: Path, name: str) -> Any:
    try:
        return json.loads((path.parent / name).read_text("utf-8"))
    except (OSError, ValueError):
        return None
