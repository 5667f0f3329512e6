"""Anthropic Messages <-> canonical :class:`Message` values, without loss.

How it works: docs/formats.md (`contextwarden.formats.anthropic`).
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
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
    MAX_DEPTH,
    TooDeep,
    check_depth,
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
    too_deep,
)
from ._media import anthropic_image_cost, anthropic_source_from_openai, media_cost, parse_data_url
from .cache_control import Continued

__all__ = [
    "LEADING_USER_TEXT",
    "compaction_block_at",
    "from_anthropic",
    "provider_compaction",
    "to_anthropic",
]

#: The user turn put before a converted conversation that would start with the assistant.
LEADING_USER_TEXT = "(continued)"

SystemPrompt = str | list[dict[str, Any]] | None

_MEDIA_BLOCKS = frozenset({"document"})
_ID_OK = re.compile(r"[a-zA-Z0-9_-]+")
_ID_BAD = re.compile(r"[^a-zA-Z0-9_-]")


# -- reading ---------------------------------------------------------------------------------------
def from_anthropic(
    messages: Sequence[Mapping[str, Any]], system: str | Sequence[Mapping[str, Any]] | None = None
) -> list[Message]:
    """Canonical messages for an Anthropic Messages request's ``messages`` and ``system``.

    A ``system`` string or list of blocks becomes one leading ``system`` message. The input is
    never mutated nor aliased. Raises :class:`FormatError` naming the message index (none for
    the system prompt) and field path for malformed input.
    """
    if not isinstance(messages, list | tuple):
        raise FormatError(f"expected a list of messages, got {tname(messages)}")
    out: list[Message] = []
    if system is not None:
        out.append(read_system(system))
    read_anthropic(messages, 0, out)
    return out


def read_system(system: Any) -> Message:
    """The canonical system message for a request's (not None) ``system``."""
    try:
        return _system(system)
    except TooDeep:
        raise deep_error({"system": system}, None) from None


def read_anthropic(messages: Sequence[Mapping[str, Any]], start: int, out: list[Message]) -> None:
    """Append to ``out`` the canonical messages for ``messages[start:]``. Each depends on its
    message alone (its index only names it in errors): so a reader that has the messages of a
    known prefix resumes here (:mod:`._prefix`)."""
    for i in range(start, len(messages)):
        m = messages[i]
        if type(m) is not dict and not isinstance(m, Mapping):
            raise FormatError(f"expected a message object, got {tname(m)}", index=i)
        try:
            out.append(_message(i, m))
        except TooDeep:
            raise deep_error(m, i) from None


def _message(i: int, m: Mapping[str, Any]) -> Message:
    """Message ``i`` of a from_anthropic list."""
    role = m.get("role")
    if role != "user" and role != "assistant" and role != "system":
        if "role" not in m:
            raise FormatError("missing", index=i, field="role")
        raise FormatError(
            f"unknown role {role!r} (expected 'user', 'assistant' or 'system')",
            index=i,
            field="role",
        )
    consumed = "content" in m
    kind = "absent"
    blocks: tuple[Block, ...] = ()
    if consumed:
        c = m["content"]
        if type(c) is str:
            blocks, kind = ((TextBlock(clean_text(c)),) if c else ()), "str"
        elif type(c) is list:
            blocks = tuple(_block(i, f"content[{j}]", b) for j, b in enumerate(c))
            kind = "list"
        elif c is None:
            kind = "null"
        else:
            raise fail(i, "content", "a string or a list of blocks", c)
    canon: Role = role
    if role == "user" and any(type(b) is ToolResultBlock for b in blocks):
        canon = "tool"
    elif role == "system":  # a system message inside ``messages`` holds text only
        for j, b in enumerate(blocks):
            if type(b) is not TextBlock:
                raise FormatError(
                    f"a system message holds text only, not a {b.type} block",
                    index=i,
                    field=f"content[{j}]",
                )
    extra = {
        clean_key(k): deep_copy(v)
        for k, v in m.items()
        if k != "role" and not (consumed and k == "content")
    }
    usage = extra.get("usage")
    return Message(
        canon,
        blocks,
        extra=frozen(extra),
        usage=MappingProxyType(usage) if type(usage) is dict else None,
        # a system message inside ``messages`` is written back there (see write_anthropic)
        hints=hints_for("anthropic", kind, "system" if role == "system" else None),
    )


