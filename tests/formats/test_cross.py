"""Converting between providers yields valid requests that keep the conversation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given

from contextwarden import FormatError, Message
from contextwarden.formats import (
    LEADING_USER_TEXT,
    check_messages,
    from_anthropic,
    from_openai,
    to_anthropic,
    to_openai,
    validate_anthropic,
    validate_openai,
)

from .providers import anthropic_requests, openai_conversations


def _has_audio(d: list[dict[str, Any]]) -> bool:
    return any(
        isinstance(m.get("content"), list)
        and any(p.get("type") == "input_audio" for p in m["content"])
        for m in d
    )


def _calls(messages: list[Message]) -> list[tuple[str, Any]]:
    return [(c.name, c.input) for m in messages for c in m.tool_calls]


@given(openai_conversations(exotic=True))
def test_openai_to_anthropic_is_valid(d: list[dict[str, Any]]) -> None:
    assume(not validate_openai(d))
    messages = from_openai(d)
    if _has_audio(d):  # Anthropic has no audio input: refused, not dropped
        with pytest.raises(FormatError, match="input_audio"):
            to_anthropic(messages)
        return
    sys_, a = to_anthropic(messages)
    assert validate_anthropic(sys_, a) == []
    back = from_anthropic(a, system=sys_)
    assert check_messages(back) == []
    # every call survives with its name and arguments (non-object arguments are wrapped)
    assert [n for n, _ in _calls(back)] == [n for n, _ in _calls(messages)]
    assert sum(len(m.tool_results) for m in back) == sum(len(m.tool_results) for m in messages)
    # and the second hop is valid OpenAI again
    assert validate_openai(to_openai(back)) == []


@given(anthropic_requests(exotic=True))
def test_anthropic_to_openai_is_valid(req: tuple[Any, list[dict[str, Any]]]) -> None:
    sys_, d = req
    assert validate_anthropic(sys_, d) == []  # the strategy draws valid requests
    messages = from_anthropic(d, system=sys_)
    o = to_openai(messages)
    assert validate_openai(o) == []
    back = from_openai(o)
    assert _calls(back) == _calls(messages)  # tool inputs are objects: they survive exactly
    assert sum(len(m.tool_results) for m in back) == sum(len(m.tool_results) for m in messages)
    s2, a2 = to_anthropic(back)
    assert validate_anthropic(s2, a2) == []


def test_openai_leading_assistant_gets_a_user_turn() -> None:
    d: list[dict[str, Any]] = [
        {"role": "system", "content": "s"},
        {"role": "assistant", "content": "Hello!"},
    ]
    sys_, a = to_anthropic(from_openai(d))
    assert sys_ == "s"
    assert a[0] == {"role": "user", "content": LEADING_USER_TEXT}
    assert validate_anthropic(sys_, a) == []


def test_tool_results_with_images_move_to_a_user_message() -> None:
    image = {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}
    d: list[dict[str, Any]] = [
        {"role": "user", "content": "look"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "a", "name": "shot", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "a",
                    "content": [{"type": "text", "text": "ok"}, image],
                },
                {"type": "text", "text": "see?"},
            ],
        },
    ]
    o = to_openai(from_anthropic(d))
    assert o[2] == {"role": "tool", "tool_call_id": "a", "content": "ok"}
    assert o[3] == {
        "role": "user",
        "content": [
            {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
            {"type": "text", "text": "see?"},
        ],
    }
    assert validate_openai(o) == []


def test_claude_code_recording_converts_to_valid_openai(shared_data: Path) -> None:
    path = shared_data / "claude-code" / "python-to-rust-port.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    d: list[dict[str, Any]] = [r["message"] for r in rows if r.get("type") in ("user", "assistant")]
    messages = from_anthropic(d)
    assert check_messages(messages) == []  # split assistant turns count as one turn
    o = to_openai(messages)
    assert validate_openai(o) == []
    # Claude Code writes one line per block; OpenAI gets one assistant message per turn
    assert sum(1 for m in o if m["role"] == "assistant") < sum(
        1 for m in d if m["role"] == "assistant"
    )
    sys_, a = to_anthropic(from_openai(o))
    assert validate_anthropic(sys_, a) == []


def test_mini_swe_agent_recordings_convert_to_valid_anthropic(shared_data: Path) -> None:
    for path in sorted((shared_data / "mini-swe-agent").glob("*.traj.json")):
        d = json.loads(path.read_text())["messages"][:-1]
        messages = from_openai(d)
        # a run cut by an error may end on an unanswered call: the same problem, once, on
        # both sides; everything else must be clean
        own = check_messages(messages, allow_pending=True)
        assert own == [], path.name
        sys_, a = to_anthropic(messages)
        assert isinstance(sys_, str)
        problems = validate_anthropic(sys_, a)
        assert len(problems) == len(validate_openai(d)) <= 1, (path.name, problems)
        assert all("not answered" in p for p in problems)
        blocks = [b for m in a if isinstance(m["content"], list) for b in m["content"]]
        assert not any(b["type"] == "thinking" for b in blocks)  # unsigned: dropped


def test_signed_thinking_from_litellm_reaches_anthropic_unsigned_is_dropped() -> None:
    d: list[dict[str, Any]] = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": "a",
            "reasoning_content": "plain reasoning",
            "thinking_blocks": [{"type": "thinking", "thinking": "t", "signature": "SIG"}],
        },
    ]
    _, a = to_anthropic(from_openai(d))
    assert a[1]["content"] == [
        {"type": "thinking", "thinking": "t", "signature": "SIG"},
        {"type": "text", "text": "a"},
    ]


def test_content_without_an_equivalent_is_refused_with_its_place() -> None:
    doc = {"type": "document", "source": {"type": "url", "url": "https://x/a.pdf"}}
    messages = from_anthropic([{"role": "user", "content": [{"type": "text", "text": "x"}, doc]}])
    with pytest.raises(FormatError) as err:
        to_openai(messages)
    assert (err.value.index, err.value.field) == (0, "content[1]")
    pdf = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"},
    }
    o = to_openai(from_anthropic([{"role": "user", "content": [pdf]}]))
    assert o[0]["content"][0]["type"] == "file"
    assert to_anthropic(from_openai(o))[1][0]["content"][0]["type"] == "document"
