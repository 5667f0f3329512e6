"""Full summary: system + hint, the task verbatim, pins verbatim, one summary with memories,
task list and diff stats; a small newest unit survives; the turn counter is reset."""

from __future__ import annotations

from collections.abc import Callable

from contextwarden import Message
from contextwarden.strategies import StrategyContext, full_summary
from contextwarden.strategies.base import assemble, is_summary_message
from contextwarden.testing import ConversationBuilder

MakeCtx = Callable[..., StrategyContext]

DIFFSTAT = " src/parse.py | 4 ++--\n tests/test_parse.py | 10 ++++++++++\n 2 files changed, 12 insertions(+), 2 deletions(-)"


def build(last_output: str = "ok") -> list[Message]:
    b = ConversationBuilder().system("sys").user("task: fix parse()")
    b.todo([("reproduce", "completed"), ("fix parse", "in_progress"), ("add a test", "pending")])
    b.assistant("I found that the root cause is the off-by-one in parse().")
    b.pin("keep python 3.8 support")
    for i in range(5):
        b.bash(f"cat src/m{i}.py", "x" * 200)
    b.edit("src/parse.py", "x - 1", "x")
    b.bash("git diff --stat", DIFFSTAT)
    b.bash("python -m pytest -q", last_output)
    return b.build()


def test_rebuild_keeps_system_task_pins_and_a_small_newest_unit(make_ctx: MakeCtx) -> None:
    msgs = build()
    out = full_summary(msgs, make_ctx())
    assert out is not None and out.rebuild and out.reset_turns
    kept = [m for i, m in enumerate(msgs) if i not in out.elided]
    assert [m.role for m in kept] == ["system", "user", "user", "assistant", "tool"]
    assert kept[2].is_pinned and kept[-1] is msgs[-1]


def test_a_large_newest_unit_is_kept_for_the_final_guard_to_cut(make_ctx: MakeCtx) -> None:
    msgs = build(last_output="E" * 20_000)
    out = full_summary(msgs, make_ctx(window=16_000))
    assert out is not None
    assert len(msgs) - 1 not in out.elided and len(msgs) - 2 not in out.elided


def test_appendix_carries_task_list_diff_stats_and_memories(make_ctx: MakeCtx) -> None:
    out = full_summary(build(), make_ctx())
    assert out is not None
    sections = dict(out.appendix)
    assert "[in_progress] fix parse" in sections["Task list"]
    assert "2 files changed, 12 insertions(+), 2 deletions(-)" in sections["Git diff stats"]
    assert any("root cause" in m for m in sections["Recent memories (oldest first)"])


def test_memories_limit_is_configurable(make_ctx: MakeCtx) -> None:
    out = full_summary(build(), make_ctx(recent_memories=0))
    assert out is not None
    assert "Recent memories (oldest first)" not in dict(out.appendix)


def test_assembled_history_is_system_task_summary(make_ctx: MakeCtx) -> None:
    msgs = build()
    out = full_summary(msgs, make_ctx())
    assert out is not None
    new = assemble(msgs, out, "<completed>\nx\n</completed>\nfix parse", "cw:abc")
    assert new[0].text.startswith("sys") and "cw:abc" in new[0].text
    assert new[1] is msgs[1]
    assert is_summary_message(new[2])
    assert "2 files changed" in new[2].text
    assert "- [in_progress] fix parse" in new[2].text
    assert "Task list:" in new[2].text


def test_appendix_lines_already_in_the_summary_are_not_repeated(make_ctx: MakeCtx) -> None:
    msgs = build()
    out = full_summary(msgs, make_ctx())
    assert out is not None
    diff = dict(out.appendix)["Git diff stats"]
    new = assemble(msgs, out, "<completed>\n" + "\n".join(diff) + "\n</completed>", "cw:abc")
    assert "Git diff stats:" not in new[2].text


def test_nothing_to_do_after_a_full_summary(make_ctx: MakeCtx) -> None:
    msgs = build()
    out = full_summary(msgs, make_ctx())
    assert out is not None
    new = assemble(msgs, out, "<completed>\nx\n</completed>", "cw:abc")
    # only system, task, the summary and a pin are left: summarizing the summary alone is
    # pointless, so the strategy declines rather than loop
    again = full_summary(new[:4], make_ctx())
    assert again is None
