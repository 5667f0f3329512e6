"""Valid or an error, always: random broken histories, every window, three wire formats.

The checkers here are written from the providers' rules, not from the repair code: an OpenAI
chat request answers every tool call right after the assistant message that made it and has no
result without its call; an Anthropic request answers each ``tool_use`` in the next user message
and holds no ``tool_result`` for a call that is not in the message before it; a Responses input
has an output for every call and a call for every output. A request the warden cannot bring
within the window raises :class:`~contextwarden.ContextOverflowError` instead.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parents[1] / "layers"))
from histories import CharCounter  # noqa: E402
from test_repair import broken  # noqa: E402

from contextwarden import ContextOverflowError, Warden  # noqa: E402
from contextwarden._messages import Message, ToolCallBlock, assistant, tool_result  # noqa: E402
from contextwarden.formats import to_anthropic, to_openai  # noqa: E402
from contextwarden.formats.responses import to_responses  # noqa: E402

Msg = dict[str, Any]


def openai_problems(messages: list[Msg]) -> list[str]:
    out: list[str] = []
    open_ids: set[str] = set()
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "tool":
            cid = m.get("tool_call_id")
            if cid not in open_ids:
                out.append(f"{i}: result for {cid!r} with no call right before it")
            open_ids.discard(cid)
            continue
        if open_ids:
            out.append(f"{i}: {role} message before calls {sorted(open_ids)} were answered")
            open_ids = set()
        calls = m.get("tool_calls") or []
        if role == "assistant" and calls:
            open_ids = {c["id"] for c in calls}
            if len(open_ids) != len(calls):
                out.append(f"{i}: duplicate call ids")
        elif not m.get("content"):
            out.append(f"{i}: {role} message with no content")
    if open_ids:
        out.append(f"end: calls {sorted(open_ids)} never answered")
    return out


def anthropic_problems(messages: list[Msg]) -> list[str]:
    out: list[str] = []
    if messages and messages[0]["role"] != "user":
        out.append("first message is not a user message")
    asked: set[str] = set()
    for i, m in enumerate(messages):
        blocks = (
            m["content"]
            if isinstance(m["content"], list)
            else [{"type": "text", "text": m["content"]}]
        )
        if not blocks:
            out.append(f"{i}: empty content")
        answered = {b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"}
        if m["role"] == "user":
            if answered - asked:
                out.append(
                    f"{i}: results for {sorted(answered - asked)} not asked in message {i - 1}"
                )
            if asked - answered:
                out.append(f"{i}: calls {sorted(asked - answered)} of message {i - 1} not answered")
            asked = set()
        elif m["role"] == "assistant":
            if asked:
                out.append(f"{i}: calls {sorted(asked)} of message {i - 1} not answered")
            asked = {b["id"] for b in blocks if b.get("type") == "tool_use"}
        for b in blocks:
            if b.get("type") == "text" and not b.get("text"):
                out.append(f"{i}: empty text block")
        if i and messages[i - 1]["role"] == m["role"]:
            out.append(f"{i}: two {m['role']} messages in a row")
    if asked:
        out.append(f"end: calls {sorted(asked)} never answered")
    return out


def responses_problems(items: list[Msg]) -> list[str]:
    calls = [
        it.get("call_id") for it in items if it.get("type") in ("function_call", "custom_tool_call")
    ]
    outputs = [
        it.get("call_id")
        for it in items
        if it.get("type") in ("function_call_output", "custom_tool_call_output")
    ]
    out = [f"output for {c!r} with no call" for c in outputs if c not in calls]
    out += [f"call {c!r} with no output" for c in calls if c not in outputs]
    seen: set[str] = set()
    for it in items:  # an output comes after its call
        if it.get("type") in ("function_call", "custom_tool_call"):
            seen.add(it.get("call_id"))
        elif (
            it.get("type") in ("function_call_output", "custom_tool_call_output")
            and it.get("call_id") not in seen
        ):
            out.append(f"output for {it.get('call_id')!r} before its call")
    return out


@st.composite
def with_huge_parts(draw: st.DrawFn) -> list[Message]:
    """A broken history, sometimes ending with a call whose arguments alone fill a window (the
    case the issue found), sometimes holding a huge result."""
    msgs = draw(broken())
    kind = draw(st.sampled_from(["none", "huge_call", "huge_result"]))
    if kind == "huge_call":
        args = json.dumps({"cmd": "x" * draw(st.sampled_from([4_000, 40_000, 120_000]))})
        msgs.append(
            assistant(
                "",
                tool_calls=[ToolCallBlock("huge", "sh", args), ToolCallBlock("small", "sh", "{}")],
            )
        )
    elif kind == "huge_result":
        msgs.append(assistant("", tool_calls=[ToolCallBlock("big", "sh", "{}")]))
        msgs.append(tool_result("big", "y" * draw(st.sampled_from([20_000, 120_000]))))
    return msgs


_SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(
    with_huge_parts(),
    st.sampled_from([1_500, 3_000, 8_000, 30_000]),
    st.lists(st.integers(1, 40), max_size=3),
)
def test_every_request_is_valid_for_every_format_or_an_error(
    msgs: list[Message], window: int, cuts: list[int]
) -> None:
    warden = Warden(counter=CharCounter())
    for k in sorted({min(c, len(msgs)) for c in cuts} | {len(msgs)}):
        try:
            result = warden.transform(msgs[:k], model="gpt-4o", window=window)
        except ContextOverflowError:
            continue
        sent = list(result.messages)
        if not any(m.role != "system" for m in sent):
            continue
        assert openai_problems(to_openai(sent)) == []
        _, anthropic = to_anthropic(sent)
        assert anthropic_problems(anthropic) == []
        _, items = to_responses(sent)
        assert responses_problems(items) == []


def test_the_two_histories_the_audit_found() -> None:
    """A repeated call id then a huge call at a 3k window; an Anthropic turn with two calls
    split over two messages, one answered, then a huge call, at 30k."""
    big = json.dumps({"cmd": "x" * 40_000})
    chat = [
        {"role": "user", "content": "task"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "A", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "A", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "A", "content": "out"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "B", "type": "function", "function": {"name": "sh", "arguments": big}},
                {"id": "C", "type": "function", "function": {"name": "sh", "arguments": "{}"}},
            ],
        },
    ]
    request, _ = Warden().transform_openai(chat, model="gpt-4o", window=3_000)
    assert openai_problems(request) == []
    messages = [
        {"role": "user", "content": "task"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "X", "name": "sh", "input": {}}],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "Y", "name": "sh", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "Y", "content": "ok"},
                {"type": "text", "text": "go on"},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "P", "name": "sh", "input": {"cmd": "y" * 200_000}}
            ],
        },
    ]
    _, out, _ = Warden().transform_anthropic(messages, model="claude-sonnet-4-5", window=30_000)
    assert anthropic_problems(out) == []
