"""Anthropic cache breakpoints: never over 4, the client's own kept, inputs untouched, the request
still valid for the API, idempotent; and where the added ones go."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextwarden import FormatError
from contextwarden.formats import (
    add_cache_breakpoints,
    count_cache_breakpoints,
    validate_anthropic,
)

from .providers import anthropic_requests

EPHEMERAL = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}
# The block types Anthropic's prompt-caching guide lets carry cache_control (tool definitions and
# system text blocks aside); thinking, redacted_thinking and empty text may not.
ALLOWED = {"text", "image", "document", "tool_use", "tool_result"}


@st.composite
def tool_lists(draw: Any) -> list[dict[str, Any]] | None:
    if draw(st.booleans()):
        return None
    tools: list[dict[str, Any]] = [
        {
            "name": f"tool_{i}",
            "description": "does a thing",
            "input_schema": {"type": "object", "properties": {}},
        }
        for i in range(draw(st.integers(0, 3)))
    ]
    for tool in tools:
        if draw(st.integers(0, 4)) == 0:
            tool["cache_control"] = dict(EPHEMERAL)
    return tools


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _places(system: Any, messages: list[dict[str, Any]], tools: Any) -> list[tuple[str, Any]]:
    """Every (place, block-like) of the request, in prefix order, nested tool_result blocks too."""
    out: list[tuple[str, Any]] = [(f"tools[{i}]", t) for i, t in enumerate(tools or [])]
    if isinstance(system, list):
        out += [(f"system[{j}]", b) for j, b in enumerate(system)]
    for i, m in enumerate(messages):
        for j, b in enumerate(_blocks(m)):
            if b.get("type") == "tool_result" and isinstance(b.get("content"), list):
                out += [(f"m{i}[{j}][{k}]", s) for k, s in enumerate(b["content"])]
            out.append((f"m{i}[{j}]", b))
    return out


def api_problems(system: Any, messages: list[dict[str, Any]], tools: Any) -> list[str]:
    """The API's cache_control rules, checked independently of the code under test."""
    problems = []
    marked = [(p, b) for p, b in _places(system, messages, tools) if b.get("cache_control")]
    if len(marked) > 4:
        problems.append(f"{len(marked)} breakpoints")
    seen_short = False
    for place, b in marked:
        control = b["cache_control"]
        if control.get("type") != "ephemeral":
            problems.append(f"{place}: type {control.get('type')!r}")
        if place.startswith("m") and place.count("[") == 1:
            if b.get("type") not in ALLOWED:
                problems.append(f"{place}: on a {b.get('type')} block")
            if b.get("type") == "text" and not b.get("text"):
                problems.append(f"{place}: on an empty text block")
        if control.get("ttl") == "1h" and seen_short:
            problems.append(f"{place}: a 1h breakpoint after a 5m one")
        seen_short = seen_short or control.get("ttl") in (None, "5m")
    return problems


def _without_control(block: Any) -> Any:
    return {k: v for k, v in block.items() if k != "cache_control"}


def assert_only_breakpoints_added(
    before: tuple[Any, list[dict[str, Any]], Any], after: tuple[Any, list[dict[str, Any]], Any]
) -> None:
    """``after`` is ``before`` plus cache_control keys on some blocks (strings may have become one
    text block), and every cache_control of ``before`` is still there, unchanged."""
    (s0, m0, t0), (s1, m1, t1) = before, after
    assert (t0 is None) == (t1 is None)
    for a, b in zip(t0 or [], t1 or [], strict=True):
        assert _without_control(a) == _without_control(b)
        if "cache_control" in a:
            assert b["cache_control"] == a["cache_control"]
    if isinstance(s0, str) and isinstance(s1, list):
        s0 = [{"type": "text", "text": s0}]
    assert (s0 is None) == (s1 is None) and isinstance(s0, str) == isinstance(s1, str)
    if isinstance(s0, list):
        for a, b in zip(s0, s1, strict=True):
            assert _without_control(a) == _without_control(b)
            if "cache_control" in a:
                assert b["cache_control"] == a["cache_control"]
    assert len(m0) == len(m1)
    for x, y in zip(m0, m1, strict=True):
        assert {k: v for k, v in x.items() if k != "content"} == {
            k: v for k, v in y.items() if k != "content"
        }
        if isinstance(y["content"], str):
            assert y["content"] == x["content"]
            continue
        for a, b in zip(_blocks(x), y["content"], strict=True):
            assert _without_control(a) == _without_control(b)  # nested content unchanged too
            if "cache_control" in a:
                assert b["cache_control"] == a["cache_control"]


