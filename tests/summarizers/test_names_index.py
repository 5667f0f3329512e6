"""A summary's names index (``contextwarden.summarizers._index``): ranked for the agent, carried
across compactions, without what the request already holds; and summaries written from what
a mask hid."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwarden import Warden
from contextwarden._log import Compaction
from contextwarden._messages import Message
from contextwarden.analysis.mentions import code_mentions, names_of
from contextwarden.analysis.sections import SummarySections, parse_summary
from contextwarden.layers.mask import UNMASKED
from contextwarden.summarizers import ExtractiveSummarizer, SummaryRequest, check_summary
from contextwarden.summarizers._index import IndexLine, density, earlier_index, names_index, tails
from contextwarden.testing import ConversationBuilder

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench._recordings import load_recording  # noqa: E402

TASK = "Make the CSV exporter quote fields that contain commas"
SOURCE = (
    "class RowWriter:\n    def write_row(self, row):\n        return ','.join(row)\n\n\n"
    "def export_rows(rows, quote_char='\"'):\n    return [RowWriter().write_row(r) for r in rows]\n"
)


_VOCAB = [
    f"{a}_{b}" for a in ("load", "parse", "write", "check") for b in ("row", "header", "field")
]


def _first_span() -> ConversationBuilder:
    b = ConversationBuilder().user(TASK)
    b.bash("cat src/exporter.py", SOURCE)
    b.bash("python -c 'import csv; print(csv.QUOTE_MINIMAL)'", "0\n" + "csv output line\n" * 60)
    b.bash("grep -rn quote_field src/", "src/util/text.py:12:def quote_field(value):\n")
    return b


def _index_names(summary: str) -> set[str]:
    lines = earlier_index(parse_summary(summary, strict=False))
    return {n for path, names in lines for n in (*names, *((path,) if path else ()))}


def test_attribute_names_count_as_code_names() -> None:
    # a method reached through a module or an object is a name the agent types again
    assert "print_exc" in names_of("traceback.print_exc()")
    assert "get_field" in names_of("model._meta.get_field('pk')")


def test_the_index_of_an_earlier_summary_is_carried_into_the_next() -> None:
    first = ExtractiveSummarizer().summarize(SummaryRequest(_first_span().messages, task=TASK))
    assert {"export_rows", "quote_field", "src/exporter.py"} <= _index_names(first)
    later = ConversationBuilder().user(TASK)
    for i in range(6):
        later.bash(f"python -m pytest tests/test_export.py -q -k case_{i}", f"{i} passed\n" * 40)
    second = ExtractiveSummarizer().summarize(
        SummaryRequest(later.messages, task=TASK, previous_summary=first)
    )
    carried = _index_names(second)
    # the names of the first span are still indexed, not demoted to "Earlier (...)" lines
    assert {"export_rows", "quote_field", "src/exporter.py"} <= carried
    assert "Earlier (Files and code in play)" not in second


def test_a_short_span_does_not_shrink_the_index_it_carries() -> None:
    # an update absorbing an earlier summary replaces that summary as well as the span: its
    # length is measured against both, so a short span still leaves room for the earlier index
    # (measured against the span alone, this one had no room for a summary at all)
    defs = "".join(f"def handle_case_{i}(row):\n    return row\n\n" for i in range(40))
    first_span = ConversationBuilder().user(TASK)
    first_span.bash("cat src/handlers.py", defs)
    first = ExtractiveSummarizer().summarize(SummaryRequest(first_span.messages, task=TASK))
    earlier = _index_names(first)
    assert len({n for n in earlier if n.startswith("handle_case_")}) >= 30
    later = ConversationBuilder().user(TASK)
    later.bash("python -m pytest tests/test_handlers.py -q", "3 passed in 0.2s\n" * 12)
    request = SummaryRequest(later.messages, task=TASK, previous_summary=first)
    second = ExtractiveSummarizer().summarize(request)
    assert check_summary(second, request) == []
    assert len(earlier & _index_names(second)) >= len(earlier) // 2


def test_a_name_the_new_span_mentions_outranks_what_is_only_carried_over() -> None:
    first_span = ConversationBuilder().user(TASK)
    first_span.bash("env | sort", "\n".join(f"handle_case_{i}=on" for i in range(40)))
    first = ExtractiveSummarizer().summarize(SummaryRequest(first_span.messages, task=TASK))
    later = ConversationBuilder().user(TASK)
    later.bash("python -c 'from csvio import parse_header_row; parse_header_row()'", "ok")
    later.bash("python -m pytest -q", "3 passed")
    lines = names_index(code_mentions(later.messages), parse_summary(first, strict=False))
    order = [n for line in sorted(lines, key=lambda ln: ln.rank) for n in line.names]
    carried = [k for k, n in enumerate(order) if n.startswith("handle_case_")]
    assert len(carried) >= 10
    # a name the agent typed in the new span comes before the carried ones
    assert order.index("parse_header_row") < min(carried)


def test_names_the_request_holds_beside_the_summary_are_not_repeated() -> None:
    request = SummaryRequest(_first_span().messages, task=TASK)
    summary = ExtractiveSummarizer().summarize(request)
    assert "quote_field" in summary
    held = SummaryRequest(_first_span().messages, task=TASK, held=frozenset({"quote_field"}))
    without = ExtractiveSummarizer().summarize(held)
    assert "quote_field" not in _index_names(without)
    assert check_summary(without, held) == []


def test_a_scratch_scripts_name_is_its_files() -> None:
    b = ConversationBuilder().user(TASK)
    b.bash("cat > reproduce_issue.py << 'EOF'\nprint(1)\nEOF", "")
    b.bash("python reproduce_issue.py", "1")
    lines = names_index(code_mentions(b.messages))
    texts = [line.text for line in lines]
    assert any(t.startswith("reproduce_issue.py") for t in texts)
    assert not any("reproduce_issue" in line.names for line in lines)


def test_generated_labels_are_not_indexed() -> None:
    b = ConversationBuilder().user(TASK)
    b.bash("cat data.txt", " ".join(f"w{i}_{j}_{i}" for i in range(5) for j in range(5)))
    b.bash("grep load_config src/", "src/config.py:3:def load_config(path):")
    names = {n for line in names_index(code_mentions(b.messages)) for n in line.names}
    assert "load_config" in names
    assert not any(n.startswith("w") and n[1].isdigit() for n in names)


def test_the_index_ranks_what_the_agent_typed_first() -> None:
    b = ConversationBuilder().user(TASK)
    b.bash("cat src/exporter.py", SOURCE + "\n".join(f"helper_{i} = {i}" for i in range(30)))
    b.bash("python -c 'from src.exporter import export_rows; export_rows([])'", "[]")
    names = [n for line in names_index(code_mentions(b.messages)) for n in line.names]
    assert names.index("export_rows") < names.index("helper_3")


def test_a_masked_result_is_summarised_from_what_it_masked() -> None:
    from contextwarden._budget import Budget
    from contextwarden.layers.config import MaskConfig
    from contextwarden.layers.mask import mask_text
    from contextwarden.strategies import StrategyContext
    from contextwarden.strategies.base import summary_request
    from contextwarden.testing import FakeSummarizer, FixedCounter

    long_source = SOURCE + "\n".join(f"# line {i}" for i in range(40))
    b = ConversationBuilder().user(TASK)
    b.bash("cat src/exporter.py", long_source)
    b.bash("ls", "README.md")
    view: list[Message] = []
    for m in b.messages:
        r = m.tool_results[0] if m.tool_results else None
        if r is not None and "RowWriter" in r.text:
            masked = mask_text(r.text, MaskConfig(names=0))
            assert "export_rows" not in masked  # the marker alone would lose it
            block = type(r)(r.tool_call_id, masked)
            m = m.replace(content=(block,), hints={UNMASKED: m})
        view.append(m)
    ctx = StrategyContext(
        budget=Budget(32_000, reserve=0),
        counter=FixedCounter(per_message=4),
        summarizer=FakeSummarizer(),
    )
    request = summary_request(view, list(range(1, len(view))), ctx)
    assert any("export_rows" in r.text for m in request.messages for r in m.tool_results)
    # the cap stays at most half of what the span holds in the request (masked)
    assert request.max_chars <= sum(m.char_count for m in view[1:]) // 2 + 1


def _defs_span(batch: int, size: int = 40) -> ConversationBuilder:
    """A span that shows ``size`` new definitions in a file read (no name the agent writes)."""
    source = "".join(f"def step_{batch}_helper_{i}(row):\n    return row\n\n" for i in range(size))
    b = ConversationBuilder().user(TASK)
    b.bash(f"cat src/batch_{batch}.py", source)
    b.bash("python -m pytest -q", "3 passed in 0.2s\n" * 20)
    return b


def test_a_name_the_agent_relied_on_survives_many_updates() -> None:
    # the agent typed parse_header_row again and again in the first span; six later spans
    # each show forty new definitions it never types (in a summary of about 2k characters):
    # the carried name keeps a place (a carried name used to count less than a definition
    # shown once, and was gone after two such spans)
    first = ConversationBuilder().user(TASK)
    for k in range(4):
        first.bash(f"python -c 'from src.csvio import parse_header_row; parse_header_row({k})'")
    summary = ExtractiveSummarizer().summarize(SummaryRequest(first.messages, task=TASK))
    assert "parse_header_row" in _index_names(summary)
    for batch in range(6):
        request = SummaryRequest(_defs_span(batch).messages, task=TASK, previous_summary=summary)
        summary = ExtractiveSummarizer().summarize(request)
        assert check_summary(summary, request) == []
        assert "parse_header_row" in _index_names(summary), batch
    # ... and the newest span's own definitions are indexed beside it
    assert "step_5_helper_0" in _index_names(summary)


def test_the_names_of_a_file_the_agent_returns_to_move_up() -> None:
    def source(stem: str) -> str:
        return "".join(f"def {stem}_fn_{i}():\n    return {i}  # {'x' * 60}\n" for i in range(6))

    first = ConversationBuilder().user(TASK)
    first.bash("cat src/beta.py", source("beta"))
    first.bash("cat src/alpha.py", source("alpha"))  # read last: ranks first
    earlier = ExtractiveSummarizer().summarize(SummaryRequest(first.messages, task=TASK))
    order = [n for _, ns in earlier_index(parse_summary(earlier, strict=False)) for n in ns]
    assert order.index("alpha_fn_0") < order.index("beta_fn_0")
    later = ConversationBuilder().user(TASK)
    later.bash("git diff --stat src/beta.py", " src/beta.py | 2 +-")
    lines = names_index(code_mentions(later.messages), parse_summary(earlier, strict=False))
    ranked = [n for line in sorted(lines, key=lambda ln: ln.rank) for n in line.names]
    assert ranked.index("beta_fn_0") < ranked.index("alpha_fn_0")


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from(_VOCAB), min_size=1, max_size=30),
    st.lists(st.sampled_from(_VOCAB), max_size=30),
    st.frozensets(st.sampled_from(_VOCAB), max_size=5),
)
def test_the_index_lists_each_name_once_and_never_what_the_request_holds(
    first_names: list[str], later_names: list[str], held: frozenset[str]
) -> None:
    first = ConversationBuilder().user(TASK)
    first.bash("cat src/mod.py", "".join(f"def {n}():\n    pass\n" for n in first_names))
    written = "\n".join(f"- {line.text}" for line in names_index(code_mentions(first.messages)))
    earlier = SummarySections(current_state=f"Files and code in play:\n{written}")
    later = ConversationBuilder().user(TASK)
    later.bash("python -c '" + "; ".join(later_names) + "'", "ok")
    lines = names_index(code_mentions(later.messages), earlier, held=held)
    listed = [n for line in lines for n in line.names]
    assert len(listed) == len(set(listed))
    assert not held & set(listed)
    # every name of the earlier index is still there unless the request holds it
    carried = {n for _, ns in earlier_index(earlier) for n in ns}
    assert carried - held <= set(listed)
    assert [ln.rank for ln in lines] == list(range(len(lines)))


@given(st.lists(st.from_regex(r"/?([a-z]{1,4}/){0,3}[a-z]{1,4}(\.py)?", fullmatch=True)))
def test_a_tail_is_held_by_the_path_it_ends(paths: list[str]) -> None:
    for tail in tails(paths):
        assert any(p.endswith("/" + tail) for p in paths)
    for p in paths:  # every shorter path a path ends with is among its tails
        parts = p.split("/")
        assert {"/".join(parts[i:]) for i in range(1, len(parts)) if parts[i]} <= tails(paths)


def test_a_file_listed_by_its_absolute_path_is_not_listed_again_by_its_tail() -> None:
    b = ConversationBuilder().user(TASK)
    b.write("/work/repo/src/exporter.py", SOURCE)
    b.bash("python -m pytest tests/test_exporter.py", "1 passed")
    b.edit("src/exporter.py", "','.join(row)", "csv_join(row)")
    b.bash("cat src/util/text.py", "def quote_field(value):\n    return value\n")
    summary = ExtractiveSummarizer().summarize(SummaryRequest(b.messages, task=TASK))
    assert "/work/repo/src/exporter.py" in summary
    lines = [ln.removeprefix("- ").split(" ")[0].rstrip(":") for ln in summary.splitlines()]
    assert "src/exporter.py" not in lines  # the absolute path holds it
    assert "src/util/text.py" in summary


def test_the_paths_a_real_session_edits_survive_its_compactions() -> None:
    """A real Claude Code session compacted at 16k: every file its removed turns wrote is in
    the summary that replaced them, and no line of the summary's file list is the tail of
    another's."""
    msgs, compactions = _compactions_at_16k("claude-code/python-to-rust-port.jsonl")
    checked = 0
    for _, edit in compactions:
        for lo, hi in edit.removed:
            for call in (c for x in msgs[lo:hi] for c in x.get("tool_calls") or []):
                if call["function"]["name"] in ("Write", "Edit"):
                    path = json.loads(call["function"]["arguments"])["file_path"]
                    assert path in edit.summary
                    checked += 1
        listed = _listed(edit.summary, "Files changed")
        assert not set(listed) & tails(listed)
    assert checked > 0


