"""The compaction engine: adaptive order, validation, fallback, cache, refs, triggers, and its
invariants on generated and real histories."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwarden import ConfigError, Message, TextBlock
from contextwarden._budget import Budget
from contextwarden._compaction import (
    CompactionReport,
    Compactor,
    held_facts,
    must_keep,
    should_compact,
)
from contextwarden._config import CompactionConfig
from contextwarden._events import Event
from contextwarden._messages import tool_result, user
from contextwarden.analysis.facts import extract_facts
from contextwarden.formats import to_anthropic, to_openai, validate_anthropic, validate_openai
from contextwarden.strategies import (
    StrategyContext,
    StrategyOutcome,
)
from contextwarden.strategies.base import HINT_RE, is_summary_message
from contextwarden.testing import ConversationBuilder, FakeSummarizer, FixedCounter

COUNTER = FixedCounter(per_message=4)
REF = re.compile(r"ref (cw:[0-9a-f]+)\]")


def flatten(messages: Sequence[Message]) -> str:
    """The words of ``messages`` (text, tool results, call arguments), whitespace collapsed:
    the plain reading of "the history holds a fact"."""
    parts: list[str] = []
    for m in messages:
        parts.append(m.text)
        parts.extend(r.text for r in m.tool_results)
        parts.extend(c.arguments for c in m.tool_calls)
    return " ".join(" ".join(parts).split())


_FACT_TEXT = st.text(alphabet=st.sampled_from("ab:._/ \t\n\u00a0\x1c"), max_size=24)


@given(texts=st.lists(_FACT_TEXT, max_size=5), facts=st.lists(_FACT_TEXT, max_size=6))
def test_held_facts_are_the_facts_in_the_words_collapsed(
    texts: list[str], facts: list[str]
) -> None:
    messages = [user(t) if i % 2 else tool_result(f"c{i}", t) for i, t in enumerate(texts)]
    flat = flatten(messages)
    wanted = [" ".join(f.split()) for f in facts]
    expected = tuple(dict.fromkeys(w for w in wanted if w and w in flat))
    assert held_facts(messages, facts) == expected


def coding(loops: int = 30, output: int = 400) -> list[Message]:
    """A coding run: a task, many shell loops, an edit, an unresolved error at the end."""
    b = ConversationBuilder().system("You are a coding agent.").user("Fix the parser bug")
    for i in range(loops):
        b.bash(f"cat src/mod{i}.py", f"line {i}\n" * (output // 7))
        if i == loops // 3:
            b.edit("src/parse.py", "x - 1", "x")
    b.bash(
        "python repro.py", "Traceback (most recent call last):\nValueError: bad input", returncode=1
    )
    return b.build()


def budget_for(messages: Sequence[Message], share: float = 0.8) -> Budget:
    """A budget whose trigger the history exceeds (tokens ~ share of the window)."""
    return Budget(int(COUNTER.count_messages(messages) / share), reserve=0)


def expand(messages: Sequence[Message], elided: Mapping[str, tuple[Message, ...]]) -> list[Message]:
    """The original history back from a compacted one: each summary replaced by its span."""
    out: list[Message] = []
    for m in messages:
        if is_summary_message(m):
            match = REF.search(m.text)
            assert match is not None
            out.extend(expand(elided[match.group(1)], elided))
        else:
            out.append(m)
    return out


def same_history(restored: Sequence[Message], original: Sequence[Message]) -> bool:
    """``restored`` holds every original message exactly once (a system message may carry the
    full summary's hint) and each elided span in its original order. A summary stands where
    its span started, so messages kept in between (pins) may come after it."""
    if len(restored) != len(original):
        return False
    by_id = {id(o): i for i, o in enumerate(original)}
    positions: list[int] = []
    for m in restored:
        if id(m) in by_id:  # compaction keeps and elides the original objects themselves
            positions.append(by_id[id(m)])
            continue
        if m.role == "system":
            m = m.replace(content=(TextBlock(HINT_RE.sub("", m.text)),))
        found = [i for i, o in enumerate(original) if o == m and i not in positions]
        if not found:
            return False
        positions.append(found[0])
    return sorted(positions) == list(range(len(original)))


# -- basics ------------------------------------------------------------------------------------
def test_nothing_to_do_under_the_trigger_unless_forced() -> None:
    msgs = coding(10)
    budget = Budget(COUNTER.count_messages(msgs) * 2, reserve=0)
    assert Compactor().compact(msgs, budget=budget, counter=COUNTER) is None
    forced = Compactor().compact(msgs, budget=budget, counter=COUNTER, force=True)
    assert forced is not None and forced.new_token_count < forced.original_token_count


def test_compacts_under_the_target_with_the_first_strategy() -> None:
    msgs = coding()
    budget = budget_for(msgs)
    compactor = Compactor()
    report = compactor.run(msgs, budget=budget, counter=COUNTER)
    result, events = report.result, list(report.events)
    assert result is not None
    assert result.strategy == "sliding_window"
    assert result.original_token_count == COUNTER.count_messages(msgs)
    assert result.new_token_count == COUNTER.count_messages(result.new_messages)
    assert result.new_token_count <= budget.target < budget.trigger
    assert 0 < result.saved_ratio < 1
    # one summary, the system prompt and the task untouched, the tail verbatim
    assert result.new_messages[0] is msgs[0] and result.new_messages[1] is msgs[1]
    notes = [m for m in result.new_messages if is_summary_message(m)]
    assert len(notes) == 1 and len(result.refs) == 1
    assert f"ref {result.refs[0]}]" in notes[0].text
    assert result.summary in notes[0].text
    span = report.elided[result.refs[0]]
    assert result.compacted_count == len(span)
    assert all(any(m is o for o in msgs) for m in span)  # the originals themselves
    assert same_history(expand(result.new_messages, report.elided), msgs)
    [event] = [e for e in events if e.kind == "context_compacted"]
    assert event.compaction is result and event.data["elided"] == report.elided


def test_input_is_not_mutated_and_output_is_deterministic() -> None:
    msgs = coding()
    before = list(msgs)
    budget = budget_for(msgs)
    a = Compactor().compact(msgs, budget=budget, counter=COUNTER)
    b = Compactor().compact(msgs, budget=budget, counter=COUNTER)
    assert msgs == before
    assert a is not None and b is not None and a.new_messages == b.new_messages


async def test_acompact_gives_the_same_result() -> None:
    msgs = coding()
    budget = budget_for(msgs)
    sync = Compactor(summarizer=FakeSummarizer()).compact(msgs, budget=budget, counter=COUNTER)
    events: list[Event] = []
    done = await Compactor(summarizer=FakeSummarizer()).acompact(
        msgs, budget=budget, counter=COUNTER, events=events
    )
    assert sync is not None and done is not None
    assert done.new_messages == sync.new_messages and done.refs == sync.refs
    assert [e.kind for e in events] == ["context_compacted"]


def test_focus_reaches_the_summarizer() -> None:
    msgs = coding()
    fake = FakeSummarizer()
    Compactor(summarizer=fake).compact(
        msgs, budget=budget_for(msgs), counter=COUNTER, focus="the parser", force=True
    )
    assert fake.calls and all(r.focus == "the parser" for r in fake.calls)


def test_every_summary_request_names_the_reference_of_its_span_and_who_wrote_it() -> None:
    """The engine tells the summarizer the cw: reference the originals are kept under (so the
    summary can point back to them) and records which summarizer wrote the summary."""
    msgs = coding()
    fake = FakeSummarizer(name="scribe")
    report = Compactor(summarizer=fake).run(msgs, budget=budget_for(msgs), counter=COUNTER)
    result = report.result
    assert result is not None and fake.calls
    assert {r.ref for r in fake.calls} <= set(result.refs) and None not in {
        r.ref for r in fake.calls
    }
    assert result.summarizer == "scribe"
    [event] = [e for e in report.events if e.kind == "context_compacted"]
    assert event.data["summarizer"] == "scribe" and "summary by scribe" in event.detail
    assert event.data["kept"] == sum(1 for m in result.new_messages if any(m is o for o in msgs))


def test_a_per_call_summarizer_replaces_the_configured_one_for_that_call_only() -> None:
    msgs = coding()
    own, guest = FakeSummarizer(name="own"), FakeSummarizer(name="guest")
    compactor = Compactor(summarizer=own)
    first = compactor.compact(msgs, budget=budget_for(msgs), counter=COUNTER, summarizer=guest)
    assert first is not None and first.summarizer == "guest" and guest.calls and not own.calls
    second = compactor.compact(msgs[:-2], budget=budget_for(msgs[:-2]), counter=COUNTER)
    assert second is not None and second.summarizer == "own" and own.calls


def test_a_failed_summarizer_is_named_as_such_and_the_fallback_as_the_writer() -> None:
    msgs = coding()
    report = Compactor(summarizer=FakeSummarizer(fail=True, name="flaky")).run(
        msgs, budget=budget_for(msgs), counter=COUNTER
    )
    assert report.result is not None and report.result.summarizer == "extractive"
    assert any(e.kind == "summarizer_failed" and "flaky" in e.detail for e in report.events)


# -- progression and the last resort ------------------------------------------------------------
def test_one_summary_call_per_compaction_even_when_the_tail_is_over_the_target() -> None:
    # the recent tail alone is over the target: a second summary of a wider span would not get
    # there either, so the first one is kept and the window cuts the rest
    b = ConversationBuilder().system("sys").user("Fix the parser bug")
    for i in range(30):
        b.bash(f"cat src/mod{i}.py", "x" * (6000 if i >= 25 else 100))
    msgs = b.build()
    budget = Budget(10_000, reserve=0)
    llm = FakeSummarizer()
    report = Compactor(summarizer=llm).run(msgs, budget=budget, counter=COUNTER)
    assert report.result is not None
    assert len(llm.calls) == 1 and report.applied == ("sliding_window",)
    # the newest unit is never summarised (the warden's final guard cuts it when too large)
    assert report.result.new_messages[-1] is msgs[-1]
    # an ordinary compaction leaves the (cached) system prompt as it is; the overflow rebuild
    # (the full summary alone) folds its hint in
    assert report.result.new_messages[0] is msgs[0]
    cfg = CompactionConfig.model_validate({"strategy_order": {}, "fallback_order": []})
    rebuilt = Compactor(cfg, hint_system=True).run(msgs, budget=budget, counter=COUNTER)
    assert rebuilt.result is not None and rebuilt.applied == ("full_summary",)
    assert "[contextwarden:" in rebuilt.result.new_messages[0].text


def test_adaptive_order_follows_the_task_type() -> None:
    b = ConversationBuilder().system("sys").user("Compare the two reports")
    for i in range(20):
        b.tool_loop("web_search", {"q": f"topic {i}"}, "result " * 100)
    msgs = b.build()
    cfg = CompactionConfig.model_validate(
        {"strategy_order": {"analysis": ["importance", "sliding_window"]}}
    )
    report = Compactor(cfg).run(msgs, budget=budget_for(msgs), counter=COUNTER)
    assert report.task_type == "analysis"
    assert report.applied[0] == "importance"


# -- validation and fallback ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "fake",
    [
        FakeSummarizer(fail=True),
        FakeSummarizer(fail=RuntimeError("network down")),
        FakeSummarizer(output=""),
        FakeSummarizer(output="just some words, no sections"),
        FakeSummarizer(output=lambda request: 42),  # type: ignore[arg-type,return-value]
        FakeSummarizer(output="<completed>\n" + "x" * 20_000 + "\n</completed>"),
    ],
    ids=["raises", "raises-foreign", "empty", "untagged", "not-text", "huge"],
)
def test_a_failing_summarizer_falls_back_to_the_extractive_one(fake: FakeSummarizer) -> None:
    msgs = coding()
    events: list[Event] = []
    result = Compactor(summarizer=fake).compact(
        msgs, budget=budget_for(msgs), counter=COUNTER, events=events
    )
    assert result is not None
    assert "summarizer_failed" in [e.kind for e in events]
    assert "<current_state>" in result.summary and "src/parse.py" in result.summary
    assert fake.calls


def test_a_summary_missing_a_fact_is_rejected_and_the_next_strategy_runs() -> None:
    msgs = coding()
    forgetful = FakeSummarizer(
        output="<completed>\nstuff\n</completed>\n<remaining>\nFix the parser bug\n"
        "</remaining>\n<current_state>\n</current_state>\n<notes>\n</notes>"
    )
    report = Compactor(summarizer=forgetful).run(msgs, budget=budget_for(msgs), counter=COUNTER)
    rejected = [e for e in report.events if e.kind == "summary_rejected"]
    assert rejected and all("src/parse.py" in e.detail for e in rejected)
    # the next strategy (key events) keeps the edit itself, so its summary need not name it
    assert report.result is not None and report.applied == ("key_events",)
    facts = ("src/parse.py", "ValueError:  bad\n input")
    assert held_facts(report.result.new_messages, facts) == (
        "src/parse.py",
        "ValueError: bad input",
    )


def test_the_last_resort_falls_back_to_the_extractive_summary() -> None:
    msgs = coding()
    forgetful = FakeSummarizer(
        output="<completed>\nstuff\n</completed>\n<remaining>\nFix the parser bug\n"
        "</remaining>\n<current_state>\n</current_state>\n<notes>\n</notes>"
    )
    cfg = CompactionConfig.model_validate({"strategy_order": {"code": []}, "fallback_order": []})
    report = Compactor(cfg, summarizer=forgetful).run(
        msgs, budget=budget_for(msgs), counter=COUNTER
    )
    assert [e.kind for e in report.events] == ["summary_rejected", "context_compacted"]
    assert report.result is not None and report.applied == ("full_summary",)
    assert "src/parse.py" in report.result.summary
    assert "ValueError: bad input" in flatten(report.result.new_messages)  # the kept newest unit


def test_a_summary_not_clearly_smaller_is_rejected() -> None:
    b = ConversationBuilder().system("sys").user("task")
    for i in range(14):
        b.bash(f"echo {i}", "ok")
    msgs = b.build()
    wordy = FakeSummarizer(
        output=lambda r: (
            "<completed>\n" + "done " * 150 + "\n</completed>\n"
            "<remaining>\ntask\n</remaining>\n<current_state>\n</current_state>\n"
            "<notes>\n</notes>"
        )
    )
    report = Compactor(summarizer=wordy).run(
        msgs, budget=Budget(10_000, reserve=0), counter=COUNTER, force=True
    )
    kinds = [e.kind for e in report.events]
    assert "summary_rejected" in kinds
    assert any("not clearly smaller" in e.detail for e in report.events)
    if report.result is not None:
        assert report.result.new_token_count < report.result.original_token_count


def test_a_strategy_that_raises_is_skipped() -> None:
    def boom(messages: Sequence[Message], ctx: StrategyContext) -> StrategyOutcome | None:
        raise RuntimeError("bug in my strategy")

    cfg = CompactionConfig.model_validate(
        {"strategy_order": {"code": ["test_boom", "sliding_window"]}}
    )
    msgs = coding()
    compactor = Compactor(cfg, strategies={"test_boom": boom})
    report = compactor.run(msgs, budget=budget_for(msgs), counter=COUNTER)
    assert report.result is not None and report.applied == ("sliding_window",)
    assert any(e.kind == "warning" and "test_boom" in e.detail for e in report.events)


def test_a_strategy_that_breaks_the_layout_is_skipped() -> None:
    def cuts_pairs(messages: Sequence[Message], ctx: StrategyContext) -> StrategyOutcome | None:
        return StrategyOutcome("cuts_pairs", (3,), summary="<completed>\nx\n</completed>")

    cfg = CompactionConfig.model_validate(
        {"strategy_order": {"code": ["test_cuts_pairs", "sliding_window"]}}
    )
    msgs = coding()
    compactor = Compactor(cfg, strategies={"test_cuts_pairs": cuts_pairs})
    report = compactor.run(msgs, budget=budget_for(msgs), counter=COUNTER)
    assert report.applied == ("sliding_window",)
    assert any("cuts the unit" in e.detail for e in report.events)


def test_unknown_strategy_names_are_a_config_error() -> None:
    cfg = CompactionConfig.model_construct(
        **{**CompactionConfig.model_validate({}).model_dump(), "fallback_order": ["nope"]}
    )
    with pytest.raises(ConfigError, match="fallback_order: unknown strategy 'nope'"):
        Compactor(cfg)


# -- cache ------------------------------------------------------------------------------------------
def test_a_summary_is_paid_once() -> None:
    msgs = coding()
    budget = budget_for(msgs)
    cache: dict[str, str] = {}
    fake = FakeSummarizer()
    first = Compactor(summarizer=fake, cache=cache).compact(msgs, budget=budget, counter=COUNTER)
    calls = len(fake.calls)
    assert calls >= 1 and len(cache) == calls
    # another process sharing the cache: the same summaries, nothing written again
    again = Compactor(summarizer=fake, cache=cache).compact(msgs, budget=budget, counter=COUNTER)
    assert len(fake.calls) == calls
    assert first is not None and again is not None and again.new_messages == first.new_messages


class BrokenCache(MutableMapping[str, str]):
    def __getitem__(self, key: str) -> str:
        raise OSError("disk gone")

    def __setitem__(self, key: str, value: str) -> None:
        raise OSError("disk gone")

    def __delitem__(self, key: str) -> None:
        raise OSError("disk gone")

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def test_a_broken_cache_is_a_miss_not_an_outage() -> None:
    msgs = coding()
    result = Compactor(cache=BrokenCache()).compact(msgs, budget=budget_for(msgs), counter=COUNTER)
    assert result is not None


# -- re-compaction ----------------------------------------------------------------------------------
def test_recompaction_folds_the_previous_summary_and_keeps_every_span_recoverable() -> None:
    msgs = coding(120)
    compactor = Compactor()
    budget = budget_for(msgs[:60], share=0.76)
    working = list(msgs[:60])
    spans: dict[str, tuple[Message, ...]] = {}
    results = 0
    for m in msgs[60:]:
        working.append(m)
        if m.role == "tool" and COUNTER.count_messages(working) > budget.trigger:
            report = compactor.run(working, budget=budget, counter=COUNTER)
            result = report.result
            assert result is not None
            spans.update(report.elided)
            working = list(result.new_messages)
            results += 1
    assert results >= 3
    assert sum(is_summary_message(m) for m in working) == 1
    assert same_history(expand(working, spans), msgs)


# -- triggers ---------------------------------------------------------------------------------------
def test_should_compact_triggers() -> None:
    msgs = coding(5)
    budget = Budget(COUNTER.count_messages(msgs) * 2, reserve=0)
    assert should_compact(msgs, budget=budget, counter=COUNTER) is None
    tight = Budget(COUNTER.count_messages(msgs), reserve=0)
    hit = should_compact(msgs, budget=tight, counter=COUNTER)
    assert hit is not None and hit.reason == "tokens"
    many = should_compact(msgs, budget=budget, counter=COUNTER, turns=200)
    assert many is not None and many.reason == "turns"
    assert should_compact(msgs, budget=budget, counter=COUNTER, turns=199) is None
    cmd = ConversationBuilder().extend(msgs).user("/compact the parser fix").build()
    hit = should_compact(cmd, budget=budget, counter=COUNTER)
    assert hit is not None and hit.reason == "command" and hit.focus == "the parser fix"
    bare = should_compact(
        [*msgs, *ConversationBuilder().user("/compact").build()], budget=budget, counter=COUNTER
    )
    assert bare is not None and bare.reason == "command" and bare.focus is None
    marked = (
        ConversationBuilder()
        .extend(msgs)
        .tool_loop("bash", {"command": "ls"}, "x", text="!!!SUMMARY!!!")
        .build()
    )
    hit = should_compact(marked, budget=budget, counter=COUNTER)
    assert hit is not None and hit.reason == "marker"
    # once the model has moved on, the old marker no longer asks
    moved = ConversationBuilder().extend(marked).assistant("next step").build()
    assert should_compact(moved, budget=budget, counter=COUNTER) is None
    not_a_command = ConversationBuilder().extend(msgs).user("please /compact later").build()
    assert should_compact(not_a_command, budget=budget, counter=COUNTER) is None


# -- invariants on generated histories ----------------------------------------------------------------
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("bash"), st.integers(0, 3000), st.booleans()),
        st.tuples(st.just("edit"), st.integers(0, 5), st.booleans()),
        st.tuples(st.just("pin"), st.integers(0, 300), st.booleans()),
        st.tuples(st.just("user"), st.integers(1, 500), st.booleans()),
        st.tuples(st.just("say"), st.integers(1, 800), st.booleans()),
        st.tuples(st.just("parallel"), st.integers(2, 4), st.booleans()),
        st.tuples(st.just("todo"), st.integers(1, 4), st.booleans()),
    ),
    min_size=1,
    max_size=60,
)


def generated(ops: list[tuple[str, int, bool]]) -> list[Message]:
    b = ConversationBuilder().system("You are an agent.").user("The task: make tests pass")
    for k, (op, n, flag) in enumerate(ops):
        if op == "bash":
            b.bash(f"run step {k}", "o" * n, returncode=1 if flag else 0)
        elif op == "edit":
            b.edit(f"src/f{n}.py", "a", "b", error="no match" if flag else None)
        elif op == "pin":
            b.pin(f"rule {k}: " + "p" * n)
        elif op == "user":
            b.user(f"note {k} " + "u" * n)
        elif op == "say":
            b.assistant(f"thinking {k} " + "s" * n)
        elif op == "parallel":
            b.parallel([("bash", {"command": f"echo {k}.{j}"}, "r" * 200, flag) for j in range(n)])
        else:
            b.todo([(f"item {j}", "pending") for j in range(n)])
    return b.build()


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, window=st.integers(800, 20_000))
def test_invariants_on_generated_histories(ops: list[tuple[str, int, bool]], window: int) -> None:
    msgs = generated(ops)
    before = list(msgs)
    budget = Budget(window, reserve=0)
    compactor = Compactor()
    report = compactor.run(msgs, budget=budget, counter=COUNTER)
    assert msgs == before
    result = report.result
    if result is None:
        return
    new = result.new_messages
    assert validate_openai(to_openai(new)) == []
    assert validate_anthropic(*to_anthropic(new)) == []
    assert new[1] is msgs[1]  # the task, verbatim
    assert HINT_RE.sub("", new[0].text) == msgs[0].text
    pinned = [m for m in msgs if m.is_pinned]
    assert all(any(p is n for n in new) for p in pinned)
    assert result.new_token_count < result.original_token_count  # never fails to shrink
    assert result.new_token_count == COUNTER.count_messages(new)
    assert same_history(expand(new, report.elided), msgs)
    for span in report.elided.values():
        where = [msgs.index(m) for m in span if m in msgs]
        assert where == sorted(where)
    flat = flatten(new)
    assert all(fact in flat for fact in must_keep(msgs))
    again = Compactor().run(msgs, budget=budget, counter=COUNTER).result
    assert again is not None and again.new_messages == new


# -- real trajectories ------------------------------------------------------------------------------
def _cuts(messages: Sequence[Message], points: Sequence[float]) -> Iterator[int]:
    """Cut points right after a tool result (where the next model call happens)."""
    for share in points:
        cut = int(len(messages) * share)
        while cut > 2 and messages[cut - 1].role != "tool":
            cut -= 1
        while cut < len(messages) and messages[cut].role == "tool":
            cut += 1
        yield cut


def _trajectories(shared: Path) -> list[Path]:
    found = sorted((shared / "mini-swe-agent").glob("*.json"))
    if not found:
        pytest.skip("no mini-swe-agent trajectories in ../shared/data")
    return found


def _exact() -> Any:
    from contextwarden._tokens import get_counter

    return get_counter("gpt-4o")


def test_real_trajectories_compact_into_16k(shared_data: Path) -> None:
    from contextwarden._transcripts import load_transcript

    counter = _exact()
    budget = Budget(16_384)
    checked = 0
    for path in _trajectories(shared_data):
        original = load_transcript(path).messages
        for cut in _cuts(original, (0.35, 0.9)):
            # pin one early tool result: it must survive verbatim
            msgs = list(original[:cut])
            k = next(
                i for i in range(4, cut) if msgs[i].role == "tool" and msgs[i].char_count < 1500
            )
            msgs[k] = msgs[k].replace(pinned=True)
            assert validate_openai(to_openai(msgs)) == [], path.name
            compactor = Compactor()
            report = compactor.run(msgs, budget=budget, counter=counter)
            result = report.result
            assert result is not None, f"{path.name}@{cut}"
            new = result.new_messages
            where = f"{path.name}@{cut} ({result.strategy})"
            assert validate_openai(to_openai(new)) == [], where
            assert counter.count_messages(new) == result.new_token_count <= budget.limit, where
            assert result.new_token_count <= budget.target, where
            assert result.new_token_count < result.original_token_count, where
            assert new[1] is msgs[1], where
            assert any(m is msgs[k] for m in new), where
            facts = extract_facts(msgs)
            flat = flatten(new)
            assert [p for p in facts.changed_files if p not in flat] == [], where
            error = facts.last_unresolved_error
            if error is not None:
                assert " ".join(error.key.removesuffix(" [...]").split()) in flat, where
            assert same_history(expand(new, report.elided), msgs), where
            checked += 1
    assert checked >= 3


def _replay(
    messages: Sequence[Message], budget: Budget, counter: Any
) -> Iterator[tuple[int, CompactionReport | None, list[Message]]]:
    """Append the history one unit at a time; before each model call, compact when over the
    trigger. Yields (call number, report or None, working history after the call)."""
    compactor = Compactor()
    working: list[Message] = []
    call = 0
    k = 0
    while k < len(messages):
        end = k + 1
        while end < len(messages) and messages[end].role == "tool":
            end += 1
        working.extend(messages[k:end])
        k = end
        if working[-1].role == "system":
            continue
        call += 1
        report = None
        trigger = should_compact(working, budget=budget, counter=counter, turns=0)
        if trigger is not None:
            report = compactor.run(working, budget=budget, counter=counter)
            if report.result is not None:
                working = list(report.result.new_messages)
        yield call, report, working


def test_replay_never_compacts_on_two_consecutive_calls(shared_data: Path) -> None:
    from contextwarden._transcripts import load_transcript

    counter = _exact()
    budget = Budget(16_384)
    for path in _trajectories(shared_data)[:4]:
        messages = load_transcript(path).messages
        last = -2
        compactions = 0
        for call, report, working in _replay(messages, budget, counter):
            if report is not None and report.result is not None:
                assert call != last + 1, f"{path.name}: compacted on calls {last} and {call}"
                last = call
                compactions += 1
            assert counter.count_messages(working) <= budget.limit, f"{path.name} call {call}"
        assert compactions >= 2, path.name


def test_replay_keeps_every_modified_file(shared_data: Path) -> None:
    from contextwarden._transcripts import load_transcript

    counter = _exact()
    budget = Budget(16_384)
    for path in _trajectories(shared_data)[:4]:
        messages = load_transcript(path).messages
        working: list[Message] = []
        for _, _, after in _replay(messages, budget, counter):
            working = after
        # every file written in the whole run is still named in the final working history
        lost = [p for p in extract_facts(messages).changed_files if p not in flatten(working)]
        assert lost == [], path.name


def test_warden_replay_writes_no_summaries_on_consecutive_calls(shared_data: Path) -> None:
    """End to end through the warden (lossless layers first), as ``contextwarden replay``."""
    from contextwarden._replay import replay
    from contextwarden._transcripts import load_transcript

    for path in _trajectories(shared_data)[:2]:
        messages = load_transcript(path).messages
        calls = replay(messages, model="gpt-4o", window=16_384).calls
        wrote = [c.call for c in calls if c.summaries_written]
        assert wrote, path.name
        assert all(b - a > 1 for a, b in zip(wrote, wrote[1:], strict=False)), (path.name, wrote)
        assert all(c.valid for c in calls), path.name
