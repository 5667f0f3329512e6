"""An optional mask of the outputs the agent has just acted on is made at once: waiting would
only make its rewrite dearer (this call's new tokens join the suffix a later mask writes again)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextwarden import Warden


def step(k: int) -> list[dict[str, Any]]:
    call = {"id": f"c{k}", "type": "function", "function": {"name": "bash"}}
    call["function"]["arguments"] = json.dumps({"cmd": f"python scripts/check.py --case {k}"})
    body = "\n".join(f"case {k} row {j}: handler_{k}_{j} returned None" for j in range(150))
    return [
        {"role": "assistant", "content": f"Running case {k}.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{k}", "content": body},
    ]


@pytest.mark.parametrize("model", ["claude-sonnet-4-5", "gpt-4o"])
def test_an_output_the_agent_acted_on_is_masked_on_the_next_call(model: str) -> None:
    warden = Warden()
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Find the handler that mishandles None."},
    ]
    whole = []  # per call: how many outputs the agent has acted on are sent whole
    for k in range(12):
        history += step(k)
        request, _ = warden.transform_openai(history, model=model)
        outputs = [m for m in request if m["role"] == "tool"]
        assert outputs[-1]["content"] == history[-1]["content"]  # the newest, unread, is whole
        whole.append(sum("characters omitted" not in m["content"] for m in outputs[:-1]))
    # far under the window: only masks that pay. Once the bill covers the bet, each call masks
    # the output the agent has just acted on (before, they piled up for a call or two)
    assert whole[-4:] == [0, 0, 0, 0]
    assert history[-1]["content"].startswith("case 11 row 0")  # the caller's list is its own
