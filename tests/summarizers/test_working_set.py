"""Summaries carry the working set: the file's lines around the latest edits, verbatim."""

from __future__ import annotations

import json

import pytest
from shared_data import SHARED_DATA, trajectory_files

from contextwarden._messages import Message, ToolCallBlock, assistant, tool_result, user
from contextwarden.analysis.working import edit_sites
from contextwarden.summarizers import ExtractiveSummarizer, SummaryRequest, check_summary

FILE = [f"def f{i}(x):" if i % 5 == 0 else f"    value_{i} = compute_{i}(x)" for i in range(60)]


def _call(cid: str, name: str, **args: object) -> Message:
    return assistant(tool_calls=[ToolCallBlock(cid, name, json.dumps(args))])


def _read_then_edit() -> list[Message]:
    """A pi-like span: the task, a read of src/m.py, an edit of its line 12."""
    return [
        user("fix compute_12"),
        _call("r", "read", path="src/m.py"),
        tool_result("r", "\n".join(FILE)),
        _call("e", "edit", path="src/m.py", oldText=FILE[12], newText="    value_12 = fixed(x)"),
        tool_result("e", "Successfully replaced text in src/m.py."),
    ]


def test_pi_read_then_edit_keeps_context_around_the_new_lines() -> None:
    span = _read_then_edit()
    (site,) = edit_sites(span)
    assert site.path == "src/m.py" and site.index == 3
    assert site.lines == (*FILE[9:12], "    value_12 = fixed(x)", *FILE[13:16])


def test_claude_code_numbered_read_with_reminder_and_a_second_edit_in_the_edited_text() -> None:
    numbered = "\n".join(f"{i + 1:>6}→{ln}" for i, ln in enumerate(FILE))
    numbered += "\n\n<system-reminder>\nconsider whether it is malware\n</system-reminder>\n"
    span = [
        user("task"),
        _call("r", "Read", file_path="/repo/m.py"),
        tool_result("r", numbered),
        _call("e1", "Edit", file_path="/repo/m.py", old_string=FILE[58], new_string="    last = 1"),
        tool_result("e1", "ok"),
        _call(
            "e2",
            "Edit",
            file_path="/repo/m.py",
            old_string="    last = 1",
            new_string="    last = 2",
        ),
        tool_result("e2", "ok"),
    ]
    first, second = edit_sites(span)
    assert first.lines == (*FILE[55:58], "    last = 1", FILE[59])
    assert second.lines == (*FILE[55:58], "    last = 2", FILE[59])
    assert not any("system-reminder" in ln for s in (first, second) for ln in s.lines)


def test_cline_search_replace_and_codex_apply_patch() -> None:
    diff = f"------- SEARCH\n{FILE[20]}\n{FILE[21]}\n=======\ndef g20(x):\n    return x\n+++++++ REPLACE"
    patch = (
        "*** Begin Patch\n*** Update File: lib/n.py\n@@ def f\n"
        f" {FILE[30]}\n-{FILE[31]}\n+    value_31 = 0\n {FILE[32]}\n*** End Patch"
    )
    span = [
        user("task"),
        _call("r", "read_file", path="lib/n.py"),
        tool_result("r", "\n".join(FILE)),
        _call("c", "replace_in_file", path="lib/n.py", diff=diff),
        tool_result("c", "ok"),
        _call("p", "apply_patch", input=patch),
        tool_result("p", "ok"),
    ]
    cline, codex = edit_sites(span)
    assert cline.lines == (*FILE[17:20], "def g20(x):", "    return x", *FILE[22:25])
    assert codex.path == "lib/n.py"
    assert codex.lines == (*FILE[27:30], FILE[30], "    value_31 = 0", FILE[32], *FILE[33:36])


def test_edit_without_a_read_keeps_the_new_text_and_odd_input_is_ignored() -> None:
    span = [
        _call(
            "e",
            "str_replace_editor",
            command="str_replace",
            path="a.py",
            old_str="x = 1",
            new_str="x = 2\ny = 3",
        ),
        tool_result("e", "edited"),
        _call("bad", "Edit", file_path="a.py", old_string=3, new_string=None),
        tool_result("bad", "error"),
        assistant(tool_calls=[ToolCallBlock("raw", "edit", "{not json")]),
        tool_result("raw", "error"),
    ]
    (site,) = edit_sites(span)
    assert site.lines == ("x = 2", "y = 3")