def _system(system: Any) -> Message:
    if type(system) is str:
        return Message(
            "system",
            (TextBlock(clean_text(system)),) if system else (),
            hints=hints_for("anthropic", "str"),
        )
    if not isinstance(system, list | tuple):
        raise fail(None, "system", "a string or a list of text blocks", system)
    blocks = tuple(_block(None, f"system[{j}]", b) for j, b in enumerate(system))
    return Message("system", blocks, hints=hints_for("anthropic", "list"))


def _rest(b: Mapping[str, Any], known: tuple[str, ...], i: int | None, path: str) -> dict[str, Any]:
    rest = {clean_key(k): deep_copy(v) for k, v in b.items() if k not in known}
    if rest:
        reserved_check(rest, i, path)
    return rest


def _block(i: int | None, path: str, b: Any) -> Block:
    """One content block (``i`` is None inside the system prompt)."""
    if type(b) is not dict and not isinstance(b, Mapping):
        raise fail(i, path, "a content block object", b)
    t = b.get("type")
    if t == "text":
        text = string_at(b, "text", i, path)
        if len(b) == 2:
            return TextBlock(clean_text(text))
        return TextBlock(clean_text(text), extra=frozen(_rest(b, ("type", "text"), i, path)))
    if t == "tool_use":
        return _tool_use(i, path, b)
    if t == "tool_result":
        return _tool_result(i, path, b)
    if t == "thinking":
        text = string_at(b, "thinking", i, path)
        sig = b.get("signature")
        if sig is not None and type(sig) is not str:
            raise fail(i, f"{path}.signature", "a string", sig)
        known = ("type", "thinking", "signature") if sig is not None else ("type", "thinking")
        return ThinkingBlock(
            clean_text(text),
            signature=clean_text(sig) if sig is not None else None,
            extra=frozen(_rest(b, known, i, path)),
        )
    if t == "redacted_thinking":
        data = string_at(b, "data", i, path)
        rest = _rest(b, ("type", "data"), i, path)
        return ThinkingBlock("", redacted=True, data=clean_text(data), extra=frozen(rest))
    if t == "image":
        source = b.get("source")
        if type(source) is not dict and not isinstance(source, Mapping):
            raise fail(i, f"{path}.source", "an object", source)
        rest = _rest(b, ("type", "source"), i, path)
        rest[FORMAT] = "anthropic"
        return ImageBlock(
            MappingProxyType(deep_copy(source)),
            token_cost=anthropic_image_cost(source),
            extra=MappingProxyType(rest),
        )
    if type(t) is not str:
        raise fail(i, f"{path}.type", "a string", t)
    block = deep_copy(b)
    if t in _MEDIA_BLOCKS:
        return opaque_media(block, "anthropic", media_cost(block))
    if t == "compaction":  # no layer may touch it: a media block's bytes go back as they came
        summary = block.get("content")  # its tokens by characters/4 (overestimates English)
        cost = len(summary) // 4 + 1 if isinstance(summary, str) else 1
        return opaque_media(block, "anthropic", cost)
    return opaque_text(block, "anthropic")


#: The ``context_management`` edit that makes the server compact the history itself.
SERVER_COMPACTION = "compact_20260112"


#: The bytes of a block whose type is ``compaction`` (a JSON body spaces them as it likes).
_COMPACTION_TYPE = re.compile(rb'"type"\s{0,20}:\s{0,20}"compaction"')


def compaction_block_at(messages: Any) -> int | None:
    """The index of the last message holding a ``compaction`` block with a summary (the server
    ignores every block before it; one whose ``content`` is null marks a failed compaction and
    changes nothing), or None."""
    if not isinstance(messages, list):
        return None
    has = getattr(messages, "has", None)  # the proxy's reader: its bytes, the new ones only
    if has is not None and not has(_COMPACTION_TYPE, 64):
        return None
    for i in range(len(messages) - 1, -1, -1):
        content = messages[i].get("content") if isinstance(messages[i], dict) else None
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "compaction" and b.get("content") is not None
            for b in content
        ):
            return i
    return None


