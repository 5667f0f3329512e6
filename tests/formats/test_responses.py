"""The Responses API codec: lossless both ways, valid after the warden has edited a history."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextwarden import FormatError, Warden, WardenConfig
from contextwarden._messages import Message, TextBlock, ThinkingBlock, ToolCallBlock
from contextwarden.formats import from_responses, to_responses
from contextwarden.formats.responses import ITEM

# -- generated item lists ----------------------------------------------------------------------
text = st.text(max_size=40)
ident = st.text(alphabet="abcdef0123456789", min_size=4, max_size=10)


def _maybe(d: dict[str, Any], draw: Any, key: str, values: st.SearchStrategy[Any]) -> None:
    if draw(st.booleans()):
        d[key] = draw(values)


@st.composite
def input_part(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(["input_text", "input_text", "input_image", "input_file"]))
    if kind == "input_text":
        return {"type": "input_text", "text": draw(text)}
    if kind == "input_image":
        d = {"type": "input_image", "image_url": "https://example.com/" + draw(ident)}
        _maybe(d, draw, "detail", st.sampled_from(["low", "high", "auto"]))
        return d
    return {"type": "input_file", "file_id": "file-" + draw(ident)}


@st.composite
def user_message(draw: Any) -> dict[str, Any]:
    role = draw(st.sampled_from(["user", "user", "system", "developer"]))
    d: dict[str, Any] = {}
    _maybe(d, draw, "type", st.just("message"))
    d["role"] = role
    d["content"] = draw(st.one_of(text, st.lists(input_part(), max_size=3)))
    _maybe(d, draw, "id", ident.map(lambda s: "msg_" + s))
    return d


@st.composite
def reasoning(draw: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"type": "reasoning", "id": "rs_" + draw(ident)}
    d["summary"] = [{"type": "summary_text", "text": t} for t in draw(st.lists(text, max_size=2))]
    _maybe(d, draw, "encrypted_content", st.text(alphabet="ABCDEFabcdef+/=", max_size=30))
    return d


@st.composite
def assistant_message(draw: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"type": "message", "role": "assistant"}
    _maybe(d, draw, "id", ident.map(lambda s: "msg_" + s))
    _maybe(d, draw, "status", st.just("completed"))
    parts = st.lists(
        st.one_of(
            text.map(lambda t: {"type": "output_text", "text": t, "annotations": []}),
            text.map(lambda t: {"type": "refusal", "refusal": t}),
        ),
        max_size=3,
    )
    d["content"] = draw(st.one_of(text, parts))
    return d


@st.composite
def call_and_output(draw: Any) -> list[dict[str, Any]]:
    call_id = "call_" + draw(ident)
    kind = draw(st.sampled_from(["function", "function", "custom", "computer"]))
    if kind == "function":
        call = {"type": "function_call", "call_id": call_id, "name": "bash"}
        call["arguments"] = json.dumps({"cmd": draw(text)})
        _maybe(call, draw, "id", ident.map(lambda s: "fc_" + s))
        _maybe(call, draw, "status", st.just("completed"))
        out: dict[str, Any] = {"type": "function_call_output", "call_id": call_id}
        out["output"] = draw(st.one_of(text, st.lists(input_part(), max_size=2)))
    elif kind == "custom":
        call = {
            "type": "custom_tool_call",
            "call_id": call_id,
            "name": "patch",
            "input": draw(text),
        }
        out = {"type": "custom_tool_call_output", "call_id": call_id, "output": draw(text)}
    else:
        call = {"type": "computer_call", "call_id": call_id, "id": "cu_" + draw(ident)}
        call["action"] = {"type": "click", "x": 1, "y": 2}
        out = {"type": "computer_call_output", "call_id": call_id}
        out["output"] = {"type": "computer_screenshot", "image_url": "data:image/png;base64,AA"}
    _maybe(out, draw, "id", ident.map(lambda s: "fco_" + s))
    return [call, out]


@st.composite
def turn(draw: Any) -> list[dict[str, Any]]:
    """One model turn (reasoning, text, calls) followed by the call outputs, or a user item."""
    kind = draw(st.sampled_from(["user", "model", "model", "other"]))
    if kind == "user":
        return [draw(user_message())]
    if kind == "other":
        return [
            draw(
                st.sampled_from(
                    [
                        {"type": "item_reference", "id": "msg_ref"},
                        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
                    ]
                )
            )
        ]
    items: list[dict[str, Any]] = []
    if draw(st.booleans()):
        items.append(draw(reasoning()))
    if draw(st.booleans()):
        items.append(draw(assistant_message()))
    pairs = draw(st.lists(call_and_output(), max_size=3))
    items.extend(p[0] for p in pairs)
    items.extend(p[1] for p in pairs)
    return items


items_lists = st.lists(turn(), max_size=8).map(lambda turns: [i for t in turns for i in t])


@given(items_lists, st.one_of(st.none(), text))
def test_round_trip_is_exact(items: list[dict[str, Any]], instructions: str | None) -> None:
    before = copy.deepcopy(items)
    messages = from_responses(items, instructions=instructions)
    out_instructions, out = to_responses(messages)
    assert out_instructions == instructions
    assert out == items
    # byte-identical too (key order kept): prompt caches key on the bytes
    assert json.dumps(out) == json.dumps(items)
    assert items == before  # the input was not mutated
    # and not aliased: changing the output leaves the messages' next rendering unchanged
    for d in out:
        d.clear()
    assert to_responses(messages)[1] == items


# -- the mapping -------------------------------------------------------------------------------
RUN = [
    {"role": "user", "content": "Fix the bug"},
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
    {"type": "message", "role": "assistant", "id": "msg_1", "content": [
        {"type": "output_text", "text": "Looking.", "annotations": []}
    ]},
    {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "ls", "arguments": "{}"},
    {"type": "function_call", "id": "fc_2", "call_id": "c2", "name": "cat", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "a.py"},
    {"type": "function_call_output", "call_id": "c2", "output": "print(1)"},
]  # fmt: skip


def test_an_assistant_run_is_one_message_and_results_follow_it() -> None:
    messages = from_responses(RUN, instructions="Be brief.")
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "tool"]
    run = messages[2]
    assert [type(b) for b in run.content] == [
        ThinkingBlock,
        TextBlock,
        ToolCallBlock,
        ToolCallBlock,
    ]
    assert run.thinking[0].signature == "gAAA"
    assert [c.id for c in run.tool_calls] == ["c1", "c2"]
    assert [m.tool_results[0].tool_call_id for m in messages[3:]] == ["c1", "c2"]


def test_removed_reasoning_drops_the_sibling_ids() -> None:
    messages = from_responses(RUN)
    run = messages[1]
    stripped = run.replace(content=tuple(b for b in run.content if type(b) is not ThinkingBlock))
    _, out = to_responses([messages[0], stripped, *messages[2:]])
    assert [i.get("type") for i in out[1:4]] == ["message", "function_call", "function_call"]
    assert all("id" not in i for i in out[1:4])
    # the other items are untouched
    assert out[4:] == RUN[5:]


def test_messages_built_in_code_get_the_plain_spelling() -> None:
    summary = Message("user", (TextBlock("Summary of earlier work"),))
    call = Message("assistant", (TextBlock("next"), ToolCallBlock("c9", "ls", "{}")))
    result = from_responses([{"type": "function_call_output", "call_id": "c9", "output": "x"}])
    instructions, out = to_responses([summary, call, *result])
    assert instructions is None
    assert out == [
        {"role": "user", "content": "Summary of earlier work"},
        {"role": "assistant", "content": "next"},
        {"type": "function_call", "call_id": "c9", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c9", "output": "x"},
    ]


def test_an_edited_result_is_sent_as_edited() -> None:
    messages = from_responses(RUN)
    tool = messages[-1]
    block = tool.tool_results[0]
    from dataclasses import replace

    edited = tool.replace(content=(replace(block, content="[masked]"),))
    _, out = to_responses([*messages[:-1], edited])
    assert out[-1] == {"type": "function_call_output", "call_id": "c2", "output": "[masked]"}


def test_opaque_items_are_kept_whole() -> None:
    items = [
        {"type": "item_reference", "id": "msg_9"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"q": "x"}},
        {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "found", "annotations": [{"url": "u"}]}
        ]},
    ]  # fmt: skip
    messages = from_responses(items)
    assert [m.role for m in messages] == ["user", "assistant"]
    assert "item_reference" in messages[0].text  # counted as the text it stands for
    assert to_responses(messages)[1] == items


@pytest.mark.parametrize(
    ("items", "where"),
    [
        ([{"role": "robot", "content": "x"}], "message 0, field 'role'"),
        ([{"content": "no role, no type"}], "message 0, field 'type'"),
        (["a string"], "message 0"),
        ([{"role": "user", "content": 3}], "message 0, field 'content'"),
        ([{"role": "user", "content": [{"type": "input_text"}]}], "content[0].text"),
        ([{"type": "function_call", "name": "ls", "arguments": "{}"}], "field 'call_id'"),
        (
            [{"type": "function_call", "call_id": "c", "name": "ls", "arguments": {}}],
            "field 'arguments'",
        ),
        (
            [{"role": "user", "content": "x"}, {"type": "function_call_output", "call_id": "c"}],
            "message 1, field 'output'",
        ),
        ([{"type": "reasoning", "id": "r", "summary": "s"}], "field 'summary'"),
        (
            [{"role": "user", "content": [{"type": "input_text", "text": "x", ITEM: 1}]}],
            "reserved",
        ),
    ],
)
def test_bad_items_are_named(items: Any, where: str) -> None:
    with pytest.raises(FormatError, match=where.replace("[", r"\[").replace("]", r"\]")):
        from_responses(items)


def test_not_a_list() -> None:
    with pytest.raises(FormatError, match="expected a list of input items, got string"):
        from_responses("hello")  # type: ignore[arg-type]
    with pytest.raises(FormatError, match="instructions"):
        from_responses([], instructions=3)  # type: ignore[arg-type]


# -- through the warden ---------------------------------------------------------------------------
def long_run(n_calls: int, output_chars: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "TASK: make tests/test_io.py pass without editing the test."}
    ]
    for k in range(n_calls):
        items.append(
            {"type": "reasoning", "id": f"rs_{k}", "summary": [], "encrypted_content": "e"}
        )
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{k}",
                "call_id": f"call_{k}",
                "name": "bash",
                "arguments": json.dumps({"cmd": f"cat src/file_{k}.py"}),
            }
        )
        body = "\n".join(
            f"line {j} of file {k}: value = {j * k}" for j in range(output_chars // 30)
        )
        items.append({"type": "function_call_output", "call_id": f"call_{k}", "output": body})
    return items


def check_valid(items: list[dict[str, Any]]) -> None:
    """Every output has its call earlier in the list; every call has its output."""
    calls: set[str] = set()
    answered: set[str] = set()
    for i, item in enumerate(items):
        t = item.get("type", "message")
        if t in ("function_call", "custom_tool_call"):
            calls.add(item["call_id"])
        elif t in ("function_call_output", "custom_tool_call_output"):
            assert item["call_id"] in calls, f"item {i}: output {item['call_id']} without its call"
            answered.add(item["call_id"])
    assert calls == answered, f"calls without output: {sorted(calls - answered)}"


@pytest.mark.parametrize("compaction", [True, False], ids=["compaction", "window-only"])
def test_warden_keeps_a_long_responses_history_valid_and_within_the_window(
    compaction: bool,
) -> None:
    items = long_run(60, 6_000)
    before = copy.deepcopy(items)
    warden = Warden(WardenConfig.model_validate({"compaction": {"enabled": compaction}}))
    result = warden.transform(
        from_responses(items, instructions="You are a coder."), model="gpt-4o", window=16_000
    )
    instructions, out = to_responses(result.messages)
    # the instructions stay (a compaction may append a note that points at its summary)
    assert (instructions or "").startswith("You are a coder.")
    assert items == before
    assert result.tokens_before > 16_000 >= result.tokens_after
    assert out[0] == items[0]  # the task
    check_valid(out)
    assert len(out) < len(items)
    kept = [i for i in out if i.get("type") == "function_call"]
    if not compaction:
        assert out[-2:] == items[-2:]  # the newest call and its output, untouched
        reasoning = {i["id"] for i in out if i.get("type") == "reasoning"}
        for call in kept:  # a call whose reasoning was stripped names no stored id
            if "id" in call:
                assert call["id"].replace("fc_", "rs_") in reasoning
