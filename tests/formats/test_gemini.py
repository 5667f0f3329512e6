"""Gemini ``contents`` to canonical messages and back: without loss, every thought signature on
its part, calls without ids paired with their responses, and what the layers change written in
Gemini's rules (checked by ``validate_gemini``)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextwarden import FormatError, Warden
from contextwarden._messages import ToolResultBlock
from contextwarden._task import task_index, task_text
from contextwarden.formats.gemini import from_gemini, to_gemini
from contextwarden.formats.validate import validate_gemini, validate_responses

TEXT = st.text(min_size=1, max_size=20)
SIG = st.text(alphabet="abcdefABCDEF0123456789+/", min_size=4, max_size=12)


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Valid Gemini contents: a user turn, then model turns (text, thoughts, signed calls, with
    or without ids, media) each answered by a user turn of responses, maybe with text."""
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": draw(TEXT)}]}]
    for turn in range(draw(st.integers(0, 5))):
        parts: list[dict[str, Any]] = []
        if draw(st.booleans()):
            parts.append({"text": draw(TEXT), "thought": True, "thoughtSignature": draw(SIG)})
        if draw(st.booleans()):
            parts.append(
                {"text": draw(TEXT)}
                | ({"thoughtSignature": draw(SIG)} if draw(st.booleans()) else {})
            )
        calls = draw(st.integers(0 if parts else 1, 3))
        ids = draw(st.booleans())
        for k in range(calls):
            fn: dict[str, Any] = {"name": f"tool{k % 2}", "args": {"n": draw(st.integers(0, 9))}}
            if ids:
                fn["id"] = f"id-{turn}-{k}"
            part: dict[str, Any] = {"functionCall": fn}
            if k == 0 and draw(st.booleans()):
                part["thoughtSignature"] = draw(SIG)
            parts.append(part)
        contents.append({"role": "model", "parts": parts})
        answer: list[dict[str, Any]] = []
        for k in range(calls):
            response = draw(st.sampled_from([{"output": "ok"}, {"error": "no"}, {"a": [1, 2]}]))
            fn = {"name": f"tool{k % 2}", "response": response}
            if ids:
                fn["id"] = f"id-{turn}-{k}"
            answer.append({"functionResponse": fn})
        if not calls or draw(st.booleans()):
            answer.append({"text": draw(TEXT)})
        if draw(st.booleans()):
            answer.append({"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}})
        contents.append({"role": "user", "parts": answer})
    return contents


@given(contents=conversations(), system=st.none() | TEXT)
def test_read_then_written_is_the_same_request(
    contents: list[dict[str, Any]], system: str | None
) -> None:
    instruction = None if system is None else {"parts": [{"text": system}]}
    before = copy.deepcopy(contents)
    messages = from_gemini(contents, instruction)
    assert contents == before  # never mutated
    assert validate_gemini(contents) == []
    assert to_gemini(messages) == (instruction, contents)


@given(contents=conversations())
def test_calls_without_ids_are_paired_with_their_responses(contents: list[dict[str, Any]]) -> None:
    messages = from_gemini(contents)
    calls = {c.id for m in messages for c in m.tool_calls}
    results = [
        b.tool_call_id for m in messages for b in m.content if isinstance(b, ToolResultBlock)
    ]
    assert set(results) == calls and len(results) == len(calls)


def test_gemini_cli_context_turn_is_not_the_task() -> None:
    context = (
        "<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat."
        "\nToday's date is Monday.\n</session_context>"
    )
    messages = from_gemini(
        [
            {"role": "user", "parts": [{"text": context}]},
            {"role": "user", "parts": [{"text": "Add a --json flag"}]},
        ]
    )
    at = task_index(messages)
    assert at == 1 and task_text(messages[at]) == "Add a --json flag"


def test_a_masked_response_keeps_its_call_and_the_signature() -> None:
    """A long history through the warden: what it masks or cuts is written back as Gemini
    parts, each call that stays with its signature and answered in the next turn."""
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "Read them all."}]}]
    for i in range(30):
        call = {"functionCall": {"name": "read", "args": {"i": i}}, "thoughtSignature": f"s{i}"}
        contents.append({"role": "model", "parts": [call]})
        output = "\n".join(f"line {j} of file {i}" for j in range(200))
        response = {"functionResponse": {"name": "read", "response": {"output": output}}}
        contents.append({"role": "user", "parts": [response]})
    result = Warden().transform(from_gemini(contents), model="gemini-2.5-flash", window=40_000)
    _, out = to_gemini(list(result.messages))
    assert validate_gemini(out) == []
    assert result.tokens_after < result.tokens_before
    for c in out:
        for p in c["parts"]:
            if "functionCall" in p:
                assert p["thoughtSignature"] == f"s{p['functionCall']['args']['i']}"
    masked = [
        p["functionResponse"]
        for c in out
        for p in c["parts"]
        if "functionResponse" in p and "cw:" in json.dumps(p)
    ]
    assert masked and all(set(m) == {"name", "response"} for m in masked)


@pytest.mark.parametrize(
    ("contents", "where"),
    [
        ([{"role": "robot", "parts": []}], "role"),
        ([{"role": "user", "parts": "hi"}], "parts"),
        ([{"role": "user", "parts": ["hi"]}], "parts[0]"),
        ([{"role": "model", "parts": [{"functionCall": {"args": {}}}]}], "functionCall.name"),
    ],
)
def test_bad_contents_name_what_and_where(contents: list[Any], where: str) -> None:
    with pytest.raises(FormatError) as caught:
        from_gemini(contents)
    assert where in str(caught.value) and "message 0" in str(caught.value)


@pytest.mark.parametrize(
    ("contents", "problem"),
    [
        ([], "no content"),
        ([{"role": "model", "parts": [{"text": "hi"}]}], "first content must be the user's"),
        ([{"role": "user", "parts": []}], "no parts"),
        ([{"role": "user", "parts": [{"text": ""}]}], "empty text"),
        ([{"role": "user", "parts": [{"text": "a", "inlineData": {}}]}], "more than one kind"),
        (
            [
                {"role": "user", "parts": [{"text": "go"}]},
                {"role": "model", "parts": [{"functionCall": {"name": "f"}}]},
            ],
            "not answered",
        ),
        (
            [
                {"role": "user", "parts": [{"text": "go"}]},
                {"role": "model", "parts": [{"functionCall": {"name": "f"}}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "g", "response": {}}}]},
            ],
            "do not name the calls' functions",
        ),
        (
            [
                {"role": "user", "parts": [{"text": "go"}]},
                {"role": "model", "parts": [{"text": "thinking"}]},
                {"role": "model", "parts": [{"functionCall": {"name": "f"}}]},
            ],
            "must come right after a user turn",
        ),
        (
            [{"role": "user", "parts": [{"functionResponse": {"name": "g", "response": {}}}]}],
            "no function call before them",
        ),
    ],
)
def test_what_gemini_refuses_is_named(contents: list[Any], problem: str) -> None:
    problems = validate_gemini(contents)
    assert any(problem in p for p in problems), problems


@pytest.mark.parametrize(
    ("items", "problem"),
    [
        ([], "no items"),
        ([{"type": "function_call_output", "call_id": "c", "output": "x"}], "no call before it"),
        ([{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}], "no output"),
        ([{"role": "user", "content": ""}], "empty or missing content"),
        ([{"role": "robot", "content": "x"}], "unknown role"),
    ],
)
def test_what_the_responses_api_refuses_is_named(items: list[Any], problem: str) -> None:
    problems = validate_responses(items)
    assert any(problem in p for p in problems), problems
