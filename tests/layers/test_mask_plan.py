"""Which tool results a mask edit keeps and which go first: reads, edits and repeated runs
recognised across agents' tool vocabularies (``contextwarden.layers.mask``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from shared_data import SHARED_DATA, trajectory_files

from contextwarden._markers import SUPERSEDED_MARKER_RE
from contextwarden._messages import Message, ToolCallBlock, assistant, tool_result, user
from contextwarden.analysis.actions import protected_results, superseded_results, tool_actions
from contextwarden.layers.mask import mask_plan, mask_text, superseded_text
from contextwarden.layers.mask_plan import MaskPlanner

BODY = "\n".join(f"line {i} of the file" for i in range(40))


def _call(cid: str, name: str, **args: object) -> Message:
    return assistant(tool_calls=[ToolCallBlock(cid, name, json.dumps(args))])


def _pair(cid: str, name: str, output: str = BODY, **args: object) -> list[Message]:
    return [_call(cid, name, **args), tool_result(cid, output)]


def _history(*pairs: list[Message]) -> list[Message]:
    out: list[Message] = [user("Fix the bug in src/app.py")]
    for p in pairs:
        out += p
    return out


# one (read, edit) pair per agent vocabulary: the read must be protected once the file is edited
VOCABULARIES = {
    "claude-code": (
        ("Read", {"file_path": "/repo/src/app.py"}),
        ("Edit", {"file_path": "/repo/src/app.py", "old_string": "a", "new_string": "b"}),
    ),
    "claude-code-multiedit": (
        ("Bash", {"command": "sed -n '1,80p' /repo/src/app.py"}),
        ("MultiEdit", {"file_path": "/repo/src/app.py", "edits": [{"old_string": "a"}]}),
    ),
    "codex": (
        ("exec_command", {"cmd": "nl -ba src/app.py | sed -n '1,220p'"}),
        (
            "apply_patch",
            {"input": "*** Begin Patch\n*** Update File: src/app.py\n@@\n-a\n+b\n*** End Patch"},
        ),
    ),
    "codex-shell": (
        ("shell", {"command": ["bash", "-lc", "cat src/app.py"]}),
        ("shell", {"command": ["apply_patch", "*** Begin Patch\n*** Update File: src/app.py\n"]}),
    ),
    "mini-swe-agent": (
        ("bash", {"command": "cd /testbed && sed -n '100,160p' src/app.py"}),
        ("bash", {"command": "cd /testbed && sed -i 's/a/b/' src/app.py"}),
    ),
    "openhands": (
        ("str_replace_editor", {"command": "view", "path": "/workspace/src/app.py"}),
        ("str_replace_editor", {"command": "str_replace", "path": "/workspace/src/app.py"}),
    ),
    "pi": (
        ("read", {"path": "src/app.py", "offset": 10, "limit": 80}),
        ("edit", {"path": "src/app.py", "oldText": "a", "newText": "b"}),
    ),
    "cline": (
        ("read_file", {"path": "src/app.py"}),
        ("replace_in_file", {"path": "src/app.py", "diff": "------- SEARCH\na\n=======\nb\n"}),
    ),
    "cline-write": (
        ("read_file", {"path": "src/app.py"}),
        ("write_to_file", {"path": "src/app.py", "content": "b"}),
    ),
    "heredoc": (
        ("bash", {"command": "head -n 50 src/app.py"}),
        ("bash", {"command": "cat > src/app.py << 'EOF'\nprint(1)\nEOF"}),
    ),
}


@pytest.mark.parametrize("agent", sorted(VOCABULARIES))
def test_the_read_of_a_file_being_edited_is_protected(agent: str) -> None:
    (rname, rargs), (ename, eargs) = VOCABULARIES[agent]
    history = _history(
        _pair("r1", rname, **rargs),
        _pair("x1", "bash", "unrelated\n" * 30, command="ls -la docs"),
        _pair("e1", ename, "edited", **eargs),
    )
    kinds = {a.id: a.kind for a in tool_actions(history)}
    assert kinds["r1"] == "read" and kinds["e1"] == "edit", kinds
    assert protected_results(history) == {"r1"}


def test_reads_of_files_never_edited_are_not_protected_without_edits() -> None:
    history = _history(_pair("r1", "Read", file_path="a.py"), _pair("r2", "Read", file_path="b.py"))
    assert protected_results(history) == frozenset()


def test_a_file_read_again_supersedes_the_older_read_and_only_the_latest_is_protected() -> None:
    history = _history(
        _pair("r1", "bash", BODY, command="cat src/app.py"),
        _pair("r2", "bash", BODY + "\nchanged", command="cd /testbed && cat src/app.py"),
        _pair("e1", "bash", "", command="sed -i 's/x/y/' src/app.py"),
    )
    assert superseded_results(history) == {"r1": "r2"}
    assert protected_results(history) == {"r2"}


def test_different_line_ranges_of_one_file_are_different_reads() -> None:
    history = _history(
        _pair("r1", "bash", BODY, command="sed -n '1,50p' src/app.py"),
        _pair("r2", "bash", BODY + "!", command="sed -n '50,99p' src/app.py"),
        _pair("e1", "Edit", "ok", file_path="src/app.py", old_string="a"),
    )
    assert superseded_results(history) == {}
    assert protected_results(history) == {"r1", "r2"}


def test_a_whole_read_supersedes_an_earlier_ranged_read() -> None:
    history = _history(
        _pair("r1", "read", BODY, path="src/app.py", offset=10, limit=20),
        _pair("r2", "read", BODY + "!", path="src/app.py"),
    )
    assert superseded_results(history) == {"r1": "r2"}


def test_test_runs_listings_and_exact_duplicates_are_superseded_by_the_latest() -> None:
    history = _history(
        _pair(
            "t1",
            "bash",
            "FAILED 3\n" * 20,
            command="cd /testbed && python -m pytest tests -x 2>&1 | tail -30",
        ),
        _pair("l1", "execute_bash", "a.py\nb.py\n", command="ls src"),
        _pair("t2", "bash", "FAILED 1\n" * 20, command="python -m pytest tests -x"),
        _pair("l2", "execute_bash", "a.py\nb.py\nc.py\n", command="ls src"),
        _pair("g1", "Grep", "hit\nhit\n", pattern="foo"),
        _pair("g2", "Glob", "hit\nhit\n", pattern="**/*.py"),
    )
    assert superseded_results(history) == {"t1": "t2", "l1": "l2", "g1": "g2"}


def test_edits_are_not_superseded_by_a_later_edit_of_the_same_file() -> None:
    history = _history(
        _pair("e1", "Edit", "snippet one\nx", file_path="a.py", old_string="a"),
        _pair("e2", "Edit", "snippet two\ny", file_path="a.py", old_string="b"),
    )
    assert superseded_results(history) == {}


def test_commands_written_in_text_are_recognised_swe_agent_style() -> None:
    history = [
        user("Fix the bug"),
        assistant("Let me look.\n```\nopen src/app.py 100\n```"),
        user("[File: src/app.py (300 lines total)]\n" + BODY),
        assistant("Now the fix.\n```\nedit 120:121\n    return 1\nend_of_edit\n```"),
        user("File updated"),
        assistant("Check it.\n```bash\nsed -i 's/a/b/' src/app.py\n```"),
        user("done"),
    ]
    acts = tool_actions(history)
    assert [(a.id, a.kind) for a in acts] == [
        ("msg:2", "read"),
        ("msg:4", "edit"),
        ("msg:6", "edit"),
    ]
    assert protected_results(history) == {"msg:2"}


def test_superseded_marker_is_one_short_line_naming_its_reference() -> None:
    out = superseded_text(BODY, "cw:0123abcd4567ef89", "call_9")
    assert "\n" not in out and "cw:0123abcd4567ef89" in out and "call_9" in out
    assert SUPERSEDED_MARKER_RE.fullmatch(out)
    assert len(out) < 100
    # idempotent, and the mask leaves a superseded marker alone
    assert superseded_text(out, "cw:0123abcd4567ef89") is out
    assert mask_text(out + "\n" + "x" * 600) == out + "\n" + "x" * 600
    assert superseded_text("tiny", "cw:0123abcd4567ef89") == "tiny"


_names = st.sampled_from(["a.py", "src/b.py", "/repo/src/b.py", "c.ts"])
_step = st.one_of(
    st.tuples(st.just("Read"), _names),
    st.tuples(st.just("Edit"), _names),
    st.tuples(st.just("cat"), _names),
    st.tuples(st.just("sed-i"), _names),
    st.tuples(st.just("pytest"), st.just("")),
    st.tuples(st.just("ls"), st.sampled_from(["src", "tests"])),
)


def _build(steps: list[tuple[str, str]], outputs: list[int]) -> list[Message]:
    pairs = []
    for i, ((kind, arg), out) in enumerate(zip(steps, outputs, strict=False)):
        text = f"output {out}\n" * 3
        cid = f"c{i}"
        if kind == "Read":
            pairs.append(_pair(cid, "Read", text, file_path=arg))
        elif kind == "Edit":
            pairs.append(_pair(cid, "Edit", text, file_path=arg, old_string="x"))
        elif kind == "cat":
            pairs.append(_pair(cid, "bash", text, command=f"cat {arg}"))
        elif kind == "sed-i":
            pairs.append(_pair(cid, "bash", text, command=f"sed -i 's/a/b/' {arg}"))
        elif kind == "pytest":
            pairs.append(_pair(cid, "bash", text, command="python -m pytest -q"))
        else:
            pairs.append(_pair(cid, "bash", text, command=f"ls {arg}"))
    return _history(*pairs)


@given(st.lists(_step, max_size=25), st.lists(st.integers(0, 4), min_size=25, max_size=25))
def test_plan_invariants(steps: list[tuple[str, str]], outputs: list[int]) -> None:
    history = _build(steps, outputs)
    before = list(history)
    plan = mask_plan(history)
    ids = {a.id for a in tool_actions(history)}
    # pure, on ids of the history's results
    assert history == before
    assert plan.protected <= ids and set(plan.superseded) <= ids
    assert not plan.protected & set(plan.superseded)
    # what supersedes a result comes later in the history
    pos = {a.id: a.position for a in tool_actions(history)}
    for old, new in plan.superseded.items():
        assert pos[new] > pos[old]
    # the latest result of each kind is never superseded: nothing comes after it
    if ids:
        last = max(ids, key=lambda i: pos[i])
        assert last not in plan.superseded
    # protected results are reads
    kinds = {a.id: a.kind for a in tool_actions(history)}
    assert all(kinds[i] == "read" for i in plan.protected)
    # deterministic
    assert mask_plan(history) == plan


def _recording(pattern: str) -> list[Message]:
    from contextwarden._transcripts import load_transcript

    files = [p for p in trajectory_files() if pattern in str(p)]
    if not files:
        pytest.skip(f"no recording matching {pattern!r} under {SHARED_DATA}")
    return list(load_transcript(Path(files[0])).messages)


@pytest.mark.parametrize(
    "pattern",
    [
        "mini-swe-agent/deepseek_chat_test_1-100__django__django-15695",
        "pi/large-session",
        "openhands/fastjson2",
    ],
)
def test_real_recordings_protect_reads_of_the_files_they_edit(pattern: str) -> None:
    history = _recording(pattern)
    acts = {a.id: a for a in tool_actions(history)}
    plan = mask_plan(history)
    assert plan.protected, "an agent that edits files has reads worth keeping"
    edited = {p for a in acts.values() if a.kind == "edit" for p in a.paths}
    assert edited
    for rid in plan.protected:
        assert acts[rid].kind == "read"
    # every protected read is a read of the working set or of the recent edit phase, and the
    # newest read of each file/range among them is kept rather than an older one
    keys = [acts[r].key for r in plan.protected]
    assert len(keys) == len(set(keys))


def test_real_recording_superseded_outputs_point_at_a_later_equivalent() -> None:
    history = _recording("mini-swe-agent/deepseek_chat_test_1-100__django__django-15695")
    acts = {a.id: a for a in tool_actions(history)}
    sup = superseded_results(history)
    assert sup
    texts = {r.tool_call_id: r.text for m in history for r in m.tool_results}
    for old, new in sup.items():
        a, b = acts[old], acts[new]
        assert b.position > a.position
        assert (
            (a.key is not None and a.key == b.key)
            or texts[old] == texts[new]
            or (a.kind == "read" and b.key == f"read {a.paths[0]}")
        )


def test_mask_message_with_a_plan_spares_protected_and_shortens_superseded() -> None:
    from histories import ctx

    from contextwarden._messages import ToolResultBlock
    from contextwarden.layers.mask import mask_message

    big = "\n".join(f"row {i} " + "x" * 40 for i in range(80))
    msg = Message(
        "tool",
        (
            ToolResultBlock("keep", "the file\n" + big),
            ToolResultBlock("old", big),
            ToolResultBlock("plain", big),
        ),
    )
    history = _history(
        _pair("keep", "Read", "the file\n" + big, file_path="a.py"),
        _pair("old", "bash", big, command="python -m pytest"),
        _pair("plain", "bash", big + "!", command="ls -R"),
        _pair("new", "bash", "passed\nok", command="python -m pytest"),
        _pair("e", "Edit", "ok", file_path="a.py", old_string="x"),
    )
    plan = mask_plan(history)
    assert plan.protected == {"keep"} and plan.superseded == {"old": "new"}
    ref = "cw:0011223344556677"
    out, events = mask_message(msg, (3, ("Read", "bash", "bash")), ctx(), ref, plan=plan)
    keep, old, plain = out.tool_results
    assert keep.text == "the file\n" + big
    assert old.text == superseded_text(big, ref, "new") and "\n" not in old.text
    assert plain.text == mask_text(big, None, ref) and ref in plain.text
    assert len(events) == 1
    # without a plan every old result is masked the usual way
    bare, _ = mask_message(msg, (3, ("Read", "bash", "bash")), ctx(), ref)
    assert [r.text for r in bare.tool_results] == [
        mask_text("the file\n" + big, None, ref),
        mask_text(big, None, ref),
        mask_text(big, None, ref),
    ]


QUOTING = {"claude-code", "claude-code-multiedit", "codex", "codex-shell", "pi", "cline"}


@pytest.mark.parametrize("agent", sorted(VOCABULARIES))
def test_an_edit_quotes_when_it_names_the_text_it_replaces(agent: str) -> None:
    (rname, rargs), (ename, eargs) = VOCABULARIES[agent]
    history = _history(_pair("r1", rname, **rargs), _pair("e1", ename, "edited", **eargs))
    edit = next(a for a in tool_actions(history) if a.id == "e1")
    # the openhands fixture's str_replace names no old_str: nothing to quote
    assert edit.quotes is (agent in QUOTING)
    quoting_only = protected_results(history, quoting=True)
    assert quoting_only == ({"r1"} if agent in QUOTING else frozenset())


@pytest.mark.parametrize(
    "pattern",
    ["mini-swe-agent/deepseek_chat_test_1-100__django__django-15695", "pi/large-session"],
)
def test_a_plan_made_with_a_memo_as_the_history_grows_is_the_plan_made_afresh(
    pattern: str,
) -> None:
    """A conversation keeps one memo of what each answered command does and plans again at
    each length: every plan equals the one made from nothing, and a command is analysed once
    (planning the same history again adds nothing to the memo)."""
    history = _recording(pattern)
    memo: dict[tuple[str, int], tuple[object, ...]] = {}
    ends = [i + 1 for i, m in enumerate(history) if m.role != "assistant"][::7]
    for end in ends:
        prefix = history[:end]
        assert mask_plan(prefix, quoting=True, memo=memo) == mask_plan(prefix, quoting=True)
        assert tool_actions(prefix, memo) == tool_actions(prefix)
    known = dict(memo)
    mask_plan(history[: ends[-1]], quoting=True, memo=memo)
    assert memo == known and len(known) >= len(tool_actions(history[: ends[-1]])) > 0


@given(
    st.lists(_step, max_size=25),
    st.lists(st.integers(0, 4), min_size=25, max_size=25),
    st.lists(st.integers(1, 6), max_size=12),
    st.booleans(),
)
def test_the_planner_grown_message_by_message_plans_as_the_whole_history_does(
    steps: list[tuple[str, str]], outputs: list[int], growth: list[int], quoting: bool
) -> None:
    """The conversation extends its planner as the history grows: at every length the plan
    follows the rules read from the whole history at once (superseded_results and
    protected_results of the analysis floor), whatever the steps the history grows by."""
    history = _build(steps, outputs)
    planner = MaskPlanner(quoting=quoting)
    n = 0
    for step in [*growth, len(history)]:
        n = min(n + step, len(history))
        planner.extend(history[:n])
        assert planner.plan().protected == protected_results(history[:n], quoting=quoting)
        assert planner.plan().superseded == superseded_results(history[:n])
    assert not planner.irregular