def provider_compaction(body: Mapping[str, Any]) -> str | None:
    """Why the server compacts this request's history itself, or None: its
    ``context_management`` asks for server-side compaction (:data:`SERVER_COMPACTION`), or its
    history holds a compaction block. Context editing alone (``clear_tool_uses_20250919``,
    ``clear_thinking_20251015``, which Claude Code sends with ``keep: "all"``) compacts
    nothing: it is forwarded as sent and the warden runs."""
    management = body.get("context_management")
    edits = management.get("edits") if isinstance(management, dict) else None
    if isinstance(edits, list) and any(
        isinstance(e, dict) and e.get("type") == SERVER_COMPACTION for e in edits
    ):
        return f"context_management asks for {SERVER_COMPACTION}"
    at = compaction_block_at(body.get("messages"))
    if at is not None:
        return f"messages[{at}] holds the server's compaction block"
    return None


def _tool_use(i: int | None, path: str, b: Mapping[str, Any]) -> ToolCallBlock:
    cid = string_at(b, "id", i, path)
    name = string_at(b, "name", i, path)
    data = b.get("input")
    if type(data) is not dict and not isinstance(data, Mapping):
        raise fail(i, f"{path}.input", "an object", data)
    try:
        arguments = json.dumps(data, ensure_ascii=False)
    except RecursionError:
        raise too_deep(i, f"{path}.input") from None
    except (TypeError, ValueError) as exc:
        raise FormatError(f"not JSON-serialisable: {exc}", index=i, field=f"{path}.input") from exc
    if arguments.count("{") + arguments.count("[") > MAX_DEPTH:  # cheap: rarely measured
        check_depth(data, i, f"{path}.input")
    rest = _rest(b, ("type", "id", "name", "input"), i, path) if len(b) > 4 else {}
    return ToolCallBlock(
        clean_text(cid), clean_text(name), clean_text(arguments), extra=frozen(rest)
    )


def _tool_result(i: int | None, path: str, b: Mapping[str, Any]) -> ToolResultBlock:
    cid = string_at(b, "tool_use_id", i, path)
    known = ["type", "tool_use_id"]
    content: str | tuple[TextBlock | ImageBlock, ...] = ""
    c = b.get("content", "")
    if type(c) is str:
        if c:  # "" stays in extra, so that it differs from an absent content
            content = clean_text(c)
            known.append("content")
    elif type(c) is list:
        content = tuple(_inner(i, f"{path}.content[{j}]", x) for j, x in enumerate(c))
        known.append("content")
    else:
        raise fail(i, f"{path}.content", "a string or a list of blocks", c)
    is_error = b.get("is_error", False)
    if is_error is True:
        known.append("is_error")
    elif is_error is not False:
        raise fail(i, f"{path}.is_error", "a bool", is_error)
    rest = _rest(b, tuple(known), i, path) if len(b) > len(known) else {}
    return ToolResultBlock(clean_text(cid), content, is_error=is_error, extra=frozen(rest))


def _inner(i: int | None, path: str, x: Any) -> TextBlock | ImageBlock:
    """A block inside a tool result: text and images; anything else is kept opaque."""
    block = _block(i, path, x)
    if type(block) is TextBlock or type(block) is ImageBlock:
        return block
    return opaque_text(deep_copy(x), "anthropic")


# -- writing ---------------------------------------------------------------------------------------
def to_anthropic(messages: Sequence[Message]) -> tuple[SystemPrompt, list[dict[str, Any]]]:
    """``(system, messages)`` of an Anthropic Messages request for canonical ``messages``.

    ``system`` is None when there is no system message, else the string or list of blocks
    :func:`from_anthropic` was given. Exact inverse of :func:`from_anthropic`; messages from
    OpenAI or built in code are converted into a valid request (see docs/formats.md). The
    output shares no mutable value with the messages. Raises :class:`FormatError` for content
    Anthropic cannot carry (audio, an image in the system prompt, an uploaded OpenAI file).
    """
    return write_anthropic(messages, message_out).result()


