"""The warm-call shortcuts give exactly what the full computation gives: re-applying remembered
compactions to a history the agent appended to, and classifying the task type."""

from __future__ import annotations

from contextwarden import Compactor, Warden, WardenConfig
from contextwarden.strategies import memory as memory_module
from contextwarden.strategies import task_type as task_type_module
from contextwarden.strategies.task_type import detect_task_type
from contextwarden.testing import ConversationBuilder


def long_history(steps: int = 60) -> list:
    b = ConversationBuilder().system("You are a coding agent.").user("Fix the parser bug")
    for i in range(steps):
        lines = "\n".join(f"row {j} of file_{i}: " + "x " * 30 for j in range(40))
        b.bash(f"cat src/file_{i}.py", lines)
        if i % 9 == 4:
            b.edit(f"src/file_{i}.py", "old", "new")
        if i % 13 == 6:
            b.user(f"Also check module {i}")
    return b.build()


def test_reapply_shortcut_equals_the_full_reapply() -> None:
    history = long_history()
    warden = Warden(WardenConfig.model_validate({}), compactor=Compactor())
    first = warden.transform(history[:80], model="gpt-4o", window=12_000)
    assert first.compaction is not None
    memory = warden.compactor.memory  # type: ignore[union-attr]
    shortcuts = 0
    for end in range(81, len(history) + 1):
        result = warden.transform(history[:end], model="gpt-4o", window=12_000)
        if memory._last is not None:
            shortcuts += 1
        fresh = Warden(WardenConfig.model_validate({}), compactor=Compactor())
        fresh.compactor.memory._entries = memory._entries.copy()  # type: ignore[union-attr]
        fresh.compactor.memory._spans = memory._spans.copy()  # type: ignore[union-attr]
        fresh.compactor.memory._version = memory._version  # type: ignore[union-attr]
        expected = fresh.transform(history[:end], model="gpt-4o", window=12_000)
        assert result.messages == expected.messages
        assert result.tokens_after == expected.tokens_after
    assert shortcuts > 0, "the shortcut was never taken"


def test_reapply_shortcut_is_not_taken_when_the_head_changes() -> None:
    history = long_history()
    warden = Warden(compactor=Compactor())
    warden.transform(history[:80], model="gpt-4o", window=12_000)
    memory = warden.compactor.memory  # type: ignore[union-attr]
    view = memory.reapply(history[:80])[0]
    assert memory._last is not None and len(memory._last.head) > 3
    # a message inside the compacted head replaced by an equal copy: not the same object, so the
    # shortcut must not apply, and the full path gives the same answer as before
    edited = [*history[:80]]
    edited[3] = edited[3].replace()
    again = memory.reapply(edited)[0]
    memory._last = None
    assert again == memory.reapply(edited)[0] == view


def test_task_type_reuse_equals_a_fresh_classification() -> None:
    history = long_history(30)
    for end in range(1, len(history) + 1, 3):
        warm = detect_task_type(history[:end])
        task_type_module._last = ((), [])
        assert detect_task_type(history[:end]) == warm
    # a different history after a long one: nothing stale is reused
    other = ConversationBuilder().user("hi").assistant("hello").user("how are you").assistant("fine").build()
    assert detect_task_type(other) == "conversation"


def test_memory_version_changes_when_entries_change() -> None:
    m = memory_module.CompactionMemory()
    before = m._version
    m.forget(["cw:none"])
    assert m._version == before + 1


def test_strategies_that_just_failed_wait_for_new_material(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from contextwarden import _compaction

    history = long_history(200)
    compactor = Compactor()
    warden = Warden(WardenConfig.model_validate({}), compactor=compactor)
    first_compaction = next(
        end for end in range(20, len(history))
        if warden.transform(history[:end], model="gpt-4o", window=12_000).compaction is not None
    )
    tries: list[int] = []

    def failing_step(self, name, *args, **kwargs):  # type: ignore[no-untyped-def]
        tries.append(len(tries))
        return None
        yield  # a generator, like the real step

    monkeypatch.setattr(_compaction.Compactor, "_step", failing_step)
    tried_at: list[int] = []
    for end in range(first_compaction + 1, len(history) + 1):
        before = len(tries)
        result = warden.transform(history[:end], model="gpt-4o", window=12_000)
        assert result.messages  # the window still does its job
        if len(tries) > before:
            tried_at.append(end)
    assert len(tried_at) >= 2, "the strategies were retried once the history grew"
    skipped = (len(history) - first_compaction) - len(tried_at)
    assert skipped > len(tried_at), "most calls right after a failure skip the strategies"
    for a, b in zip(tried_at, tried_at[1:], strict=False):
        assert b - a > 1, "no retry on the very next call"
