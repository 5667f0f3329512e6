"""Hypothesis strategies: valid provider message lists of every shape the adapters handle.

``openai_conversations()`` and ``anthropic_requests()`` draw whole requests whose tool calls
are all answered, roles are in order and content is non-empty, so they pass the validators;
with ``exotic=True`` they also draw the spellings real recorders produce (``content: null``,
``tool_calls: []``, ``function_call: null``, recorder extras...), which must round-trip too.
"""

from __future__ import annotations

import base64
import struct
from typing import Any

from hypothesis import strategies as st

__all__ = [
    "anthropic_requests",
    "json_values",
    "mutate_everything",
    "openai_conversations",
    "png_data",
]

Draw = Any

_KEY = st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8).filter(
    lambda k: not k.startswith("_")
)
# A small alphabet keeps generation fast and still covers escapes, CJK and astral characters.
_TEXT = st.text(list('abcdefgh xyz\n\t"\\{}:中文éß\u200b🙂'), min_size=1, max_size=20)
_ID = st.text(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", min_size=1, max_size=12
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEY, inner, max_size=3),
    max_leaves=5,
)
_OBJECTS = st.dictionaries(_KEY, json_values, max_size=3)


def mutate_everything(value: Any) -> None:
    """Change every dict and list reachable from ``value`` in place."""
    if isinstance(value, dict):
        for v in list(value.values()):
            mutate_everything(v)
        value["__mutated__"] = True
    elif isinstance(value, list):
        for v in value:
            mutate_everything(v)
        value.append("__mutated__")


def png_data(width: int, height: int) -> str:
    """Base64 of a PNG header (signature and IHDR): enough for size sniffing."""
    ihdr = struct.pack(">II", width, height) + b"\x08\x06\x00\x00\x00"
    raw = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + b"\x00\x00\x00\x00"
    return base64.b64encode(raw).decode()


def _extras(draw: Draw, known: set[str], exotic: bool) -> dict[str, Any]:
    """Unknown keys a recorder or provider adds (never clashing with ``known``)."""
    if not exotic:
        return {}
    extra = draw(_OBJECTS)
    return {k: v for k, v in extra.items() if k not in known}


# -- OpenAI ----------------------------------------------------------------------------------------
_OPENAI_KNOWN = {
    "role",
    "content",
    "name",
    "tool_calls",
    "tool_call_id",
    "function_call",
    "reasoning_content",
    "reasoning",
    "thinking_blocks",
    "refusal",
    "usage",
}


@st.composite
def _openai_part(draw: Draw, exotic: bool, media: bool) -> dict[str, Any]:
    kinds = ["text"]
    if media:
        kinds += ["image_url", "input_audio", "file"]
    kind = draw(st.sampled_from(kinds))
    if kind == "text":
        part: dict[str, Any] = {"type": "text", "text": draw(_TEXT)}
        if exotic and draw(st.booleans()):
            part["cache_control"] = {"type": "ephemeral"}
        return part
    if kind == "image_url":
        url = draw(
            st.sampled_from(
                [
                    "https://example.com/cat.png",
                    f"data:image/png;base64,{png_data(draw(st.integers(1, 4000)), 300)}",
                ]
            )
        )
        image: dict[str, Any] = {"url": url}
        if draw(st.booleans()):
            image["detail"] = draw(st.sampled_from(["low", "high", "auto"]))
        return {"type": "image_url", "image_url": image}
    if kind == "input_audio":
        return {
            "type": "input_audio",
            "input_audio": {"data": base64.b64encode(b"RIFF" * 50).decode(), "format": "wav"},
        }
    return {
        "type": "file",
        "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERi0xLjQK"},
    }


@st.composite
def _openai_content(
    draw: Draw, exotic: bool, media: bool = False, allow_empty: bool = False
) -> Any:
    if draw(st.booleans()):
        return draw(_TEXT) if not allow_empty else draw(st.sampled_from(["", "x"]) | _TEXT)
    parts = draw(st.lists(_openai_part(exotic, media), min_size=1, max_size=3))
    if media and not any(p["type"] == "text" for p in parts):
        parts.insert(0, {"type": "text", "text": "look"})
    return parts


@st.composite
def _openai_call(draw: Draw, cid: str, exotic: bool, index: int) -> dict[str, Any]:
    args = draw(st.sampled_from(['{"command": "ls"}', "{}", '{"a": [1, 2.5, null]}', "{oops"]))
    fn: dict[str, Any] = {"name": draw(_ID), "arguments": args}
    call: dict[str, Any] = {"id": cid, "type": "function", "function": fn}
    if exotic and draw(st.booleans()):
        call["index"] = index  # streaming recorders keep it
    if exotic and draw(st.booleans()):
        fn["strict"] = True  # an unknown key inside ``function``
    if exotic and draw(st.booleans()):
        del call["type"]
    return call