def message_out(i: int, msg: Message) -> dict[str, Any] | None:
    """The Anthropic message written for canonical (not system) message ``i`` on its own,
    before :func:`write_anthropic` merges it into the one before it; None when it has no place
    in a request (a converted empty message). A new dict that depends on ``msg`` alone (``i``
    only names it in errors)."""
    origin = msg.hints.get("format")
    exact = origin == "anthropic"
    # a system message here is an inline one, written as a message (write_anthropic)
    role = msg.role if msg.role == "system" or msg.role == "assistant" else "user"
    blocks = [b for b in (_block_out(i, j, blk, origin) for j, blk in enumerate(msg.content)) if b]
    if not exact and msg.role != "assistant":
        # Anthropic wants tool results first in a user message
        blocks.sort(key=lambda b: b.get("type") != "tool_result")
    if exact:
        d: dict[str, Any] = {"role": role}
        kind = msg.hints.get("content")  # the spelling the message was read with
        if kind == "str" and _all_plain_text(blocks):
            d["content"] = "\n".join(b["text"] for b in blocks)
        elif kind == "null" and not blocks:
            d["content"] = None
        elif kind != "absent" or blocks:
            d["content"] = blocks
        if msg.extra:
            fill(d, msg.extra)
        return d
    if not blocks:
        return None  # the API refuses empty messages
    d = {"role": role}
    if msg.role == "user" and _all_plain_text(blocks) and msg.hints.get("content") != "list":
        d["content"] = "\n".join(b["text"] for b in blocks)
    else:
        d["content"] = blocks
    if origin is None and msg.extra:
        fill(d, msg.extra)
    return d


class AnthropicWrite:
    """What :func:`write_anthropic` wrote for ``messages``: the system messages met, the dicts
    of the others (``out``, before a leading user turn is added) and which of those were written
    as Anthropic originals (``exact``), and ``starts``: ``(i, len(system), len(out))`` before
    each message ``i`` that began a user or assistant dict. Every list that starts with the
    same ``messages[:i]`` is written the same up to such an ``i``, and what comes after never
    changes the dicts before it (a merge goes into ``i``'s dict or a later one)."""

    __slots__ = (
        "begin",
        "exact",
        "given",
        "kept",
        "messages",
        "out",
        "prior",
        "starts",
        "system",
        "written",
    )

    def __init__(self, messages: Sequence[Message], last: AnthropicWrite | None, same: int):
        self.messages = tuple(messages)
        self.begin = self.kept = 0  # the first message and dict not taken from ``last``
        self.system: list[tuple[int, Message]] = []
        self.out: list[dict[str, Any]] = []
        self.exact: list[bool] = []
        self.starts: list[tuple[int, int, int]] = []
        self.prior: Any = None
        self.given: Continued | None = None
        # the JSON of the last request this writer's lists went into (see Continued.written)
        self.written: dict[int, tuple[Any, bytes]] = last.written if last is not None else {}
        at = bisect_right(last.starts, same, key=lambda s: s[0]) - 1 if last is not None else -1
        if last is not None and at >= 0:
            self.begin, k, self.kept = last.starts[at]
            self.system, self.starts = last.system[:k], last.starts[:at]
            self.out, self.exact = last.out[: self.kept], last.exact[: self.kept]
            self.prior = last.given.found if last.given is not None else None

    def result(self, continued: bool = False) -> tuple[SystemPrompt, list[dict[str, Any]]]:
        """``(system, messages)``, as :func:`to_anthropic` gives them; ``continued``: the
        messages as a :class:`Continued` list, which tells the breakpoint scan what it found in
        the messages taken from the last write."""
        out = self.out
        if out and out[0]["role"] == "assistant" and not self.exact[0]:
            out = [{"role": "user", "content": LEADING_USER_TEXT}, *out]
        elif continued:
            out = self.given = Continued(out)
            out.kept, out.prior, out.written = self.kept, self.prior, self.written
        return _system_out(self.system), out