def _compactions_at_16k(
    recording: str,
) -> tuple[list[dict[str, Any]], Iterator[tuple[int, Compaction]]]:
    """A recording's messages, and each compaction with a summary that replaying it as an agent
    loop at 16k makes, with the call it was made at (skips when the recording is absent)."""
    path = ROOT / "tests" / "data" / "recordings" / recording
    if not path.is_file():
        pytest.skip(f"{recording} is not in this checkout")
    msgs = list(load_recording(path).messages)

    def replay() -> Iterator[tuple[int, Compaction]]:
        warden = Warden()
        for k, m in enumerate(msgs):
            if m["role"] != "assistant":
                continue
            _, result = warden.transform_openai(msgs[:k], model="claude-sonnet-4-5", window=16_000)
            for edit in result.edits:
                if isinstance(edit, Compaction) and edit.summary:
                    yield k, edit

    return msgs, replay()


def _listed(summary: str, heading: str) -> list[str]:
    """The one-path lines under ``heading`` in ``summary``."""
    out: list[str] = []
    under = False
    for line in summary.splitlines():
        if not line.startswith(("-", " ")):
            under = line.startswith(heading)
        elif under and line.startswith("- ") and " " not in line[2:]:
            out.append(line[2:])
    return out


_IDENT = st.from_regex(r"[a-z]{2,9}_[a-z]{2,12}", fullmatch=True)


