"""What the agent needs survives the cut: every instruction the user gave, verbatim, in every
request after it (in the history or in a summary, compaction after compaction), a
``<completed>`` section that says what was done, and a cut that keeps what fits."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextwarden import Warden
from contextwarden.summarizers import parse_summary
from contextwarden.testing import FakeSummarizer

INSTRUCTIONS = {
    6: "Keep the public signature of parse_header unchanged; callers depend on it.",
    14: "Also add a regression test named test_header_with_tabs.",
    23: "Do not touch the vendored code under third_party/.",
}


def steps(n: int = 36) -> list[list[dict[str, Any]]]:
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the header parser in src/headers.py"},
    ]
    out = []
    for k in range(n):
        if k in INSTRUCTIONS:
            history.append({"role": "user", "content": INSTRUCTIONS[k]})
        out.append([dict(m) for m in history])
        command = f"sed -i 's/a{k}/b{k}/' src/mod{k}.py" if k % 3 == 0 else f"cat src/mod{k}.py"
        history.append(
            {
                "role": "assistant",
                "content": f"Working on src/mod{k}.py: " + "reasoning about the parser " * 100,
                "tool_calls": [
                    {
                        "id": f"c{k}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"cmd": command})},
                    }
                ],
            }
        )
        body = "\n".join(f"line {j} of mod{k}: value_{k}_{j} = {j}" for j in range(120))
        history.append({"role": "tool", "tool_call_id": f"c{k}", "content": body})
    return out


def summaries(request: list[dict[str, Any]]) -> list[str]:
    return [
        m["content"]
        for m in request
        if isinstance(m.get("content"), str) and m["content"].startswith("[Context summary")
    ]


# at 32k the masks of the outputs the agent has acted on keep the request under the trigger
# for longer: a longer session, for the summaries to be updated
@pytest.mark.parametrize(("window", "calls"), [(16_000, 36), (32_000, 90)])
def test_every_user_instruction_stays_verbatim_through_compactions(window: int, calls: int) -> None:
    warden = Warden()
    compactions = 0
    for history in steps(calls):
        request, result = warden.transform_openai(history, model="gpt-4o", window=window)
        compactions += result.compaction is not None
        text = "\n".join(str(m.get("content")) for m in request)
        for at, said in INSTRUCTIONS.items():
            if any(m.get("content") == said for m in history):
                assert said in text, f"instruction of step {at} lost at window {window}"
        for summary in summaries(request):
            assert parse_summary(summary.split("\n", 1)[1]).completed.strip()
    assert compactions >= 2  # the later summaries carried the earlier ones' instructions


def test_a_later_summary_updates_the_earlier_one_with_one_call() -> None:
    llm = FakeSummarizer()
    warden = Warden(summarizer=llm)
    made = 0
    for history in steps():
        before = len(llm.calls)
        _, result = warden.transform_openai(history, model="gpt-4o", window=16_000)
        made += result.compaction is not None
        assert len(llm.calls) - before == (result.compaction is not None)
    assert made >= 2
    # each later request carries the earlier summary and only the new span
    for earlier, later in zip(llm.calls, llm.calls[1:], strict=False):
        assert later.previous_summary
        assert len(later.messages) < len(earlier.messages) + 30