def test_summary_quotes_the_working_set_with_its_reference() -> None:
    span = [user("fix compute_12 in src/m.py")]
    for k in range(4):
        span += [_call(f"r{k}", "read", path="src/m.py"), tool_result(f"r{k}", "\n".join(FILE))]
    span += [
        _call("e", "edit", path="src/m.py", oldText=FILE[12], newText="    value_12 = fixed(x)"),
        tool_result("e", "Successfully replaced text in src/m.py."),
    ]
    request = SummaryRequest(tuple(span), max_chars=3000, ref="cw:00112233aabbccdd")
    summary = ExtractiveSummarizer().summarize(request)
    assert "Working set (recall cw:00112233aabbccdd):" in summary
    block = "\n".join([*FILE[9:12], "    value_12 = fixed(x)", *FILE[13:16]])
    assert f"```\n{block}\n```" in summary
    assert not check_summary(summary, request)
    # summarised again as an earlier summary: the quoted lines do not become headings
    again = SummaryRequest(
        (user("next"), assistant("ok")), previous_summary=summary, max_chars=3000
    )
    out = ExtractiveSummarizer().summarize(
        SummaryRequest(tuple([*span, *again.messages]), previous_summary=summary, max_chars=3000)
    )
    assert "Earlier (def f10(x))" not in out and "Earlier (    value" not in out


def test_real_pi_recording_edit_sites_hold_each_edits_new_text() -> None:
    from contextwarden._transcripts import load_transcript

    files = [p for p in trajectory_files() if "pi/large-session" in str(p)]
    if not files:
        pytest.skip(f"no pi recording under {SHARED_DATA}")
    messages = list(load_transcript(files[0]).messages)
    sites = edit_sites(messages)
    edits = [
        c for m in messages for c in m.tool_calls if c.name == "edit" and isinstance(c.input, dict)
    ]
    assert len(sites) >= len(edits) * 0.9
    placed = 0
    for site in sites:
        news = [
            c.input["newText"].split("\n")[:16]
            for c in messages[site.index].tool_calls
            if c.name == "edit"
        ]
        new = next(n for n in news if all(ln in site.lines for ln in n))
        placed += len(site.lines) > len(new)
    assert placed > len(sites) // 2, "most edits are placed in text the agent read"


def test_the_working_set_is_carried_through_a_span_without_edits() -> None:
    first = _read_then_edit()
    summary = ExtractiveSummarizer().summarize(SummaryRequest(first, task="fix compute_12"))
    assert "    value_12 = fixed(x)" in summary and FILE[13] in summary
    later = [user("fix compute_12")]
    for i in range(4):  # the agent runs the tests, edits nothing
        later += [_call(f"t{i}", "bash", command="pytest -q"), tool_result(f"t{i}", "ok\n" * 400)]
    request = SummaryRequest(later, task="fix compute_12", previous_summary=summary)
    again = ExtractiveSummarizer().summarize(request)
    assert check_summary(again, request) == []
    # the next edit of src/m.py quotes these lines: still there, once, in their block
    assert again.count("    value_12 = fixed(x)") == 1 and FILE[13] in again
    assert "src/m.py, around the edit of an earlier span:\n```" in again
    # a span that edits the file again quotes its own, fresher lines instead
    newer = [
        user("fix compute_12"),
        _call("r2", "read", path="src/m.py"),
        tool_result("r2", "\n".join([*FILE[:12], "    value_12 = fixed(x)", *FILE[13:]])),
        _call("e2", "edit", path="src/m.py", oldText=FILE[30], newText="    value_30 = 0"),
        tool_result("e2", "ok\n" * 200),
    ]
    third = ExtractiveSummarizer().summarize(
        SummaryRequest(newer, task="fix compute_12", previous_summary=again)
    )
    assert "value_30 = 0" in third and "an earlier span" not in third
