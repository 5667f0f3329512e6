"""The Warden: API, invariants on generated and real histories, caching behaviour."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent / "layers"))
from histories import (  # noqa: E402
    SMALL,
    CharCounter,
    agent_run,
    call,
    config,
    histories,
    lines,
    validity_problems,
)

from contextwarden._budget import Budget  # noqa: E402
from contextwarden._config import WardenConfig  # noqa: E402
from contextwarden._events import CompactResult  # noqa: E402
from contextwarden._exceptions import (
    ConfigError,
    ContextOverflowError,
    FormatError,
    UnknownModelError,
)  # noqa: E402
from contextwarden._messages import (  # noqa: E402
    Message,
    TextBlock,
    ToolResultBlock,
    assistant,
    system,
    tool_result,
    user,
)
from contextwarden._tokens import TokenCounter  # noqa: E402
from contextwarden._warden import CompactionHook, TransformResult, Warden  # noqa: E402
from contextwarden.layers import (  # noqa: E402
    LayerContext,
    LayerResult,
    is_protected,
)
from contextwarden.layers.units import HistoryIndex  # noqa: E402
from contextwarden.layers.window import NEWEST_MIN_CHARS  # noqa: E402

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command.",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
        },
    }
]


#: Seed 000's exact behaviour: the layers on every call, the window as the only lossy step.
LAYERED = SMALL.model_copy(
    update={
        "compaction": config(compaction={"enabled": False}).compaction,
        "policy": config(policy={"mode": "immediate"}).policy,
    }
)


def warden(cfg: WardenConfig | None = None, **kw: Any) -> Warden:
    return Warden(cfg or LAYERED, counter=CharCounter(), **kw)


# -- the API ----------------------------------------------------------------------------------
def test_result_counts_are_the_counters_own() -> None:
    msgs = agent_run(60, result_chars=1500)
    w = warden()
    r = w.transform(msgs, window=4_000, tools=TOOLS)
    counter = w.counter_for()
    assert isinstance(r, TransformResult) and isinstance(r.budget, Budget)
    assert r.tokens_before == counter.count_messages(msgs, tools=TOOLS)
    assert r.tokens_after == counter.count_messages(r.messages, tools=TOOLS)
    assert r.tokens_after <= r.budget.trigger and r.within_budget
    assert r.saved_tokens == r.tokens_before - r.tokens_after > 0
    assert r.compaction is None and not r.newest_truncated
    kinds = {e.kind for e in r.events}
    assert kinds == {"masked", "dropped"} or kinds == {"masked", "dropped", "warning"}


def test_system_prompt_is_prepended_once() -> None:
    msgs = agent_run(3, with_system=False)
    w = warden()
    r = w.transform(msgs, window=50_000, system="Be brief.")
    assert r.messages[0] == system("Be brief.") and r.messages[1:] == tuple(msgs)
    again = w.transform(list(r.messages), window=50_000, system="Be brief.")
    assert again.messages == r.messages  # already present: not added twice
    # the prepended message is the same object call after call (warm calls stay warm)
    r2 = w.transform(msgs + [user("more")], window=50_000, system="Be brief.")
    assert r2.messages[0] is r.messages[0]


def test_tools_count_against_the_budget() -> None:
    msgs = agent_run(40, result_chars=1000)
    big_tools = [dict(TOOLS[0], function=dict(TOOLS[0]["function"], description="d" * 12_000))]
    plain = warden().transform(msgs, window=8_000)
    with_tools = warden().transform(msgs, window=8_000, tools=big_tools)
    assert len(with_tools.messages) < len(plain.messages)
    assert with_tools.tokens_after <= with_tools.budget.trigger  # type: ignore[union-attr]


def test_without_a_window_only_the_lossless_layers_run() -> None:
    msgs = agent_run(40)
    r = warden().transform(msgs)
    assert r.budget is None and len(r.messages) == len(msgs)
    assert {e.kind for e in r.events} == {"masked"}


def test_window_from_model_registry_and_small_windows() -> None:
    w = Warden(counter=CharCounter())
    r = w.transform(agent_run(3), model="gpt-4o")
    assert r.budget is not None and r.budget.window == 128_000
    # an 8k window with the default reserve still leaves room (reserve capped at a quarter)
    b = w.budget_for(window=8_000)
    assert b is not None and b.limit >= 6_000 and b.trigger <= b.limit
    with pytest.raises(UnknownModelError):
        w.transform(agent_run(1), model="no-such-model-xyz")
    explicit = Warden(WardenConfig(reserve_tokens=9_000), counter=CharCounter())
    with pytest.raises(ConfigError, match="reserve"):
        explicit.transform(agent_run(1), window=8_000)


def test_bad_input_in_a_warm_conversation_is_named() -> None:
    # a call checks only what its conversation does not hold yet: an item appended, or one put
    # in place of a message the conversation holds, is still named
    w = warden()
    msgs = agent_run(6)
    w.transform(msgs, window=9_000)
    bad: Any = {"role": "user", "content": "hi"}
    with pytest.raises(FormatError, match=f"message {len(msgs)}"):
        w.transform([*msgs, bad], window=9_000)
    with pytest.raises(FormatError, match="message 3"):
        w.transform([*msgs[:3], bad, *msgs[4:], user("next")], window=9_000)
    assert len(w.transform([*msgs, user("next")], window=9_000).messages) > len(msgs)


def test_bad_input_is_named() -> None:
    w = warden()
    with pytest.raises(FormatError, match="message 2"):
        w.transform([user("a"), assistant("b"), {"role": "user"}], window=9_000)  # type: ignore[list-item]
    with pytest.raises(FormatError, match="sequence of Message"):
        w.transform("hello", window=9_000)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="model must be a model name"):
        w.transform([user("a")], model=5, window=9_000)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="WardenConfig"):
        Warden({"mask": {}})  # type: ignore[arg-type]


def test_async_entry_points() -> None:
    msgs = agent_run(30)
    w = warden(LAYERED.model_copy(update={"context_window": 6_000}))
    r = asyncio.run(w.atransform(msgs))
    assert r.messages == warden().transform(msgs, window=6_000).messages
    out = asyncio.run(w.transform_context(msgs))
    assert isinstance(out, list) and tuple(out) == r.messages

    class Aborted:
        aborted = True

    # pi's contract: transform_context never raises; aborted or failing, the history comes back
    assert asyncio.run(w.transform_context(msgs, Aborted())) == msgs
    stop, go = asyncio.Event(), asyncio.Event()  # an event as the signal: set means aborted
    stop.set()
    assert asyncio.run(w.transform_context(msgs, stop)) == msgs
    assert tuple(asyncio.run(w.transform_context(msgs, go))) == r.messages
    assert asyncio.run(w.transform_context([user("a"), {"role": "user"}])) == [  # type: ignore[list-item]
        user("a"),
        {"role": "user"},
    ]


def test_provider_dict_helpers() -> None:
    from contextwarden.formats import to_anthropic, to_openai, validate_anthropic, validate_openai

    msgs = agent_run(50, result_chars=1200)
    openai_in = to_openai(msgs)
    snapshot = copy.deepcopy(openai_in)
    out, r = warden().transform_openai(openai_in, window=6_000)
    assert openai_in == snapshot
    assert validate_openai(out) == [] and len(out) == len(r.messages) < len(openai_in)
    assert out[0] == openai_in[0] and out[1] == openai_in[1]

    sys_prompt, anth_in = to_anthropic(msgs)
    snapshot = copy.deepcopy(anth_in)
    sys_out, anth_out, r2 = warden().transform_anthropic(anth_in, system=sys_prompt, window=6_000)
    assert anth_in == snapshot and sys_out == sys_prompt
    assert validate_anthropic(sys_out, anth_out) == []
    assert anth_out[0] == anth_in[0] and r2.tokens_after <= 6_000


# -- compaction hook --------------------------------------------------------------------------
class KeepHeadAndNewest:
    """A stand-in compactor: the system prompt and task, a summary, then the newest unit."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def compact(
        self,
        messages: Sequence[Message],
        *,
        budget: Budget,
        counter: TokenCounter,
        tools: Sequence[Mapping[str, Any]] | None,
        focus: str | None,
    ) -> CompactResult | None:
        self.calls.append(len(messages))
        index = HistoryIndex()
        index.extend(messages, 0)
        start = index.unit_starts[-1]
        kept = [m for m in messages[:start] if m.role == "system" or m is messages[index.task or 0]]
        new = (*kept, user("Summary: the agent ran many commands."), *messages[start:])
        return CompactResult(
            new_messages=tuple(new),
            summary="the agent ran many commands",
            original_token_count=counter.count_messages(messages, tools=tools),
            new_token_count=counter.count_messages(new, tools=tools),
            compacted_count=len(messages) - len(new) + 1,
            strategy="test",
        )