@given(st.lists(_IDENT, min_size=2, max_size=40, unique=True))
def test_of_names_worth_the_same_the_shorter_are_admitted_first(names: list[str]) -> None:
    # one result shows every name once, at the same place: each is worth the same to the
    # agent, so the index, whose budget is in characters, admits the shorter ones first
    b = ConversationBuilder().user(TASK)
    b.bash("env | sort", "\n".join(f"{n}=on" for n in names))
    lines = sorted(names_index(code_mentions(b.messages)), key=lambda ln: ln.rank)
    listed = [n for line in lines for n in line.names]
    assert sorted(listed) == sorted(names)
    lengths = [len(n) for n in listed]
    assert lengths == sorted(lengths)
    assert sorted(ln.place for ln in lines) == list(range(len(lines)))


@given(
    st.lists(st.integers(min_value=1, max_value=40), min_size=2, max_size=12),
    st.lists(_IDENT, min_size=12, max_size=12, unique=True),
)
def test_the_index_is_written_by_worth_and_admitted_by_worth_per_character(
    runs: list[int], names: list[str]
) -> None:
    # the agent typed each name a different number of times: the written order (what a later
    # summary reads back as the ranking) follows what the name is worth, whatever its length;
    # the admission order follows its worth per character
    b = ConversationBuilder().user(TASK)
    for name, count in zip(names, runs, strict=False):
        for _ in range(count):
            b.bash(f"python -c 'import tool; tool.{name}()'", "ok")
    code = code_mentions(b.messages)
    score = {m.name: m.score for m in code.names}
    lines = names_index(code)
    # loose names only (no file was read): one line per run of names
    assert all(line.path is None for line in lines)

    def first(line: IndexLine) -> str:
        return line.names[0]

    written = [first(ln) for ln in sorted(lines, key=lambda ln: ln.place)]
    assert [score[n] for n in written] == sorted((score[n] for n in written), reverse=True)
    admitted = [n for ln in sorted(lines, key=lambda ln: ln.rank) for n in ln.names]
    worth = [density(score[n], n) for n in admitted]
    assert worth == sorted(worth, reverse=True)


