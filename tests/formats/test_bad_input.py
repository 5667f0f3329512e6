"""Bad input gets the library's own errors, naming where; what is read can always be sent."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwarden import ConfigError, FormatError, Warden
from contextwarden._budget import Budget
from contextwarden._messages import Message, TextBlock, ToolCallBlock, user
from contextwarden.formats import (
    check_tools,
    from_anthropic,
    from_openai,
    to_anthropic,
    to_openai,
    validate_anthropic,
    validate_openai,
)
from contextwarden.formats._common import MAX_DEPTH

HALF = "\ud83d"  # the first half of 😀, as a byte-level cut leaves it
REPLACED = "\ufffd"


def nested(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = {"a": value}
    return value


def utf8(value: Any) -> bytes:
    """What a server writes: UTF-8 JSON (raises on a lone surrogate)."""
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


# -- lone surrogates -------------------------------------------------------------------------------
def test_lone_surrogates_in_openai_messages_are_replaced_everywhere() -> None:
    d: list[dict[str, Any]] = [
        {"role": "system", "content": f"be nice {HALF}"},
        {"role": "user", "content": [{"type": "text", "text": f"hi {HALF}"}], "name": f"n{HALF}"},
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": f"think {HALF}",
            "tool_calls": [
                {
                    "id": f"call{HALF}",
                    "type": "function",
                    "function": {"name": "echo", "arguments": json.dumps({"t": HALF})[:-1] + "}"},
                }
            ],
            f"x-{HALF}": {"note": [HALF]},
        },
        {"role": "tool", "tool_call_id": f"call{HALF}", "content": f"out {HALF} 😀"},
    ]
    msgs = from_openai(d)
    out = to_openai(msgs)
    raw = utf8(out)  # does not raise
    assert HALF.encode("utf-8", "surrogatepass") not in raw
    assert out[0]["content"] == f"be nice {REPLACED}"
    assert out[1]["content"][0]["text"] == f"hi {REPLACED}" and out[1]["name"] == f"n{REPLACED}"
    assert out[2]["tool_calls"][0]["id"] == f"call{REPLACED}" == out[3]["tool_call_id"]
    assert out[2][f"x-{REPLACED}"] == {"note": [REPLACED]}
    assert out[3]["content"] == f"out {REPLACED} 😀"  # a whole emoji is kept
    assert validate_openai(out) == []
    utf8(to_anthropic(msgs))
    assert d[0]["content"] == f"be nice {HALF}"  # the input is not touched


def test_lone_surrogates_in_anthropic_messages_are_replaced() -> None:
    d: list[dict[str, Any]] = [
        {"role": "user", "content": f"task {HALF}"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": f"hm {HALF}", "signature": "sig"},
                {"type": "tool_use", "id": "t1", "name": "grep", "input": {"q": HALF}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": f"{HALF}!"}],
        },
    ]
    msgs = from_anthropic(d, system=[{"type": "text", "text": f"sys {HALF}"}])
    system, out = to_anthropic(msgs)
    utf8([system, out])
    assert out[1]["content"][1]["input"] == {"q": REPLACED}
    assert out[2]["content"][0]["content"] == f"{REPLACED}!"
    assert validate_anthropic(system, out) == []
    utf8(to_openai(msgs))


def test_clean_text_is_kept_as_the_same_object() -> None:
    text = "déjà vu 😀 " * 100
    (msg,) = from_openai([{"role": "user", "content": text}])
    assert msg.content[0].text is text  # type: ignore[union-attr]


# -- nesting ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 450, 5_000])
def test_deep_values_are_refused_naming_message_and_field(levels: int) -> None:
    deep = nested(levels)
    cases: list[tuple[Any, int | None, str]] = [
        (lambda: from_openai([{"role": "user", "content": "x", "meta": deep}]), 0, "meta"),
        (
            lambda: from_openai(
                [
                    {"role": "user", "content": "hi"},
                    {"role": "user", "content": [{"type": "x", "v": deep}]},
                ]
            ),
            1,
            "content",
        ),
        (
            lambda: from_anthropic(
                [
                    {"role": "user", "content": "x"},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t", "name": "f", "input": deep}],
                    },
                ]
            ),
            1,
            "content[0].input",
        ),
        (
            lambda: from_anthropic(
                [{"role": "user", "content": "x"}],
                system=[{"type": "text", "text": "s", "cache": deep}],
            ),
            None,
            "system",
        ),
    ]
    for read, index, field in cases:
        with pytest.raises(FormatError) as info:
            read()
        assert info.value.index == index and info.value.field == field
        assert f"more than {MAX_DEPTH} levels" in str(info.value)


def test_nesting_up_to_the_limit_is_read_and_round_trips() -> None:
    d = [{"role": "user", "content": "x", "meta": nested(MAX_DEPTH - 1)}]
    assert to_openai(from_openai(d)) == d
    a = [
        {"role": "user", "content": "x"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t", "name": "f", "input": nested(MAX_DEPTH - 1)}
            ],
        },
    ]
    assert to_anthropic(from_anthropic(a)) == (None, a)


def test_deep_tool_arguments_stay_text_and_go_to_anthropic_raw() -> None:
    args = "[" * 450 + "]" * 450
    d: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": args}}
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "ok"},
    ]
    msgs = from_openai(d)
    assert to_openai(msgs) == d
    _, out = to_anthropic(msgs)
    assert out[1]["content"][0]["input"] == {"_raw": args}
    deeper = "{" + '"a":{' * 3_000 + "}" * 3_001  # too deep for json.loads itself
    msgs = [user("go"), Message("assistant", (ToolCallBlock("c", "f", deeper),))]
    _, out = to_anthropic(msgs)
    assert out[1]["content"][0]["input"] == {"_raw": deeper}
    json.dumps(out)


def test_deep_extras_of_messages_built_in_code_are_refused_on_the_way_out() -> None:
    msg = Message("user", (TextBlock("x"),), extra={"meta": nested(3_000)})
    with pytest.raises(FormatError, match="levels deep"):
        to_openai([msg])


# -- odd shapes ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("tools", "field", "words"),
    [
        (["x"], "tools[0]", "got string"),
        ([1], "tools[0]", "got int"),
        ([{"type": "function"}, None], "tools[1]", "got null"),
        ("x", "tools", "got string"),
        (5, "tools", "got int"),
        ({"name": "f"}, "tools", "got object"),
        ([{"type": "function", "function": nested(450)}], "tools[0]", "levels deep"),
    ],
)
def test_check_tools_names_the_bad_definition(tools: Any, field: str, words: str) -> None:
    with pytest.raises(FormatError) as info:
        check_tools(tools)
    assert info.value.field == field and words in str(info.value)


def test_check_tools_accepts_none_and_lists_of_objects() -> None:
    assert check_tools(None) is None
    tools = ({"type": "function", "function": {"name": "f"}},)
    assert check_tools(tools) == list(tools)


@pytest.mark.parametrize("content", [[1], [None], ["text"], [[]]])
def test_odd_content_parts_are_named(content: list[Any]) -> None:
    with pytest.raises(FormatError) as info:
        from_openai([{"role": "user", "content": content}])
    assert (info.value.index, info.value.field) == (0, "content[0]")
    with pytest.raises(FormatError) as info:
        from_anthropic([{"role": "user", "content": content}])
    assert (info.value.index, info.value.field) == (0, "content[0]")


@pytest.mark.parametrize(("model", "window"), [(5, 1_000), (["gpt-4o"], 1_000), ("gpt-4o", "x")])
def test_model_and_window_of_the_wrong_type_are_config_errors(model: Any, window: Any) -> None:
    with pytest.raises(ConfigError):
        Budget.for_model(model, window)
    with pytest.raises(ConfigError):
        Warden().transform_openai([{"role": "user", "content": "hi"}], model=model, window=window)


# -- property: reading raises FormatError or gives something sendable ------------------------------
_KEYS = st.sampled_from(
    ["role", "content", "tool_calls", "tool_call_id", "name", "type", "text", "id", "function"]
    + ["arguments", "image_url", "url", "input", "tool_use_id", "thinking", "signature", "x"]
)
_WORDS = st.sampled_from(
    ["user", "assistant", "tool", "system", "function", "text", "image_url", "tool_use"]
    + ["tool_result", "thinking", "image", "document", "", "{}", '{"a": [1]}', HALF]
)
_TEXT = st.text(
    alphabet=st.characters(min_codepoint=0, max_codepoint=0x1F64F, exclude_categories=()),
    max_size=6,
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _WORDS | _TEXT,
    lambda c: st.lists(c, max_size=4) | st.dictionaries(_KEYS, c, max_size=5),
    max_leaves=30,
)


@settings(deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.dictionaries(_KEYS, _JSON, max_size=6), max_size=5), _JSON)
def test_reading_anything_raises_format_error_or_gives_sendable_output(
    messages: list[Any], system: Any
) -> None:
    for read in (lambda: from_openai(messages), lambda: from_anthropic(messages, system=system)):
        try:
            msgs = read()
        except FormatError:
            continue
        for write in (to_openai, to_anthropic):
            try:
                out = write(msgs)
            except FormatError:
                continue
            utf8(out)