def test_compactor_runs_only_over_the_trigger_and_its_output_is_used() -> None:
    compactor = KeepHeadAndNewest()
    assert isinstance(compactor, CompactionHook)
    w = warden(SMALL, compactor=compactor)
    small = agent_run(2)
    r = w.transform(small, window=50_000)
    assert compactor.calls == [] and r.compaction is None

    msgs = agent_run(60, result_chars=1500)
    r = w.transform(msgs, window=3_000)
    assert compactor.calls == [len(msgs)]
    assert r.compaction is not None and r.compaction.strategy == "test"
    assert r.messages == r.compaction.new_messages
    assert [e.kind for e in r.edits][-1] == "compaction"
    # the next call only appends: the compactor is not asked again, the summary stays
    more = [*msgs, user("and then?")]
    again = w.transform(more, window=3_000)
    assert compactor.calls == [len(msgs)] and again.messages[: len(r.messages)] == r.messages
    assert [e.kind for e in r.events].count("context_compacted") == 1
    assert validity_problems(r.messages) == []


def test_declining_compactor_leaves_the_window_in_charge() -> None:
    class Declines:
        def compact(self, messages: Sequence[Message], **kw: Any) -> None:
            return None

    msgs = agent_run(60, result_chars=1500)
    r = warden(SMALL, compactor=Declines()).transform(msgs, window=3_000)
    assert r.compaction is None and any(e.kind == "dropped" for e in r.events)
    no_compaction = SMALL.model_copy(
        update={"compaction": config(compaction={"enabled": False}).compaction}
    )
    assert r.messages == warden(no_compaction).transform(msgs, window=3_000).messages