_SEGMENT = st.sampled_from(["src", "pkg", "app", "core", "util", "repo", "work"])


@given(
    st.lists(
        st.tuples(st.booleans(), st.lists(_SEGMENT, min_size=0, max_size=3), _SEGMENT),
        min_size=1,
        max_size=12,
    )
)
def test_a_file_the_index_lists_is_written_once_by_its_longest_path(
    spec: list[tuple[bool, list[str], str]],
) -> None:
    # an agent mixes a file's absolute and relative paths: the index writes the longest path,
    # which holds every shorter one, once
    paths = [
        "/".join([*(["", "repo"] if absolute else []), *dirs, f"{stem}.py"])
        for absolute, dirs, stem in spec
    ]
    b = ConversationBuilder().user(TASK)
    for p in paths:
        b.bash(f"cat {p}", "x = 1\n")
    listed = [ln.path for ln in names_index(code_mentions(b.messages)) if ln.path is not None]
    assert not set(listed) & tails(listed)
    for p in paths:
        assert any(q == p or q.endswith("/" + p) for q in listed), p


@pytest.mark.parametrize(
    "recording",
    [
        "claude-code/python-to-rust-port.jsonl",
        "mini-swe-agent/deepseek_chat_dev_rerun__marshmallow-code__marshmallow-1343.traj.json",
        "mini-swe-agent/deepseek_chat_test_1-100__django__django-12470.traj.json",
    ],
)
def test_a_real_sessions_indexes_write_each_file_once(recording: str) -> None:
    """Real sessions that name a file both as ``/testbed/src/x.py`` or ``./src/x.py`` and as
    ``src/x.py``, compacted at 16k: no path of a summary's names index ends another of its
    paths (the index writes the file once, by its longest path)."""
    _, compactions = _compactions_at_16k(recording)
    seen = 0
    for k, edit in compactions:
        index = earlier_index(parse_summary(edit.summary, strict=False))
        listed = [p for p, _ in index if p is not None]
        assert listed, "a compaction of a coding session lists the files in play"
        assert not set(listed) & tails(listed), (k, set(listed) & tails(listed))
        seen += 1
    assert seen > 0


