"""One vocabulary of tool actions: the mask plan, the facts a summary is written from, the working
set and the strategies' signals give one answer for every tool the tables name, and for a name
no table holds."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from contextwarden._messages import Message, ToolCallBlock, assistant, tool_result, user
from contextwarden.analysis.actions import (
    EDITOR_COMMANDS,
    EDITOR_TOOLS,
    FILE_TOOLS,
    SEARCH_TOOLS,
    SHELL_TOOLS,
    TODO_TOOLS,
    file_action,
    text_output,
    tool_actions,
)
from contextwarden.analysis.facts import extract_facts
from contextwarden.analysis.mentions import code_mentions
from contextwarden.analysis.working import edit_sites
from contextwarden.strategies._signals import call_kinds

OLD = "def area(r):\n    return 3.14 * r * r"
NEW = "def area(r):\n    return math.pi * r * r"


def _history(name: str, **args: object) -> list[Message]:
    call = ToolCallBlock("c1", name, json.dumps(args))
    return [user("Fix area() in geo.py"), assistant(tool_calls=[call]), tool_result("c1", OLD)]


def _answers(name: str, **args: object) -> tuple[str, str, str | None, frozenset[str]]:
    """(mask plan kind, file action, the action facts record for geo.py, signal kinds)."""
    history = _history(name, **args)
    (action,) = tool_actions(history)
    touches = [t.action for t in extract_facts(history).files if t.path == "geo.py"]
    return (
        action.kind,
        str(file_action(name, args)),
        touches[-1] if touches else None,
        call_kinds(history[1].tool_calls[0]),
    )


@pytest.mark.parametrize("name", sorted(FILE_TOOLS))
def test_every_named_file_tool_means_the_same_to_every_reader(name: str) -> None:
    expected = FILE_TOOLS[name]
    kind, action, touched, kinds = _answers(
        name, path="geo.py", old_string=OLD, new_string=NEW, content=NEW
    )
    assert action == expected
    assert touched == expected
    if expected == "read":
        assert kind == "read" and "inspect" in kinds
    else:
        assert kind == "edit" and "edit" in kinds


@pytest.mark.parametrize("tool", sorted(EDITOR_TOOLS))
@pytest.mark.parametrize("command", sorted(EDITOR_COMMANDS))
def test_an_editor_tool_is_read_by_its_command(tool: str, command: str) -> None:
    expected = EDITOR_COMMANDS[command]
    kind, action, touched, kinds = _answers(
        tool, command=command, path="geo.py", old_str=OLD, new_str=NEW
    )
    assert action == touched == expected
    assert (kind, "inspect" in kinds) == (("read", True) if expected == "read" else ("edit", False))


@pytest.mark.parametrize("name", sorted(TODO_TOOLS | SEARCH_TOOLS))
def test_todo_and_search_tools_do_nothing_to_files(name: str) -> None:
    kind, action, touched, kinds = _answers(name, path="geo.py", pattern="area")
    assert action == "None" and touched is None
    assert kind == "other" and "edit" not in kinds


@pytest.mark.parametrize("name", sorted(SHELL_TOOLS))
def test_a_shell_tool_is_read_by_its_command(name: str) -> None:
    assert _answers(name, command="sed -i 's/3.14/math.pi/' geo.py")[0] == "edit"
    assert "edit" in _answers(name, command="sed -i 's/3.14/math.pi/' geo.py")[3]
    kind, _, touched, kinds = _answers(name, command="cat geo.py")
    assert (kind, touched, "edit" in kinds) == ("read", "read", False)


@given(st.from_regex(r"[A-Za-z][A-Za-z_]{2,20}", fullmatch=True))
def test_a_name_no_table_holds_gets_one_guess_everywhere(name: str) -> None:
    kind, action, touched, kinds = _answers(name, path="geo.py", old_string=OLD, new_string=NEW)
    if action == "read":
        assert kind == "read" and touched == "read"
    elif action != "None":
        assert kind == "edit" and touched == action and "edit" in kinds
    else:
        assert touched is None


def test_the_working_set_follows_a_read_then_an_edit_of_any_vocabulary_pair() -> None:
    for read in ("Read", "view_file", "cat", "readfile"):
        history = [
            user("Fix area() in geo.py"),
            assistant(tool_calls=[ToolCallBlock("r", read, json.dumps({"path": "geo.py"}))]),
            tool_result("r", "import math\n\n" + OLD + "\n\nprint(area(2))"),
            assistant(
                tool_calls=[
                    ToolCallBlock(
                        "e",
                        "Edit",
                        json.dumps({"path": "geo.py", "old_string": OLD, "new_string": NEW}),
                    )
                ]
            ),
            tool_result("e", "ok"),
        ]
        (site,) = edit_sites(history)
        assert site.path == "geo.py"
        assert "import math" in site.lines and "print(area(2))" in site.lines, read


#: What an assistant of the text protocol writes around its command: a snippet of code, an
#: unlabelled block (SWE-agent labels none), the command in mini-swe-agent 1.x's ``bash`` block
#: or 2.x's ``mswea_bash_command`` block.
_SEGMENTS = {
    "prose": "The helper `scale_area` is wrong.",
    "python": "```python\nresult = scale_area(2)\n```",
    "bare": "```\ncat src/geo.py\n```",
    "bash": "```bash\ncat src/geo.py\n```",
    "mswea": "```mswea_bash_command\ncat src/geo.py\n```",
}
_OUTPUT = "<returncode>0</returncode>\n<output>\ndef scale_area(r):\n    return r\n</output>"


@given(st.lists(st.sampled_from(sorted(_SEGMENTS)), max_size=5), st.booleans())
@example(["prose", "python", "bash"], True)  # 102 of 815 steps of the held-out gemini runs
def test_a_command_written_in_text_is_one_answer_to_every_reader(
    parts: list[str], output: bool
) -> None:
    reply = _OUTPUT if output else "Please always provide EXACTLY ONE action in triple backticks."
    history = [
        user("Fix area() in src/geo.py"),
        assistant("\n\n".join(_SEGMENTS[p] for p in parts)),
        user(reply),
    ]
    shell = [p for p in parts if p in ("bash", "mswea")]
    # one block labelled as a command runs; unlabelled blocks are commands only without one
    ran = len(shell) == 1 or not shell and parts.count("bare") == 1
    answered = ran and output
    read = [("msg:2", "read", ("src/geo.py",))] if ran else []
    assert [(a.id, a.kind, a.paths) for a in tool_actions(history)] == read
    assert (text_output(history[1], history[2], 2) is not None) == answered
    facts = extract_facts(history)
    assert [c.command for c in facts.commands] == (["cat src/geo.py"] if answered else [])
    assert facts.task == "Fix area() in src/geo.py" and facts.instructions == (
        (reply,) if not output else ()
    )
    shown = {m.name: m.files for m in code_mentions(history).names}
    if output:  # the output's definition is attributed to the file the command printed
        assert shown["scale_area"] == (("src/geo.py",) if answered else ())