def write_anthropic(
    messages: Sequence[Message],
    produce: Callable[[int, Message], dict[str, Any] | None],
    last: AnthropicWrite | None = None,
    same: int = 0,
) -> AnthropicWrite:
    """:func:`to_anthropic`, with ``produce(i, message)`` giving what :func:`message_out` gives:
    a writer that remembers them passes its own. Its dicts are never changed here (a merge
    writes a new dict), so they may be shared with other calls. ``last``: an earlier write whose
    first ``same`` messages are those of ``messages`` (the same objects), whose dicts for them
    are taken instead of written again (the dicts and the lists of a write are never changed
    once it is made)."""
    w = AnthropicWrite(messages, last, same)
    out, exact_out = w.out, w.exact
    for i in range(w.begin, len(messages)):
        msg = messages[i]
        inline = msg.role == "system" and is_inline_system(msg)
        if msg.role == "system" and not inline:
            w.system.append((i, msg))
            continue
        d = produce(i, msg)
        if d is None:
            continue
        role, exact = d["role"], msg.hints.get("format") == "anthropic"
        k = len(out) - 1
        # an inline system message stands outside the user/assistant alternation: a user turn
        # after a user turn (the reply between removed by a compaction) joins it, so the request
        # alternates as validate_anthropic requires; two assistant originals stay apart (a
        # compaction block stands alone, Claude Code records a turn per block)
        while k >= 0 and out[k]["role"] == "system":
            k -= 1
        apart = role == "assistant" and exact and k >= 0 and exact_out[k]
        if not inline and not apart and k >= 0 and out[k]["role"] == role:
            out[k] = dict(out[k])  # a new dict: the produced ones may be shared
            _merge(out[k], d)
            exact_out[k] = False
            w.kept = min(w.kept, k)  # not the dict of the last write any more
            continue
        if not inline:
            w.starts.append((i, len(w.system), len(out)))
        out.append(d)
        exact_out.append(exact)
    return w


def is_inline_system(msg: Message) -> bool:
    """A system message read from inside an Anthropic request's ``messages`` (the
    mid-conversation system messages Claude Code sends): it is written back in its place, with
    its spelling, not into the system prompt."""
    return msg.hints.get("role") == "system" and msg.hints.get("format") == "anthropic"


def _all_plain_text(blocks: list[dict[str, Any]]) -> bool:
    return all(len(b) == 2 and b.get("type") == "text" for b in blocks)


def _merge(prev: dict[str, Any], new: dict[str, Any]) -> None:
    """Append ``new``'s content to ``prev`` (same role), tool results first."""
    b = _as_list(new.get("content"))
    merged = _as_list(prev.get("content")) + b
    if any(x.get("type") == "tool_result" for x in b):
        merged.sort(key=lambda x: x.get("type") != "tool_result")
    prev["content"] = merged


def _as_list(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content) if content else []


def _system_out(system_msgs: list[tuple[int, Message]]) -> SystemPrompt:
    if not system_msgs:
        return None
    if len(system_msgs) == 1 and system_msgs[0][1].hints.get("format") == "anthropic":
        i, msg = system_msgs[0]
        blocks = [
            out
            for j, b in enumerate(msg.content)
            if (out := _system_block(i, j, b, "anthropic")) is not None
        ]
        if msg.hints.get("content") == "str" and _all_plain_text(blocks):
            return "\n".join(b["text"] for b in blocks)
        return blocks
    blocks = [  # an empty text of a converted message has no place
        out
        for i, msg in system_msgs
        for j, b in enumerate(msg.content)
        if (out := _system_block(i, j, b, msg.hints.get("format"))) is not None
        and (out.get("type") != "text" or out.get("text"))
    ]
    if not blocks:
        return None
    return "\n\n".join(b["text"] for b in blocks) if _all_plain_text(blocks) else blocks


def _system_block(i: int, j: int, b: Block, origin: Any) -> dict[str, Any] | None:
    if type(b) is not TextBlock:
        raise FormatError(
            f"an Anthropic system prompt holds text only, not a {b.type} block",
            index=i,
            field=f"content[{j}]",
        )
    return _block_out(i, j, b, origin)


def _safe_id(cid: str) -> str:
    if _ID_OK.fullmatch(cid):
        return cid
    return _ID_BAD.sub("_", cid) or "_"