def test_an_address_the_agent_typed_survives_the_compaction_of_its_call() -> None:
    """A real pi-based session at 16k: the agent fetches a video's transcript by its address,
    tries other ways, and types the same address again 34 messages later. By then the call
    that typed it is compacted: the summary still writes the address, as its resource and the
    video id its query held."""
    path = ROOT / "tests" / "data" / "recordings" / "pi-based" / "gjc-youtube-transcript.jsonl"
    if not path.is_file():
        pytest.skip("the gjc-youtube-transcript recording is not in this checkout")
    msgs = list(load_recording(path).messages)
    url = "https://www.youtube.com/watch?v=Pxt1xpiyabU"

    def holds(ms: list[dict[str, Any]]) -> list[int]:
        return [i for i, m in enumerate(ms) if url in json.dumps(m, ensure_ascii=False)]

    typed = [i for i in holds(msgs) if msgs[i]["role"] == "assistant"]
    first, again = typed[0], typed[1]
    assert again - max(i for i in holds(msgs) if i < again) > 10  # the measure's long range
    warden = Warden()
    removed: list[range] = []
    for k in (i for i, m in enumerate(msgs[: again + 1]) if m["role"] == "assistant"):
        request, result = warden.transform_openai(
            msgs[:k], model="claude-sonnet-4-5", window=16_000
        )
        removed += [
            range(lo, hi) for e in result.edits if isinstance(e, Compaction) for lo, hi in e.removed
        ]
    assert any(first in r for r in removed)  # the call that typed it is gone from the request
    summaries = [m for m in request if m["role"] != "assistant" and "<current_state>" in str(m)]
    written = json.dumps(summaries, ensure_ascii=False)
    assert "https://www.youtube.com/watch" in written and "Pxt1xpiyabU" in written
