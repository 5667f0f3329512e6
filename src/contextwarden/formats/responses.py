"""OpenAI Responses API input items <-> canonical :class:`Message` values, without loss.

How it works: docs/formats.md (`contextwarden.formats.responses`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from .._exceptions import FormatError
from .._messages import (
    EMPTY,
    Block,
    ImageBlock,
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ._common import (
    FORMAT,
    ITEM,
    OPAQUE,
    deep_copy,
    fail,
    fill,
    frozen,
    reserved_check,
    string_at,
    tname,
)
from ._media import openai_image_cost

__all__ = [
    "compaction_item_at",
    "compaction_trigger",
    "from_responses",
    "provider_compaction",
    "to_responses",
]

_FMT = "responses"

_MESSAGE_ROLES: dict[str, Role] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
}
#: Call items we understand, and the key holding their arguments.
_CALLS = {"function_call": "arguments", "custom_tool_call": "input"}
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})
_TEXT_PARTS = frozenset({"input_text", "output_text"})


def _hints(content: str, **more: Any) -> Mapping[str, Any]:
    return MappingProxyType({"format": _FMT, "content": content, **more})


_HINTS = {k: _hints(k) for k in ("str", "list", "absent")}
_ASSISTANT_HINTS = MappingProxyType({"format": _FMT})
_WHOLE_HINTS = MappingProxyType({"format": _FMT, "item": "opaque"})  # one item kept whole


# -- reading ---------------------------------------------------------------------------------------
def from_responses(
    items: Sequence[Mapping[str, Any]], *, instructions: str | None = None
) -> list[Message]:
    """Canonical messages for a Responses API ``input`` item list (and its ``instructions``).

    The input is never mutated nor aliased. Raises :class:`FormatError` naming the item index
    and field path for malformed input (an item that is not an object, a message with an
    unknown role, a ``function_call`` without a string ``call_id``...).
    """
    if not isinstance(items, list | tuple):
        raise FormatError(f"expected a list of input items, got {tname(items)}")
    if instructions is not None and type(instructions) is not str:
        raise fail(None, "instructions", "a string or null", instructions)
    out: list[Message] = []
    if instructions is not None:
        out.append(
            Message("system", (TextBlock(instructions),), hints=_hints("str", instructions=True))
        )
    run: list[Block] = []  # the assistant run being collected
    reasoning = 0
    # the hints of the tool results of one key order, shared by the results of this input
    output_hints: dict[tuple[str, tuple[str, ...]], Mapping[str, Any]] = {}

    def close_run() -> None:
        nonlocal reasoning
        if run:
            hints = (
                _ASSISTANT_HINTS
                if not reasoning
                else MappingProxyType({"format": _FMT, "reasoning": reasoning})
            )
            out.append(Message("assistant", tuple(run), hints=hints))
            run.clear()
            reasoning = 0

    for i, item in enumerate(items):
        if type(item) is not dict and not isinstance(item, Mapping):
            raise FormatError(f"expected an input item object, got {tname(item)}", index=i)
        kind = item.get("type", "message" if "role" in item else None)
        if type(kind) is not str:
            raise fail(i, "type", "a string", kind)
        if kind == "message":
            role = item.get("role")
            canon = _MESSAGE_ROLES.get(role) if type(role) is str else None
            if canon is None:
                raise FormatError(
                    f"unknown role {role!r} (expected one of {', '.join(_MESSAGE_ROLES)})",
                    index=i,
                    field="role",
                )
            if canon == "assistant":
                run.extend(_assistant_message(i, item))
                continue
            close_run()
            out.append(_message(i, item, canon, str(role)))
        elif kind in _CALLS:
            run.append(_call(i, item, kind))
        elif kind == "reasoning":
            run.append(_reasoning(i, item))
            reasoning += 1
        elif kind in _OUTPUTS:
            close_run()
            out.append(_output(i, item, output_hints))
        elif type(item.get("call_id")) is str:
            # A call or output of a built-in tool (computer, shell...): kept whole, but paired
            # like a function call so that the window never separates the two.
            block = deep_copy(item)
            frozen_item = MappingProxyType(block)
            opaque = MappingProxyType({OPAQUE: block, FORMAT: _FMT})
            if kind.endswith("_output"):
                close_run()
                result = ToolResultBlock(item["call_id"], _render(block), extra=opaque)
                out.append(Message("tool", (result,), hints=_ASSISTANT_HINTS))
            else:
                run.append(ToolCallBlock(item["call_id"], kind, _render(frozen_item), extra=opaque))
        elif kind.endswith("_call") or kind in ("mcp_list_tools", "mcp_approval_request"):
            run.append(_opaque(item))  # server-side tool use: part of the model's turn
        elif kind == "compaction":
            close_run()
            block = deep_copy(item)
            encrypted = item.get("encrypted_content")
            cost = len(encrypted) // 4 + 1 if isinstance(encrypted, str) else 1
            opaque = MappingProxyType({OPAQUE: block, FORMAT: _FMT})
            kept = ImageBlock(MappingProxyType(block), token_cost=cost, extra=opaque)
            out.append(Message("user", (kept,), hints=_WHOLE_HINTS))
        else:
            close_run()
            out.append(Message("user", (_opaque(item),), hints=_WHOLE_HINTS))
    close_run()
    return out


def compaction_item_at(items: Any) -> int | None:
    """The index of the last ``compaction`` item of ``input``, or None. It carries what the
    items before it held (the API's guide lets a client drop them), so they are not the
    history to reduce."""
    if not isinstance(items, list):
        return None
    for i in range(len(items) - 1, -1, -1):
        if isinstance(items[i], dict) and items[i].get("type") == "compaction":
            return i
    return None


def provider_compaction(body: Mapping[str, Any]) -> str | None:
    """Why the server compacts this request's history itself, or None: its
    ``context_management`` asks for server-side compaction. (Codex's ``compaction_trigger``
    asks for one compaction of the history it follows: see :func:`compaction_trigger`.)"""
    management = body.get("context_management")
    if isinstance(management, list) and any(
        isinstance(m, dict) and m.get("type") == "compaction" for m in management
    ):
        return "context_management asks for server-side compaction"
    return None


def compaction_trigger(items: Any) -> bool:
    """Whether ``input`` ends with the ``compaction_trigger`` with which Codex asks for exactly
    one ``compaction`` item back (a summary of the items before it)."""
    return (
        isinstance(items, list)
        and bool(items)
        and isinstance(items[-1], dict)
        and items[-1].get("type") == "compaction_trigger"
    )


def _render(item: Mapping[str, Any]) -> str:
    return json.dumps(dict(item), ensure_ascii=False, default=str)


def _opaque(item: Mapping[str, Any]) -> TextBlock:
    block = deep_copy(item)
    return TextBlock(_render(block), extra=MappingProxyType({OPAQUE: block, FORMAT: _FMT}))


def _tag(i: int, item: Mapping[str, Any], consumed: tuple[str, ...], **more: Any) -> Any:
    """The ``_cw_item`` record of item ``i``: its position, key order and unconsumed keys."""
    rest = {k: deep_copy(v) for k, v in item.items() if k not in consumed}
    return MappingProxyType({"seq": i, "order": tuple(item), "rest": rest, **more})


def _content(i: int, item: Mapping[str, Any], tag: Any) -> tuple[Block, ...]:
    c = item["content"]
    if type(c) is str:
        return (TextBlock(c, extra=MappingProxyType({ITEM: tag}) if tag is not None else EMPTY),)
    return tuple(_part(i, f"content[{j}]", p, tag) for j, p in enumerate(c))


def _content_kind(i: int, item: Mapping[str, Any]) -> str:
    if "content" not in item:
        return "absent"
    c = item["content"]
    if type(c) is str:
        return "str"
    if type(c) is list:
        return "list"
    raise fail(i, "content", "a string or a list of content parts", c)


def _part(i: int, path: str, p: Any, tag: Any) -> TextBlock | ImageBlock:
    """One content part: ``input_text`` / ``output_text``, ``input_image``, or opaque."""
    if type(p) is not dict and not isinstance(p, Mapping):
        raise fail(i, path, "a content part object", p)
    t = string_at(p, "type", i, path)
    extra: dict[str, Any]
    if t in _TEXT_PARTS:
        text = string_at(p, "text", i, path)
        extra = {k: deep_copy(v) for k, v in p.items() if k != "text"}
        reserved_check(extra, i, path)
        if tag is not None:
            extra[ITEM] = tag
        return TextBlock(text, extra=MappingProxyType(extra))
    block = deep_copy(p)
    reserved_check(block, i, path)
    extra = {OPAQUE: block, FORMAT: _FMT}
    if tag is not None:
        extra[ITEM] = tag
    if t == "input_image":
        cost = openai_image_cost({"url": p.get("image_url"), "detail": p.get("detail")})
        return ImageBlock(MappingProxyType(block), token_cost=cost, extra=MappingProxyType(extra))
    return TextBlock(_render(block), extra=MappingProxyType(extra))


def _assistant_message(i: int, item: Mapping[str, Any]) -> tuple[Block, ...]:
    kind = _content_kind(i, item)
    if kind == "absent" or not item["content"]:
        return (_opaque(item),)  # nothing to hold its place: keep the item whole
    tag = _tag(i, item, ("content",), kind="message", content=kind)
    return _content(i, item, tag)


def _message(i: int, item: Mapping[str, Any], canon: Role, role: str) -> Message:
    kind = _content_kind(i, item)
    content = _content(i, item, None) if kind != "absent" else ()
    if kind == "str" and not item["content"]:
        content = ()
    extra = {k: deep_copy(v) for k, v in item.items() if k not in ("role", "content")}
    more: dict[str, Any] = {"role": role} if role == "developer" else {}
    if extra:
        more["order"] = tuple(item)
    hints = _hints(kind, **more) if more else _HINTS[kind]
    return Message(canon, content, extra=frozen(extra), hints=hints)


def _call(i: int, item: Mapping[str, Any], kind: str) -> ToolCallBlock:
    key = _CALLS[kind]
    call_id, name = string_at(item, "call_id", i), string_at(item, "name", i)
    arguments = string_at(item, key, i)
    tag = _tag(i, item, ("call_id", "name", key), kind=kind)
    return ToolCallBlock(call_id, name, arguments, extra=MappingProxyType({ITEM: tag}))


def _reasoning(i: int, item: Mapping[str, Any]) -> ThinkingBlock:
    summary = item.get("summary", [])
    if type(summary) is not list:
        raise fail(i, "summary", "a list of summary parts", summary)
    texts = []
    for j, s in enumerate(summary):
        if not isinstance(s, Mapping) or type(s.get("text")) is not str:
            raise fail(
                i, f"summary[{j}].text", "a string", s.get("text") if isinstance(s, Mapping) else s
            )
        texts.append(s["text"])
    encrypted = item.get("encrypted_content")
    if encrypted is not None and type(encrypted) is not str:
        raise fail(i, "encrypted_content", "a string or null", encrypted)
    consumed = ("encrypted_content",) if encrypted is not None else ()
    tag = _tag(i, item, consumed, kind="reasoning")
    return ThinkingBlock(
        "\n\n".join(texts), signature=encrypted, extra=MappingProxyType({ITEM: tag})
    )


def _output(
    i: int, item: Mapping[str, Any], shared: dict[tuple[str, tuple[str, ...]], Mapping[str, Any]]
) -> Message:
    call_id = string_at(item, "call_id", i)
    if "output" not in item:
        raise FormatError("missing", index=i, field="output")
    output = item["output"]
    result: str | tuple[TextBlock | ImageBlock, ...]
    if type(output) is str:
        result, kind = output, "str"
    elif type(output) is list:
        result = tuple(_part(i, f"output[{j}]", p, None) for j, p in enumerate(output))
        kind = "list"
    else:
        raise fail(i, "output", "a string or a list of content parts", output)
    order = tuple(item)
    if order == _PLAIN_OUTPUT:  # the common spelling: share the extra and hints mappings
        extra: Mapping[str, Any] = _OUTPUT_TYPES[item["type"]]
    else:
        extra = frozen({k: deep_copy(v) for k, v in item.items() if k not in _OUTPUT_KEYS})
    return Message(
        "tool",
        (ToolResultBlock(call_id, result),),
        extra=extra,
        hints=_output_hints(kind, order, shared),
    )


_PLAIN_OUTPUT = ("type", "call_id", "output")
_OUTPUT_KEYS = ("call_id", "output")
_OUTPUT_TYPES = {t: MappingProxyType({"type": t}) for t in _OUTPUTS}


def _output_hints(
    kind: str, order: tuple[str, ...], shared: dict[tuple[str, tuple[str, ...]], Mapping[str, Any]]
) -> Mapping[str, Any]:
    """The hints of a tool result spelled with ``order``: the common spelling's are made once,
    the others once per input (``shared``), so that the results of one input share them."""
    if order == _PLAIN_OUTPUT and kind in _PLAIN_OUTPUT_HINTS:
        return _PLAIN_OUTPUT_HINTS[kind]
    hints = shared.get((kind, order))
    if hints is None:
        hints = shared[(kind, order)] = _hints(kind, order=order)
    return hints


_PLAIN_OUTPUT_HINTS = {kind: _hints(kind, order=_PLAIN_OUTPUT) for kind in ("str", "list")}


# -- writing ---------------------------------------------------------------------------------------
def to_responses(messages: Sequence[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """``(instructions, input items)`` for canonical ``messages``.

    Exact inverse of :func:`from_responses` for messages that came from it. Messages built in
    code (a compaction summary) or converted from Chat Completions / Anthropic get the plain
    spelling (``{"role": ..., "content": "..."}``, ``function_call`` items). Thinking that did
    not come from a ``reasoning`` item is left out: the API only takes back its own reasoning.
    The output shares no mutable value with the messages. Raises :class:`FormatError` for
    content the Responses API cannot carry.
    """
    instructions: str | None = None
    out: list[dict[str, Any]] = []
    for i, msg in enumerate(messages):
        if i == 0 and msg.role == "system" and msg.hints.get("instructions"):
            instructions = msg.text
            continue
        if msg.role == "assistant":
            _assistant_out(out, i, msg)
        elif msg.role == "tool" or any(type(b) is ToolResultBlock for b in msg.content):
            _tool_out(out, i, msg)
        else:
            _message_out(out, i, msg)
    return instructions, out


def _native(msg: Message) -> bool:
    return msg.hints.get("format") == _FMT


def _message_out(out: list[dict[str, Any]], i: int, msg: Message) -> None:
    if len(msg.content) == 1 and msg.hints.get("item") == "opaque":
        whole = _whole_item(msg.content[0])
        if whole is not None:
            out.append(whole)
            return
    native = _native(msg)
    role = msg.hints.get("role", msg.role) if native else msg.role
    d: dict[str, Any] = {"role": role}
    kind = msg.hints.get("content") if native else None
    if kind == "list" or (kind is None and not _plain(msg.content)):
        d["content"] = [_part_out(i, j, b, "input_text") for j, b in enumerate(msg.content)]
    elif kind != "absent" or msg.content:
        d["content"] = "\n".join(b.text for b in msg.content if isinstance(b, TextBlock))
    if native:
        fill(d, msg.extra)
        d = _ordered(d, msg.hints.get("order", ()))
    out.append(d)


def _whole_item(b: Block) -> dict[str, Any] | None:
    """The original item of an item-level opaque block (not a part of a message)."""
    if not b.extra or b.extra.get(FORMAT) != _FMT or OPAQUE not in b.extra or ITEM in b.extra:
        return None
    original = b.extra[OPAQUE]
    if type(b) is TextBlock and b.text != _render(original):
        return None  # a layer edited it: it is plain text now
    return dict(deep_copy(original))


def _plain(blocks: Sequence[Block]) -> bool:
    return all(type(b) is TextBlock and not b.extra for b in blocks)


def _part_out(i: int, j: int, b: Block, text_type: str) -> dict[str, Any]:
    if type(b) is TextBlock:
        extra = b.extra
        if extra.get(FORMAT) == _FMT and OPAQUE in extra:
            if b.text == _render(extra[OPAQUE]):
                return dict(deep_copy(extra[OPAQUE]))
            return {"type": text_type, "text": b.text}
        t = extra.get("type")
        d: dict[str, Any] = {"type": t if t in _TEXT_PARTS else text_type, "text": b.text}
        if extra and (FORMAT not in extra or extra.get(FORMAT) == _FMT):
            fill(d, extra)
        return d
    if type(b) is ImageBlock:
        if b.extra.get(FORMAT) == _FMT:
            return dict(deep_copy(b.source))
        url = b.source.get("url")
        if isinstance(url, str) and "type" not in b.source:  # a chat-completions image_url
            return {
                "type": "input_image",
                "image_url": url,
                "detail": b.source.get("detail", "auto"),
            }
        raise FormatError(
            "this image or media block has no Responses API equivalent",
            index=i,
            field=f"content[{j}]",
        )
    raise FormatError(f"a {b.type} block cannot be a content part", index=i, field=f"content[{j}]")


def _ordered(d: dict[str, Any], order: Sequence[str]) -> dict[str, Any]:
    """``d`` with the keys of ``order`` first, in that order (the item's original spelling)."""
    if list(d) == list(order):
        return d
    out = {k: d[k] for k in order if k in d}
    out.update((k, v) for k, v in d.items() if k not in out)
    return out


def _assistant_out(out: list[dict[str, Any]], i: int, msg: Message) -> None:
    native = _native(msg)
    had = msg.hints.get("reasoning", 0) if native else 0
    kept = sum(1 for b in msg.content if type(b) is ThinkingBlock and ITEM in b.extra)
    drop_ids = kept < had  # a layer removed reasoning: the siblings must not name stored ids
    current: dict[str, Any] | None = None  # the item the previous block went into
    current_seq: object = None
    loose: list[Block] = []  # text built in code or converted: one assistant message

    def flush_loose() -> None:
        if loose:
            texts = [b.text for b in loose if isinstance(b, TextBlock)]
            out.append({"role": "assistant", "content": "\n".join(texts)})
            loose.clear()

    for j, b in enumerate(msg.content):
        tag = b.extra.get(ITEM) if b.extra and native else None
        if tag is None:
            current, current_seq = None, None
            whole = _whole_item(b)
            if whole is not None:
                flush_loose()
                out.append(whole)
            elif type(b) is ToolCallBlock:
                flush_loose()
                opaque = b.extra.get(OPAQUE) if b.extra.get(FORMAT) == _FMT else None
                if opaque is not None:
                    out.append(dict(deep_copy(opaque)))
                else:
                    out.append(
                        {
                            "type": "function_call",
                            "call_id": b.id,
                            "name": b.name,
                            "arguments": b.arguments,
                        }
                    )
            elif type(b) is TextBlock:
                loose.append(b)
            elif type(b) is ThinkingBlock:
                continue  # not the API's own reasoning item: it cannot take it back
            else:
                raise FormatError(
                    f"an assistant {b.type} block has no Responses API equivalent",
                    index=i,
                    field=f"content[{j}]",
                )
            continue
        flush_loose()
        kind = tag["kind"]
        if kind == "message" and current is not None and current_seq == tag["seq"]:
            current["content"].append(_part_out(i, j, b, "output_text"))
            continue
        d = {k: deep_copy(v) for k, v in tag["rest"].items()}
        if drop_ids and kind != "reasoning":
            d.pop("id", None)
        if kind == "message":
            d["content"] = [_part_out(i, j, b, "output_text")]
        elif kind == "reasoning":
            assert type(b) is ThinkingBlock
            _reasoning_out(d, b)
        else:
            assert type(b) is ToolCallBlock
            d["call_id"], d["name"], d[_CALLS[kind]] = b.id, b.name, b.arguments
        d = _ordered(d, tag["order"])
        out.append(d)
        current, current_seq = d, tag["seq"]
        if kind == "message" and tag["content"] == "str":
            current = _string_content(d)
    flush_loose()


def _string_content(d: dict[str, Any]) -> dict[str, Any] | None:
    """Turn back a one-part text content list into the string it was; None when done."""
    parts = d["content"]
    if len(parts) == 1 and set(parts[0]) == {"type", "text"}:
        d["content"] = parts[0]["text"]
        return None  # a string holds no more parts
    return d


def _reasoning_out(d: dict[str, Any], b: ThinkingBlock) -> None:
    summary = d.get("summary")
    texts = [s["text"] for s in summary] if type(summary) is list else []
    if b.thinking != "\n\n".join(texts):
        d["summary"] = [{"type": "summary_text", "text": b.thinking}] if b.thinking else []
    if b.signature is not None:
        d["encrypted_content"] = b.signature


def _tool_out(out: list[dict[str, Any]], i: int, msg: Message) -> None:
    native = _native(msg)
    rest: list[Block] = []
    for j, b in enumerate(msg.content):
        if type(b) is not ToolResultBlock:
            rest.append(b)
            continue
        opaque = b.extra.get(OPAQUE) if b.extra.get(FORMAT) == _FMT else None
        if opaque is not None:
            out.append(dict(deep_copy(opaque)))
            continue
        kind = msg.extra.get("type") if native else None
        d: dict[str, Any] = {"type": kind if kind in _OUTPUTS else "function_call_output"}
        d["call_id"] = b.tool_call_id
        if isinstance(b.content, str):
            d["output"] = b.content
        elif native and msg.hints.get("content") == "list":
            d["output"] = [_part_out(i, j, x, "input_text") for x in b.content]
        else:
            d["output"] = b.text
        if native:
            fill(d, msg.extra)
            d = _ordered(d, msg.hints.get("order", ()))
        out.append(d)
    if rest:
        _message_out(out, i, Message("user", tuple(rest)))
