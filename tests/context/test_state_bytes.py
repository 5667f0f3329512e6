"""What a warden keeps alive is counted by its parts, in bytes, and bounded by them: the
conversations (their messages and the copies edits made), the codec's entries (the messages they
keep alive) and what it wrote, the counters' caches. A warden given ``max_state_bytes`` forgets
its least recently used conversations beyond it."""

from __future__ import annotations

from typing import Any

from contextwarden import Warden
from contextwarden._messages import MESSAGE_BYTES, held_bytes, user
from contextwarden.formats._prefix import _DIGEST_BYTES, PrefixCodec


def history(task: str, steps: int, line: int = 400) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": task},
    ]
    for i in range(steps):
        call = {"id": f"c{i}", "type": "function"}
        call["function"] = {"name": "bash", "arguments": f'{{"cmd": "cat f{i}"}}'}
        out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        out.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"{task} {i} " * line})
    return out


def chars(messages: list[dict[str, Any]]) -> int:
    return sum(len(m["content"] or "") for m in messages)


def test_a_message_is_counted_as_its_characters_and_a_fixed_cost() -> None:
    assert held_bytes(user("x" * 1000)) == MESSAGE_BYTES + 1000


def test_state_bytes_count_the_conversations_and_fall_when_one_is_forgotten() -> None:
    warden = Warden()
    msgs = history("fix the parser", 20)
    _, result = warden.transform_openai(msgs, model="gpt-4o")
    held = warden.state_bytes()
    # the conversation's messages and the codec's entry for the same request: each counts them
    assert held >= 2 * chars(msgs)
    warden.transform_openai(history("port the tests", 20), model="gpt-4o")
    assert warden.state_bytes() > held
    warden.forget(result.conversation)
    assert warden.state_bytes() < held


def test_max_state_bytes_forgets_the_least_recent_conversations() -> None:
    one = history("task one", 30)
    budget = 3 * chars(one)  # the conversation and the codec's copy of it fit, not two of them
    warden = Warden(max_state_bytes=budget)
    first = warden.transform_openai(one, model="gpt-4o")[1].conversation
    assert first in warden._table._conversations
    for k in range(4):
        latest = warden.transform_openai(history(f"task {k + 2}", 30), model="gpt-4o")[1]
        assert warden._table.kept_bytes() <= budget
        assert latest.conversation in warden._table._conversations  # the call's own stays
    assert first not in warden._table._conversations
    assert warden._table.evicted >= 4


def test_codec_entries_count_the_messages_they_keep_alive() -> None:
    codec = PrefixCodec(max_bytes=60_000)
    for k in range(10):
        codec.from_openai(history(f"t{k}", 5, line=100))
    assert codec.kept_bytes >= 0 and codec._bytes <= 60_000
    kept = [m for entries in codec._table.values() for e in entries for m in e.messages]
    assert codec._bytes >= sum(held_bytes(m) for m in kept)


def test_models_counted_alike_share_one_counter_and_its_cache() -> None:
    warden = Warden()
    names = [f"gpt-4o-{k}" for k in range(40)] + ["gpt-4o", "gpt-4.1", "o3"]
    counters = {id(warden.counter_for(name)) for name in names}
    assert len(counters) == 1  # one o200k counter, however many names
    assert warden.counter_for("claude-sonnet-4-6") is not warden.counter_for("gpt-4o")


def test_a_growing_conversation_counts_each_message_once_in_the_codec() -> None:
    codec = PrefixCodec()
    msgs = history("grow", 40, line=20)
    for n in range(3, len(msgs) + 1, 7):  # the agent appends, the codec reads only what is new
        codec.from_openai(msgs[:n])
    (entries,) = codec._table.values()
    (entry,) = entries
    assert len(entry.messages) == len(msgs) - (len(msgs) - 3) % 7
    assert entry.size == sum(held_bytes(m) for m in entry.messages) + _DIGEST_BYTES * len(
        entry.images
    )
    assert codec._bytes == entry.size
