"""Facts extracted from agent histories of every common shape (summarizers/facts.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from summarizer_loaders import final_diff_files, load_messages

from contextwarden import Message, TextBlock, ToolCallBlock, ToolResultBlock
from contextwarden.summarizers import extract_facts
from contextwarden.testing import ConversationBuilder


def _facts(b: ConversationBuilder, **kw: object):  # type: ignore[no-untyped-def]
    return extract_facts(b.build(), **kw)  # type: ignore[arg-type]


def test_task_is_first_user_message_unless_given() -> None:
    b = ConversationBuilder().system("sys").user("Fix bug 12").user("also this")
    assert _facts(b).task == "Fix bug 12"
    assert _facts(b, task="The real task").task == "The real task"


@pytest.mark.parametrize(
    ("result", "code", "ok"),
    [
        ("<returncode>0</returncode>\n<output>\nfine\n</output>", 0, True),  # mini-swe-agent
        ("<returncode>2</returncode>\n<output>\nboom\n</output>", 2, False),
        ("lots of output\n[The command completed with exit code 1.]", 1, False),  # OpenHands
        ("Command `make` executed with exit code 0.", 0, True),
        ("npm ERR! missing script\n\nCommand exited with code 1", 1, False),  # pi
        ("Process exited with code 0", 0, True),
    ],
)
def test_exit_status_shapes(result: str, code: int, ok: bool) -> None:
    b = ConversationBuilder().user("t").tool_loop("bash", {"command": "make build"}, result)
    facts = _facts(b)
    (run,) = facts.commands
    assert (run.exit_code, run.ok) == (code, ok)
    assert bool(facts.errors) is (not ok)


def test_is_error_without_exit_code_is_a_failure() -> None:
    b = (
        ConversationBuilder()
        .user("t")
        .tool_loop(
            "Bash", {"command": "cargo build"}, "error[E0425]: cannot find value `x`", is_error=True
        )
    )
    facts = _facts(b)
    assert facts.commands[0].ok is False
    assert facts.last_unresolved_error is not None
    assert facts.last_unresolved_error.key == "error[E0425]: cannot find value `x`"


def test_grep_without_match_is_not_an_error() -> None:
    b = ConversationBuilder().user("t").bash("grep -rn missing_name src/", "", returncode=1)
    b.bash("cat src/a.py | grep zzz", "", returncode=1)
    assert _facts(b).errors == ()


def test_traceback_signature_is_the_exception_line() -> None:
    tb = (
        'Traceback (most recent call last):\n  File "t.py", line 3, in <module>\n'
        "    f()\nValueError: bad value 3"
    )
    b = ConversationBuilder().user("t").bash("python t.py", tb, returncode=1)
    err = _facts(b).last_unresolved_error
    assert err is not None and err.key == "ValueError: bad value 3"
    assert err.source == "`python t.py`"
    assert "line 3" in err.excerpt


def test_error_printed_by_a_successful_script_counts() -> None:
    # a reproduction script that catches the exception and prints it, exiting 0
    b = ConversationBuilder().user("t").bash("python repro.py", "Testing...\nKeyError: 'id'")
    err = _facts(b).last_unresolved_error
    assert err is not None and err.key == "KeyError: 'id'"


def test_error_fixed_by_a_later_success_of_the_same_command() -> None:
    b = ConversationBuilder().user("t")
    b.bash(
        "cd /repo && python -m pytest tests/ -x 2>&1 | tail -20", "E   AssertionError", returncode=1
    )
    b.bash("sed -i 's/-/+/' calc.py")
    b.bash("python -m pytest tests/ -x", "3 passed")
    facts = _facts(b)
    assert len(facts.errors) == 1
    assert facts.errors[0].fixed_at == 6
    assert facts.last_unresolved_error is None


def test_failed_edit_fixed_by_a_later_edit_of_the_same_file() -> None:
    b = ConversationBuilder().user("t")
    b.edit("src/a.py", "x = 1", "x = 2", error="Error: No replacement was performed")
    b.edit("src/a.py", "x=1", "x = 2")
    facts = _facts(b)
    assert facts.errors and facts.errors[0].fixed_at is not None
    assert facts.changed_files == ("src/a.py",)  # the failed edit changed nothing


def test_last_unresolved_error_is_the_latest_open_one() -> None:
    b = ConversationBuilder().user("t")
    b.bash("python a.py", "NameError: name 'q' is not defined", returncode=1)
    b.bash("python b.py", "TypeError: unsupported operand", returncode=1)
    b.bash("python b.py", "ok")
    err = _facts(b).last_unresolved_error
    assert err is not None and err.key == "NameError: name 'q' is not defined"


def test_files_from_editor_tools_of_each_agent() -> None:
    b = ConversationBuilder().user("t")
    b.tool_loop("str_replace_editor", {"command": "view", "path": "/r/a.py"}, "1 x")
    b.tool_loop(
        "str_replace_editor",
        {"command": "create", "path": "/r/new.py", "file_text": "x"},
        "File created",
    )
    b.tool_loop(
        "str_replace_based_edit_tool",
        {"command": "str_replace", "path": "/r/b.py", "old_str": "a", "new_str": "b"},
        "ok",
    )
    b.tool_loop("Edit", {"file_path": "/r/c.py", "old_string": "a", "new_string": "b"}, "ok")
    b.tool_loop("Write", {"file_path": "/r/a.py", "content": "y"}, "ok")  # existed: modified
    b.tool_loop("read", {"path": "docs/x.md"}, "# doc")
    b.tool_loop(
        "apply_patch",
        {"input": "*** Begin Patch\n*** Update File: lib/z.py\n@@\n-a\n+b\n*** End Patch"},
        "Done",
    )
    facts = _facts(b)
    status = facts.file_status()
    assert status["/r/new.py"] == "created"
    assert status["/r/b.py"] == status["/r/c.py"] == status["/r/a.py"] == "modified"
    assert status["lib/z.py"] == "modified"
    assert facts.read_files == ("docs/x.md",)
    assert set(facts.changed_files) == {"/r/new.py", "/r/b.py", "/r/c.py", "/r/a.py", "lib/z.py"}


def test_files_from_bash_idioms() -> None:
    b = ConversationBuilder().user("t")
    b.bash(
        "cat > fix.py << 'EOF'\nwith open('src/m.py') as f:\n    s = f.read()\n"
        "with open('src/m.py', 'w') as f:\n    f.write(s.replace('a', 'b'))\nEOF"
    )
    b.bash("python fix.py")
    b.bash("cat > p.patch << 'EOF'\n--- a/src/n.py\n+++ b/src/n.py\n@@\n-a\n+b\nEOF")
    b.bash("patch -p1 < p.patch", "patching file src/n.py")
    b.bash("git checkout src/o.py")
    b.bash("rm scratch.txt")
    facts = _facts(b)
    status = facts.file_status()
    assert status["src/m.py"] == "modified"
    assert status["src/n.py"] == "modified"
    assert status["src/o.py"] == "reverted"
    assert status["scratch.txt"] == "deleted"
    assert status["fix.py"] == "created"


def test_git_diff_output_names_modified_files_and_stats() -> None:
    diff = (
        "diff --git a/pkg/core.py b/pkg/core.py\nindex 1..2 100644\n--- a/pkg/core.py\n"
        "+++ b/pkg/core.py\n@@ -1 +1 @@\n-a\n+b\n"
    )
    stat = " pkg/core.py | 2 +-\n pkg/util.py | 10 ++++++++--\n 2 files changed, 9 insertions(+)"
    b = ConversationBuilder().user("t").bash("git diff", diff).bash("git diff --stat", stat)
    facts = _facts(b)
    assert "pkg/core.py" in facts.changed_files
    assert facts.diff_stat[-1].startswith("2 files changed")
    assert len(facts.diff_stat) == 3
    # git show prints history, not our changes
    shown = ConversationBuilder().user("t").bash("git show HEAD --stat", stat + "\n" + diff)
    assert _facts(shown).changed_files == ()


def test_git_status_lists_changes() -> None:
    out = " M src/a.py\n?? notes.md\nA  src/b.py"
    facts = _facts(ConversationBuilder().user("t").bash("git status --short", out))
    assert facts.file_status() == {
        "src/a.py": "modified",
        "notes.md": "created",
        "src/b.py": "created",
    }


def test_todo_tools_and_text_plans() -> None:
    b = ConversationBuilder().user("t")
    b.todo([("Write parser", "completed"), ("Write tests", "in_progress"), ("Docs", "pending")])
    facts = _facts(b)
    assert [(t.text, t.status) for t in facts.plan] == [
        ("Write parser", "completed"),
        ("Write tests", "in_progress"),
        ("Docs", "pending"),
    ]
    assert facts.plan_source == "TodoWrite"
    b.tool_loop("update_plan", {"plan": [{"step": "Ship", "status": "pending"}]}, "ok")
    assert [t.text for t in _facts(b).plan] == ["Ship"]
    b.assistant("Plan:\n1. Reproduce the bug\n2. Fix `parse()`\n- [x] read code")
    facts = _facts(b)
    assert [t.text for t in facts.plan] == ["Reproduce the bug", "Fix `parse()`", "read code"]
    assert facts.plan[-1].status == "completed" and facts.plan_source == "text"


def test_pins_by_flag_and_tag() -> None:
    b = ConversationBuilder().user("t").user("Always use tabs.", pinned=True)
    b.pin("API key lives in VAULT_X").assistant("ok <Pin>keep port 8080</Pin>")
    assert _facts(b).pins == ("Always use tabs.", "API key lives in VAULT_X", "keep port 8080")


def test_memories_are_the_last_ten_findings() -> None:
    b = ConversationBuilder().user("t")
    for i in range(15):
        b.assistant(f"I found that the issue number {i} is caused by the cache. Let me look.")
    memories = _facts(b).memories
    assert len(memories) == 10
    assert memories[0].startswith("I found that the issue number 5")
    assert memories[-1].startswith("I found that the issue number 14")
    assert not any(m.startswith("Let me") for m in memories)


def test_previous_summary_file_list_carries_over() -> None:
    previous = (
        "<completed>\n- ran tests\n</completed>\n<remaining>\n</remaining>\n"
        "<current_state>\nFiles changed:\n- src/old.py\n- src/gone.py (deleted)\n"
        "</current_state>\n<notes>\n</notes>"
    )
    facts = extract_facts(ConversationBuilder().user("t").build(), previous_summary=previous)
    assert facts.file_status() == {"src/old.py": "modified", "src/gone.py": "deleted"}
    assert facts.earlier is not None and "ran tests" in facts.earlier.completed
    # a summary message inside the span is merged the same way, and is not the task
    span = ConversationBuilder().user(previous).user("next task").build()
    inner = extract_facts(span)
    assert inner.task == "next task" and "src/old.py" in inner.changed_files


def test_mini_swe_agent_text_protocol() -> None:
    msgs = [
        Message("user", (TextBlock("Fix it"),)),
        Message("assistant", (TextBlock("THOUGHT: edit\n```bash\nsed -i 's/a/b/' m.py\n```"),)),
        Message("user", (TextBlock("<returncode>0</returncode>\n<output>\n</output>"),)),
        Message("assistant", (TextBlock("Example:\n```bash\nrm -rf /\n```"),)),
        Message("user", (TextBlock("thanks, looks good"),)),
    ]
    facts = extract_facts(msgs)
    assert facts.changed_files == ("m.py",)  # the unexecuted example deleted nothing
    assert [r.command for r in facts.commands] == ["sed -i 's/a/b/' m.py"]


def test_results_without_calls_and_calls_without_results() -> None:
    msgs = [
        Message(
            "tool",
            (
                ToolResultBlock(
                    "gone", "Traceback (most recent call last):\nOSError: disk full", is_error=True
                ),
            ),
        ),
        Message("assistant", (ToolCallBlock("c9", "write", json.dumps({"path": "late.py"})),)),
    ]
    facts = extract_facts(msgs)
    assert facts.last_unresolved_error is not None
    assert facts.last_unresolved_error.key == "OSError: disk full"
    assert facts.changed_files == ("late.py",)


def test_does_not_mutate_and_is_deterministic() -> None:
    b = ConversationBuilder().user("t").bash("python x.py", "ValueError: v", returncode=1)
    msgs = b.build()
    before = [m.fingerprint for m in msgs]
    assert extract_facts(msgs) == extract_facts(list(msgs))
    assert [m.fingerprint for m in msgs] == before


# -- real trajectories --------------------------------------------------------------------------
def _mini_files(shared_data: Path) -> list[Path]:
    files = sorted((shared_data / "mini-swe-agent").glob("*.traj.json"))
    if not files:
        pytest.skip("no mini-swe-agent trajectories in ../shared/data")
    return files


def test_every_file_in_the_final_diff_is_found(shared_data: Path) -> None:
    """mini-swe-agent edits with sed -i, heredocs, patch and Python scripts; the submitted
    git diff says which files really changed: each must be among the changed files."""
    checked = 0
    for path in _mini_files(shared_data):
        facts = extract_facts(load_messages(path))
        for real in final_diff_files(path):
            assert any(real in changed for changed in facts.changed_files), (path.name, real)
            checked += 1
    assert checked >= 5


def test_other_agent_formats_yield_facts(shared_data: Path) -> None:
    cases = {
        "claude-code/python-to-rust-port.jsonl": "/tmp/tmpqwh7888i/src/lib.rs",
        "openhands/fastjson2-2775.output.jsonl": "/home/fastjson2/core/src/main/java/com/alibaba/fastjson2/JSON.java",
        "pi/large-session.jsonl": "packages/coding-agent/src/theme/theme.ts",
    }
    for name, expected in cases.items():
        path = shared_data / name
        if not path.exists():
            continue
        facts = extract_facts(load_messages(path))
        assert expected in facts.changed_files, name
        assert facts.commands, name
        # nothing that is obviously not a path (sed scripts, shell words) is listed as a file
        assert not any(
            p.startswith(("s/", "/undefined")) or p == "echo" for p in facts.changed_files
        ), name


def test_a_failed_read_is_fixed_by_a_later_successful_read() -> None:
    b = ConversationBuilder().user("t")
    b.tool_loop(
        "str_replace_editor",
        {"command": "view", "path": "/r/src/x.py"},
        "ERROR:\nInvalid `path` parameter: /r/src/x.py does not exist.",
        is_error=True,
    )
    b.bash("cat wrong.txt", "cat: wrong.txt: No such file or directory", returncode=1)
    facts = _facts(b)
    assert facts.errors[0].key.startswith("ERROR: Invalid `path` parameter")  # not just "ERROR:"
    assert [e.fixed for e in facts.errors] == [False, False]
    b.tool_loop("str_replace_editor", {"command": "view", "path": "/r/core/x.py"}, "1 code")
    b.bash("cat right.txt", "content")
    assert [e.fixed for e in _facts(b).errors] == [True, True]


def test_exceptions_logged_mid_output_of_a_passing_run_are_not_errors() -> None:
    log = (
        "Running tests\ncom.acme.ParseException: illegal number (expected by the test)\n"
        + "ok\n" * 10
        + "Tests run: 12, Failures: 0"
    )
    b = ConversationBuilder().user("t").bash("mvn test", log)
    assert _facts(b).errors == ()


def test_an_analysis_written_as_a_numbered_list_is_not_a_plan() -> None:
    b = ConversationBuilder().user("t")
    b.assistant("The call chain is:\n1. load() reads the file\n2. parse() drops the header")
    assert _facts(b).plan == ()
    b.assistant("Next steps:\n1. Patch parse()\n2. Re-run the tests")
    assert [t.text for t in _facts(b).plan] == ["Patch parse()", "Re-run the tests"]


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=30),
    lambda kids: (
        st.lists(kids, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "command",
                    "path",
                    "file_path",
                    "todos",
                    "content",
                    "status",
                    "input",
                    "plan",
                    "cmd",
                    "edits",
                    "paths",
                ]
            ),
            kids,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                ["bash", "edit", "read", "TodoWrite", "apply_patch", "str_replace_editor", "x"]
            ),
            _json | st.text(max_size=40),
            st.text(max_size=120),
            st.booleans(),
        ),
        max_size=12,
    )
)
def test_never_raises_on_odd_tool_calls(calls: list[tuple[str, object, str, bool]]) -> None:
    b = ConversationBuilder().user("t")
    for name, args, result, is_error in calls:
        raw = args if isinstance(args, str) else json.dumps(args)
        b.tool_loop(name, raw, result, is_error=is_error)
    facts = extract_facts(b.build())
    assert all(isinstance(p, str) and p for p in facts.changed_files)