def _last_cacheable(messages: list[dict[str, Any]], start: int) -> tuple[int, int] | None:
    for i in range(start, -1, -1):
        blocks = _blocks(messages[i])
        for j in range(len(blocks) - 1, -1, -1):
            b = blocks[j]
            if b["type"] in ALLOWED and (b["type"] != "text" or b["text"]):
                return i, j
    return None


def _marked(messages: list[dict[str, Any]], at: tuple[int, int]) -> bool:
    return "cache_control" in _blocks(messages[at[0]])[at[1]]


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


@st.composite
def client_requests(draw: Any) -> tuple[Any, list[dict[str, Any]], list[dict[str, Any]] | None]:
    """An Anthropic request with the client's own breakpoints: as the exotic generator draws them
    (anywhere, sometimes more than 4), or 0-4 of them on chosen blocks, the first ones sometimes
    with the one-hour TTL (which must come first)."""
    system, messages = draw(st.booleans().flatmap(lambda exotic: anthropic_requests(exotic=exotic)))
    tools = draw(tool_lists())
    if draw(st.booleans()):
        return system, messages, tools
    system, messages, tools = _strip(system), _strip(messages), _strip(tools)
    attached = {id(b) for m in messages if isinstance(m["content"], list) for b in m["content"]}
    attached |= {id(b) for b in (system if isinstance(system, list) else [])}
    attached |= {id(t) for t in tools or []}
    attached |= {
        id(sub)
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result" and isinstance(b.get("content"), list)
        for sub in b["content"]
    }
    places = [
        b
        for p, b in _places(system, messages, tools)
        if id(b) in attached
        and (b.get("type") in ALLOWED or p.startswith("tools"))
        and (b.get("type") != "text" or b.get("text"))
    ]
    if not places:
        return system, messages, tools
    k = draw(st.integers(0, min(4, len(places))))
    chosen = draw(st.lists(st.integers(0, len(places) - 1), min_size=k, max_size=k, unique=True))
    hours = draw(st.integers(0, k))
    for n, index in enumerate(sorted(chosen)):
        places[index]["cache_control"] = dict(HOUR if n < hours else EPHEMERAL)
    return system, messages, tools


