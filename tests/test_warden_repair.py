"""The warden repairs a structurally invalid history as it enters (issue 14): orphan results
leave the view, duplicate ids are made unique, calls left unanswered mid-history are closed,
empty messages fixed; one ``repaired`` event per repair, the history itself untouched; under
``strict`` it raises instead. The repairs are edits of the conversation's log, so calls that
extend the history keep the request prefix the earlier calls sent."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent / "layers"))
from histories import CharCounter, validity_problems  # noqa: E402
from test_repair import broken  # noqa: E402

from contextwarden import FormatError, Warden, WardenConfig  # noqa: E402
from contextwarden._codec import message_to_dict  # noqa: E402
from contextwarden._messages import (  # noqa: E402
    Message,
    ToolCallBlock,
    assistant,
    system,
    tool_result,
    user,
)
from contextwarden.context.conversation import split_tail  # noqa: E402
from contextwarden.formats import from_openai, to_openai, validate_openai  # noqa: E402
from contextwarden.layers.repair import NO_RESULT_TEXT, repair_history  # noqa: E402

_SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _repairs(events: object) -> list[object]:
    return [e for e in events if e.kind == "repaired" and e.layer == "repair"]  # type: ignore[attr-defined]


@_SETTINGS
@given(broken(), st.lists(st.integers(1, 40), max_size=3))
def test_every_request_is_valid_and_each_fault_is_repaired_once(
    msgs: list[Message], cuts: list[int]
) -> None:
    """Called on growing prefixes of a broken history (as an agent loop calls), every request is
    valid for both providers, the history is never changed, and the repairs made over all the
    calls are those of the whole history, one event each."""
    frozen = [message_to_dict(m) for m in msgs]
    w = Warden(counter=CharCounter())  # no window: the lossless edits and repairs only
    events: dict[str, list[object]] = {}  # by conversation: a history that gains its first
    for k in sorted({min(c, len(msgs)) for c in cuts} | {len(msgs)}):  # user message is new
        result = w.transform(msgs[:k])
        events.setdefault(result.conversation, []).extend(_repairs(result.events))
        if any(m.role != "system" for m in result.messages):
            assert validity_problems(result.messages) == []
    assert [message_to_dict(m) for m in msgs] == frozen
    _, expected = repair_history(msgs)
    made = events[result.conversation]
    assert [(e.index, e.detail) for e in made] == [(e.index, e.detail) for e in expected]  # type: ignore[attr-defined]


@_SETTINGS
@given(broken())
def test_strict_refuses_a_history_that_needs_a_repair(msgs: list[Message]) -> None:
    # trailing system messages are the request's per-call tail, not history: a call the history
    # ends with is open (dropped from this request), not unanswered before them
    history, _ = split_tail(msgs)
    _, expected = repair_history(list(history))
    w = Warden(WardenConfig(strict=True), counter=CharCounter())
    if expected:
        with pytest.raises(FormatError) as info:
            w.transform(msgs)
        assert info.value.index is not None
    else:
        w.transform(msgs)


def test_each_kind_of_fault_is_one_event_naming_the_message() -> None:
    history = [
        system("You are an agent."),
        user("Fix the bug"),
        tool_result("ghost", "a result without its call"),
        assistant(
            "", tool_calls=[ToolCallBlock("c1", "ls", "{}"), ToolCallBlock("c2", "ls", "{}")]
        ),
        tool_result("c1", "a.py"),
        user("never mind, look at b.py"),  # c2 was never answered
        assistant("", tool_calls=[ToolCallBlock("c1", "cat", "{}")]),  # c1 again
        tool_result("c1", "print('b')"),
        user(""),
    ]
    result = Warden().transform(history)
    details = {e.index: e.detail for e in _repairs(result.events)}
    assert sorted(details) == [2, 3, 6, 7, 8]
    assert "'ghost' dropped" in details[2]
    assert "'c2' was not answered before message 5" in details[3]
    assert "'c1' was already used" in details[6]
    assert "renamed 'c1-2' with its call" in details[7]
    assert "empty user message" in details[8]
    sent = to_openai(list(result.messages))
    assert validate_openai(sent) == []
    assert {"role": "tool", "tool_call_id": "c2", "content": NO_RESULT_TEXT} in sent
    assert [e.kind for e in result.edits].count("repair") == 2  # the orphan out, c2 closed
    assert history[2].tool_results[0].tool_call_id == "ghost"  # the history is the agent's


def test_later_calls_extend_the_repaired_request_byte_for_byte() -> None:
    """A repair is made once, when its message enters; the next call's request starts with the
    previous one, so the provider's prompt cache reads it."""
    history = [
        system("You are an agent."),
        user("Fix the bug"),
        assistant("", tool_calls=[ToolCallBlock("c1", "ls", "{}")]),
        user("stop, read the README first"),  # c1 unanswered
        assistant("", tool_calls=[ToolCallBlock("c1", "cat", '{"path": "README"}')]),
        tool_result("c1", "# readme"),
    ]
    w = Warden()
    first = to_openai(list(w.transform(history).messages))
    more = [*history, assistant("Done."), user("thanks; now run the tests")]
    second = w.transform(more)
    assert to_openai(list(second.messages))[: len(first)] == first
    assert _repairs(second.events) == []  # nothing repaired twice


def test_a_broken_provider_request_is_repaired() -> None:
    body = [
        {"role": "user", "content": "task"},
        {"role": "tool", "tool_call_id": "nobody", "content": "orphan"},
        {"role": "assistant", "content": "ok"},
    ]
    out, result = Warden().transform_openai(body, model="gpt-4o")
    assert validate_openai(out) == []
    assert [m["role"] for m in out] == ["user", "assistant"]
    assert len(_repairs(result.events)) == 1
    assert from_openai(body)[1].role == "tool"  # the input is read, never changed
