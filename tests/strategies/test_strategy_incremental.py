"""Incremental chunk summaries: chunks of 20 turns, every chunk but the last summarized, each
summary request chained to the previous one; the last chunk kept whole."""

from __future__ import annotations

from collections.abc import Callable

from contextwarden import Message
from contextwarden.strategies import StrategyContext, incremental
from contextwarden.strategies.base import Layout
from contextwarden.testing import ConversationBuilder

MakeCtx = Callable[..., StrategyContext]


def build(turns: int) -> list[Message]:
    b = ConversationBuilder().system("sys").user("task")
    for i in range(turns):
        b.bash(f"echo {i}", str(i))
    return b.build()


def test_chunks_of_twenty_turns(make_ctx: MakeCtx) -> None:
    msgs = build(65)  # body: 64 units (the newest is always kept) -> chunks 20, 20, 20, 4
    out = incremental(msgs, make_ctx())
    assert out is not None
    assert len(out.requests) == 3
    assert [len(r.messages) for r in out.requests] == [40, 40, 40]
    assert out.elided == tuple(range(2, 2 + 120))
    # chunks are consecutive and together are exactly what is elided
    joined = tuple(m for r in out.requests for m in r.messages)
    assert joined == tuple(msgs[i] for i in out.elided)
    # the last chunk (and the newest unit) stay whole
    assert out.elided[-1] + 1 == 122 and msgs[122].role == "assistant"


def test_chunk_size_is_configurable(make_ctx: MakeCtx) -> None:
    out = incremental(build(30), make_ctx(chunk_turns=7))
    assert out is not None
    assert len(out.requests) == 4  # 29 body units -> 7, 7, 7, 7, 1


def test_single_chunk_does_nothing(make_ctx: MakeCtx) -> None:
    assert incremental(build(20), make_ctx()) is None


def test_chunks_follow_unit_boundaries_with_parallel_calls(make_ctx: MakeCtx) -> None:
    b = ConversationBuilder().system("sys").user("task")
    for i in range(30):
        b.parallel(
            [
                ("bash", {"command": f"echo {i}"}, "x", False),
                ("bash", {"command": "ls"}, "y", False),
            ]
        )
    msgs = b.build()
    out = incremental(msgs, make_ctx(chunk_turns=4))
    assert out is not None
    layout = Layout.of(msgs)
    starts = {s for s, _ in layout.units}
    for request in out.requests:
        first = msgs.index(request.messages[0])
        assert first in starts and request.messages[-1].role == "tool"