def _block_out(i: int, j: int, b: Block, origin: Any) -> dict[str, Any] | None:
    """The Anthropic block for ``b``; None when it has no place in a request: an empty text
    (the API refuses one: ``text content blocks must be non-empty``), or a converted block
    Anthropic cannot take (unsigned thinking)."""
    exact = origin == "anthropic"
    if type(b) is TextBlock:
        payload = opaque_payload(b)
        if payload is not None and payload[0] == "anthropic":
            return dict(deep_copy(payload[1]))
        if not b.text:  # Anthropic refuses an empty text block, even one it was sent
            return None
        d: dict[str, Any] = {"type": "text", "text": b.text}
        if b.extra and payload is None:
            if origin is None or exact:
                fill(d, b.extra)
            elif "cache_control" in b.extra:  # the one OpenAI-style part key Anthropic takes
                d["cache_control"] = deep_copy(b.extra["cache_control"])
        return d
    if type(b) is ToolCallBlock:
        d = {"type": "tool_use", "id": b.id if exact else _safe_id(b.id), "name": b.name}
        d["input"] = _input(b.arguments)
        return fill(d, b.extra) if b.extra and origin != "openai" else d
    if type(b) is ToolResultBlock:
        return _result_out(i, j, b, origin)
    if type(b) is ThinkingBlock:
        if not exact and (b.data is None if b.redacted else not b.signature):
            return None  # the API refuses unsigned thinking
        return thinking_out(b, EMPTY if origin == "openai" else b.extra)
    assert isinstance(b, ImageBlock)
    return _image_out(i, j, b)


def _input(arguments: str) -> Any:
    """``input`` for a tool call's JSON text: an object; invalid or non-object JSON (models
    write it) is wrapped as ``{"_raw": text}``."""
    if not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return {"_raw": arguments}
    if type(value) is not dict:
        return {"_raw": arguments}
    if arguments.count("{") + arguments.count("[") > MAX_DEPTH:  # cheap: rarely measured
        try:
            check_depth(value, None, "input")
        except FormatError:  # too deep to send as an object
            return {"_raw": arguments}
    if "\\u" in arguments:  # an escaped lone surrogate decodes to one: replace it
        value = deep_copy(value)
    return value


def _result_out(i: int, j: int, b: ToolResultBlock, origin: Any) -> dict[str, Any]:
    exact = origin == "anthropic"
    d: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": b.tool_call_id if exact else _safe_id(b.tool_call_id),
    }
    c = b.content
    if isinstance(c, str):
        if c:
            d["content"] = c
    else:
        inner = [_block_out(i, j, x, origin) for x in c]
        d["content"] = [x for x in inner if x is not None]
    if b.is_error:
        d["is_error"] = True
    if b.extra and origin != "openai":
        fill(d, b.extra)
    return d


def _image_out(i: int, j: int, b: ImageBlock) -> dict[str, Any]:
    payload = opaque_payload(b)
    if payload is not None:
        fmt, original = payload
        if fmt == "anthropic":
            return dict(deep_copy(original))
        converted = _file_to_document(original)
        if converted is None:
            raise FormatError(
                f"an OpenAI {original.get('type')!r} part has no Anthropic equivalent",
                index=i,
                field=f"content[{j}]",
            )
        return converted
    fmt = b.extra.get(FORMAT) or ("anthropic" if "type" in b.source else "openai")
    if fmt == "anthropic":
        return fill({"type": "image", "source": deep_copy(b.source)}, b.extra)
    source = anthropic_source_from_openai(b.source)
    if source is None:
        raise FormatError("an image without a url", index=i, field=f"content[{j}]")
    d: dict[str, Any] = {"type": "image", "source": source}
    if "cache_control" in b.extra:
        d["cache_control"] = deep_copy(b.extra["cache_control"])
    return d


def _file_to_document(part: Mapping[str, Any]) -> dict[str, Any] | None:
    """An Anthropic ``document`` for an OpenAI ``file`` part with inline data, else None."""
    file = part.get("file")
    if part.get("type") != "file" or not isinstance(file, Mapping):
        return None
    data = file.get("file_data")
    parsed = parse_data_url(data) if isinstance(data, str) else None
    if parsed is None:
        return None
    d: dict[str, Any] = {
        "type": "document",
        "source": {
            "type": "base64",
            "media_type": parsed[0] or "application/pdf",
            "data": parsed[1],
        },
    }
    if isinstance(file.get("filename"), str):
        d["title"] = file["filename"]
    return d
