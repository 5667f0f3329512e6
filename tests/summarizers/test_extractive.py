"""The embedded extractive summarizer (summarizers/extractive.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from summarizer_loaders import final_diff_files, load_messages

from contextwarden import Message, SummarizerError
from contextwarden.analysis.facts import walk_facts
from contextwarden.summarizers import (
    ExtractiveSummarizer,
    Summarizer,
    SummaryRequest,
    check_summary,
    extract_facts,
    parse_summary,
    request_facts,
)
from contextwarden.summarizers.base import replaced_chars
from contextwarden.testing import ConversationBuilder

TASK = "Fix the off-by-one in pager.py so the last page is shown"


def _history() -> list[Message]:
    b = ConversationBuilder().system("You are a coding agent.").user(TASK)
    b.pin("Never touch the public API of pager.Pager")
    b.todo([("Reproduce", "completed"), ("Fix pager.py", "in_progress"), ("Add test", "pending")])
    b.bash(
        "python repro.py",
        'Traceback (most recent call last):\n  File "repro.py"\n'
        "IndexError: list index out of range",
        returncode=1,
        text="I found that the issue is caused by range(n - 1).",
    )
    b.read("pager.py", "def pages(n):\n    return range(n - 1)\n" * 40)
    b.edit("pager.py", "range(n - 1)", "range(n)")
    b.bash("python repro.py", "ok")
    b.bash(
        "pytest -q tests/test_pager.py",
        "FAILED tests/test_pager.py::test_empty - AssertionError: expected 0 pages",
        returncode=1,
    )
    b.bash("git diff --stat", " pager.py | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)")
    return b.build()


def _request(**kw: object) -> SummaryRequest:
    msgs = tuple(_history()[1:])
    return SummaryRequest(msgs, **{"task": TASK, **kw})  # type: ignore[arg-type]


def test_follows_the_protocol() -> None:
    assert isinstance(ExtractiveSummarizer(), Summarizer)


def test_four_sections_with_every_must_keep_fact() -> None:
    request = _request()
    summary = ExtractiveSummarizer().summarize(request)
    sections = parse_summary(summary)
    assert TASK in sections.remaining
    assert "Never touch the public API of pager.Pager" in sections.notes
    assert "pager.py" in sections.current_state
    assert "AssertionError: expected 0 pages" in sections.current_state  # last unresolved
    assert "Add test" in sections.remaining and "Fix pager.py (in progress)" in sections.remaining
    assert "Reproduce" in sections.completed
    assert "IndexError: list index out of range" in sections.completed  # fixed, listed as such
    assert "1 file changed" in sections.current_state
    assert check_summary(summary, request) == []


def test_respects_max_chars_and_keeps_priorities() -> None:
    request = _request(max_chars=450)
    summary = ExtractiveSummarizer().summarize(request)
    assert len(summary) <= 450
    # the most important facts survive a tight cap; the low tiers go first
    assert TASK in summary and "pager.py" in summary
    assert "Never touch the public API" in summary
    assert "Findings" not in summary


def test_clearly_smaller_than_what_it_replaces() -> None:
    request = _request(max_chars=100_000)
    summary = ExtractiveSummarizer().summarize(request)
    assert len(summary) <= 0.5 * replaced_chars(request)


def test_too_small_or_empty_spans_are_refused() -> None:
    with pytest.raises(SummarizerError, match="no messages"):
        ExtractiveSummarizer().summarize(SummaryRequest(()))
    tiny = SummaryRequest(tuple(ConversationBuilder().user("hi").assistant("hello").build()))
    with pytest.raises(SummarizerError, match="too small"):
        ExtractiveSummarizer().summarize(tiny)


def test_focus_moves_matching_entries_up() -> None:
    b = ConversationBuilder().user(TASK)
    for i in range(30):
        b.bash(f"python step_{i}.py --flag", "done " * 20)
    b.bash("python migrate_database.py", "done")
    msgs = tuple(b.build())
    plain = ExtractiveSummarizer().summarize(SummaryRequest(msgs, max_chars=700))
    focused = ExtractiveSummarizer().summarize(
        SummaryRequest(msgs, max_chars=700, focus="database migration")
    )
    assert "Focus requested: database migration" in focused
    assert "migrate_database.py" in focused
    assert len(plain) <= 700 and len(focused) <= 700


def test_incremental_update_keeps_earlier_facts() -> None:
    first = _request()
    s1 = ExtractiveSummarizer().summarize(first)
    later = ConversationBuilder().user("x").bash("sed -i 's/a/b/' README.md").build()[1:]
    request = SummaryRequest(
        tuple(later) * 6,
        task=TASK,
        previous_summary=s1,
        pinned=("Never touch the public API of pager.Pager",),
    )
    s2 = ExtractiveSummarizer().summarize(request)
    assert "README.md" in s2 and "pager.py" in s2  # new file and carried-over file
    assert check_summary(s2, request) == []


def test_async_matches_sync() -> None:
    import asyncio

    request = _request()
    s = ExtractiveSummarizer()
    assert asyncio.run(s.asummarize(request)) == s.summarize(request)


def test_max_chars_setting_is_validated() -> None:
    with pytest.raises(ValueError, match="at least 200"):
        ExtractiveSummarizer(max_chars=50)


# -- properties ---------------------------------------------------------------------------------
_steps = st.lists(
    st.one_of(
        st.tuples(st.just("user"), st.text(min_size=1, max_size=80)),
        st.tuples(st.just("assistant"), st.text(max_size=120)),
        st.tuples(
            st.just("bash"),
            st.sampled_from(
                [
                    "python t.py",
                    "pytest -q",
                    "sed -i 's/a/b/' src/x.py",
                    "cat > n.py << 'EOF'\nx\nEOF",
                    "grep -rn foo .",
                    "git diff",
                ]
            ),
            st.text(max_size=200),
            st.integers(0, 2),
        ),
        st.tuples(st.just("edit"), st.sampled_from(["a.py", "src/b.py", "c d.txt"]), st.booleans()),
        st.tuples(st.just("pin"), st.text(min_size=1, max_size=40)),
    ),
    min_size=1,
    max_size=25,
)


def _build(steps: list[tuple[object, ...]]) -> list[Message]:
    b = ConversationBuilder().user("Task: make the tests pass in the project")
    for step in steps:
        kind = step[0]
        if kind == "user":
            b.user(str(step[1]))
        elif kind == "assistant":
            b.assistant(str(step[1]), thinking="hmm" if len(str(step[1])) % 2 else None)
        elif kind == "bash":
            b.bash(str(step[1]), str(step[2]), returncode=int(step[3]))  # type: ignore[call-overload]
        elif kind == "edit":
            b.edit(str(step[1]), "a", "b", error="Error: no match" if step[2] else None)
        else:
            b.pin(str(step[1]))
    return b.build()


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_steps, st.integers(200, 3000))
def test_deterministic_bounded_and_smaller(steps: list[tuple[object, ...]], cap: int) -> None:
    msgs = _build(steps)
    request = SummaryRequest(tuple(msgs), max_chars=cap)
    summarizer = ExtractiveSummarizer()
    try:
        first = summarizer.summarize(request)
    except SummarizerError:
        assert min(cap, replaced_chars(request) // 2) < 200  # refused only when too small
        return
    # same request, rebuilt from scratch: same bytes
    again = ExtractiveSummarizer().summarize(SummaryRequest(tuple(_build(steps)), max_chars=cap))
    assert first == again
    assert len(first) <= cap
    assert len(first) <= 0.5 * replaced_chars(request)
    parse_summary(first)  # four tags, not all empty


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_steps)
def test_passes_its_own_checks_when_room_allows(steps: list[tuple[object, ...]]) -> None:
    msgs = _build(steps) * 3  # enough text that the must-keep facts fit in half of it
    request = SummaryRequest(tuple(msgs), max_chars=20_000)
    facts = extract_facts(request.messages)
    must_keep = sum(len(p) + 8 for p in facts.changed_files) + sum(len(p) for p in facts.pins) + 600
    if must_keep > 0.5 * replaced_chars(request):
        return
    summary = ExtractiveSummarizer().summarize(request)
    assert check_summary(summary, request, facts) == []


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_steps)
def test_a_walk_without_command_records_finds_the_same_files_and_errors(
    steps: list[tuple[object, ...]],
) -> None:
    msgs = _build(steps)
    full, lean = walk_facts(msgs), walk_facts(msgs, commands=False)
    assert lean.commands == ()
    assert lean.files == full.files and lean.errors == full.errors
    assert lean.changed_files == full.changed_files
    assert (len(full.commands) > 0) == any(s[0] in ("bash", "edit") for s in steps)


# -- real trajectories --------------------------------------------------------------------------
def _cut_points(n: int) -> list[int]:
    return sorted({max(4, n * k // 4) for k in (1, 2, 3, 4)})


def test_real_trajectories_cut_at_several_points(shared_data: Path) -> None:
    files = sorted((shared_data / "mini-swe-agent").glob("*.traj.json"))
    others = [
        shared_data / "claude-code/python-to-rust-port.jsonl",
        shared_data / "openhands/fastjson2-2775.output.jsonl",
        shared_data / "pi/large-session.jsonl",
    ]
    files += [p for p in others if p.exists()]
    if not files:
        pytest.skip("no trajectories in ../shared/data")
    summarizer = ExtractiveSummarizer()
    checked = 0
    for path in files:
        msgs = [m for m in load_messages(path) if m.role != "system"]
        task = next(m.text for m in msgs if m.role == "user" and m.text.strip())
        for cut in _cut_points(len(msgs)):
            request = SummaryRequest(tuple(msgs[:cut]), task=task)
            summary = summarizer.summarize(request)
            problems = check_summary(summary, request, request_facts(request))
            assert problems == [], (path.name, cut)
            assert summary == summarizer.summarize(request)
            checked += 1
        if path.name.endswith(".traj.json"):
            whole = summarizer.summarize(SummaryRequest(tuple(msgs), task=task))
            for real in final_diff_files(path):
                assert real in whole, (path.name, real)
    assert checked >= 10


def test_same_bytes_across_processes_and_hash_seeds() -> None:
    """No set or hash order leaks into the text: two interpreters with different hash seeds
    write the same summary."""
    import os
    import subprocess
    import sys

    code = (
        "from contextwarden.testing import ConversationBuilder\n"
        "from contextwarden.summarizers import ExtractiveSummarizer, SummaryRequest\n"
        "b = ConversationBuilder().user('Refactor the storage layer').pin('keep WAL mode')\n"
        "for i in range(12):\n"
        "    b.bash(f'sed -i s/a/b/ pkg/m{i}.py && python t{i % 3}.py', f'ValueError: v{i}',"
        " returncode=i % 2)\n"
        "    b.assistant(f'I found that module {i} is the cause because of the cache.')\n"
        "print(ExtractiveSummarizer().summarize(SummaryRequest(b.messages, max_chars=1500)))\n"
    )
    outputs = set()
    for seed in ("1", "2", "random"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
        )
        outputs.add(out.stdout)
    assert len(outputs) == 1 and "pkg/m11.py" in outputs.pop()


def _instructed(n: int, said: str) -> ConversationBuilder:
    """A span where the user speaks ``n`` times (each a long paste), between the agent's calls
    naming a helper of its own."""
    b = ConversationBuilder().user(TASK)
    b.bash("npm test", "ok\n" * 3000)
    for i in range(n):
        b.user(
            f"{said} {i}\n" + "".join(f"  at line_{i}_{j} (src/view.ts:{j})\n" for j in range(12))
        )
        b.bash(f"grep -n apply_theme_{i} src/view.ts", f"src/view.ts:{i}:apply_theme_{i}()")
    return b


def test_the_users_instructions_do_not_crowd_out_the_names_in_play() -> None:
    request = SummaryRequest(_instructed(30, "the theme breaks again, see").messages, task=TASK)
    summary = ExtractiveSummarizer().summarize(request)
    sections = parse_summary(summary)
    # the newest instruction verbatim, every line of it
    assert "the theme breaks again, see 29\n" in sections.remaining + "\n"
    assert "at line_29_11 (src/view.ts:11)" in sections.remaining
    # the older ones fill what room the names the agent typed leave (they once filled it all)
    typed = [f"apply_theme_{i}" for i in range(30)]
    assert sum(name in sections.current_state for name in typed) >= 25


def test_a_multi_line_instruction_is_carried_whole_by_the_next_summary() -> None:
    first = _instructed(2, "please fix:")
    summary = ExtractiveSummarizer().summarize(SummaryRequest(first.messages, task=TASK))
    later = ConversationBuilder().user(TASK)
    later.bash("npm test", "ok\n" * 3000)
    second = ExtractiveSummarizer().summarize(
        SummaryRequest(later.messages, task=TASK, previous_summary=summary)
    )
    remaining = parse_summary(second).remaining
    # one bullet per instruction, each line of it kept under it (not a bullet of its own)
    assert remaining.count("- please fix:") == 2
    assert "at line_0_11 (src/view.ts:11)" in remaining
    assert "at line_1_11 (src/view.ts:11)" in remaining
    assert "- at line_" not in remaining


def test_a_finished_background_task_is_not_a_user_instruction() -> None:
    # Claude Code sends a sub-agent's report as a user turn in a <task-notification> block:
    # the client's words, not the user's; the names it reports are still names in play
    report = (
        "<task-notification>\n<task-id>a92e91fc</task-id>\n<status>completed</status>\n"
        "<result>The pager is built in render_pages (src/pager.py); "
        + "the page size is read from PAGE_LIMIT. " * 40
        + "</result>\n</task-notification>"
    )
    b = ConversationBuilder().user(TASK)
    b.bash("grep -n last_page src/pager.py", "src/pager.py:12:def last_page(n):")
    b.user(report)
    b.user("Also keep the footer")
    for i in range(6):
        b.bash(f"sed -n {i}0,{i}9p src/pager.py", f"line {i}\n" * 30)
    summary = ExtractiveSummarizer().summarize(SummaryRequest(b.messages, task=TASK))
    sections = parse_summary(summary)
    assert "Also keep the footer" in sections.remaining
    assert "task-notification" not in summary and "PAGE_LIMIT. the page" not in summary
    assert "render_pages" in sections.current_state
