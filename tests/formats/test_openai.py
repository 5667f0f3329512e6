"""OpenAI Chat Completions adapter: exact round trips, no aliasing, located errors."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwarden import (
    FormatError,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    assistant,
    tool_result,
    user,
)
from contextwarden.formats import from_openai, opaque_payload, to_openai

from .providers import mutate_everything, openai_conversations, png_data


# -- round trip ------------------------------------------------------------------------------------
@given(openai_conversations(exotic=True, lenient=True))
def test_round_trip_is_exact(d: list[dict[str, Any]]) -> None:
    before = copy.deepcopy(d)
    messages = from_openai(d)
    assert to_openai(messages) == d
    assert d == before  # the input is not mutated


@settings(max_examples=50, deadline=None)
@given(openai_conversations(exotic=True, lenient=True))
def test_output_and_input_share_nothing(d: list[dict[str, Any]]) -> None:
    snapshot = copy.deepcopy(d)
    messages = from_openai(d)
    mutate_everything(d)  # mutating the input afterwards does not reach the messages
    out = to_openai(messages)
    assert out == snapshot
    mutate_everything(out)  # nor does mutating an output reach the next one
    assert to_openai(messages) == snapshot


@settings(max_examples=50, deadline=None)
@given(openai_conversations(exotic=True, lenient=True))
def test_json_text_round_trips(d: list[dict[str, Any]]) -> None:
    # The adapters keep every value JSON-shaped, so serialising the output is safe and equal.
    assert json.loads(json.dumps(to_openai(from_openai(d)))) == d


def test_mini_swe_agent_recordings_round_trip(shared_data: Path) -> None:
    files = sorted((shared_data / "mini-swe-agent").glob("*.traj.json"))
    assert files, "no mini-swe-agent recordings found"
    reasoning = 0
    for path in files:
        raw = json.loads(path.read_text())["messages"]
        assert raw[-1]["role"] == "exit"
        d = raw[:-1]
        messages = from_openai(d)
        assert to_openai(messages) == d, path.name
        reasoning += sum(1 for m in messages if m.thinking)
        # tool output is a ToolResultBlock, recorder extras ride along untouched
        tools = [m for m in messages if m.role == "tool"]
        assert tools and all(len(m.tool_results) == 1 for m in tools)
        assert all("extra" in m.extra for m in tools)
    assert reasoning > 0  # the deepseek_reasoner files carry reasoning_content


def test_exit_record_is_rejected_with_its_index(shared_data: Path) -> None:
    path = next((shared_data / "mini-swe-agent").glob("*.traj.json"))
    raw = json.loads(path.read_text())["messages"]
    with pytest.raises(FormatError) as err:
        from_openai(raw)
    assert err.value.index == len(raw) - 1
    assert err.value.field == "role"
    assert "'exit'" in str(err.value)


# -- the canonical shape ---------------------------------------------------------------------------
def test_mapping_of_a_tool_turn() -> None:
    d: list[dict[str, Any]] = [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": "hi", "name": "ann"},
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "think",
            "tool_calls": [
                {
                    "index": 0,
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "ls", "arguments": '{"p": 1}'},
                }
            ],
            "refusal": None,
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a b"},
    ]
    sys_, usr, asst, tool = from_openai(d)
    assert sys_.role == "system" and sys_.text == "be brief" and sys_.hints["role"] == "developer"
    assert usr.name == "ann" and usr.content == (TextBlock("hi"),)
    assert asst.content[0] == ThinkingBlock("think")
    call = asst.tool_calls[0]
    assert (call.id, call.name, call.arguments, call.input) == ("c1", "ls", '{"p": 1}', {"p": 1})
    assert call.extra["index"] == 0 and asst.extra == {"refusal": None}
    assert tool.role == "tool" and tool.tool_results == (ToolResultBlock("c1", "a b"),)


def test_content_spellings_are_kept() -> None:
    for content in ("", None, [], [{"type": "text", "text": "x"}], "x"):
        d: list[dict[str, Any]] = [{"role": "assistant", "content": content}]
        assert to_openai(from_openai(d)) == d
    d = [{"role": "assistant", "tool_calls": []}]  # no content key at all
    assert to_openai(from_openai(d)) == d
    (m,) = from_openai([{"role": "assistant", "content": ""}])
    assert m.content == ()  # empty text is no block


def test_legacy_function_call_pairs_with_function_message() -> None:
    d: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
        {"role": "function", "name": "f", "content": "done"},
    ]
    _, asst, fn = from_openai(d)
    assert asst.tool_calls[0].id == fn.tool_results[0].tool_call_id == "function_call_1"
    assert fn.name == "f" and fn.hints["role"] == "function"
    assert to_openai([_, asst, fn]) == d


def test_images_get_an_estimated_cost() -> None:
    small = f"data:image/png;base64,{png_data(512, 512)}"
    big = f"data:image/png;base64,{png_data(4096, 2048)}"
    d: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": small}},
                {"type": "image_url", "image_url": {"url": big, "detail": "high"}},
                {"type": "image_url", "image_url": {"url": big, "detail": "low"}},
                {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
            ],
        }
    ]
    blocks = from_openai(d)[0].content
    assert all(isinstance(b, ImageBlock) for b in blocks)
    costs = [b.token_cost for b in blocks if isinstance(b, ImageBlock)]
    # 512x512 -> 1 tile; 4096x2048 -> 2048x1024 -> 1536x768 -> 3x2 tiles; low is flat 85
    assert costs == [170 + 85, 6 * 170 + 85, 85, 765]


def test_audio_and_file_parts_are_opaque_and_lossless() -> None:
    audio = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
    other = {"type": "mystery", "payload": {"k": [1, 2]}}
    d: list[dict[str, Any]] = [{"role": "user", "content": [audio, other]}]
    a, o = from_openai(d)[0].content
    assert isinstance(a, ImageBlock) and opaque_payload(a) == ("openai", audio)
    assert isinstance(o, TextBlock) and "mystery" in o.text
    assert to_openai(from_openai(d)) == d


def test_edited_opaque_text_is_emitted_as_text() -> None:
    d: list[dict[str, Any]] = [
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}
    ]
    (m,) = from_openai(d)
    (b,) = m.content
    assert isinstance(b, TextBlock) and b.text == "no"
    edited = m.replace(content=(TextBlock("[masked]", extra=b.extra),))
    assert to_openai([edited])[0]["content"] == [{"type": "text", "text": "[masked]"}]


def test_built_messages_get_the_usual_spelling() -> None:
    call = ToolCallBlock("c1", "ls", "{}")
    msgs: list[Message] = [
        user("hi"),
        assistant(tool_calls=[call]),
        tool_result("c1", "out"),
        assistant("done", thinking="hmm"),
    ]
    assert to_openai(msgs) == [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "out"},
        {"role": "assistant", "content": "done", "reasoning_content": "hmm"},
    ]


def test_usage_is_exposed_and_still_emitted() -> None:
    d: list[dict[str, Any]] = [{"role": "assistant", "content": "x", "usage": {"prompt_tokens": 5}}]
    (m,) = from_openai(d)
    assert m.usage == {"prompt_tokens": 5}
    assert to_openai([m]) == d


# -- errors ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("d", "index", "field", "words"),
    [
        ([{"content": "x"}], 0, "role", "missing"),
        ([{"role": "user", "content": "x"}, {"role": "robot"}], 1, "role", "unknown role"),
        ([{"role": "user", "content": 3}], 0, "content", "got int"),
        ([{"role": "user", "content": [{"type": "text", "text": 1}]}], 0, "content[0].text", "int"),
        ([{"role": "user", "content": [{"text": "x"}]}], 0, "content[0].type", "got null"),
        (
            [{"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": 1}}]}],
            0,
            "tool_calls[0].function.name",
            "expected a string, got int",
        ),
        (
            [{"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f"}}]}],
            0,
            "tool_calls[0].function.arguments",
            "got null",
        ),
        ([{"role": "assistant", "tool_calls": {"id": "a"}}], 0, "tool_calls", "a list"),
        ([{"role": "tool", "content": "x"}], 0, "tool_call_id", "missing"),
        ([{"role": "function", "content": "x"}], 0, "name", "string"),
        (
            [{"role": "user", "content": [{"type": "text", "text": "x", "_cw_opaque": 1}]}],
            0,
            "content[0]._cw_opaque",
            "reserved",
        ),
    ],
)
def test_malformed_input_names_index_and_field(
    d: list[dict[str, Any]], index: int, field: str, words: str
) -> None:
    with pytest.raises(FormatError) as err:
        from_openai(d)
    assert err.value.index == index
    assert err.value.field == field
    assert words in str(err.value)
    assert str(err.value).startswith(f"message {index}, field {field!r}: ")


def test_error_message_matches_the_documented_form() -> None:
    d: list[dict[str, Any]] = [{"role": "user", "content": "x"}] * 3 + [
        {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": 7, "arguments": ""}}]}
    ]
    with pytest.raises(
        FormatError,
        match=r"^message 3, field 'tool_calls\[0\]\.function\.name': "
        r"expected a string, got int$",
    ):
        from_openai(d)


@given(st.one_of(st.integers(), st.text(), st.none()))
def test_not_a_list_is_rejected(value: Any) -> None:
    with pytest.raises(FormatError):
        from_openai(value)
