"""The summarizer contract: check_summary, summary_cache_key, the section format
(summarizers/base.py, summarizers/_sections.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextwarden import SummarizerError
from contextwarden.analysis.sections import Entry, fit
from contextwarden.summarizers import (
    SummaryRequest,
    SummarySections,
    check_summary,
    parse_summary,
    summary_cache_key,
)
from contextwarden.testing import ConversationBuilder, FakeSummarizer

TASK = "Port the date parser to use zoneinfo instead of pytz everywhere in the package"


def _request(**kw: object) -> SummaryRequest:
    b = ConversationBuilder().user(TASK)
    b.pin("Keep Python 3.8 support")
    b.edit("pkg/dates.py", "import pytz", "import zoneinfo")
    b.bash(
        "python -m pytest -q", "E   ModuleNotFoundError: No module named 'zoneinfo'", returncode=1
    )
    b.bash("cat pkg/dates.py", "x = 1\n" * 300)
    return SummaryRequest(b.messages, **{"task": TASK, **kw})  # type: ignore[arg-type]


def _summary(
    *,
    task: str = TASK,
    pin: str = "Keep Python 3.8 support",
    path: str = "pkg/dates.py",
    error: str = "E ModuleNotFoundError: No module named 'zoneinfo'",
) -> str:
    return SummarySections(
        completed="- edited the imports",
        remaining=f"Original task:\n{task}",
        current_state=f"Files changed:\n- {path}\nLast unresolved error:\n{error}",
        notes=f"Pinned (verbatim):\n{pin}",
    ).render()


def test_a_complete_summary_passes() -> None:
    assert check_summary(_summary(), _request()) == []


@pytest.mark.parametrize(
    ("summary", "problem"),
    [
        (_summary(task="Something else entirely"), "missing the original task"),
        (_summary(pin="Keep Python 3.12"), "missing pinned text 'Keep Python 3.8 support'"),
        (_summary(path="pkg/other.py"), "missing modified file path 'pkg/dates.py'"),
        (_summary(error="it failed"), "missing the last unresolved error"),
        ("just some text " + TASK, "summary is missing <completed>"),
        ("   ", "summary is empty"),
    ],
)
def test_each_missing_fact_is_reported(summary: str, problem: str) -> None:
    problems = check_summary(summary, _request())
    assert any(problem in p for p in problems), problems


def test_whitespace_differences_do_not_matter() -> None:
    rewrapped = _summary().replace("Port the date parser", "Port the\n   date parser")
    assert check_summary(rewrapped, _request()) == []


def test_not_clearly_smaller_is_rejected() -> None:
    request = _request()
    replaced = sum(m.char_count for m in request.messages)
    padded = _summary().replace("- edited the imports", "x" * int(replaced * 0.7))
    problems = check_summary(padded, request)
    assert any("not clearly smaller" in p for p in problems)
    assert not any("max_chars" in p for p in problems)
    tight = check_summary(_summary(), _request(max_chars=300))
    assert any(f"summary has {len(_summary())} chars, over max_chars=300" in p for p in tight)


def test_request_pins_are_checked_too() -> None:
    request = _request(pinned=("The deadline is Friday",))
    assert any("The deadline is Friday" in p for p in check_summary(_summary(), request))


def test_a_long_task_needs_only_its_opening() -> None:
    long_task = TASK + " and " + "also handle leap seconds; " * 200
    request = _request(task=long_task)
    assert check_summary(_summary(task=long_task[:200]), request) == []


def test_cache_key_depends_on_what_changes_the_summary() -> None:
    base = _request()
    key = summary_cache_key(base, "extractive")
    assert key == summary_cache_key(_request(), "extractive")  # equal content, equal key
    variants = [
        summary_cache_key(base, "llm"),
        summary_cache_key(_request(focus="tests"), "extractive"),
        summary_cache_key(_request(previous_summary="<completed>x</completed>"), "extractive"),
        summary_cache_key(_request(max_chars=1000), "extractive"),
        summary_cache_key(_request(pinned=("p",)), "extractive"),
        summary_cache_key(SummaryRequest(base.messages[:-1], task=TASK), "extractive"),
    ]
    assert key not in variants and len(set(variants)) == len(variants)
    assert summary_cache_key(base, FakeSummarizer(name="a")) != summary_cache_key(
        base, FakeSummarizer(name="b")
    )


def test_request_validation() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        SummaryRequest((), max_chars=0)
    # lists are frozen into tuples
    req = SummaryRequest(list(_request().messages), pinned=["a"])  # type: ignore[arg-type]
    assert isinstance(req.messages, tuple) and req.pinned == ("a",)


def test_parse_summary_strict_and_lenient() -> None:
    text = (
        "Here you go:\n<completed>\na\n</completed>\n<remaining>b</remaining>\n"
        "<current_state>\n</current_state>\n<notes>n</notes>\nThanks!"
    )
    s = parse_summary(text)
    assert (s.completed, s.remaining, s.current_state, s.notes) == ("a", "b", "", "n")
    assert parse_summary(s.render()) == s
    with pytest.raises(SummarizerError, match="missing <remaining>, <notes>"):
        parse_summary("<completed>a</completed><remaining/><current_state></current_state>")
    assert parse_summary("<notes>only</notes>", strict=False).notes == "only"


def test_fit_admits_by_tier_and_renders_in_order() -> None:
    entries = [
        Entry("completed", "low priority line", 9, (0,), "Done"),
        Entry("remaining", "the task", 0, (0,), "Task", bullet=False),
        Entry("current_state", "a.py", 2, (0, 0), "Files"),
        Entry("current_state", "b.py", 2, (0, 1), "Files"),
        Entry("notes", "x" * 500, 1, (0,), min_chars=50),
    ]
    out = fit(entries, 260)
    assert len(out) <= 260
    assert "Task:\nthe task\n" in out and "Files:\n- a.py\n- b.py\n" in out
    assert "low priority line" not in out
    assert "[...]" in out  # the long note was clipped to the room left
    big = fit(entries, 10_000)
    assert "Done:\n- low priority line\n" in big


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["completed", "remaining", "current_state", "notes"]),
            st.text(max_size=60),
            st.integers(0, 9),
            st.sampled_from([None, "G", "H"]),
            st.integers(0, 80),
        ),
        max_size=30,
    ),
    st.integers(0, 800),
)
def test_fit_never_exceeds_the_cap(
    raw: list[tuple[str, str, int, str | None, int]], cap: int
) -> None:
    entries = [
        Entry(sec, text, tier, (i,), group, min_chars=mc)
        for i, (sec, text, tier, group, mc) in enumerate(raw)
    ]
    out = fit(entries, cap)
    scaffold = len(SummarySections().render())
    assert len(out) <= max(cap, scaffold)
    parse_summary(out, strict=False)
    assert out == fit(list(entries), cap)
