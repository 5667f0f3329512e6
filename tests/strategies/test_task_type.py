"""Task-type detection from tool names, arguments and the shape of the conversation."""

from __future__ import annotations

import json

import pytest

from contextwarden import Message
from contextwarden.formats import from_openai
from contextwarden.strategies import TASK_TYPES, detect_task_type
from contextwarden.testing import ConversationBuilder


def calls(*names: str, args: dict[str, str] | None = None) -> list[Message]:
    b = ConversationBuilder().system("sys").user("task")
    for name in names:
        b.tool_loop(name, args or {"q": "x"}, "result")
    return b.build()


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        (calls("bash", "bash", "str_replace_editor", "bash"), "code"),
        (calls("Read", "Grep", "Edit", "Bash", "Read", "Glob"), "code"),  # reading around edits
        (calls("apply_patch", "git"), "code"),
        (calls("web_search", "fetch_url", "read_file", "web_search"), "analysis"),
        (calls("sql_query", "query", "search"), "analysis"),
        (calls("web_search", "web_search", "bash", "write_file"), "mixed"),
        (
            ConversationBuilder()
            .system("s")
            .user("hi")
            .assistant("hello")
            .user("how?")
            .assistant("so")
            .build(),
            "conversation",
        ),
        (ConversationBuilder().system("s").user("just a task").build(), "unknown"),
        ([], "unknown"),
    ],
)
def test_detects(history: list[Message], expected: str) -> None:
    assert detect_task_type(history) == expected
    assert expected in TASK_TYPES


def test_shell_commands_that_query_count_as_research() -> None:
    hist = calls("bash", "bash", "bash", args={"command": "psql -c 'select 1'"})
    assert detect_task_type(hist) == "analysis"


def test_a_chat_with_a_rare_tool_call_is_conversation() -> None:
    b = ConversationBuilder().system("s").user("task")
    for i in range(8):
        b.user(f"question {i}").assistant(f"answer {i}")
    b.tool_loop("web_search", {"q": "x"}, "r")
    assert detect_task_type(b.build()) == "conversation"


def test_real_mini_swe_agent_runs_are_code(shared_data: object) -> None:
    from pathlib import Path

    assert isinstance(shared_data, Path)
    for path in sorted((shared_data / "mini-swe-agent").glob("*.json"))[:3]:
        data = json.loads(path.read_text())
        msgs = [
            {k: v for k, v in m.items() if k in ("role", "content", "tool_calls", "tool_call_id")}
            for m in data["messages"]
            if m["role"] != "exit"
        ]
        assert detect_task_type(from_openai(msgs)) == "code", path.name
