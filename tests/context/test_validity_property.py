"""Valid or an error, always: random broken histories, every window, three wire formats.

The checkers are the ones that judge the real clients' requests (``tests/clients/checks.py``),
written from the providers' rules, not from the repair code: an OpenAI chat request answers
every tool call right after the assistant message that made it and has no result without its
call; an Anthropic request answers each ``tool_use`` in the next user message and holds no
``tool_result`` for a call that is not in the message before it; a Responses input has an output
for every call and a call for every output. A request the warden cannot bring
within the window raises :class:`~contextwarden.ContextOverflowError` instead.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parents[1] / "layers"))
from clients.checks import anthropic_problems, openai_problems, responses_problems  # noqa: E402
from histories import CharCounter  # noqa: E402
from test_repair import broken  # noqa: E402

from contextwarden import ContextOverflowError, Warden  # noqa: E402
from contextwarden._messages import Message, ToolCallBlock, assistant, tool_result  # noqa: E402
from contextwarden.formats import to_anthropic, to_openai  # noqa: E402
from contextwarden.formats.responses import to_responses  # noqa: E402


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


_SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


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
        assert openai_problems({"messages": to_openai(sent)}) == []
        system, anthropic = to_anthropic(sent)
        assert anthropic_problems({"system": system, "messages": anthropic}) == []
        _, items = to_responses(sent)
        assert responses_problems({"input": items}) == []


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
    assert openai_problems({"messages": request}) == []
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
    system, out, _ = Warden().transform_anthropic(
        messages, model="claude-sonnet-4-5", window=30_000
    )
    assert anthropic_problems({"system": system, "messages": out}) == []
