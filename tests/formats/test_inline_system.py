"""System and developer messages in the middle of a conversation.

Claude Code sends ``role: "system"`` messages inside an Anthropic request's ``messages`` (the
mid-conversation system beta); Codex and others send ``developer`` / ``system`` items anywhere in
a Responses ``input`` or a chat ``messages`` list. They are read at their place, written back at
the same place in the same spelling, never moved into the system prompt, and the warden keeps
them (never dropped, masked or summarised away).
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from contextwarden import TextBlock, Warden, WardenConfig, user
from contextwarden.formats import (
    from_anthropic,
    from_openai,
    from_responses,
    to_anthropic,
    to_openai,
    to_responses,
    validate_anthropic,
    validate_openai,
)

from .providers import anthropic_requests

ENV = "# Environment\n - Primary working directory: /tmp/w\n - Platform: linux"


def _claude_code_like(steps: int, big: int = 0) -> list[dict[str, Any]]:
    """A Claude Code shaped history: the task, a system turn at index 1, tool steps, and a
    system turn every few messages (between a tool result and the next assistant turn)."""
    msgs: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<system-reminder>\nbe careful\n</system-reminder>"},
                {"type": "text", "text": "cw-task: count the rows"},
            ],
        },
        {"role": "system", "content": ENV},
    ]
    for k in range(steps):
        msgs.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": f"step {k}", "signature": "sig"},
                    {
                        "type": "tool_use",
                        "id": f"toolu_{k}",
                        "name": "Bash",
                        "input": {"command": f"cat f{k}"},
                    },
                ],
            }
        )
        msgs.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"toolu_{k}",
                        "content": f"out {k} " + "x" * big,
                    }
                ],
            }
        )
        if k % 5 == 4:
            msgs.append(
                {
                    "role": "system",
                    "content": [
                        {
                            "type": "text",
                            "text": f"reminder {k}: todo list is empty",
                            "cache_control": {"type": "ephemeral"},
                        }
                    ],
                }
            )
    return msgs


def test_claude_code_system_turns_round_trip_in_place() -> None:
    d = _claude_code_like(12)
    system = [{"type": "text", "text": "You are Claude Code."}]
    before = copy.deepcopy(d)
    canon = from_anthropic(d, system=system)
    assert canon[0].role == "system" and canon[0].text == "You are Claude Code."
    assert canon[2].role == "system" and canon[2].text == ENV  # index 1 of messages, in place
    inline = [m.text for m in canon[1:] if m.role == "system"]
    assert inline == [ENV, "reminder 4: todo list is empty", "reminder 9: todo list is empty"]
    assert to_anthropic(canon) == (system, d)
    assert d == before
    assert validate_anthropic(system, d) == []


@st.composite
def _with_inline_system(draw: Any) -> tuple[Any, list[dict[str, Any]]]:
    """A valid request with system messages inserted where no tool call waits for its result."""
    system, msgs = draw(anthropic_requests(exotic=True))
    out: list[dict[str, Any]] = []
    for i, m in enumerate(msgs):
        prev = msgs[i - 1] if i else None
        waiting = (
            prev is not None
            and prev["role"] == "assistant"
            and isinstance(prev.get("content"), list)
            and any(b.get("type") == "tool_use" for b in prev["content"])
        )
        if i and not waiting and draw(st.booleans()):
            text = draw(st.text("abc xyz\n", min_size=1, max_size=12))
            if draw(st.booleans()):
                out.append({"role": "system", "content": text})
            else:
                out.append({"role": "system", "content": [{"type": "text", "text": text}]})
        out.append(m)
    return system, out


@given(_with_inline_system())
def test_inline_system_round_trip_is_exact(req: tuple[Any, list[dict[str, Any]]]) -> None:
    system, d = req
    before = copy.deepcopy(d)
    assert validate_anthropic(system, d) == []
    assert to_anthropic(from_anthropic(d, system=system)) == (system, d)
    assert d == before


def test_validator_rules_for_inline_system() -> None:
    ok = [{"role": "user", "content": "go"}, {"role": "system", "content": "note"}]
    assert validate_anthropic(None, ok) == []
    # outside the alternation: user, system, user is two user turns in a row
    assert any(
        "two user messages" in p
        for p in validate_anthropic(None, [*ok, {"role": "user", "content": "again"}])
    )
    empty = [{"role": "user", "content": "go"}, {"role": "system", "content": ""}]
    assert "message 1 (system): empty content" in validate_anthropic(None, empty)
    image = [
        {"role": "user", "content": "go"},
        {"role": "system", "content": [{"type": "image", "source": {}}]},
    ]
    assert any("must be text" in p for p in validate_anthropic(None, image))
    between = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}],
        },
        {"role": "system", "content": "note"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "r"}]},
    ]
    assert any("followed by a system message" in p for p in validate_anthropic(None, between))


def test_inline_system_converted_to_openai_stays_in_place() -> None:
    d = _claude_code_like(2)
    out = to_openai(from_anthropic(d))
    assert [m["role"] for m in out][:2] == ["user", "system"]
    assert out[1]["content"] == ENV
    assert validate_openai(out) == []


def test_openai_developer_messages_anywhere_round_trip() -> None:
    d: list[dict[str, Any]] = [
        {"role": "developer", "content": "rules"},
        {"role": "user", "content": "cw-task: go"},
        {"role": "developer", "content": [{"type": "text", "text": "mode: plan"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "system", "content": "late system note"},
        {"role": "assistant", "content": "done"},
    ]
    canon = from_openai(d)
    assert [m.role for m in canon] == [
        "system",
        "user",
        "system",
        "assistant",
        "tool",
        "system",
        "assistant",
    ]
    assert to_openai(canon) == d


def test_responses_developer_and_system_items_anywhere_round_trip() -> None:
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "a"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<env/>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "task"}]},
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"role": "developer", "content": "switched to full access"},
        {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "s"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "more"}]},
    ]
    instructions = "You are Codex."
    canon = from_responses(items, instructions=instructions)
    assert [m.role for m in canon].count("system") == 4  # instructions + three items
    assert to_responses(canon) == (instructions, items)


def _keeps_inline_system(window: int) -> None:
    d = _claude_code_like(30, big=3000)
    system = "You are Claude Code."
    w = Warden(WardenConfig())
    new_system, out, result = w.transform_anthropic(
        copy.deepcopy(d), system=system, model="claude-sonnet-4-5", window=window
    )
    assert result.tokens_after < result.tokens_before  # the history was reduced
    assert validate_anthropic(new_system, out) == []
    want = [m["content"] for m in d if m["role"] == "system"]
    got = [m["content"] for m in out if m["role"] == "system"]
    assert got == want  # every one kept, verbatim, in order, as a message
    assert out[1] == {"role": "system", "content": ENV}  # and the first one in its place


def test_warden_keeps_inline_system_messages_through_reduction() -> None:
    _keeps_inline_system(window=60_000)


def test_warden_keeps_inline_system_messages_through_compaction() -> None:
    _keeps_inline_system(window=20_000)


def test_text_block_of_inline_system_keeps_cache_control() -> None:
    d = _claude_code_like(5)
    canon = from_anthropic(d)
    last = [m for m in canon if m.role == "system"][-1]
    block = last.content[0]
    assert isinstance(block, TextBlock) and block.extra["cache_control"] == {"type": "ephemeral"}


def test_converted_message_after_inline_system_joins_the_turn_before() -> None:
    d = _claude_code_like(1)[:2]  # the task, then the environment system message
    canon = from_anthropic(d)
    note = user("[summary of earlier steps]")
    _, out = to_anthropic([*canon, note, *from_anthropic(_claude_code_like(1)[2:4])])
    assert [m["role"] for m in out] == ["user", "system", "assistant", "user"]
    assert out[0]["content"][-1] == {"type": "text", "text": "[summary of earlier steps]"}
    assert out[1] == {"role": "system", "content": ENV}
    assert validate_anthropic(None, out) == []


def _aider_like(turns: int) -> list[dict[str, Any]]:
    """An aider shaped chat: its system prompt, a few-shot example, the history of turns, the
    files in the chat, the current turn, and its system reminder at the very end."""
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "Act as an expert software developer."},
        {"role": "user", "content": "Change the greeting to be more casual"},
        {"role": "assistant", "content": "Ok, I will:\n\nhello.py\n```\nprint('hey')\n```"},
        {"role": "user", "content": "I switched to a new code base."},
        {"role": "assistant", "content": "Ok."},
        {"role": "user", "content": "cw-task: fill the notes files"},
    ]
    for k in range(turns):
        msgs.append(
            {"role": "assistant", "content": f"notes_{k}.txt\n```\n" + "x " * 2000 + "\n```"}
        )
        msgs.append({"role": "user", "content": f"Turn {k + 1}: carry on with the next file."})
    msgs[-1:-1] = [
        {"role": "user", "content": "I have *added these files to the chat*\n" + "y " * 3000},
        {"role": "assistant", "content": "Ok, any changes I propose will be to those files."},
    ]
    msgs.append({"role": "system", "content": "To suggest changes you MUST return whole files."})
    return msgs


def test_trailing_system_message_does_not_cost_the_current_turn() -> None:
    d = _aider_like(12)
    out, result = Warden().transform_openai(copy.deepcopy(d), model="gpt-4o-mini", window=8_000)
    assert result.tokens_after < result.tokens_before
    assert out[-1] == d[-1]  # the reminder stays last
    assert d[-2] in out  # and the turn it follows is still there


def test_warden_keeps_responses_developer_items_through_compaction() -> None:
    """Codex's shape: developer items, the environment, the task, tool steps, and a developer
    item mid-way (a permission change): after compaction every developer item is still there,
    in its order, spelled as it was."""
    items: list[dict[str, Any]] = [
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "rules"}],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<env/>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "cw-task"}]},
    ]
    for k in range(30):
        items.append(
            {"type": "function_call", "call_id": f"c{k}", "name": "shell", "arguments": "{}"}
        )
        items.append({"type": "function_call_output", "call_id": f"c{k}", "output": "z " * 3000})
        if k == 10:
            items.append(
                {
                    "type": "message",
                    "role": "developer",
                    "content": [{"type": "input_text", "text": "approval mode changed"}],
                }
            )
    result = Warden().transform(
        from_responses(copy.deepcopy(items)), model="gpt-5-codex", window=30_000
    )
    assert result.tokens_after < result.tokens_before
    _, out = to_responses(list(result.messages))
    developer = [it for it in items if it.get("role") == "developer"]
    assert [it for it in out if it.get("role") == "developer"] == developer
