"""OpenAI Chat Completions messages <-> canonical :class:`Message` values, without loss.

How it works: docs/formats.md (`contextwarden.formats.openai`).
"""

from __future__ import annotations

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
    FIELD,
    FORMAT,
    FUNCTION_EXTRA,
    LEGACY,
    TooDeep,
    clean_key,
    clean_text,
    deep_copy,
    deep_error,
    fail,
    fill,
    frozen,
    hints_for,
    opaque_media,
    opaque_payload,
    opaque_text,
    reserved_check,
    string_at,
    thinking_out,
    tname,
)
from ._media import media_cost, openai_image_cost, openai_image_url_from_anthropic

__all__ = ["from_openai", "to_openai"]

_ROLES: dict[str, Role] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
    "function": "tool",
}
_MEDIA_PARTS = frozenset({"input_audio", "file"})
_THINKING_FIELDS = ("reasoning_content", "reasoning", "thinking_blocks")
_OPENAI_HINTS = {k: hints_for("openai", k) for k in ("str", "list", "null", "absent")}


# -- reading ---------------------------------------------------------------------------------------
def from_openai(messages: Sequence[Mapping[str, Any]]) -> list[Message]:
    """Canonical messages for a list of OpenAI Chat Completions messages.

    The input is never mutated nor aliased. Raises :class:`FormatError` naming the message
    index and field path for malformed input, including an unknown role (a mini-swe-agent
    ``exit`` record, for instance: drop it before calling).
    """
    if not isinstance(messages, list | tuple):
        raise FormatError(f"expected a list of messages, got {tname(messages)}")
    out: list[Message] = []
    read_openai(messages, 0, None, out, None)
    return out


def read_openai(
    messages: Sequence[Mapping[str, Any]],
    start: int,
    legacy_call: str | None,
    out: list[Message],
    states: list[str | None] | None,
) -> None:
    """Append to ``out`` the canonical messages ``messages[start:]``, as :func:`from_openai`
    reads them after its first ``start`` messages left ``legacy_call`` (the id given to the last
    unanswered legacy ``function_call``, None at the start) unanswered; ``states`` gets that id
    after each message. Message ``i`` depends only on ``i``, the message and that id: so a
    reader that has the messages of a known prefix resumes here (:mod:`._prefix`)."""
    for i in range(start, len(messages)):
        m = messages[i]
        if type(m) is not dict and not isinstance(m, Mapping):
            raise FormatError(f"expected a message object, got {tname(m)}", index=i)
        try:
            msg, legacy_call = _message(i, m, legacy_call)
        except TooDeep:
            raise deep_error(m, i) from None
        out.append(msg)
        if states is not None:
            states.append(legacy_call)


#: Roles a ``{"role": ..., "content": "text"}`` message is read as itself (see ``_message``).
_PLAIN_ROLES: dict[str, Role] = {"system": "system", "user": "user", "assistant": "assistant"}


def _message(i: int, m: Mapping[str, Any], legacy_call: str | None) -> tuple[Message, str | None]:
    """Message ``i`` and the id of the legacy function_call still unanswered after it."""
    role = m.get("role")
    if len(m) == 2 and type(role) is str:  # the common shape, read at once: what the general
        plain = _PLAIN_ROLES.get(role)  # path below gives for it
        content = m.get("content")
        if plain is not None and type(content) is str:
            blocks = (TextBlock(clean_text(content)),) if content else ()
            return Message(plain, blocks, hints=_OPENAI_HINTS["str"]), legacy_call
    canon = _ROLES.get(role) if isinstance(role, str) else None
    if canon is None:
        if "role" not in m:
            raise FormatError("missing", index=i, field="role")
        raise FormatError(
            f"unknown role {role!r} (expected one of {', '.join(_ROLES)})", index=i, field="role"
        )
    if canon == "tool":
        msg = _tool(i, m, str(role), legacy_call)
        if role == "function":
            legacy_call = None
    elif canon == "assistant":
        msg = _assistant(i, m)
        if "function_call" in m and isinstance(m["function_call"], Mapping):
            legacy_call = f"function_call_{i}"
    else:
        consumed = "content" in m
        content, kind = _content_value(i, m["content"]) if consumed else ((), "absent")
        name = _name(i, m.get("name"))
        extra = _extra(m, ("role", "name") if name is not None else ("role",), consumed)
        msg = Message(
            canon,
            content,
            name=name,
            extra=frozen(extra),
            usage=_usage(extra),
            hints=hints_for("openai", kind, role if role == "developer" else None),
        )
    return msg, legacy_call


