"""A compaction is a record: the engine says by position what it removed, which summary stands
where and which message it replaced, and the conversation appends exactly that to its log."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwarden import Budget, Compactor, Message, Warden, user
from contextwarden._config import CompactionConfig
from contextwarden._events import CompactionPlan, CompactResult
from contextwarden.testing import ConversationBuilder, FixedCounter

COUNTER = FixedCounter(per_message=4)
ORDERS = {
    "sliding window then full summary": ["sliding_window"],
    "key events, importance, sliding window": ["key_events", "importance", "sliding_window"],
    "full summary only": [],
}


def coding(loops: int, sizes: Sequence[int]) -> list[Message]:
    b = ConversationBuilder().system("You are a coding agent.").user("Fix the parser bug")
    for i in range(loops):
        b.bash(f"cat src/mod{i}.py", "line\n" * sizes[i % len(sizes)])
        if i % 7 == 3:
            b.edit(f"src/mod{i}.py", "x - 1", "x")
    return b.build()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    loops=st.integers(8, 40),
    sizes=st.lists(st.integers(1, 900), min_size=1, max_size=5),
    share=st.floats(0.15, 0.85),
    order=st.sampled_from(sorted(ORDERS)),
    hint=st.booleans(),
)
def test_the_plan_applied_to_the_input_is_the_output(
    loops: int, sizes: list[int], share: float, order: str, hint: bool
) -> None:
    msgs = coding(loops, sizes)
    budget = Budget(int(COUNTER.count_messages(msgs) / share) + 1, reserve=0)
    cfg = CompactionConfig.model_validate({"strategy_order": {}, "fallback_order": ORDERS[order]})
    result = Compactor(cfg, hint_system=hint).compact(
        msgs, budget=budget, counter=COUNTER, force=True
    )
    if result is None:
        return
    plan = result.plan
    assert plan is not None
    assert plan.apply(msgs) == result.new_messages
    # every kept input message is the input's own, and the plan names each position once
    assert list(plan.removed) == sorted(set(plan.removed))
    assert not {p for p, _ in plan.replaced} & set(plan.removed)
    assert len(result.new_messages) == len(msgs) - len(plan.removed) + len(plan.inserted)
    if hint and result.strategy.endswith("full_summary"):
        [(p, shown)] = plan.replaced
        assert msgs[p].role == "system" and "[contextwarden:" in shown.text


def test_a_hook_that_returns_only_messages_gets_the_plan_of_its_output() -> None:
    msgs = coding(12, [40])
    summary = user("[summary of the first loops]")
    new = (*msgs[:2], summary, *msgs[10:])
    plan = CompactionPlan.between(msgs, new)
    assert plan.removed == tuple(range(2, 10))
    assert plan.inserted == ((10, summary),)
    assert plan.apply(msgs) == new
    # equal in content counts as kept, whatever the object: a copy is not a new message
    copied = [m.replace() for m in new]
    assert CompactionPlan.between(msgs, copied) == plan


class PlanOnly:
    """A hook that says what it did by plan: drop every other tool loop, one summary at the
    end of the dropped span. Its new_messages are deliberately not the input's objects."""

    def __init__(self) -> None:
        self.calls = 0

    def compact(self, messages: Sequence[Message], **_: Any) -> CompactResult:
        self.calls += 1
        cut = [p for p in range(2, len(messages) - 2) if messages[p].role in ("assistant", "tool")]
        cut = cut[: len(cut) // 2]
        while cut and messages[cut[-1] + 1].role == "tool":  # never split a call from its result
            cut.pop()
        note = user(f"[summary {self.calls}]")
        plan = CompactionPlan(removed=tuple(cut), inserted=((cut[0], note),))
        new = tuple(m.replace() for m in plan.apply(messages))
        return CompactResult(new, "s", 0, 0, len(cut), "plan-only", plan=plan)


def test_the_conversation_records_the_plan_it_is_given() -> None:
    hook = PlanOnly()
    warden = Warden(compactor=hook)
    msgs = coding(60, [300])
    first = warden.transform(msgs, window=8_000)
    assert hook.calls == 1 and first.compaction is not None
    [edit] = [e for e in first.edits if e.kind == "compaction"]
    assert first.compaction.plan is not None
    removed = {p for a, b in edit.removed for p in range(a, b)}
    assert removed == set(first.compaction.plan.removed)
    assert [m.text for _, m in edit.inserted] == ["[summary 1]"]
    # the summary stands where the plan put it, and the request keeps the task
    texts = [m.text for m in first.messages]
    assert "[summary 1]" in texts and "Fix the parser bug" in texts
    # the next call only appends: the same request prefix, no new compaction
    again = warden.transform([*msgs, user("and now?")], window=8_000)
    assert hook.calls == 1
    assert again.messages[: len(first.messages)] == first.messages