@st.composite
def _openai_assistant(draw: Draw, ids: list[str], exotic: bool, legacy: bool) -> dict[str, Any]:
    m: dict[str, Any] = {"role": "assistant"}
    has_calls = bool(ids) or legacy
    content = draw(_openai_content(exotic))
    if isinstance(content, list):
        if exotic and draw(st.booleans()):
            content.append({"type": "refusal", "refusal": draw(_TEXT)})
    if has_calls and draw(st.booleans()):
        content = draw(st.sampled_from([None, "", "absent"]))
    if content != "absent":
        m["content"] = content
    if draw(st.booleans()):
        m["reasoning_content"] = draw(_TEXT)
    elif exotic and draw(st.booleans()):
        m["reasoning_content"] = draw(st.sampled_from([None, ""]))
    if exotic and draw(st.booleans()):
        m["reasoning"] = draw(_TEXT)
    if exotic and draw(st.booleans()):
        m["thinking_blocks"] = [
            {"type": "thinking", "thinking": draw(_TEXT), "signature": draw(_ID)},
            {"type": "redacted_thinking", "data": draw(_ID)},
        ]
    if ids:
        m["tool_calls"] = [draw(_openai_call(cid, exotic, j)) for j, cid in enumerate(ids)]
    elif exotic and draw(st.booleans()):
        m["tool_calls"] = draw(st.sampled_from([None, []]))
    if legacy:
        m["function_call"] = {"name": draw(_ID), "arguments": "{}"}
    elif exotic and draw(st.booleans()):
        m["function_call"] = None
    if exotic and draw(st.booleans()):
        m["refusal"] = draw(st.none() | _TEXT)
    if exotic and draw(st.booleans()):
        m["name"] = draw(_ID)
    if exotic and draw(st.booleans()):
        m["provider_specific_fields"] = {"reasoning_content": m.get("reasoning_content")}
    if exotic and draw(st.booleans()):
        m["usage"] = {"prompt_tokens": draw(st.integers(0, 10**6)), "completion_tokens": 3}
    m.update(_extras(draw, _OPENAI_KNOWN | set(m), exotic))
    return m


@st.composite
def _openai_tool(draw: Draw, cid: str, exotic: bool, lenient: bool) -> dict[str, Any]:
    m: dict[str, Any] = {"role": "tool", "tool_call_id": cid}
    choice = draw(st.integers(0, 3 if lenient else 1))
    if choice == 0:
        m["content"] = draw(st.sampled_from(["", "ok"]) | _TEXT)
    elif choice == 1:
        m["content"] = [{"type": "text", "text": draw(_TEXT)}]
    elif choice == 2:
        m["content"] = None
    # choice 3: no content key at all
    if exotic and draw(st.booleans()):
        m["name"] = draw(_ID)
    if exotic and draw(st.booleans()):
        m["extra"] = {"raw_output": draw(_TEXT), "returncode": draw(st.integers(0, 2))}
    return m


@st.composite
def openai_conversations(
    draw: Draw, exotic: bool = False, lenient: bool = False
) -> list[dict[str, Any]]:
    """A valid OpenAI Chat Completions ``messages`` list (see the module notes).

    ``lenient=True`` also draws tool messages with ``content: null`` or no content, which
    the API refuses but recorders write (they must round-trip all the same)."""
    out: list[dict[str, Any]] = []
    counter = 0
    if draw(st.booleans()):
        role = draw(st.sampled_from(["system", "developer"]))
        out.append({"role": role, "content": draw(_openai_content(exotic))})
    for _ in range(draw(st.integers(1, 5))):
        user: dict[str, Any] = {"role": "user", "content": draw(_openai_content(exotic, True))}
        if exotic and draw(st.booleans()):
            user["name"] = draw(_ID)
        out.append(user)
        for _turn in range(draw(st.integers(0, 3))):
            legacy = exotic and draw(st.integers(0, 5)) == 0
            n = 0 if legacy else draw(st.integers(0, 3))
            ids = [f"call_{counter + k}" for k in range(n)]
            counter += n
            out.append(draw(_openai_assistant(ids, exotic, legacy)))
            if legacy:
                out.append({"role": "function", "name": draw(_ID), "content": draw(_TEXT)})
            answer = draw(st.permutations(ids)) if ids else []
            out.extend(draw(_openai_tool(cid, exotic, lenient)) for cid in answer)
            if not ids and not legacy:
                break  # a turn without calls ends with the assistant's answer
    if exotic and draw(st.booleans()):
        out.append({"role": "system", "content": "late reminder"})
    return out


# -- Anthropic -------------------------------------------------------------------------------------
_ANTHROPIC_KNOWN = {"role", "content"}