@given(request=client_requests(), data=st.data())
def test_breakpoint_invariants(
    request: tuple[Any, list[dict[str, Any]], list[dict[str, Any]] | None], data: Any
) -> None:
    system, messages, tools = request
    stable_end = data.draw(st.none() | st.integers(0, len(messages)), label="stable_end")
    limit = data.draw(st.integers(0, 4), label="max_breakpoints")
    frozen = copy.deepcopy((system, messages, tools))
    before = count_cache_breakpoints(system, messages, tools)

    out = add_cache_breakpoints(
        system, messages, tools=tools, stable_end=stable_end, max_breakpoints=limit
    )

    assert (system, messages, tools) == frozen  # inputs not mutated
    after = count_cache_breakpoints(*out)
    assert after == before if before >= limit else before <= after <= limit
    assert_only_breakpoints_added(frozen, out)
    assert validate_anthropic(out[0], out[1]) == []
    if before <= 4:  # a client may send more than 4 (kept as they are: the API will say no)
        assert api_problems(*out) == []
    assert (
        add_cache_breakpoints(
            out[0], out[1], tools=out[2], stable_end=stable_end, max_breakpoints=limit
        )
        == out
    )  # idempotent

    newest = _last_cacheable(messages, len(messages) - 1)
    stable = _last_cacheable(messages, stable_end - 1) if stable_end else None

    # Where they go, exactly: the targets the client had not marked, in priority order, while there is
    # room (newest, stable end, then the system's last text block or the last tool).
    def is_marked(request: tuple[Any, list[dict[str, Any]], Any], target: Any) -> bool:
        sys_, msgs, tls = request
        if target == "system":
            if isinstance(sys_, str):
                return False
            j = max(j for j, b in enumerate(sys_) if b["text"])
            return "cache_control" in sys_[j]
        if target == "tool":
            return "cache_control" in tls[-1]
        return _marked(msgs, target)

    targets: list[Any] = [at for at in dict.fromkeys((newest, stable)) if at is not None]
    if (isinstance(system, str) and system) or (
        isinstance(system, list) and any(b["text"] for b in system)
    ):
        targets.append("system")
    elif not system and tools:
        targets.append("tool")
    room = max(limit - before, 0)
    for target in targets:
        expected = is_marked(frozen, target) or room > 0
        if not is_marked(frozen, target) and room > 0:
            room -= 1
        assert is_marked(out, target) == expected, target
    assert after == before + max(limit - before, 0) - room  # one per target it marked


def test_placement_and_string_conversion() -> None:
    system = "You are a coding agent."
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "fix the bug"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "reading"},
                {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a.py"}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "now I see"},
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            ],
        },
    ]
    s, m, t = add_cache_breakpoints(system, messages, stable_end=2)
    assert t is None
    assert s == [{"type": "text", "text": system, "cache_control": EPHEMERAL}]
    # the newest: its last cacheable block (thinking may not carry one)
    assert m[3]["content"][0]["cache_control"] == EPHEMERAL
    assert "cache_control" not in m[3]["content"][1]
    # the end of the stable prefix: message 1's tool_use
    assert m[1]["content"][1]["cache_control"] == EPHEMERAL
    assert m[0] is messages[0] and m[2] is messages[2]  # untouched messages are shared
    assert count_cache_breakpoints(s, m, t) == 3

    # a stable prefix ending at the newest adds nothing more; neither does None or 0
    for end in (4, None, 0):
        assert (
            count_cache_breakpoints(*add_cache_breakpoints(system, messages, stable_end=end)) == 2
        )


def test_no_system_marks_the_last_tool_and_a_user_string_becomes_a_block() -> None:
    tools = [{"name": "a", "input_schema": {}}, {"name": "b", "input_schema": {}}]
    s, m, t = add_cache_breakpoints(None, [{"role": "user", "content": "hi"}], tools=tools)
    assert s is None
    assert m == [
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": EPHEMERAL}]}
    ]
    assert t == [tools[0], {**tools[1], "cache_control": EPHEMERAL}]
    assert t[0] is tools[0] and "cache_control" not in tools[1]


def test_priority_when_the_client_left_one_slot() -> None:
    system = [
        {"type": "text", "text": "a", "cache_control": EPHEMERAL},
        {"type": "text", "text": "b", "cache_control": EPHEMERAL},
    ]
    tools = [{"name": "x", "input_schema": {}, "cache_control": EPHEMERAL}]
    messages = [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "two"},
        {"role": "user", "content": "three"},
    ]
    s, m, t = add_cache_breakpoints(system, messages, tools=tools, stable_end=2)
    assert (s, t) == (system, tools)
    assert m[:2] == messages[:2]  # no room for the stable end
    assert m[2]["content"][0]["cache_control"] == EPHEMERAL  # the newest wins the last slot
    assert count_cache_breakpoints(s, m, t) == 4


def test_a_full_or_overfull_request_is_left_alone() -> None:
    blocks = [{"type": "text", "text": str(i), "cache_control": EPHEMERAL} for i in range(5)]
    messages = [{"role": "user", "content": blocks}]
    s, m, _ = add_cache_breakpoints("sys", messages)
    assert (s, m) == ("sys", messages)
    assert count_cache_breakpoints(s, m) == 5
    assert add_cache_breakpoints("sys", messages[:1], max_breakpoints=0)[:2] == ("sys", messages)


