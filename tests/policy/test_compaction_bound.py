"""The bound ``docs/policy.md`` states, checked with the library on generated sessions: over
``n`` calls a conversation makes at most ``ceil(n / summary_spacing)`` compactions, each asking
the summarizer once, none landing below half its target, whatever the window, the share of it
the fixed part takes (5% to 75%), the growth per call and the price structure."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwarden import Warden, WardenConfig
from contextwarden.testing import FakeSummarizer

#: The four price structures: Anthropic (read 0.1x, write 1.25x, 5-minute TTL), OpenAI gpt-4o
#: (read 0.5x, write 1x), DeepSeek (read 0.1x-0.02x, write 1x, an hour), Gemini (read 0.1x).
MODELS = ("claude-sonnet-4-5", "gpt-4o", "deepseek-chat", "gemini-2.5-pro")
#: Characters per heuristic token (the config's heuristic counter: about four).
CHARS_PER_TOKEN = 4


def session(fixed: int, growth: int, prose: float, steps: int) -> list[list[dict[str, Any]]]:
    """The requests of an agent whose system prompt and tools take about ``fixed`` tokens and
    whose history grows by about ``growth`` tokens a call, ``prose`` of it the agent's own
    words (no mask removes them), the rest tool output."""
    system = ("rule " * (fixed * CHARS_PER_TOKEN // 5)).strip()
    history: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": "Make the test suite pass"},
    ]
    said = max(int(growth * prose) * CHARS_PER_TOKEN, 8)
    shown = max(int(growth * (1 - prose)) * CHARS_PER_TOKEN, 8)
    out = []
    for k in range(steps):
        out.append([dict(m) for m in history])
        history.append(
            {
                "role": "assistant",
                "content": (f"note{k} " * (said // 6 + 1))[:said],
                "tool_calls": [
                    {
                        "id": f"c{k}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"cmd": f"t {k}"})},
                    }
                ],
            }
        )
        history.append(
            {"role": "tool", "tool_call_id": f"c{k}", "content": (f"out{k}\n" * shown)[:shown]}
        )
    return out


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(
    window=st.sampled_from([16_000, 32_000, 64_000, 128_000]),
    share=st.floats(0.05, 0.75),
    growth_share=st.floats(0.01, 0.2),
    prose=st.floats(0.1, 1.0),
    model=st.sampled_from(MODELS),
    steps=st.integers(10, 40),
)
def test_compactions_per_call_stay_within_the_stated_bound(
    window: int, share: float, growth_share: float, prose: float, model: str, steps: int
) -> None:
    config = WardenConfig.model_validate({"counter": "heuristic"})
    spacing = config.policy.summary_spacing
    llm = FakeSummarizer()
    warden = Warden(config, summarizer=llm)
    fixed, growth = int(window * share), max(int(window * growth_share), 50)
    compactions = 0
    for history in session(fixed, growth, prose, steps):
        _, result = warden.transform_openai(history, model=model, window=window)
        if result.compaction is not None:
            compactions += 1
            target = result.budget.target
            assert result.compaction.new_token_count >= target // 2, (
                f"compacted to {result.compaction.new_token_count}, target {target}"
            )
    assert compactions <= math.ceil(steps / spacing)
    assert len(llm.calls) == compactions  # one summary call per compaction
