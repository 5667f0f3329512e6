"""The providers' own compaction in the formats: Anthropic's ``compaction`` block and the
Responses ``compaction`` item are opaque blocks that come back byte for byte, whatever the warden
does around them, and the formats say when the server compacts a request itself."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextwarden import Warden, WardenConfig
from contextwarden.formats import from_anthropic, to_anthropic
from contextwarden.formats.anthropic import compaction_block_at
from contextwarden.formats.anthropic import provider_compaction as anthropic_compaction
from contextwarden.formats.responses import (
    compaction_item_at,
    compaction_trigger,
    from_responses,
    provider_compaction,
    to_responses,
)
from contextwarden.formats.validate import validate_responses

BLOCK = {"type": "compaction", "content": "Summary: read files 1-9.", "signature": "sig-1"}
ITEM = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA" + "x" * 800}


def _agent(steps: int, output: str) -> list[dict[str, Any]]:
    """An Anthropic tool loop of ``steps`` calls, each returning ``output``."""
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "task: read the files"}]
    for i in range(steps):
        msgs.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"t{i}", "name": "bash", "input": {"c": f"cat {i}"}}
                ],
            }
        )
        msgs.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": output}],
            }
        )
    return msgs


def test_a_compaction_block_survives_the_warden_byte_for_byte() -> None:
    history = _agent(3, "x")
    history.append({"role": "assistant", "content": [copy.deepcopy(BLOCK)]})
    history += _agent(12, "line of output\n" * 400)[1:]
    sent = copy.deepcopy(history)
    # a window the history fits under the trigger of once its old tool results are masked: no
    # compaction (over the trigger on a first call, where nothing is cached to lose, the cost
    # model would compact at once)
    warden = Warden(WardenConfig(context_window=32_000))
    _, out, result = warden.transform_anthropic(history, model="claude-sonnet-4-5")
    assert history == sent  # the caller's history untouched
    assert result.tokens_after < result.tokens_before  # the warden masked around the block
    assert out[7]["content"] == [BLOCK]  # in its place, byte for byte


@given(st.text(min_size=1, max_size=200), st.booleans())
@settings(max_examples=50)
def test_anthropic_round_trip_keeps_the_block(summary: str, null: bool) -> None:
    block = {"type": "compaction", "content": None if null else summary, "signature": "s"}
    msgs = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [block, {"type": "text", "text": "on"}]},
        {"role": "user", "content": "more"},
    ]
    assert to_anthropic(from_anthropic(msgs))[1] == msgs
    # a null summary is a failed compaction: the server ignores nothing for it
    assert compaction_block_at(msgs) == (None if null else 1)


def test_anthropic_says_when_the_server_compacts() -> None:
    plain = {"messages": [{"role": "user", "content": "hi"}]}
    assert anthropic_compaction(plain) is None
    editing = dict(plain, context_management={"edits": [{"type": "clear_thinking_20251015"}]})
    assert anthropic_compaction(editing) is None  # context editing alone compacts nothing
    asked = dict(plain, context_management={"edits": [{"type": "compact_20260112"}]})
    assert "compact_20260112" in (anthropic_compaction(asked) or "")
    held = {
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [BLOCK]},
            {"role": "user", "content": "go on"},
        ]
    }
    assert "messages[1]" in (anthropic_compaction(held) or "")


def test_responses_item_round_trip_and_cost() -> None:
    items = [
        {"type": "message", "role": "user", "content": "task"},
        copy.deepcopy(ITEM),
        {"type": "message", "role": "user", "content": "next"},
    ]
    messages = from_responses(items)
    assert to_responses(messages)[1] == items
    (kept,) = messages[1].content
    assert kept.token_cost >= len(ITEM["encrypted_content"]) // 4  # type: ignore[union-attr]
    assert compaction_item_at(items) == 1 and compaction_item_at(items[:1]) is None


def test_responses_says_when_the_server_compacts() -> None:
    items = [{"type": "message", "role": "user", "content": "task"}]
    assert provider_compaction({"input": items}) is None
    # Codex's trigger asks for one compaction of what precedes it, only as the last item
    trigger = [*items, {"type": "compaction_trigger"}]
    assert compaction_trigger(trigger) and provider_compaction({"input": trigger}) is None
    assert not compaction_trigger([{"type": "compaction_trigger"}, *items])
    assert not compaction_trigger(items) and not compaction_trigger([])
    managed = {"input": items, "context_management": [{"type": "compaction"}]}
    assert provider_compaction(managed) is not None


def test_the_warden_leaves_what_precedes_a_compaction_block_to_the_provider() -> None:
    """The provider reads an Anthropic history from its last compaction block on: what comes
    before goes back as it came, is not counted and is never summarised, however large."""
    before = _agent(30, "old output line\n" * 400)  # far over the window by itself
    after = [{"role": "assistant", "content": [copy.deepcopy(BLOCK)]}, *_agent(2, "new")[1:]]
    history = before + after
    sent = copy.deepcopy(history)
    warden = Warden(WardenConfig(context_window=16_000))
    _, out, result = warden.transform_anthropic(history, system="s", model="claude-sonnet-4-5")
    assert history == sent
    assert out[: len(before)] == before and out[len(before)]["content"] == [BLOCK]
    assert result.compaction is None
    _, alone, counted = Warden(WardenConfig(context_window=16_000)).transform_anthropic(
        after, system="s", model="claude-sonnet-4-5"
    )
    assert out[len(before) :] == alone
    assert (result.tokens_before, result.tokens_after) == (
        counted.tokens_before,
        counted.tokens_after,
    )


def _responses_agent(steps: int, output: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": "task: read"}]
    for i in range(steps):
        args = f'{{"c": "cat {i}"}}'
        items.append({"type": "function_call", "call_id": f"c{i}", "name": "sh", "arguments": args})
        items.append({"type": "function_call_output", "call_id": f"c{i}", "output": output})
    return items


def test_the_warden_reads_responses_from_the_last_compaction_item() -> None:
    before = _responses_agent(30, "old output line\n" * 400)
    after = [copy.deepcopy(ITEM), *_responses_agent(3, "line\n" * 300)[1:]]
    warden = Warden(WardenConfig(context_window=16_000))
    instructions, out, result = warden.transform_responses(
        before + after, instructions="be brief", model="gpt-5"
    )
    assert instructions == "be brief"
    assert out[: len(before)] == before and out[len(before)] == ITEM
    assert result.compaction is None
    assert result.tokens_before < 16_000  # the 30 old steps are the item's: not counted


def test_a_compaction_trigger_stays_last_and_the_warden_does_not_compact() -> None:
    """Codex asks the provider to summarise the history (``compaction_trigger`` last): the
    warden sends the history as its log has it, the trigger after it, and makes no summary of
    its own, even over its trigger; the same history without the trigger is compacted."""
    items = _responses_agent(150, "word " * 90)  # outputs too short to mask: 16.6k tokens
    trigger = {"type": "compaction_trigger"}
    config = WardenConfig(context_window=16_000)
    _, out, result = Warden(config).transform_responses([*items, trigger], model="gpt-5")
    assert out[-1] == trigger and result.compaction is None
    assert validate_responses(out[:-1]) == []
    _, _, plain = Warden(config).transform_responses(items, model="gpt-5")
    assert plain.compaction is not None
