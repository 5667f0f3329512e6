"""The mini-swe-agent wrapper in a real ``DefaultAgent`` run: a scripted tool-calling model, real
shell commands in a temporary directory (``LocalEnvironment``), 60 large outputs."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
pytest.importorskip("minisweagent", reason="mini-swe-agent is not installed")

from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.test_models import DeterministicToolcallModel, make_toolcall_output

from contextwarden import count_tokens
from contextwarden.formats import from_openai, validate_openai
from contextwarden.integrations.mini_swe_agent import WardenModel

TASK = "Find why tests/test_io.py fails and fix src/io.py without editing the test."
WINDOW = 16_000
CALLS = 60


def script() -> list[dict[str, Any]]:
    outputs = []
    for k in range(CALLS + 1):
        command = f"cat mod_{k}.py" if k < CALLS else "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
        call = {
            "id": f"call_{k}",
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": command})},
        }
        action = {"command": command, "tool_call_id": f"call_{k}"}
        outputs.append(make_toolcall_output(None, [call], [action]))
    return outputs


class Recording(DeterministicToolcallModel):
    """The scripted model, keeping a copy of every message list it is asked to answer."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seen: list[list[dict[str, Any]]] = []

    def query(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        self.seen.append(copy.deepcopy(messages))
        return super().query(messages, **kwargs)  # type: ignore[no-any-return]


def test_a_real_agent_run_sends_valid_requests_within_the_window(tmp_path: Path) -> None:
    for k in range(CALLS):
        body = "\n".join(f"def f_{k}_{j}(x):  # step {j}\n    return x * {j}" for j in range(60))
        (tmp_path / f"mod_{k}.py").write_text(body)
    inner = Recording(outputs=script())
    model = WardenModel(inner, model="gpt-4o", window=WINDOW)
    agent = DefaultAgent(
        model,
        LocalEnvironment(cwd=str(tmp_path)),
        system_template="You are a coding agent. Run one command per call.",
        instance_template=f"TASK: {TASK}",
        step_limit=CALLS + 5,
        cost_limit=1000.0,
    )
    result = agent.run(TASK)
    assert result["exit_status"] == "Submitted"
    # the agent keeps every message: system, task, 61 calls, 60 outputs (the submitting call
    # ends the run instead), the exit record
    assert len(agent.messages) == 2 + (CALLS + 1) + CALLS + 1
    assert sum(1 for m in agent.messages if m["role"] == "tool") == CALLS
    assert len(inner.seen) == CALLS + 1
    for sent in inner.seen:
        assert validate_openai(sent) == []  # no tool message without its call
        assert sent[1]["content"] == f"TASK: {TASK}"
        assert all("extra" not in m for m in sent)  # the agent's bookkeeping stays home
        assert count_tokens(from_openai(sent), model="gpt-4o") <= WINDOW
    history = [{k: v for k, v in m.items() if k != "extra"} for m in agent.messages[:-1]]
    assert count_tokens(from_openai(history), model="gpt-4o") > 3 * WINDOW
    assert len(inner.seen[-1]) < len(agent.messages)
    # the wrapper is the model for everything else
    assert model.serialize() == inner.serialize() and model.config is inner.config


def test_not_a_model() -> None:
    with pytest.raises(TypeError, match="inner must be a mini-swe-agent model, got str"):
        WardenModel("gpt-4o")
