"""The public test doubles in contextwarden.testing."""

from __future__ import annotations

import asyncio
import json

import pytest

from contextwarden import (
    ImageBlock,
    SummarizerError,
    TextBlock,
    ThinkingBlock,
    TokenCounter,
    ToolCallBlock,
    ToolResultBlock,
)
from contextwarden.summarizers import Summarizer, SummaryRequest, check_summary, parse_summary
from contextwarden.testing import ConversationBuilder, FakeSummarizer, FixedCounter


def _span() -> tuple[SummaryRequest, str]:
    task = "Rename the config loader and update callers"
    b = ConversationBuilder().user(task).pin("Do not break the CLI flags")
    b.edit("app/config.py", "def load", "def load_config")
    b.bash("pytest", "NameError: name 'load' is not defined", returncode=1)
    b.bash("cat app/config.py", "def load_config(): ...\n" * 50)
    return SummaryRequest(b.messages, task=task), task


# -- FakeSummarizer -----------------------------------------------------------------------------
def test_fake_default_output_is_valid_and_keeps_must_keep_facts() -> None:
    request, task = _span()
    fake = FakeSummarizer()
    assert isinstance(fake, Summarizer)
    summary = fake.summarize(request)
    parse_summary(summary)
    assert check_summary(summary, request) == []
    assert fake.calls == [request]
    assert fake.summarize(request) == summary  # deterministic


def test_fake_scripted_output_and_callable() -> None:
    request, _ = _span()
    assert FakeSummarizer("fixed text").summarize(request) == "fixed text"
    echo = FakeSummarizer(lambda r: f"{len(r.messages)} messages")
    assert echo.summarize(request) == f"{len(request.messages)} messages"


def test_fake_failures() -> None:
    request, _ = _span()
    with pytest.raises(SummarizerError, match="scripted failure"):
        FakeSummarizer(fail=True).summarize(request)
    with pytest.raises(TimeoutError):
        FakeSummarizer(fail=TimeoutError("slow")).summarize(request)
    flaky = FakeSummarizer("ok", fail_times=2)
    for _ in range(2):
        with pytest.raises(SummarizerError):
            flaky.summarize(request)
    assert flaky.summarize(request) == "ok"
    assert len(flaky.calls) == 3
    assert asyncio.run(flaky.asummarize(request)) == "ok"


# -- FixedCounter -------------------------------------------------------------------------------
def test_fixed_counter_arithmetic() -> None:
    counter = FixedCounter()
    assert isinstance(counter, TokenCounter)
    assert [counter.count_text(t) for t in ("", "a", "abcd", "abcde")] == [0, 1, 1, 2]
    words = FixedCounter("words")
    assert words.count_text("one two  three\nfour") == 4
    msgs = ConversationBuilder().user("x" * 8).assistant("y" * 4, thinking="z" * 12).build()
    assert counter.count_message(msgs[0]) == 2
    assert counter.count_message(msgs[1]) == 1 + 3
    framed = FixedCounter(per_message=3, per_request=5)
    assert framed.count_messages(msgs) == 5 + (3 + 2) + (3 + 4)
    tools = [{"name": "bash"}]
    expected_tools = counter.count_text(json.dumps(tools, sort_keys=True))
    assert counter.count_messages(msgs, tools=tools) == 2 + 4 + expected_tools


def test_fixed_counter_counts_calls_results_and_images() -> None:
    counter = FixedCounter(chars_per_token=1)
    b = ConversationBuilder().tool_loop("ls", {"a": 1}, "out").image(token_cost=100, text="see")
    call_msg, result_msg, image_msg = b.build()
    assert counter.count_message(call_msg) == len("ls") + len('{"a": 1}')
    assert counter.count_message(result_msg) == 3
    assert counter.count_message(image_msg) == 100 + 3


def test_fixed_counter_validates() -> None:
    with pytest.raises(ValueError, match="mode"):
        FixedCounter("tokens")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="chars_per_token"):
        FixedCounter(chars_per_token=0)


# -- ConversationBuilder ------------------------------------------------------------------------
def test_builder_shapes() -> None:
    msgs = (
        ConversationBuilder()
        .system("sys")
        .user("task")
        .pin("keep")
        .assistant("thinking aloud", thinking="hmm", signature="sig")
        .tool_loop("bash", {"command": "ls"}, "a.py", text="listing")
        .parallel([("read", {"path": "a"}, "A", False), ("read", "{bad json", "err", True)])
        .assistant(thinking="secret", redacted=True)
        .build()
    )
    assert [m.role for m in msgs] == [
        "system",
        "user",
        "user",
        "assistant",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert msgs[2].is_pinned and msgs[2].text == "<Pin>keep</Pin>"
    assert msgs[3].content[0] == ThinkingBlock("hmm", signature="sig")
    call = msgs[4].content[1]
    assert (
        isinstance(call, ToolCallBlock) and call.id == "call_1" and call.input == {"command": "ls"}
    )
    assert msgs[4].content[0] == TextBlock("listing")
    ids = [b.id for b in msgs[6].tool_calls]
    assert ids == ["call_2", "call_3"]
    assert [r.tool_results[0].tool_call_id for r in msgs[7:9]] == ids
    assert msgs[8].tool_results[0].is_error and msgs[6].tool_calls[1].arguments == "{bad json"
    redacted = msgs[9].content[0]
    assert isinstance(redacted, ThinkingBlock) and redacted.redacted and redacted.data == "secret"


def test_builder_conveniences_and_determinism() -> None:
    def build() -> ConversationBuilder:
        return (
            ConversationBuilder()
            .user("t")
            .bash("make", "boom", returncode=2)
            .read("a.py", "x")
            .write("b.py", "y")
            .edit("a.py", "x", "z")
            .edit("a.py", "q", "r", error="no match")
            .todo([("a", "pending")])
        )

    one, two = build(), build()
    assert [m.fingerprint for m in one.build()] == [m.fingerprint for m in two.build()]
    msgs = one.build()
    result = msgs[2].content[0]
    assert isinstance(result, ToolResultBlock)
    assert result.content == "<returncode>2</returncode>\n<output>\nboom\n</output>"
    assert msgs[-1].tool_results[0].content == "Todos have been modified."
    assert len(one) == len(msgs)
    assert one.messages == tuple(msgs)
    one.user("more")
    assert len(msgs) == len(two)  # build() returned a copy
    assert isinstance(ConversationBuilder().image().build()[0].content[0], ImageBlock)
