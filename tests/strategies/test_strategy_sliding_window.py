"""Sliding-window compaction: keep 5 assistant + 4 user/tool recent messages, whole units."""

from __future__ import annotations

from collections.abc import Callable

from contextwarden.strategies import StrategyContext, sliding_window
from contextwarden.strategies.base import is_summary_message
from contextwarden.testing import ConversationBuilder

MakeCtx = Callable[..., StrategyContext]


def loops(n: int) -> ConversationBuilder:
    b = ConversationBuilder().system("sys").user("task: fix the bug")
    for i in range(n):
        b.bash(f"cat file{i}.py", f"content {i}")
    return b


def test_keeps_five_assistant_and_four_other_messages_in_whole_units(make_ctx: MakeCtx) -> None:
    msgs = loops(20).build()
    out = sliding_window(msgs, make_ctx())
    assert out is not None
    kept_tail = msgs[out.elided[-1] + 1 :]
    assert sum(m.role == "assistant" for m in kept_tail) == 5
    assert sum(m.role == "tool" for m in kept_tail) >= 4
    assert kept_tail[0].role == "assistant"  # never starts on a tool result
    assert out.elided == tuple(range(2, len(msgs) - len(kept_tail)))
    assert out.requests[0].messages == tuple(msgs[2 : out.elided[-1] + 1])
    assert out.requests[0].task == "task: fix the bug"


def test_window_size_is_configurable(make_ctx: MakeCtx) -> None:
    msgs = loops(20).build()
    out = sliding_window(msgs, make_ctx(sliding_window_size=3))
    assert out is not None
    kept_tail = msgs[out.elided[-1] + 1 :]
    assert sum(m.role == "assistant" for m in kept_tail) == 2


def test_parallel_calls_stay_together(make_ctx: MakeCtx) -> None:
    b = loops(6)
    b.parallel([("bash", {"command": f"echo {k}"}, str(k), False) for k in range(4)])
    b.bash("ls", "x")
    msgs = b.build()
    out = sliding_window(msgs, make_ctx(sliding_window_size=3))
    assert out is not None
    first_kept = out.elided[-1] + 1
    assert msgs[first_kept].role != "tool"


def test_pins_stay_in_place(make_ctx: MakeCtx) -> None:
    b = loops(3).pin("use python 3.8")
    for i in range(10):
        b.bash(f"echo {i}", str(i))
    msgs = b.build()
    out = sliding_window(msgs, make_ctx())
    assert out is not None
    pin_index = next(i for i, m in enumerate(msgs) if m.is_pinned)
    assert pin_index not in out.elided
    assert min(out.elided) < pin_index < max(out.elided)


def test_nothing_to_do_on_a_short_history(make_ctx: MakeCtx) -> None:
    assert sliding_window(loops(3).build(), make_ctx()) is None


def test_an_earlier_summary_alone_is_not_summarized_again(make_ctx: MakeCtx) -> None:
    b = ConversationBuilder().system("sys").user("task")
    b.user(
        "[Context summary: 40 earlier messages were compacted; ref cw:1]\n<completed>\n</completed>"
    )
    for i in range(5):
        b.bash(f"echo {i}", str(i))
    msgs = b.build()
    assert is_summary_message(msgs[2])
    assert sliding_window(msgs, make_ctx()) is None


def test_earlier_summary_becomes_previous_summary(make_ctx: MakeCtx) -> None:
    b = ConversationBuilder().system("sys").user("task")
    b.user(
        "[Context summary: 40 earlier messages were compacted; ref cw:1]\n<completed>\nold\n</completed>"
    )
    for i in range(12):
        b.bash(f"echo {i}", str(i))
    msgs = b.build()
    out = sliding_window(msgs, make_ctx())
    assert out is not None and 2 in out.elided
    request = out.requests[0]
    assert request.previous_summary is not None and "old" in request.previous_summary
    assert not request.previous_summary.startswith("[Context summary")
    assert all(not is_summary_message(m) for m in request.messages)


def test_input_not_mutated_and_deterministic(make_ctx: MakeCtx) -> None:
    msgs = loops(15).build()
    copy = list(msgs)
    a = sliding_window(msgs, make_ctx())
    b = sliding_window(msgs, make_ctx())
    assert msgs == copy and a == b
