"""Gemini API ``contents`` (and ``systemInstruction``) <-> canonical :class:`Message` values.

How it works: docs/formats.md (`contextwarden.formats.gemini`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from .._exceptions import FormatError
from .._messages import (
    Block,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ._common import FORMAT, OPAQUE, deep_copy, fail, tname

__all__ = ["IMAGE_TOKENS", "from_gemini", "to_gemini"]

#: Reserved block-``extra`` key: the part a block came from.
PART = "_cw_part"
_FMT = "gemini"
#: Tokens Gemini bills per image (258 for one up to 384 px a side; larger ones are tiled, so
#: this errs low for them: https://ai.google.dev/gemini-api/docs/tokens#multimodal-tokens).
IMAGE_TOKENS = 258
_MEDIA = ("inlineData", "inline_data", "fileData", "file_data")
_CALL = ("functionCall", "function_call")
_RESPONSE = ("functionResponse", "function_response")
_SIGNATURE = ("thoughtSignature", "thought_signature")
_SYNTHETIC = "gemini:"


def _get(part: Mapping[str, Any], names: tuple[str, ...]) -> tuple[str, Any] | None:
    """The (key, value) of the first of ``names`` (camelCase, snake_case) in ``part``."""
    for name in names:
        if name in part:
            return name, part[name]
    return None


# -- reading ---------------------------------------------------------------------------------------
def from_gemini(contents: Sequence[Any], system_instruction: Any = None) -> list[Message]:
    """Canonical messages for a Gemini request's ``contents`` and ``systemInstruction``.

    The input is never mutated nor aliased. Raises :class:`FormatError` naming the content
    index and field for malformed input (a content that is not an object, a role other than
    ``user`` / ``model``, ``parts`` that is not a list, a part that is not an object...).
    """
    if not isinstance(contents, list | tuple):
        raise FormatError(f"contents: expected a list of contents, got {tname(contents)}")
    out: list[Message] = []
    if system_instruction is not None:
        out.append(_system(system_instruction))
    pending: dict[str, list[str]] = {}  # name -> ids of the last model content's open calls
    for i, content in enumerate(contents):
        if not isinstance(content, Mapping):
            raise FormatError(f"expected a content object, got {tname(content)}", index=i)
        role = content.get("role", "user")
        if role not in ("user", "model", "function"):
            raise fail(i, "role", "'user' or 'model'", role)
        parts = content.get("parts")
        if not isinstance(parts, list):
            raise fail(i, "parts", "a list of parts", parts)
        rest = MappingProxyType({k: deep_copy(v) for k, v in content.items() if k != "parts"})
        hints = MappingProxyType({"format": _FMT, "turn": i})
        if role == "model":
            blocks = [_model_part(i, j, p, pending) for j, p in enumerate(parts)]
            out.append(Message("assistant", tuple(blocks), extra=rest, hints=hints))
            continue
        kept: list[Block] = []
        for j, p in enumerate(parts):
            found = _get(_part(i, j, p), _RESPONSE)
            if found is None:
                kept.append(_user_part(i, j, p))
            else:
                result = _response(i, j, p, found[1], pending)
                out.append(Message("tool", (result,), extra=rest, hints=hints))
        if kept or not parts:
            out.append(Message("user", tuple(kept), extra=rest, hints=hints))
    return out


def _part(i: int, j: int, p: Any) -> Mapping[str, Any]:
    if not isinstance(p, Mapping):
        raise fail(i, f"parts[{j}]", "a part object", p)
    return p


def _extra(p: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType({PART: MappingProxyType(deep_copy(dict(p)))})


def _system(system: Any) -> Message:
    if isinstance(system, str):  # the API takes a bare string too
        return Message("system", (TextBlock(system),), hints={"format": _FMT, "system": "str"})
    if not isinstance(system, Mapping) or not isinstance(system.get("parts"), list):
        raise fail(None, "systemInstruction", "a content object with parts", system)
    blocks = [_user_part(None, j, p) for j, p in enumerate(system["parts"])]
    rest = MappingProxyType({k: deep_copy(v) for k, v in system.items() if k != "parts"})
    return Message("system", tuple(blocks), extra=rest, hints={"format": _FMT})


def _user_part(i: int | None, j: int, p: Any) -> Block:
    p = _part(i or 0, j, p)
    text = p.get("text")
    if isinstance(text, str) and not p.get("thought"):
        return TextBlock(text, extra=_extra(p))
    return _opaque(p)


def _opaque(p: Mapping[str, Any]) -> Block:
    """A part the model has no type for: media counted at :data:`IMAGE_TOKENS`, anything else
    as the text of its JSON."""
    whole = deep_copy(dict(p))
    extra = MappingProxyType({OPAQUE: whole, FORMAT: _FMT, PART: MappingProxyType(whole)})
    if _get(p, _MEDIA) is not None:
        return ImageBlock(MappingProxyType(whole), token_cost=IMAGE_TOKENS, extra=extra)
    return TextBlock(json.dumps(whole, ensure_ascii=False, default=str), extra=extra)


def _model_part(i: int, j: int, p: Any, pending: dict[str, list[str]]) -> Block:
    p = _part(i, j, p)
    if j == 0:
        pending.clear()  # a new model turn: the calls of the one before are answered or lost
    call = _get(p, _CALL)
    if call is not None:
        fn = call[1]
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            raise fail(i, f"parts[{j}].{call[0]}.name", "a string", fn)
        given = fn.get("id")
        call_id = given if isinstance(given, str) and given else f"{_SYNTHETIC}{i}:{j}"
        pending.setdefault(fn["name"], []).append(call_id)
        args = fn.get("args", {})
        return ToolCallBlock(call_id, fn["name"], json.dumps(args, ensure_ascii=False), _extra(p))
    text = p.get("text")
    if p.get("thought") is True and isinstance(text, str):
        signature = _get(p, _SIGNATURE)
        sig = signature[1] if signature is not None and isinstance(signature[1], str) else None
        return ThinkingBlock(text, signature=sig, extra=_extra(p))
    if isinstance(text, str):
        return TextBlock(text, extra=_extra(p))
    return _opaque(p)


def _response(
    i: int, j: int, p: Mapping[str, Any], fn: Any, pending: dict[str, list[str]]
) -> ToolResultBlock:
    if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
        raise fail(i, f"parts[{j}].functionResponse.name", "a string", fn)
    given = fn.get("id")
    waiting = pending.get(fn["name"], [])
    if isinstance(given, str) and given:
        call_id = given
        if given in waiting:
            waiting.remove(given)
    else:
        call_id = waiting.pop(0) if waiting else f"{_SYNTHETIC}{i}:{j}"
    response = fn.get("response")
    text, error = _response_text(response)
    return ToolResultBlock(call_id, text, is_error=error, extra=_extra(p))


def _response_text(response: Any) -> tuple[str, bool]:
    """The text a function's response is read as: its ``output`` (or ``error``) when that is
    all it holds, else its JSON."""
    if isinstance(response, Mapping) and len(response) == 1:
        ((key, value),) = response.items()
        if key in ("output", "error") and isinstance(value, str):
            return value, key == "error"
    return json.dumps(response, ensure_ascii=False, default=str), False


# -- writing ---------------------------------------------------------------------------------------
def to_gemini(messages: Sequence[Message]) -> tuple[Any, list[dict[str, Any]]]:
    """``(systemInstruction, contents)`` for canonical ``messages`` (``systemInstruction``
    None when there is no leading system message). The messages of one content (the same
    ``hints["turn"]``), the results answering one model turn, and consecutive assistant
    messages are written as one content; a system message after the first other one becomes
    a ``user`` text content (Gemini has no system turn)."""
    lead = 0
    while lead < len(messages) and messages[lead].role == "system":
        lead += 1
    system = _system_out(messages[:lead]) if lead else None
    contents: list[dict[str, Any]] = []
    last_turn: Any = None
    last_role = ""
    names: dict[str, str] = {}  # call id -> function name, for results made here
    for msg in messages[lead:]:
        role = "model" if msg.role == "assistant" else "user"
        turn = msg.hints.get("turn") if msg.hints.get("format") == _FMT else None
        names.update((c.id, c.name) for c in msg.tool_calls)
        parts = _parts(msg, names)
        if not parts:
            continue
        joins = (
            contents
            and last_role == role
            and (
                (turn is not None and turn == last_turn)
                or role == "model"
                or (
                    msg.role == "tool"
                    and all(_get(p, _RESPONSE) is not None for p in contents[-1]["parts"])
                )
            )
        )
        if joins:
            contents[-1]["parts"].extend(parts)
        else:
            head = {k: v for k, v in msg.extra.items()} if turn is not None else {"role": role}
            head.setdefault("role", role)
            contents.append({**head, "parts": parts})
        last_turn, last_role = turn, role
    return system, contents


def _system_out(messages: Sequence[Message]) -> Any:
    first = messages[0]
    if len(messages) == 1 and first.hints.get("system") == "str" and len(first.content) == 1:
        block = first.content[0]
        if isinstance(block, TextBlock):
            return block.text
    parts = [p for m in messages for p in _parts(m, {})]
    head = dict(first.extra) if first.hints.get("format") == _FMT else {}
    return {**head, "parts": parts}


def _parts(msg: Message, names: Mapping[str, str]) -> list[dict[str, Any]]:
    return [p for b in msg.content if (p := _part_out(b, names)) is not None]


def _part_out(b: Block, names: Mapping[str, str]) -> dict[str, Any] | None:
    part = b.extra.get(PART)
    original = dict(part) if isinstance(part, Mapping) else None
    if isinstance(b, TextBlock):
        if OPAQUE in b.extra and original is not None:
            rendered = json.dumps(original, ensure_ascii=False, default=str)
            return original if b.text == rendered else {"text": b.text}
        if original is not None and original.get("text") == b.text:
            return original
        if not b.text and original is None:
            return None
        return {**(original or {}), "text": b.text}
    if isinstance(b, ThinkingBlock):
        if original is not None and original.get("text") == b.thinking:
            return original
        out = {**(original or {}), "text": b.thinking, "thought": True}
        if b.signature:
            out["thoughtSignature"] = b.signature
        return out
    if isinstance(b, ToolCallBlock):
        try:
            args = json.loads(b.arguments) if b.arguments else {}
        except ValueError:
            args = {"arguments": b.arguments}
        if original is not None:
            key, fn = _get(original, _CALL) or ("functionCall", {})
            if fn.get("name") == b.name and fn.get("args", {}) == args:
                return original
            return {**original, key: {**fn, "name": b.name, "args": args}}
        fn_out: dict[str, Any] = {"name": b.name, "args": args}
        if not b.id.startswith(_SYNTHETIC):
            fn_out["id"] = b.id
        return {"functionCall": fn_out}
    if isinstance(b, ToolResultBlock):
        text = b.text
        if original is not None:
            key, fn = _get(original, _RESPONSE) or ("functionResponse", {})
            if _response_text(fn.get("response")) == (text, b.is_error):
                return original
            return {**original, key: {**fn, "response": _result(text, b.is_error)}}
        name = names.get(b.tool_call_id, "tool")
        out_fn: dict[str, Any] = {"name": name, "response": _result(text, b.is_error)}
        if not b.tool_call_id.startswith(_SYNTHETIC):
            out_fn["id"] = b.tool_call_id
        return {"functionResponse": out_fn}
    if original is not None:  # an image or other media part
        return original
    source = dict(b.source)
    return source if _get(source, _MEDIA) is not None else None


def _result(text: str, error: bool) -> dict[str, Any]:
    return {"error" if error else "output": text}