def test_added_breakpoints_before_a_one_hour_one_take_its_ttl() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "two"},
        {"role": "user", "content": [{"type": "text", "text": "three", "cache_control": HOUR}]},
    ]
    s, m, _ = add_cache_breakpoints("sys", messages, stable_end=2)
    assert s[0]["cache_control"] == HOUR
    assert m[1]["content"][0]["cache_control"] == HOUR
    assert api_problems(s, m, None) == []
    # after a 1h breakpoint, the default TTL is fine
    messages = [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": [{"type": "text", "text": "two", "cache_control": HOUR}]},
        {"role": "user", "content": "three"},
    ]
    s, m, _ = add_cache_breakpoints("sys", messages)
    assert m[2]["content"][0]["cache_control"] == EPHEMERAL
    assert s[0]["cache_control"] == HOUR


def test_a_breakpoint_inside_a_tool_result_counts() -> None:
    inner = [{"type": "text", "text": "out", "cache_control": EPHEMERAL}]
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t", "content": inner}],
        },
    ]
    assert count_cache_breakpoints(None, messages) == 1
    _, m, _ = add_cache_breakpoints(None, messages, max_breakpoints=2)
    assert m[2]["content"][0]["cache_control"] == EPHEMERAL
    assert m[2]["content"][0]["content"] == inner
    assert count_cache_breakpoints(None, m) == 2


def test_empty_newest_falls_back_to_the_message_before() -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}]
    _, m, _ = add_cache_breakpoints(None, messages)
    assert m[1] == {"role": "assistant", "content": ""}  # an empty prefill cannot carry one
    assert m[0]["content"] == [{"type": "text", "text": "hi", "cache_control": EPHEMERAL}]
    assert add_cache_breakpoints("", [{"role": "user", "content": ""}]) == (
        "",
        [{"role": "user", "content": ""}],
        None,
    )


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (
            (None, [{"role": "user", "content": "x"}]),
            {"max_breakpoints": 5},
            ValueError,
            "between 0 and 4",
        ),
        ((None, [{"role": "user", "content": "x"}]), {"stable_end": 2}, ValueError, "stable_end"),
        ((None, [{"role": "user", "content": 3}]), {}, FormatError, "message 0, field 'content'"),
        (
            (None, [{"role": "user", "content": "x"}, "oops"]),
            {},
            FormatError,
            "message 1: expected an object",
        ),
        ((None, [{"role": "user", "content": ["x"]}]), {}, FormatError, r"content\[0\]"),
        ((7, [{"role": "user", "content": "x"}]), {}, FormatError, "system: expected a string"),
        ((None, [{"role": "user", "content": "x"}]), {"tools": ["t"]}, FormatError, r"tools\[0\]"),
    ],
)
def test_bad_input_is_named(args: Any, kwargs: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        add_cache_breakpoints(*args, **kwargs)


def test_the_docs_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The Python blocks of docs/proxy.md's prompt-caching section run as written."""
    docs = Path(__file__).resolve().parents[2] / "docs" / "proxy.md"
    section = docs.read_text(encoding="utf-8").split("## Anthropic prompt caching", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.DOTALL)
    assert blocks
    for code in blocks:
        exec(compile(code, str(docs), "exec"), {"__name__": "__docs__"})
    assert capsys.readouterr().out.split()[0] == "3"


def test_a_target_the_client_marked_costs_no_slot() -> None:
    messages = [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "two"},
        {"role": "user", "content": [{"type": "text", "text": "three", "cache_control": HOUR}]},
    ]
    s, m, _ = add_cache_breakpoints("sys", messages, stable_end=2, max_breakpoints=2)
    assert m[2] is messages[2]  # the client's own, untouched (its 1h TTL too)
    assert m[1]["content"][0]["cache_control"] == HOUR  # the one free slot: the stable end
    assert s == "sys"