def _content_value(i: int, c: Any) -> tuple[tuple[TextBlock | ImageBlock, ...], str]:
    """(blocks, spelling) of a present ``content`` value."""
    if type(c) is str:
        return ((TextBlock(clean_text(c)),) if c else ()), "str"
    if type(c) is list:
        return tuple(_part(i, f"content[{j}]", p) for j, p in enumerate(c)), "list"
    if c is None:
        return (), "null"
    raise fail(i, "content", "a string, a list of parts or null", c)


def _name(i: int, name: Any) -> str | None:
    if name is None:
        return None
    if type(name) is str:
        return clean_text(name)
    raise fail(i, "name", "a string", name)


def _extra(m: Mapping[str, Any], known: tuple[str, ...], content_consumed: bool) -> dict[str, Any]:
    """Copies of the keys of ``m`` not consumed into canonical fields (every key of ``known``
    is present in ``m``)."""
    if content_consumed:
        known = (*known, "content")
    if len(m) == len(known):
        return {}
    return {clean_key(k): deep_copy(v) for k, v in m.items() if k not in known}


def _usage(extra: dict[str, Any]) -> Mapping[str, Any] | None:
    usage = extra.get("usage")
    return MappingProxyType(usage) if type(usage) is dict else None


def _part(i: int, path: str, p: Any) -> TextBlock | ImageBlock:
    """One content part: text, image_url, or an opaque part kept whole."""
    if type(p) is not dict and not isinstance(p, Mapping):
        raise fail(i, path, "a content part object", p)
    t = p.get("type")
    if t == "text":
        text = string_at(p, "text", i, path)
        if len(p) == 2:
            return TextBlock(clean_text(text))
        rest = {clean_key(k): deep_copy(v) for k, v in p.items() if k != "type" and k != "text"}
        reserved_check(rest, i, path)
        return TextBlock(clean_text(text), extra=MappingProxyType(rest))
    if t == "image_url":
        url = p.get("image_url")
        if not isinstance(url, Mapping):
            raise fail(i, f"{path}.image_url", "an object", url)
        string_at(url, "url", i, f"{path}.image_url")
        rest = {
            clean_key(k): deep_copy(v) for k, v in p.items() if k != "type" and k != "image_url"
        }
        reserved_check(rest, i, path)
        rest[FORMAT] = "openai"
        return ImageBlock(
            MappingProxyType(deep_copy(url)),
            token_cost=openai_image_cost(url),
            extra=MappingProxyType(rest),
        )
    if type(t) is not str:
        raise fail(i, f"{path}.type", "a string", t)
    block = deep_copy(p)
    if t in _MEDIA_PARTS:
        return opaque_media(block, "openai", media_cost(block))
    return opaque_text(block, "openai")


def _assistant(i: int, m: Mapping[str, Any]) -> Message:
    # One pass over the keys: this is the hottest path of a long agent history.
    thinking: dict[str, list[ThinkingBlock]] = {}
    content: tuple[Block, ...] = ()
    kind = "absent"
    calls: list[Block] = []
    legacy: ToolCallBlock | None = None
    name: str | None = None
    extra: dict[str, Any] = {}
    for k, v in m.items():
        if k == "role":
            continue
        if k == "content":
            content, kind = _content_value(i, v)
        elif k == "tool_calls":
            if type(v) is not list and v is not None:
                raise fail(i, "tool_calls", "a list", v)
            if not v:  # null and [] stay in extra
                extra[clean_key(k)] = deep_copy(v)
            else:
                calls = [_tool_call(i, j, c) for j, c in enumerate(v)]
        elif k == "function_call" and v is not None:
            if not isinstance(v, Mapping):
                raise fail(i, "function_call", "an object or null", v)
            legacy = _function_call(i, v)
        elif k == "name" and v is not None:
            name = _name(i, v)
        elif k in _THINKING_FIELDS and (found := _thinking(i, k, v)):
            thinking[k] = found
        else:
            extra[clean_key(k)] = deep_copy(v)
    blocks: list[Block] = []
    for fld in _THINKING_FIELDS:  # a fixed order, whatever the key order
        if fld in thinking:
            blocks.extend(thinking[fld])
    blocks.extend(content)
    blocks.extend(calls)
    if legacy is not None:
        blocks.append(legacy)
    return Message(
        "assistant",
        tuple(blocks),
        name=name,
        extra=frozen(extra),
        usage=_usage(extra),
        hints=_OPENAI_HINTS[kind],
    )