def test_compaction_disabled_in_config_skips_the_compactor() -> None:
    compactor = KeepHeadAndNewest()
    cfg = SMALL.model_copy(update={"compaction": config(compaction={"enabled": False}).compaction})
    r = warden(cfg, compactor=compactor).transform(agent_run(60, result_chars=1500), window=3_000)
    assert compactor.calls == [] and any(e.kind == "dropped" for e in r.events)


def test_layers_given_to_the_warden_run_last_on_every_call() -> None:
    seen: list[int] = []

    def guard(messages: Sequence[Message], ctx: LayerContext) -> LayerResult:
        seen.append(len(messages))
        return LayerResult(tuple(messages))

    msgs = agent_run(60, result_chars=1500)
    r = warden(layers=[guard]).transform(msgs, window=8_000)
    assert seen == [len(r.messages)]
    assert r.messages == warden().transform(msgs, window=8_000).messages
    # no process-wide registry: another warden does not run it
    warden().transform(msgs, window=8_000)
    assert len(seen) == 1


# -- warm calls and logging -------------------------------------------------------------------
def test_warm_call_only_counts_what_is_new_and_reuses_outputs() -> None:
    msgs = agent_run(500, result_chars=1200)
    w = warden()
    counter = w.counter_for()
    assert isinstance(counter, CharCounter)
    first = w.transform(msgs, window=30_000)
    cold_calls = counter.calls
    more = msgs + [assistant("next", tool_calls=[call("n1")]), tool_result("n1", lines(30))]
    before = counter.calls
    second = w.transform(more, window=30_000)
    assert counter.calls - before < 40 < cold_calls
    # unchanged messages come back as the very same objects
    same = sum(a is b for a, b in zip(first.messages, second.messages, strict=False))
    assert same > 0
    assert second.tokens_after == counter.count_messages(second.messages)
    assert validity_problems(second.messages) == []


def test_each_action_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    msgs = agent_run(80, result_chars=1500)
    w = warden()
    with caplog.at_level(logging.WARNING, logger="contextwarden"):
        r1 = w.transform(msgs, window=8_000)
        first = len(caplog.records)
        r2 = w.transform(msgs, window=8_000)
        second = len(caplog.records) - first
    assert first == len(r1.events) > 0
    # the same history again: the log already holds every decision, nothing new happens
    assert second == 0 and r2.events == () and r2.messages == r1.messages


# -- invariants on generated histories ---------------------------------------------------------
def _cuttable_texts(m: Message) -> list[str]:
    out: list[str] = []
    for b in m.content:
        if isinstance(b, TextBlock):
            out.append(b.text)
        elif isinstance(b, ToolResultBlock):
            if isinstance(b.content, str):
                out.append(b.content)
            else:
                out.extend(x.text for x in b.content if isinstance(x, TextBlock))
    return out