@st.composite
def _anthropic_text(draw: Draw, exotic: bool) -> dict[str, Any]:
    b: dict[str, Any] = {"type": "text", "text": draw(_TEXT)}
    if exotic and draw(st.booleans()):
        b["cache_control"] = {"type": "ephemeral"}
    if exotic and draw(st.booleans()):
        b["citations"] = [{"type": "char_location", "cited_text": "x", "start_char_index": 0}]
    return b


@st.composite
def _anthropic_media(draw: Draw) -> dict[str, Any]:
    kind = draw(st.integers(0, 3))
    if kind == 0:
        data = png_data(draw(st.integers(1, 3000)), draw(st.integers(1, 3000)))
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": data},
        }
    if kind == 1:
        return {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}}
    if kind == 2:
        return {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQK"},
            "title": "a.pdf",
        }
    return {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": draw(_TEXT)},
    }


@st.composite
def _tool_result(draw: Draw, cid: str, exotic: bool) -> dict[str, Any]:
    b: dict[str, Any] = {"type": "tool_result", "tool_use_id": cid}
    choice = draw(st.integers(0, 3))
    if choice == 0:
        b["content"] = draw(_TEXT)
    elif choice == 1:
        inner: list[dict[str, Any]] = [draw(_anthropic_text(exotic))]
        if draw(st.booleans()):
            inner.append(draw(_anthropic_media()))
        b["content"] = inner
    elif choice == 2 and exotic:
        b["content"] = ""
    if draw(st.booleans()):
        b["is_error"] = draw(st.booleans())
    if exotic and draw(st.booleans()):
        b["cache_control"] = {"type": "ephemeral"}
    return b


@st.composite
def _anthropic_assistant(draw: Draw, ids: list[str], exotic: bool) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    if draw(st.booleans()):
        blocks.append({"type": "thinking", "thinking": draw(_TEXT), "signature": draw(_ID)})
    if exotic and draw(st.booleans()):
        blocks.append({"type": "redacted_thinking", "data": draw(_ID)})
    if draw(st.booleans()) or not ids:
        blocks.append(draw(_anthropic_text(exotic)))
    if exotic and draw(st.booleans()):
        sid = f"srvtoolu_{draw(_ID)}"
        blocks.append(
            {"type": "server_tool_use", "id": sid, "name": "web_search", "input": {"query": "q"}}
        )
        blocks.append(
            {
                "type": "web_search_tool_result",
                "tool_use_id": sid,
                "content": [{"type": "web_search_result", "url": "https://e.com", "title": "t"}],
            }
        )
    for cid in ids:
        call: dict[str, Any] = {
            "type": "tool_use",
            "id": cid,
            "name": draw(_ID),
            "input": draw(_OBJECTS),
        }
        if exotic and draw(st.booleans()):
            call["cache_control"] = {"type": "ephemeral"}
        blocks.append(call)
    m: dict[str, Any] = {"role": "assistant", "content": blocks}
    if not ids and len(blocks) == 1 and blocks[0]["type"] == "text" and len(blocks[0]) == 2:
        if draw(st.booleans()):
            m["content"] = blocks[0]["text"]
    if exotic and draw(st.booleans()):
        m.update(
            {
                "id": f"msg_{draw(_ID)}",
                "type": "message",
                "model": "claude-x",
                "stop_reason": "tool_use" if ids else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": draw(st.integers(0, 10**6)), "output_tokens": 7},
            }
        )
    return m


@st.composite
def anthropic_requests(
    draw: Draw, exotic: bool = False
) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """A valid Anthropic Messages ``(system, messages)`` pair (see the module notes)."""
    system: str | list[dict[str, Any]] | None = draw(
        st.none() | _TEXT | st.lists(_anthropic_text(exotic), min_size=1, max_size=2)
    )
    out: list[dict[str, Any]] = []
    counter = 0
    pending: list[str] = []
    for _ in range(draw(st.integers(1, 5))):
        user_blocks: list[dict[str, Any]] = [draw(_tool_result(c, exotic)) for c in pending]
        if not pending or draw(st.booleans()):
            if draw(st.booleans()) and not pending:
                out.append({"role": "user", "content": draw(_TEXT)})
            else:
                user_blocks.append(draw(_anthropic_text(exotic)))
                if draw(st.booleans()):
                    user_blocks.append(draw(_anthropic_media()))
        if user_blocks:
            out.append({"role": "user", "content": user_blocks})
        n = draw(st.integers(0, 2))
        pending = [f"toolu_{counter + k}" for k in range(n)]
        counter += n
        out.append(draw(_anthropic_assistant(pending, exotic)))
    if pending:
        out.append({"role": "user", "content": [draw(_tool_result(c, exotic)) for c in pending]})
    return system, out