def _thinking(i: int, fld: str, value: Any) -> list[ThinkingBlock]:
    """Thinking blocks for one thinking-ish field; empty when the value carries none (then the
    field stays in ``extra`` verbatim)."""
    if fld == "reasoning_content":
        if value is None or value == "":
            return []
        if type(value) is not str:
            raise fail(i, fld, "a string or null", value)
        return [ThinkingBlock(clean_text(value))]
    if fld == "reasoning":
        # Other providers use ``reasoning`` for objects too; only a string is thinking text.
        return (
            [ThinkingBlock(clean_text(value), extra=_FIELD_REASONING)]
            if type(value) is str and value
            else []
        )
    if type(value) is not list or not value:
        return []
    out: list[ThinkingBlock] = []
    for b in value:  # litellm's thinking_blocks: Anthropic blocks; any other shape stays extra
        if type(b) is not dict:
            return []
        t = b.get("type")
        if t == "thinking" and type(b.get("thinking")) is str:
            sig = b.get("signature")
            if sig is not None and type(sig) is not str:
                return []
            known: tuple[str, ...] = (
                ("type", "thinking", "signature") if sig else ("type", "thinking")
            )
            block = ThinkingBlock(
                clean_text(b["thinking"]),
                signature=clean_text(sig) if sig else None,
                extra=_thinking_extra(b, known),
            )
        elif t == "redacted_thinking" and type(b.get("data")) is str:
            block = ThinkingBlock(
                "",
                redacted=True,
                data=clean_text(b["data"]),
                extra=_thinking_extra(b, ("type", "data")),
            )
        else:
            return []
        out.append(block)
    return out


_FIELD_REASONING: Mapping[str, Any] = MappingProxyType({FIELD: "reasoning"})


def _thinking_extra(b: Mapping[str, Any], known: tuple[str, ...]) -> Mapping[str, Any]:
    rest = {clean_key(k): deep_copy(v) for k, v in b.items() if k not in known}
    reserved_check(rest, None, "thinking_blocks[]")
    rest[FIELD] = "thinking_blocks"
    return MappingProxyType(rest)


def _tool_call(i: int, j: int, c: Any) -> ToolCallBlock:
    path = f"tool_calls[{j}]"
    if type(c) is not dict and not isinstance(c, Mapping):
        raise fail(i, path, "an object", c)
    cid = clean_text(string_at(c, "id", i, path))
    fn = c.get("function")
    if type(fn) is not dict and not isinstance(fn, Mapping):
        raise fail(i, f"{path}.function", "an object", fn)
    name, arguments = _function(i, f"{path}.function", fn)
    if len(c) == 3 and len(fn) == 2 and c.get("type") == "function":
        return ToolCallBlock(cid, name, arguments, extra=_TYPE_FUNCTION)  # the common shape
    rest = {clean_key(k): deep_copy(v) for k, v in c.items() if k != "id" and k != "function"}
    reserved_check(rest, i, path)
    if len(fn) > 2:
        rest[FUNCTION_EXTRA] = _function_extra(fn)
    return ToolCallBlock(cid, name, arguments, extra=frozen(rest))


_TYPE_FUNCTION: Mapping[str, Any] = MappingProxyType({"type": "function"})


def _function(i: int, path: str, fn: Mapping[str, Any]) -> tuple[str, str]:
    name, arguments = string_at(fn, "name", i, path), string_at(fn, "arguments", i, path)
    return clean_text(name), clean_text(arguments)


def _function_extra(fn: Mapping[str, Any]) -> dict[str, Any]:
    """Copies of a ``function`` object's keys other than its name and arguments."""
    return {clean_key(k): deep_copy(v) for k, v in fn.items() if k != "name" and k != "arguments"}


def _function_call(i: int, fc: Mapping[str, Any]) -> ToolCallBlock:
    name, arguments = _function(i, "function_call", fc)
    rest: dict[str, Any] = {LEGACY: True}
    if len(fc) > 2:
        rest[FUNCTION_EXTRA] = _function_extra(fc)
    return ToolCallBlock(f"function_call_{i}", name, arguments, extra=MappingProxyType(rest))