def _fits_whenever_possible(r: TransformResult) -> None:
    """Over the trigger only when nothing droppable is left and the newest unit's texts are
    cut to the minimum."""
    assert r.budget is not None
    if r.tokens_after <= r.budget.trigger:
        return
    index = HistoryIndex()
    index.extend(r.messages, 0)
    assert index.droppable() == []
    for m in r.messages[index.unit_starts[-1] :]:
        if not is_protected(m):
            assert all(len(t) <= NEWEST_MIN_CHARS + 64 for t in _cuttable_texts(m))


def _check_invariants(
    msgs: list[Message], window: int, tools: list[dict[str, Any]] | None
) -> TransformResult | None:
    snapshot = list(msgs)
    deep = repr(msgs)
    w = warden()
    try:
        r = w.transform(msgs, window=window, tools=tools)
    except ContextOverflowError as exc:  # nothing left to cut: said, never sent oversize
        assert exc.tokens is not None and exc.limit is not None and exc.tokens > exc.limit
        assert all(a is b for a, b in zip(msgs, snapshot, strict=True))
        return None
    # input never mutated
    assert all(a is b for a, b in zip(msgs, snapshot, strict=True)) and repr(msgs) == deep
    # valid for both APIs
    assert validity_problems(r.messages) == []
    # deterministic
    r_again = warden().transform(msgs, window=window, tools=tools)
    assert r_again.messages == r.messages and r_again.events == r.events
    # the same history again: the log holds, the same request
    assert w.transform(msgs, window=window, tools=tools).messages == r.messages
    # system, task and pins kept
    index = HistoryIndex()
    index.extend(msgs, 0)
    task = msgs[index.task] if index.task is not None else None
    newest = set(range(index.unit_starts[-1], len(msgs))) if index.unit_starts else set()
    for i, m in enumerate(msgs):
        if m.role == "system" or m.is_pinned:
            assert m in r.messages, f"message {i} ({m.role}) lost"
    if task is not None and not (r.newest_truncated and index.task in newest):
        assert task in r.messages
    # within the window whenever possible
    _fits_whenever_possible(r)
    return r


@settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    histories(),
    st.sampled_from([600, 1_500, 3_000, 8_000, 30_000]),
    st.booleans(),
)
def test_invariants_on_generated_histories(
    msgs: list[Message], window: int, with_tools: bool
) -> None:
    _check_invariants(msgs, window, TOOLS if with_tools else None)


def test_one_user_message_and_300_tool_calls_through_the_warden() -> None:
    msgs = agent_run(300, result_chars=3000)
    r = _check_invariants(msgs, 16_000, TOOLS)
    assert r is not None
    assert r.messages[:2] == tuple(msgs[:2]) and r.messages[-2:] == tuple(msgs[-2:])
    assert len(r.messages) > 20


# -- real trajectories ----------------------------------------------------------------------
def _real_files(shared: Path) -> list[Path]:
    return sorted(p for p in shared.rglob("*") if p.is_file() and p.suffix in {".json", ".jsonl"})


_NUM = re.compile(r"\d+")


def _kinds(problems: list[str]) -> set[str]:
    return {_NUM.sub("#", p) for p in problems}


def test_real_trajectories_at_four_windows(shared_data: Path) -> None:
    from contextwarden._tokens import get_counter
    from contextwarden._transcripts import load_transcript

    files = _real_files(shared_data)
    assert files
    for path in files:
        t = load_transcript(path)
        msgs = list(t.messages)
        deep = repr(msgs)
        tools = list(t.tools) if t.tools else None
        fitted = 0
        for window in (8_000, 16_000, 32_000, 64_000):
            w = Warden(counter=get_counter(t.model))
            where = f"{path.name} at {window}"
            try:
                r = w.transform(msgs, model=t.model, window=window, tools=tools)
            except ContextOverflowError as exc:
                # what is never cut (system prompt, task, pins, the newest message's floor)
                # is over this window: an error, never an oversize request
                assert exc.tokens is not None and exc.tokens > window // 2, where
                continue
            fitted += 1
            assert validity_problems(r.messages) == [], where
            assert repr(msgs) == deep, where
            assert r.budget is not None and r.tokens_after <= r.budget.trigger, where
            again = Warden(counter=get_counter(t.model)).transform(
                list(r.messages), model=t.model, window=window, tools=tools
            )
            assert again.messages == r.messages, where
            # system prompt, task and pins kept
            index = HistoryIndex()
            index.extend(msgs, 0)
            for m in msgs:
                if m.role == "system" or m.is_pinned:
                    assert m in r.messages, where
            if index.task is not None:
                assert msgs[index.task] in r.messages, where
        assert fitted >= 2, path.name


