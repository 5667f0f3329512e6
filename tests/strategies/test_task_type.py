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


def _text_session(commands: list[str]) -> list[Message]:
    """mini-swe-agent's text protocol: each command in a fenced block, its output sent back as
    a user message."""
    b = ConversationBuilder().system("s").user("Fix the parser bug in src/parse.py.")
    for command in commands:
        b.assistant(f"THOUGHT: next.\n\n```bash\n{command}\n```")
        b.user(f"<returncode>0</returncode>\n<output>\nran {command}\n</output>")
    return b.build()


def test_commands_written_in_text_count_as_calls() -> None:
    # the outputs are not the user's turns: a coding session, not a conversation
    commands = ["cat -n src/parse.py", "sed -i 's/a/b/' src/parse.py", "python -m pytest -q"]
    assert detect_task_type(_text_session(commands * 3)) == "code"
    twin = calls("bash", "bash", "bash", args={"command": "python -m pytest -q"})
    assert detect_task_type(_text_session(["python -m pytest -q"] * 3)) == detect_task_type(twin)


def test_a_user_reply_after_a_command_is_still_the_users_turn() -> None:
    b = ConversationBuilder().system("s").user("task")
    for i in range(8):
        b.assistant(f"Shall I run this?\n\n```bash\nls dir_{i}\n```").user(f"no, question {i}")
    assert detect_task_type(b.build()) == "conversation"
