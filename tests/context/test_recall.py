"""Every ``cw:`` reference a request shows can be read back, verbatim, through the warden: a
masked tool result, stripped reasoning, a summarised span, a window cut (on a real recording
and on a made-up agent), and the recall tool's answer carries it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from shared_data import SHARED_DATA, trajectory_files

from contextwarden import Budget, Warden, from_openai, load_transcript, to_openai
from contextwarden.recall import (
    ANSWER_MAX_CHARS,
    ANSWER_MIN_CHARS,
    RECALL_TOOL_NAME,
    answer_max_chars,
    recall_answer,
    recall_ref,
    recall_tool,
    shown_refs,
)

REF = re.compile(r"cw:[0-9a-f]{16}")


def _recording(pattern: str) -> list[dict]:
    files = [p for p in trajectory_files() if pattern in str(p)]
    if not files:
        pytest.skip(f"no recording matching {pattern!r} under {SHARED_DATA}")
    return to_openai(load_transcript(Path(files[0])).messages)


@pytest.mark.parametrize("pattern", ["marshmallow-1343", "python-to-rust-port"])
def test_every_reference_a_request_shows_is_recalled_verbatim(pattern: str) -> None:
    messages = _recording(pattern)
    warden = Warden()
    originals = {json.dumps(m, sort_keys=True) for m in messages}
    seen: set[str] = set()
    for k in range(2, len(messages)):
        if messages[k]["role"] != "assistant":  # the model is called before each answer
            continue
        # a window small enough that both sessions are masked and cut: references to read
        sent, result = warden.transform_openai(messages[:k], model="gpt-4o", window=12_000)
        shown = set(REF.findall(json.dumps(sent)))
        for ref in sorted(shown - seen):
            found = warden.recall(result.conversation, ref)
            assert found, ref
            for m in to_openai(found):  # the agent's own messages, byte for byte
                assert json.dumps(m, sort_keys=True) in originals, ref
        seen |= shown
    assert len(seen) >= 3, f"too few references shown to test recall: {seen}"


def test_a_masked_result_comes_back_whole_through_the_tools_answer() -> None:
    messages = _recording("marshmallow-1343")
    warden = Warden()
    sent, result = warden.transform_openai(messages, model="gpt-4o", window=32_000)
    masked = [
        (m, found.group(0))
        for m in sent
        if m["role"] == "tool" and (found := REF.search(str(m.get("content"))))
    ]
    assert masked, "nothing masked at 32k"
    message, ref = masked[0]
    (original,) = warden.recall(result.conversation, ref)
    assert original.tool_results[0].tool_call_id == message["tool_call_id"]
    text, error = recall_answer(ref, [original])
    assert not error and original.tool_results[0].text in text
    assert len(text) > len(str(message["content"]))


def test_an_unknown_reference_is_a_clear_error() -> None:
    warden = Warden()
    _, result = warden.transform_openai(
        [{"role": "user", "content": "hi"}], model="gpt-4o", window=16_000
    )
    with pytest.raises(KeyError, match="cw:0000000000000000"):
        warden.recall(result.conversation, "cw:0000000000000000")
    text, error = recall_answer("cw:0000000000000000", None)
    assert error and "cw:0000000000000000" in text
    assert recall_answer("", None)[1]


def test_the_tool_definitions_and_their_arguments() -> None:
    assert recall_tool("openai")["function"]["name"] == RECALL_TOOL_NAME
    assert recall_tool("anthropic")["input_schema"]["required"] == ["ref"]
    assert recall_tool("responses")["name"] == RECALL_TOOL_NAME
    with pytest.raises(ValueError, match="gemini"):
        recall_tool("gemini")  # type: ignore[arg-type]
    assert recall_ref('{"ref": "cw:0123456789abcdef"}') == "cw:0123456789abcdef"
    assert recall_ref({"ref": " cw:0123456789abcdef "}) == "cw:0123456789abcdef"
    assert recall_ref("cw:0123456789abcdef") == "cw:0123456789abcdef"
    assert recall_ref("not json") == "" and recall_ref({"other": 1}) == ""


def test_the_references_a_request_shows_and_the_room_for_an_answer() -> None:
    messages = _recording("marshmallow-1343")
    warden = Warden()
    sent, result = warden.transform_openai(messages, model="gpt-4o", window=32_000)
    shown = shown_refs(result.messages)
    assert shown and shown == list(dict.fromkeys(REF.findall(json.dumps(sent))))
    assert shown_refs(from_openai([{"role": "user", "content": "hi"}])) == []
    assert answer_max_chars(None, 10**6) == ANSWER_MAX_CHARS
    budget = Budget(16_000, reserve=4_000)
    assert answer_max_chars(budget, 11_000) == 3 * 1_000
    assert answer_max_chars(budget, 15_000) == ANSWER_MIN_CHARS  # over the limit: the floor
    assert answer_max_chars(budget, 0) == 36_000
    assert answer_max_chars(budget, 0, spent=30_000) == 6_000  # answers already added
    assert answer_max_chars(Budget(128_000), 0) == ANSWER_MAX_CHARS
    assert recall_tool("openai") is not recall_tool("openai")  # the caller's own copy