def test_openhands_250k_token_output_fits_8k_by_truncation(
    shared_data: Path, tmp_path: Path
) -> None:
    from contextwarden._tokens import get_counter
    from contextwarden._transcripts import load_transcript

    path = shared_data / "openhands" / "fastjson2-2775.output.jsonl"
    if not path.exists():
        pytest.skip(f"{path} not present")
    # the run as an OpenHands set to send observations whole (max_message_chars: none) sends it
    run = json.loads(path.read_text(encoding="utf-8"))
    run["metadata"]["llm_config"]["max_message_chars"] = None
    whole = tmp_path / "output.jsonl"
    whole.write_text(json.dumps(run) + "\n", encoding="utf-8")
    t = load_transcript(whole)
    w = Warden(counter=get_counter(t.model))
    r = w.transform(t.messages, model=t.model, window=8_000)
    assert r.tokens_before > 200_000
    assert r.budget is not None and r.tokens_after <= r.budget.trigger
    truncated = [e for e in r.events if e.kind == "truncated"]
    assert truncated and max(e.tokens_before or 0 for e in truncated) > 200_000
    assert validity_problems(r.messages) == []


def test_real_replay_is_prefix_stable_between_edits(shared_data: Path) -> None:
    """Replay a real run call by call: between two edits, the request of call k+1 begins with
    the request of call k (what a provider's prompt cache reads); every request is valid."""
    from contextwarden._tokens import get_counter
    from contextwarden._transcripts import load_transcript

    path = next((p for p in _real_files(shared_data) if "reasoner" in p.name), None)
    if path is None:
        pytest.skip("no reasoner trajectory present")
    t = load_transcript(path)
    msgs = list(t.messages)
    w = Warden(counter=get_counter(t.model))
    ends = [i for i, m in enumerate(msgs) if m.role == "assistant" and i > 1]
    previous: tuple[Message, ...] | None = None
    edits = 0
    for end in ends:
        r = w.transform(msgs[:end], model=t.model, window=16_000)
        if previous is not None and not r.edits:
            assert r.messages[: len(previous)] == previous, end
        edits += bool(r.edits)
        assert validity_problems(r.messages) == [], end
        assert r.budget is not None and r.tokens_after <= r.budget.limit
        previous = r.messages
    assert 0 < edits < len(ends) // 4  # edits come in batches, not on every call


def test_text_blocks_of_a_cut_newest_unit_keep_head_and_tail() -> None:
    msgs = [user("task"), assistant("", tool_calls=[call("c")]), tool_result("c", lines(2_000))]
    r = warden().transform(msgs, window=600)
    assert r.newest_truncated
    text = r.messages[-1].tool_results[0].text
    original = msgs[-1].tool_results[0].text
    head, tail = text.split("characters truncated] ...")
    assert original.startswith(head.split("\n\n... [")[0])
    assert original.endswith(tail.lstrip("\n"))
    assert isinstance(r.messages[0].content[0], TextBlock)


def test_appending_one_message_at_a_time_stays_warm() -> None:
    """Every prefix, including those ending on an assistant message whose calls have no
    result yet (repaired in the working copy): warm calls count only what is new."""
    msgs = agent_run(200, result_chars=1500)
    w = warden()
    counter = w.counter_for()
    assert isinstance(counter, CharCounter)
    w.transform(msgs[:300], window=12_000)
    for end in range(301, len(msgs) + 1):
        before = counter.calls
        r = w.transform(msgs[:end], window=12_000)
        assert counter.calls - before < 40, end  # an edit too: the view's counts are reused
        if end % 37 == 0 or end == len(msgs):
            assert validity_problems(r.messages) == [], end
            assert r.tokens_after <= 12_000 * 0.75, end