def _tool(i: int, m: Mapping[str, Any], role: str, legacy_call: str | None) -> Message:
    call_id: str | None = None
    name: str | None = None
    kind = "absent"
    result: str | tuple[TextBlock | ImageBlock, ...] = ""
    extra: dict[str, Any] = {}
    function = role == "function"
    for k, v in m.items():
        if k == "role":
            continue
        if k == "content":
            if type(v) is str:
                result, kind = clean_text(v), "str"
            else:  # a list of parts, or null (an empty result)
                parts, kind = _content_value(i, v)
                result = parts if kind == "list" else ""
        elif k == "tool_call_id" and not function:
            if type(v) is not str:
                raise fail(i, "tool_call_id", "a string", v)
            call_id = clean_text(v)
        elif k == "name" and v is not None:
            name = _name(i, v)
        else:
            extra[clean_key(k)] = deep_copy(v)
    if function:
        if name is None:
            raise fail(i, "name", "a string (a function message names its function)", None)
        call_id = legacy_call or f"function_{i}"
    elif call_id is None:
        raise FormatError("missing", index=i, field="tool_call_id")
    return Message(
        "tool",
        (ToolResultBlock(call_id, result),),
        name=name,
        extra=frozen(extra),
        usage=_usage(extra),
        hints=hints_for("openai", kind, "function") if function else _OPENAI_HINTS[kind],
    )


