"""Anthropic Messages adapter: exact round trips, no aliasing, located errors."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

from contextwarden import (
    FormatError,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    Warden,
    assistant,
    system,
    tool_result,
    user,
)
from contextwarden.formats import from_anthropic, opaque_payload, to_anthropic, validate_anthropic

from .providers import anthropic_requests, mutate_everything, png_data

Request = tuple[Any, list[dict[str, Any]]]


@given(anthropic_requests(exotic=True))
def test_round_trip_is_exact(req: Request) -> None:
    sys_, d = req
    before = copy.deepcopy(req)
    messages = from_anthropic(d, system=sys_)
    assert to_anthropic(messages) == (sys_, d)
    assert (sys_, d) == before


@settings(max_examples=50, deadline=None)
@given(anthropic_requests(exotic=True))
def test_output_and_input_share_nothing(req: Request) -> None:
    snapshot = copy.deepcopy(req)
    sys_, d = req
    messages = from_anthropic(d, system=sys_)
    mutate_everything(d)
    mutate_everything(sys_)
    out = to_anthropic(messages)
    assert out == snapshot
    mutate_everything(out[1])
    mutate_everything(out[0])
    assert to_anthropic(messages) == snapshot


def _claude_code_messages(shared_data: Path) -> list[dict[str, Any]]:
    path = shared_data / "claude-code" / "python-to-rust-port.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r["message"] for r in rows if r.get("type") in ("user", "assistant")]


def test_claude_code_recording_round_trips(shared_data: Path) -> None:
    d = _claude_code_messages(shared_data)
    assert len(d) > 50
    messages = from_anthropic(d)
    # the transcript keeps one assistant line per block (kept apart: the API combines them);
    # user lines in a row are joined into one turn
    _, written = to_anthropic(messages)
    assert [p for p in validate_anthropic(None, written) if "assistant messages" not in p] == []
    assert _blocks(written) == _blocks(d)
    for line in d:  # and one line at a time, as a transcript loader may call it
        assert to_anthropic(from_anthropic([line])) == (None, [line])
    calls = sum(len(m.tool_calls) for m in messages)
    results = sum(len(m.tool_results) for m in messages)
    assert calls == results == 39  # the README's 39 tool pairs
    assert all(m.usage is not None for m in messages if m.role == "assistant")


def test_mapping_of_blocks() -> None:
    d: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "redacted_thinking", "data": "enc"},
                {"type": "text", "text": "ok", "citations": None},
                {"type": "tool_use", "id": "t1", "name": "ls", "input": {"path": "/", "n": 1.5}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "a", "is_error": True},
                {"type": "text", "text": "and also"},
            ],
        },
    ]
    u, a, t = from_anthropic(d)
    assert u.role == "user" and u.text == "go"
    assert a.content[0] == ThinkingBlock("hmm", signature="sig")
    assert a.content[1] == ThinkingBlock("", redacted=True, data="enc")
    assert a.content[2] == TextBlock("ok", extra={"citations": None})
    call = a.content[3]
    assert isinstance(call, ToolCallBlock) and call.input == {"path": "/", "n": 1.5}
    assert t.role == "tool"  # a user message carrying tool results
    assert t.content == (ToolResultBlock("t1", "a", is_error=True), TextBlock("and also"))
    assert to_anthropic([u, a, t]) == (None, d)


def test_system_spellings() -> None:
    blocks = [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}]
    for sys_ in ("be brief", "", blocks, []):
        messages = from_anthropic([{"role": "user", "content": "x"}], system=sys_)
        assert messages[0].role == "system"
        assert to_anthropic(messages)[0] == sys_
    assert to_anthropic(from_anthropic([{"role": "user", "content": "x"}]))[0] is None


def test_tool_result_spellings_are_kept() -> None:
    extras: list[dict[str, Any]] = [
        {},
        {"content": ""},
        {"content": []},
        {"is_error": False},
        {"content": "x"},
    ]
    for extra in extras:
        d: list[dict[str, Any]] = [
            {"role": "user", "content": "x"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", **extra}]},
        ]
        assert to_anthropic(from_anthropic(d)) == (None, d)


def test_server_tools_and_documents_are_opaque() -> None:
    server = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    result = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}
    doc = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "x" * 400},
    }
    d: list[dict[str, Any]] = [
        {"role": "user", "content": [doc]},
        {"role": "assistant", "content": [server, result]},
    ]
    u, a = from_anthropic(d)
    (media,) = u.content
    assert isinstance(media, ImageBlock) and media.token_cost == 100  # 400 chars / 4
    assert opaque_payload(media) == ("anthropic", doc)
    assert not a.tool_calls  # a server tool is not ours to answer
    assert all(isinstance(b, TextBlock) and opaque_payload(b) for b in a.content)
    assert to_anthropic([u, a]) == (None, d)


def test_image_cost_from_the_header() -> None:
    src = {"type": "base64", "media_type": "image/png", "data": png_data(1000, 750)}
    (m,) = from_anthropic([{"role": "user", "content": [{"type": "image", "source": src}]}])
    (img,) = m.content
    assert isinstance(img, ImageBlock) and img.token_cost == 1000  # 1000*750/750
    url = {"type": "url", "url": "https://x/y.png"}
    (m,) = from_anthropic([{"role": "user", "content": [{"type": "image", "source": url}]}])
    assert isinstance(m.content[0], ImageBlock) and m.content[0].token_cost == 1600


def test_built_messages_become_a_valid_request() -> None:
    call = ToolCallBlock("c.1", "ls", "not json")
    msgs = [
        system("rules"),
        user("hi"),
        assistant(tool_calls=[call], thinking="unsigned"),
        tool_result("c.1", "out"),
        user("thanks"),
    ]
    sys_, d = to_anthropic(msgs)
    assert sys_ == "rules"
    assert d == [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "c_1", "name": "ls", "input": {"_raw": "not json"}}
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c_1", "content": "out"},
                {"type": "text", "text": "thanks"},
            ],
        },
    ]


def test_two_user_turns_in_a_row_are_written_as_one_valid_turn() -> None:
    d: list[dict[str, Any]] = [
        {"role": "user", "content": "a"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "r"}]},
        {"role": "assistant", "content": "removed by a compaction"},
        {"role": "user", "content": "b"},
    ]
    messages = from_anthropic(d)
    _, out = to_anthropic([*messages[:3], messages[4]])
    assert out[2:] == [
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "r"},
                {"type": "text", "text": "b"},
            ],
        }
    ]
    assert validate_anthropic(None, out) == []
    _, converted = to_anthropic([*messages, user("c")])
    assert converted[-1] == {
        "role": "user",
        "content": [{"type": "text", "text": "b"}, {"type": "text", "text": "c"}],
    }


def _blocks(d: list[dict[str, Any]]) -> list[str]:
    """Every content block of ``d`` (a string content as its text block), sorted."""
    out = []
    for m in d:
        c = m.get("content")
        items = [{"type": "text", "text": c}] if isinstance(c, str) else c or []
        out += [json.dumps([m["role"], b], sort_keys=True) for b in items]
    return sorted(out)


@given(anthropic_requests(exotic=True))
def test_removing_replies_keeps_the_request_valid_and_loses_nothing(req: Request) -> None:
    sys_, d = req
    keep = [
        i
        for i, m in enumerate(d)
        if m["role"] != "assistant"
        or any(isinstance(b, dict) and b.get("type") == "tool_use" for b in m["content"])
    ]
    messages = from_anthropic(d, system=sys_)
    head = len(messages) - len(d)  # the system prompt's message
    out_sys, out = to_anthropic(messages[:head] + [messages[head + i] for i in keep])
    assert out_sys == sys_
    assert validate_anthropic(sys_, out) == []
    assert _blocks(out) == _blocks([d[i] for i in keep])


@pytest.mark.parametrize(
    ("d", "sys_", "index", "field", "words"),
    [
        ([{"role": "tool", "content": "x"}], None, 0, "role", "unknown role"),
        (
            [
                {"role": "user", "content": "go"},
                {"role": "system", "content": [{"type": "thinking", "thinking": "t"}]},
            ],
            None,
            1,
            "content[0]",
            "text only",
        ),
        ([{"role": "user", "content": 5}], None, 0, "content", "got int"),
        ([{"role": "user", "content": [{"type": "text"}]}], None, 0, "content[0].text", "null"),
        (
            [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "a", "name": "f", "input": []}],
                }
            ],
            None,
            0,
            "content[0].input",
            "an object, got list",
        ),
        (
            [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": 3}]}],
            None,
            0,
            "content[0].tool_use_id",
            "a string, got int",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "a", "is_error": 1}],
                }
            ],
            None,
            0,
            "content[0].is_error",
            "a bool",
        ),
        (
            [
                {
                    "role": "assistant",
                    "content": [{"type": "thinking", "thinking": "x", "signature": 1}],
                }
            ],
            None,
            0,
            "content[0].signature",
            "a string",
        ),
        ([], [{"type": "text", "text": 1}], None, "system[0].text", "a string"),
        ([], 7, None, "system", "got int"),
    ],
)
def test_malformed_input_names_index_and_field(
    d: list[dict[str, Any]], sys_: Any, index: int | None, field: str, words: str
) -> None:
    with pytest.raises(FormatError) as err:
        from_anthropic(d, system=sys_)
    assert err.value.index == index
    assert err.value.field == field
    assert words in str(err.value)


def _empty_texts(value: Any) -> int:
    """Empty text blocks anywhere inside ``value``."""
    if isinstance(value, dict):
        own = value.get("type") == "text" and value.get("text") == ""
        return int(own) + sum(_empty_texts(v) for v in value.values())
    if isinstance(value, list):
        return sum(_empty_texts(v) for v in value)
    return 0


def test_empty_text_blocks_are_never_written() -> None:
    # Anthropic refuses them ("text content blocks must be non-empty"), even in what it was sent:
    # beside a tool result (as Claude Code sends them), inside one, in the system prompt
    empty: dict[str, Any] = {"type": "text", "text": ""}
    system_ = [dict(empty), {"type": "text", "text": "You are terse."}]
    d: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "Read a.py"}, dict(empty)]},
        {
            "role": "assistant",
            "content": [dict(empty), {"type": "tool_use", "id": "t1", "name": "read", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": [dict(empty)]},
                {**empty, "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "go on"},
            ],
        },
    ]
    assert _empty_texts([system_, d]) == 5
    sys_out, out = to_anthropic(from_anthropic(d, system=system_))
    assert _empty_texts([sys_out, out]) == 0
    assert sys_out == [{"type": "text", "text": "You are terse."}]
    assert out[0]["content"] == [{"type": "text", "text": "Read a.py"}]
    assert [b["type"] for b in out[1]["content"]] == ["tool_use"]
    assert [b["type"] for b in out[2]["content"]] == ["tool_result", "text"]
    assert validate_anthropic(sys_out, out) == []
    # and through the warden, as the proxy writes a request
    sent_system, sent, _ = Warden().transform_anthropic(
        d, system=system_, model="claude-sonnet-4-6", window=200_000
    )
    assert _empty_texts([sent_system, sent]) == 0
    assert validate_anthropic(sent_system, sent) == []