def test_the_compaction_engine_plugs_in_sync_and_async() -> None:
    """The issue-4 Compactor through the hook: its events join the result's, and atransform
    awaits its acompact."""
    compaction = pytest.importorskip("contextwarden._compaction")
    msgs = agent_run(80, result_chars=2500)
    compactor = compaction.Compactor()
    w = Warden(counter=CharCounter(), compactor=compactor)
    assert w.compactor is not None
    r = w.transform(msgs, window=8_000)
    assert r.compaction is not None
    assert sum(e.kind == "context_compacted" for e in r.events) >= 1
    assert validity_problems(r.messages) == []
    assert r.budget is not None and r.tokens_after <= r.budget.trigger
    ra = asyncio.run(
        Warden(counter=CharCounter(), compactor=compactor).atransform(msgs, window=8_000)
    )
    assert ra.messages == r.messages


def test_concurrent_async_calls_of_one_conversation_do_not_block_the_loop() -> None:
    """Two coroutines on one event loop, the same conversation: the second waits for the
    first's compaction in a thread, not by blocking the loop (which would deadlock)."""

    class SlowAsync(KeepHeadAndNewest):
        async def acompact(self, messages: Sequence[Message], **kw: Any) -> CompactResult | None:
            await asyncio.sleep(0.05)
            return self.compact(messages, **kw)

    w = warden(SMALL, compactor=SlowAsync())
    msgs = agent_run(60, result_chars=1500)

    async def both() -> list[TransformResult]:
        return list(
            await asyncio.wait_for(
                asyncio.gather(w.atransform(msgs, window=3_000), w.atransform(msgs, window=3_000)),
                timeout=30,
            )
        )

    first, second = asyncio.run(both())
    assert first.messages == second.messages
    assert validity_problems(first.messages) == []


def test_a_per_call_summarizer_writes_that_calls_summary_and_the_log_names_it() -> None:
    """``transform(summarizer=...)`` (what the proxy passes: its upstream with the caller's key)
    writes the summary of a compaction made on that call; the edit log records who wrote it, and
    keeps it through its JSON form."""
    from contextwarden._log import Compaction, edit_from_dict
    from contextwarden.testing import ConversationBuilder, FakeSummarizer

    b = ConversationBuilder().system("You are a coding agent.").user("Fix the parser bug")
    for i in range(40):
        b.bash(f"cat src/mod{i}.py", f"def f{i}(x):\n    return x + {i}\n" * 60)
    history = b.build()
    own, guest = FakeSummarizer(name="own"), FakeSummarizer(name="guest")
    w = Warden(summarizer=own)
    result = w.transform(history, model="gpt-4o", window=16_000, summarizer=guest)
    [edit] = [e for e in result.edits if isinstance(e, Compaction)]
    assert edit.summarizer == "guest" and guest.calls and not own.calls
    assert all(r.ref == edit.ref for r in guest.calls)  # the summary can point back to them
    assert edit_from_dict(edit.as_dict()) == edit
    last = w.edit_log(result.conversation)[-1]
    assert isinstance(last, Compaction) and last.summarizer == "guest"


def test_agents_sharing_a_task_at_different_points_keep_a_log_each() -> None:
    """The same job run twice (same system prompt, tools and task), the runs at different
    points: each run's calls extend its own log (warm calls, stable request prefix), instead of
    the two throwing each other's log away on every call."""
    from contextwarden.formats import to_openai
    from contextwarden.testing import ConversationBuilder

    b = ConversationBuilder().system("You are a coding agent.").user("Fix the parser bug")
    for i in range(30):
        b.bash(f"cat src/mod{i}.py", f"def f{i}(x):\n    return x + {i}\n" * 40)
    history = b.build()
    # edits as soon as they help, so each run's log has some to keep apart
    w = Warden(WardenConfig.model_validate({"policy": {"mode": "immediate"}}))
    ids: dict[str, set[str]] = {"a": set(), "b": set()}
    last: dict[str, list[dict[str, Any]]] = {}
    rebuilt = 0
    for k in range(30, len(history) + 1, 2):
        for run, end in (("a", k), ("b", k - 12)):
            result = w.transform(history[:end], model="gpt-4o", window=128_000)
            sent = to_openai(list(result.messages))
            ids[run].add(result.conversation)
            if run in last and not result.edits:
                # a warm call: the previous request, then what is new
                rebuilt += sent[: len(last[run])] != last[run]
            last[run] = sent
    assert len(ids["a"]) == 1 and len(ids["b"]) == 1 and ids["a"] != ids["b"]
    assert rebuilt == 0
    assert len(w.edit_log(next(iter(ids["a"])))) >= 1