# -- writing ---------------------------------------------------------------------------------------
def to_openai(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """OpenAI Chat Completions messages for canonical ``messages``.

    Exact inverse of :func:`from_openai` for messages that came from it; messages from
    Anthropic are converted (see docs/formats.md: consecutive assistant messages are
    merged, and one left with neither text nor tool calls is dropped); an assistant message
    right after one with tool calls is merged into it whatever its origin (the calls' results
    follow both, one turn; OpenAI wants them in one message); messages built in code get the usual
    spelling (string content when all text, ``type: "function"`` on tool calls). The output
    shares no mutable value with the messages. Raises :class:`FormatError` for content
    OpenAI cannot carry (an Anthropic document other than a PDF, an image given as an
    uploaded file id).
    """
    return write_openai(messages, [message_out(i, m) for i, m in enumerate(messages)])


def message_out(i: int, msg: Message) -> list[dict[str, Any]]:
    """The OpenAI messages written for canonical message ``i`` on its own, before
    :func:`write_openai` merges an assistant message into the one before it. New dicts that
    depend on ``msg`` alone (``i`` only names it in errors)."""
    origin = msg.hints.get("format")
    if msg.role == "assistant":
        return [_assistant_out(i, msg, origin)]
    out: list[dict[str, Any]] = []
    if msg.role == "tool" or (
        msg.role == "user" and any(type(b) is ToolResultBlock for b in msg.content)
    ):
        _emit_tool(out, i, msg, origin)
        return out
    role = msg.role
    if origin == "openai":
        role = msg.hints.get("role", role)
    d: dict[str, Any] = {"role": role}
    _set_content(d, i, msg.content, kind=_kind(msg, origin), role=role, origin=origin)
    _finish(d, msg, origin)
    out.append(d)
    return out


def write_openai(
    messages: Sequence[Message], produced: Sequence[list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """:func:`to_openai`, with ``produced[i]`` what :func:`message_out` gives for message ``i``
    (a writer that remembers them passes its own). Their dicts are never changed here (a merge
    writes a new dict), so they may be shared with other calls."""
    out: list[dict[str, Any]] = []
    converted: list[dict[str, Any]] = []  # every assistant converted from Anthropic
    for i, msg in enumerate(messages):
        written = produced[i]
        if msg.role == "assistant":
            origin = msg.hints.get("format")
            d = written[0]
            prev = out[-1] if out else None
            after_converted = bool(converted) and converted[-1] is prev
            if prev is not None and (
                (origin == "anthropic" and after_converted)
                # an assistant message right after one with tool calls continues its turn (the
                # results come after both): OpenAI wants the calls in one message
                or (prev["role"] == "assistant" and prev.get("tool_calls"))
            ):
                # Anthropic splits a turn; OpenAI must not. ``prev`` is copied, not changed: a
                # writer may give the same dicts to other calls.
                merged = dict(prev)
                _merge_assistant(merged, d)
                out[-1] = merged
                if after_converted:
                    converted[-1] = merged
                continue
            out.append(d)
            if origin == "anthropic":
                converted.append(d)
        else:
            out.extend(written)
    drop = {id(d) for d in converted if not d.get("content") and not d.get("tool_calls")}
    if drop:  # a converted turn of only (redacted) thinking, or an empty prefill
        out = [d for d in out if id(d) not in drop]
    return out


def _merge_assistant(prev: dict[str, Any], new: dict[str, Any]) -> None:
    """Fold an assistant message into the previous one (text, thinking, calls)."""
    for key in ("content", "reasoning_content"):
        a, b = prev.get(key), new.get(key)
        if not b:
            continue
        if not a:
            prev[key] = b
        elif isinstance(a, str) and isinstance(b, str):
            prev[key] = f"{a}\n{b}"
        else:  # parts on either side: one list of parts
            prev[key] = [*_as_parts(a), *_as_parts(b)]
    if new.get("tool_calls"):
        prev["tool_calls"] = [*prev.get("tool_calls", ()), *new["tool_calls"]]


def _as_parts(content: Any) -> list[Any]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _finish(d: dict[str, Any], msg: Message, origin: Any) -> None:
    if msg.name is not None:
        d["name"] = msg.name
    if origin != "anthropic" and msg.extra:
        fill(d, msg.extra)


def _set_content(
    d: dict[str, Any], i: int, blocks: Sequence[Block], *, kind: Any, role: str, origin: Any
) -> None:
    """Write ``content`` for ``blocks``: the recorded spelling ``kind`` when there is one, else
    a string when every block is text (text only from a converted message), else parts."""
    if kind != "list" and not blocks:
        if kind != "absent":
            d["content"] = None if kind == "null" or (kind is None and role == "assistant") else ""
    elif kind != "list" and all(
        type(b) is TextBlock and (origin == "anthropic" or not b.extra) for b in blocks
    ):
        d["content"] = "\n".join(b.text for b in blocks if isinstance(b, TextBlock))
    else:
        d["content"] = [_part_out(i, j, b, origin) for j, b in enumerate(blocks)]


def _kind(msg: Message, origin: Any) -> Any:
    """The recorded spelling of ``content``; only honoured for messages from OpenAI."""
    return msg.hints.get("content") if origin == "openai" else None


def _part_out(i: int, j: int, b: Block, origin: Any) -> dict[str, Any]:
    if type(b) is TextBlock:
        payload = opaque_payload(b)
        if payload is not None and payload[0] == "openai":
            return dict(deep_copy(payload[1]))
        d: dict[str, Any] = {"type": "text", "text": b.text}
        if origin != "anthropic" and b.extra and payload is None:
            fill(d, b.extra)
        return d
    if type(b) is ImageBlock:
        return _image_out(i, j, b)
    raise FormatError(f"a {b.type} block cannot be a content part", index=i, field=f"content[{j}]")


def _image_out(i: int, j: int, b: ImageBlock) -> dict[str, Any]:
    payload = opaque_payload(b)
    if payload is not None:
        fmt, original = payload
        if fmt == "openai":
            return dict(deep_copy(original))
        converted = _document_to_file(original)
        if converted is None:
            raise FormatError(
                f"an Anthropic {original.get('type')!r} block has no OpenAI equivalent",
                index=i,
                field=f"content[{j}]",
            )
        return converted
    fmt = b.extra.get(FORMAT) or ("anthropic" if "type" in b.source else "openai")
    if fmt == "openai":
        return fill({"type": "image_url", "image_url": deep_copy(b.source)}, b.extra)
    url = openai_image_url_from_anthropic(b.source)
    if url is None:
        raise FormatError(
            f"an image with a {b.source.get('type')!r} source has no OpenAI equivalent",
            index=i,
            field=f"content[{j}]",
        )
    return {"type": "image_url", "image_url": url}


def _document_to_file(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """An OpenAI part for an Anthropic document: a ``file`` part for an inline PDF, a text
    part for a plain-text document; None when OpenAI has no equivalent."""
    source = block.get("source")
    if block.get("type") != "document" or not isinstance(source, Mapping):
        return None
    if source.get("type") == "text" and isinstance(source.get("data"), str):
        return {"type": "text", "text": source["data"]}
    if source.get("type") == "base64" and isinstance(source.get("data"), str):
        media = source.get("media_type", "application/pdf")
        title = block.get("title")
        return {
            "type": "file",
            "file": {
                "filename": title if isinstance(title, str) else "document.pdf",
                "file_data": f"data:{media};base64,{source['data']}",
            },
        }
    return None


def _assistant_out(i: int, msg: Message, origin: Any) -> dict[str, Any]:
    thinking: list[ThinkingBlock] = []
    content: list[Block] = []
    calls: list[ToolCallBlock] = []
    for b in msg.content:
        if type(b) is ThinkingBlock:
            thinking.append(b)
        elif type(b) is ToolCallBlock:
            calls.append(b)
        elif type(b) is ToolResultBlock:
            raise FormatError(
                "an assistant message cannot carry a tool result", index=i, field="content"
            )
        else:
            content.append(b)
    d: dict[str, Any] = {"role": "assistant"}
    _set_content(d, i, content, kind=_kind(msg, origin), role="assistant", origin=origin)
    if thinking:
        _thinking_out(d, thinking, origin)
    legacy = [c for c in calls if c.extra.get(LEGACY)] if origin != "anthropic" else []
    if legacy:
        if len(legacy) > 1:
            raise FormatError("more than one legacy function_call", index=i, field="function_call")
        calls = [c for c in calls if not c.extra.get(LEGACY)]
    if calls:
        d["tool_calls"] = [_call_out(c, origin) for c in calls]
    if legacy:
        fc = {"name": legacy[0].name, "arguments": legacy[0].arguments}
        d["function_call"] = fill(fc, legacy[0].extra.get(FUNCTION_EXTRA) or EMPTY)
    _finish(d, msg, origin)
    return d


def _thinking_out(d: dict[str, Any], blocks: list[ThinkingBlock], origin: Any) -> None:
    if origin == "anthropic":
        texts = [b.thinking for b in blocks if not b.redacted]
        if texts:
            d["reasoning_content"] = "\n".join(texts)
        return
    by_field: dict[str, list[ThinkingBlock]] = {}
    for b in blocks:
        by_field.setdefault(str(b.extra.get(FIELD, "reasoning_content")), []).append(b)
    for fld, group in by_field.items():
        if fld == "thinking_blocks":
            d[fld] = [thinking_out(b, b.extra) for b in group]
        else:
            texts = [b.thinking for b in group if not b.redacted]
            if texts:
                d[fld] = texts[0] if len(texts) == 1 else "\n".join(texts)


def _call_out(c: ToolCallBlock, origin: Any) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": c.name, "arguments": c.arguments}
    if origin == "openai":
        if c.extra.get(FUNCTION_EXTRA):
            fill(fn, c.extra[FUNCTION_EXTRA])
        return fill({"id": c.id, "function": fn}, c.extra)
    d = {"id": c.id, "type": "function", "function": fn}
    if origin is None and c.extra:
        fill(d, c.extra)
    return d


def _emit_tool(out: list[dict[str, Any]], i: int, msg: Message, origin: Any) -> None:
    """One ``tool`` message per result; other blocks (and images OpenAI cannot put in a tool
    message, for converted messages) follow in one ``user`` message."""
    rest: list[Block] = []
    first = True
    for b in msg.content:
        if type(b) is not ToolResultBlock:
            rest.append(b)
            continue
        if origin == "openai" and msg.hints.get("role") == "function":
            d: dict[str, Any] = {"role": "function"}
        else:
            d = {"role": "tool", "tool_call_id": b.tool_call_id}
        content = b.content
        if isinstance(content, str):
            kind = _kind(msg, origin)
            if content or kind not in ("null", "absent"):
                d["content"] = content
            elif kind == "null":
                d["content"] = None
        elif origin == "openai":
            d["content"] = [_part_out(i, j, x, origin) for j, x in enumerate(content)]
        else:  # OpenAI tool messages carry text only: images move to the user message after
            d["content"] = "\n".join(x.text for x in content if type(x) is TextBlock)
            rest.extend(x for x in content if type(x) is not TextBlock)
        if first:
            _finish(d, msg, origin)
            first = False
        elif msg.name is not None:
            d["name"] = msg.name
        out.append(d)
    if rest:
        d = {"role": "user"}
        _set_content(d, i, rest, kind=None, role="user", origin=origin)
        out.append(d)
