"""What a window cut takes out after a summary is summarised by the next compaction: each
message the agent saw is summarised once before it leaves the request for good."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from contextwarden import Compactor, Warden
from contextwarden._budget import Budget
from contextwarden._config import CompactionConfig
from contextwarden._log import Compaction, WindowCut
from contextwarden._messages import Message
from contextwarden.strategies import StrategyContext, incremental
from contextwarden.summarizers import ExtractiveSummarizer
from contextwarden.testing import ConversationBuilder, FixedCounter

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench._recordings import load_recording  # noqa: E402

COUNTER = FixedCounter(per_message=4)


def _runs(first: int, count: int) -> list[Message]:
    """A task and ``count`` shell loops from loop ``first`` on, each defining its own function."""
    b = ConversationBuilder().system("You are a coding agent.").user("Fix the parser bug")
    for i in range(first, first + count):
        b.bash(
            f"grep -n 'def load_part_{i}' src/parts.py",
            f"src/parts.py:{10 * i}:def load_part_{i}(rows):\n" + "row\n" * 60,
        )
    return b.build()


def _summary(messages: list[Message], **options: object) -> str:
    budget = Budget(int(COUNTER.count_messages(messages) / 0.8), reserve=0)
    result = Compactor().compact(messages, budget=budget, counter=COUNTER, **options)  # type: ignore[arg-type]
    assert result is not None and result.summary
    return result.summary


def test_the_summary_covers_what_window_cuts_took_out_before_its_span() -> None:
    cut = _runs(0, 3)[2:]  # three loops a window cut took out, with no summary for them
    history = _runs(3, 12)
    before = [m.text for m in history]

    plain = _summary(history)
    covered = _summary(history, unsummarized=tuple(cut))

    assert "load_part_0" not in plain and "load_part_3" in plain
    for name in ("load_part_0", "load_part_1", "load_part_2", "load_part_3"):
        assert name in covered
    assert [m.text for m in history] == before  # the caller's messages are not changed


def test_of_chunked_requests_only_the_first_takes_the_cut_in() -> None:
    # the incremental strategy summarises the span in chunks, in order, each updating the
    # last: the cut messages come before the first chunk and are summarised once, with it
    cut = tuple(_runs(0, 2)[2:])
    history = _runs(2, 60)
    budget = Budget(int(COUNTER.count_messages(history) / 0.8), reserve=0)
    config = CompactionConfig(chunk_turns=10)
    ctx = StrategyContext(budget, COUNTER, ExtractiveSummarizer(), config, unsummarized=cut)
    outcome = incremental(history, ctx)
    assert outcome is not None and len(outcome.requests) > 1
    taken = [sum(m in r.messages for m in cut) for r in outcome.requests]
    assert taken == [len(cut)] + [0] * (len(taken) - 1)
    assert outcome.requests[0].messages[: len(cut)] == cut  # before the span, in order


def test_a_warden_summarises_the_turns_its_window_cuts_dropped() -> None:
    # a codex session at 16k: its fixed part (system prompt, tools, task) leaves little room,
    # so between summaries the window cuts whole oldest turns; the agent's final findings (call
    # 61) name `AwsBedrockEmbedder` and `aws_bedrock.py`, which only the turns that the cut at
    # call 45 dropped showed (messages 37-38); the compaction at call 55 now summarises them
    path = ROOT / "tests" / "data" / "recordings" / "codex" / "raze-codex-session.jsonl"
    if not path.is_file():
        pytest.skip("codex/raze-codex-session.jsonl is not in this checkout")
    msgs = list(load_recording(path).messages)
    warden = Warden()
    cuts: list[WindowCut] = []
    summaries: list[str] = []
    request: list[dict[str, object]] = []
    for k, m in enumerate(msgs[:62]):
        if m["role"] != "assistant":
            continue
        request, result = warden.transform_openai(msgs[:k], model="gpt-4o", window=16_000)
        cuts += [e for e in result.edits if isinstance(e, WindowCut)]
        summaries += [e.summary for e in result.edits if isinstance(e, Compaction) and e.summary]
    dropped = {i for e in cuts for lo, hi in e.removed for i in range(lo, hi)}
    assert {37, 38} <= dropped  # a window cut took them out, with no summary
    sent = json.dumps(request)
    for name in ("AwsBedrockEmbedder", "aws_bedrock.py", "embedder/base.py"):
        assert name in json.dumps(msgs[61]), name  # the agent types it at call 61
        assert not any(name in json.dumps(msgs[i]) for i in range(39, 61)), name
        assert name in summaries[-1] and name in sent, name
