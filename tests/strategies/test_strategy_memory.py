"""The compaction memory: stable keys survive the lossless layers; recorded compactions are
re-applied where all their messages are, oldest first."""

from __future__ import annotations

from contextwarden import Message, TextBlock, ThinkingBlock, ToolResultBlock
from contextwarden.strategies import StrategyOutcome
from contextwarden.strategies.base import assemble, is_summary_message, make_ref
from contextwarden.strategies.memory import CompactionMemory, conversation_key, stable_key
from contextwarden.testing import ConversationBuilder

SUMMARY = "<completed>\nx\n</completed>"


def history(n: int = 8) -> list[Message]:
    b = ConversationBuilder().system("sys").user("task")
    for i in range(n):
        b.tool_loop("bash", {"command": f"echo {i}"}, f"out {i}\n" * 50, thinking=f"why {i}")
    return b.build()


def test_stable_key_ignores_masking_and_thinking_but_not_content() -> None:
    msgs = history()
    tool, call = msgs[3], msgs[2]
    masked = tool.replace(content=(ToolResultBlock(tool.tool_results[0].tool_call_id, "[...]"),))
    stripped = call.replace(
        content=tuple(b for b in call.content if not isinstance(b, ThinkingBlock))
    )
    assert stable_key(masked) == stable_key(tool)
    assert stable_key(stripped) == stable_key(call)
    assert stable_key(msgs[4]) != stable_key(call)
    edited = msgs[1].replace(content=(TextBlock("another task"),))
    assert stable_key(edited) != stable_key(msgs[1])


def record(
    memory: CompactionMemory, msgs: list[Message], elided: tuple[int, ...]
) -> tuple[Message, ...]:
    span = tuple(msgs[i] for i in elided)
    ref = make_ref(span)
    outcome = StrategyOutcome("sliding_window", elided, summary=SUMMARY)
    memory.record(span, outcome, SUMMARY, ref)
    return assemble(msgs, outcome, SUMMARY, ref)


def test_reapply_reproduces_the_compaction_and_chains() -> None:
    msgs = history(12)
    memory = CompactionMemory()
    first = record(memory, msgs, tuple(range(2, 10)))
    second = record(memory, list(first), tuple(range(2, 9)))  # folds the first summary
    grown = [*msgs, *ConversationBuilder().bash("ls", "a").build()]
    view, used, texts = memory.reapply(grown)
    assert view[: len(second)] == second and len(used) == 2 and set(texts) == set(used)
    assert sum(is_summary_message(m) for m in view) == 1
    assert memory.spans(used)[used[0]] == tuple(msgs[2:10])


def test_reapply_skips_what_is_not_all_there_and_forgotten_entries() -> None:
    msgs = history(12)
    memory = CompactionMemory()
    record(memory, msgs, tuple(range(2, 10)))
    view, used, _ = memory.reapply(msgs[:6])  # part of the span is missing
    assert used == () and view == tuple(msgs[:6])
    memory.forget([make_ref(msgs[2:10])])
    assert memory.reapply(msgs) == (tuple(msgs), (), {})
    assert memory.summary(make_ref(msgs[2:10])) == ""


def test_memory_is_bounded() -> None:
    msgs = history(12)
    memory = CompactionMemory(size=2)
    for start in (2, 4, 6):
        record(memory, msgs, tuple(range(start, start + 2)))
    assert len(memory) == 2
    assert make_ref(msgs[2:4]) not in memory.spans([make_ref(msgs[2:4])])


def test_a_shared_store_carries_the_memory_to_another_process() -> None:
    msgs = history(12)
    store: dict[str, str] = {}
    key = conversation_key(msgs)
    assert key is not None and key.startswith("cw-memory:")
    first = CompactionMemory(store=store)
    span = tuple(msgs[2:10])
    ref = make_ref(span)
    outcome = StrategyOutcome("sliding_window", tuple(range(2, 10)), summary=SUMMARY)
    first.record(span, outcome, SUMMARY, ref, key)
    other = CompactionMemory(store=store)  # a fresh process sharing the store
    view, used, _ = other.reapply(msgs, key)
    assert used == (ref,) and view == assemble(msgs, outcome, SUMMARY, ref)
    other.forget([ref], key)
    assert CompactionMemory(store=store).reapply(msgs, key)[1] == ()


def test_a_broken_store_leaves_the_local_memory_working() -> None:
    msgs = history(12)
    store = {conversation_key(msgs) or "": "not json"}
    memory = CompactionMemory(store=store)
    key = conversation_key(msgs)
    span = tuple(msgs[2:10])
    outcome = StrategyOutcome("sliding_window", tuple(range(2, 10)), summary=SUMMARY)
    memory.record(span, outcome, SUMMARY, make_ref(span), key)
    assert memory.reapply(msgs, key)[1] == (make_ref(span),)
