"""A conversation continues through what clients change that is not content.

Each test runs an agent loop the way a real client sends it: Claude Code moving its
``cache_control`` breakpoint to the newest message on every call, aider ending each request with
a system reminder (or appending it to the newest user message) that the next request no longer
holds, Codex sending its environment block before the user's task. The log must continue (no
compaction repeated, each request after an edit beginning with the previous request), and a real
branch (the agent rewrote an earlier turn) must get a log of its own.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from contextwarden import Warden
from contextwarden._config import WardenConfig

Msg = dict[str, Any]

OUTPUT = "\n".join(f"line {k}: " + "x" * 60 for k in range(120))  # ~2.3k tokens a result


def thought(k: int) -> str:
    """An assistant's reasoning at step ``k``: ~700 tokens that masking does not touch."""
    return f"step {k}: " + " ".join(f"w{k}x{j}" for j in range(350))


def openai_steps(task: str, steps: int) -> list[list[Msg]]:
    """The histories an OpenAI chat agent sends, call by call: after each call the assistant
    makes one tool call and gets a large result."""
    history: list[Msg] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": task},
    ]
    out = [copy.deepcopy(history)]
    for k in range(steps):
        history.append(
            {
                "role": "assistant",
                "content": thought(k),
                "tool_calls": [
                    {
                        "id": f"call_{k}",
                        "type": "function",
                        "function": {
                            "name": "bash",
                            "arguments": json.dumps({"cmd": f"cat f{k}.py"}),
                        },
                    }
                ],
            }
        )
        history.append(
            {"role": "tool", "tool_call_id": f"call_{k}", "content": f"f{k}.py\n{OUTPUT}"}
        )
        out.append(copy.deepcopy(history))
    return out


def anthropic_steps(first: list[dict[str, Any]], steps: int) -> list[list[Msg]]:
    """The same for an Anthropic client; ``first`` is the content of the first user message."""
    history: list[Msg] = [{"role": "user", "content": first}]
    out = [copy.deepcopy(history)]
    for k in range(steps):
        history.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": thought(k)},
                    {
                        "type": "tool_use",
                        "id": f"tu_{k}",
                        "name": "Bash",
                        "input": {"command": f"cat f{k}.py"},
                    },
                ],
            }
        )
        history.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"tu_{k}",
                        "content": f"f{k}.py\n{OUTPUT}",
                    }
                ],
            }
        )
        out.append(copy.deepcopy(history))
    return out


def with_moving_breakpoint(messages: list[Msg]) -> list[Msg]:
    """What Claude Code sends: one cache_control breakpoint, on the newest message's last block."""
    out = copy.deepcopy(messages)
    last = out[-1]
    if isinstance(last["content"], str):
        last["content"] = [{"type": "text", "text": last["content"]}]
    last["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return out


def starts_with(request: list[Msg], previous: list[Msg]) -> bool:
    """``request`` begins with ``previous`` by content, breakpoints set aside."""

    def plain(m: Msg) -> str:
        m = copy.deepcopy(m)
        if isinstance(m.get("content"), list):
            for b in m["content"]:
                if isinstance(b, dict):
                    b.pop("cache_control", None)
        return json.dumps(m, sort_keys=True)

    return len(request) >= len(previous) and all(
        plain(a) == plain(b) for a, b in zip(request, previous, strict=False)
    )


def breakpoints(messages: list[Msg]) -> list[int]:
    return [
        i
        for i, m in enumerate(messages)
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and "cache_control" in b
    ]


def run(
    sends: list[Any], send: Callable[[Any], tuple[list[Msg], Any]]
) -> tuple[list[list[Msg]], int]:
    requests: list[list[Msg]] = []
    compactions = 0
    for history in sends:
        request, result = send(history)
        requests.append(request)
        compactions += result.compaction is not None
    return requests, compactions


def rewrites(requests: list[list[Msg]]) -> int:
    """Requests that do not begin with the previous one (an edit rewrote the prefix)."""
    return sum(not starts_with(b, a) for a, b in zip(requests, requests[1:], strict=False))


def anthropic_run(sends: list[list[Msg]]) -> tuple[list[list[Msg]], int]:
    warden = Warden()
    return run(
        sends,
        lambda h: warden.transform_anthropic(
            h, system="You are Claude Code.", model="claude-sonnet-4-5", window=32_000
        )[1:],
    )


def openai_run(sends: list[list[Msg]]) -> tuple[list[list[Msg]], int]:
    warden = Warden()
    return run(sends, lambda h: warden.transform_openai(h, model="gpt-4o", window=32_000))


def test_a_breakpoint_moved_to_the_newest_message_every_call_continues_the_log() -> None:
    plain = anthropic_steps([{"type": "text", "text": "Port parser.py"}], 40)
    sends = [with_moving_breakpoint(h) for h in plain]
    requests, compactions = anthropic_run(sends)
    # the client's habit changes nothing: as many compactions and rewritten prefixes as for a
    # client that sets no breakpoint (without continuity every call after the first compaction
    # compacted again)
    expected_requests, expected = anthropic_run(plain)
    assert 1 <= compactions == expected
    assert rewrites(requests) == rewrites(expected_requests)
    for sent, request in zip(sends, requests, strict=True):
        # the client's breakpoint stays where it put it, and only there
        assert breakpoints(request) == [len(request) - 1]
        assert request[-1]["content"][-1] == sent[-1]["content"][-1]


def test_a_trailing_system_reminder_is_sent_last_and_does_not_restart_the_log() -> None:
    reminder = {"role": "system", "content": "Reply with SEARCH/REPLACE blocks only."}
    plain = openai_steps("Fix the failing test", 40)
    requests, compactions = openai_run([[*h, reminder] for h in plain])
    expected_requests, expected = openai_run(plain)
    assert 1 <= compactions <= expected + 1  # the reminder's tokens may bring one forward
    bodies = [r[:-1] for r in requests]
    assert rewrites(bodies) <= rewrites(expected_requests) + 1
    assert all(r[-1] == reminder for r in requests)
    assert all(sum(m == reminder for m in r) == 1 for r in requests)


def test_a_reminder_appended_to_the_newest_message_and_taken_back_continues_the_log() -> None:
    plain = openai_steps("Fix the failing test", 40)
    sends = []
    for h in plain:
        h = copy.deepcopy(h)
        h[-1]["content"] += "\n\nRemember: reply with SEARCH/REPLACE blocks."
        sends.append(h)
    requests, compactions = openai_run(sends)
    expected_requests, expected = openai_run(plain)
    assert 1 <= compactions <= expected + 1
    # every request but its newest message begins with the previous request, between edits
    assert rewrites([r[:-1] for r in requests]) <= rewrites(expected_requests) + 1
    # the task, verbatim, in every request after the first (which the client sent with its reminder)
    assert len({r[1]["content"] for r in requests[1:]}) == 1


def test_a_rewritten_turn_gets_a_log_of_its_own() -> None:
    steps = openai_steps("Fix the failing test", 30)
    warden = Warden()
    results = [warden.transform_openai(h, model="gpt-4o", window=32_000)[1] for h in steps]
    assert any(r.compaction is not None for r in results)
    # the agent goes back and rewrites an early assistant turn that a compaction summarised
    branch = copy.deepcopy(steps[-1])
    branch[4]["content"] = "a different step"
    request, result = warden.transform_openai(branch, model="gpt-4o", window=32_000)
    assert result.conversation != results[-1].conversation
    assert "a different step" in json.dumps(request) or result.compaction is not None
    # and the original conversation goes on with its own log
    again, later = warden.transform_openai(steps[-1], model="gpt-4o", window=32_000)
    assert later.conversation == results[-1].conversation
    assert later.compaction is None


def test_codex_task_after_its_environment_block_is_kept_in_every_request() -> None:
    task = "Add retries to the HTTP client in net/client.py and test them"
    history: list[Msg] = [
        {
            "role": "developer",
            "content": "<permissions instructions>sandbox: workspace-write</permissions instructions>",
        },
        {
            "role": "user",
            "content": "<environment_context>\n  <cwd>/repo</cwd>\n  <shell>bash</shell>\n</environment_context>",
        },
        {"role": "user", "content": task},
    ]
    sends = []
    for k in range(50):
        sends.append(copy.deepcopy(history))
        history.append(
            {
                "role": "assistant",
                "content": thought(k),
                "tool_calls": [
                    {
                        "id": f"c{k}",
                        "type": "function",
                        "function": {
                            "name": "shell",
                            "arguments": json.dumps({"command": ["cat", f"f{k}"]}),
                        },
                    }
                ],
            }
        )
        history.append({"role": "tool", "tool_call_id": f"c{k}", "content": OUTPUT})
    requests, compactions = openai_run(sends)
    assert compactions >= 1
    for request in requests:
        assert any(m.get("content") == task for m in request)
        assert request[0]["role"] == "developer"


class Nibbler:
    """A compaction hook that summarises only the oldest tool call and its result: the request
    stays over the target after it, as when a summary cannot get small enough."""

    def __init__(self) -> None:
        self.calls = 0

    def compact(self, messages: Any, **_: Any) -> Any:
        from contextwarden._events import CompactResult
        from contextwarden._messages import user

        self.calls += 1
        first = next(i for i, m in enumerate(messages) if m.role == "assistant")
        kept = (*messages[:first], user(f"[summary {self.calls}]"), *messages[first + 2 :])
        return CompactResult(kept, f"summary {self.calls}", 0, 0, 2, "nibble")


def nibbled(spacing: int) -> list[bool]:
    """Which calls compacted, with a hook that frees little, at the given summary spacing. A
    small reserve leaves room between the trigger (24k) and the hard limit (30k)."""
    cfg = WardenConfig.model_validate(
        {"reserve_tokens": 2_000, "policy": {"summary_spacing": spacing}}
    )
    hook = Nibbler()
    warden = Warden(cfg, compactor=hook)
    made = [
        warden.transform_openai(h, model="gpt-4o", window=32_000)[1].compaction is not None
        for h in openai_steps("Fix it", 40)
    ]
    assert sum(made) == hook.calls
    return made


@pytest.mark.parametrize("spacing", [3, 5])
def test_a_compaction_that_cannot_reach_its_target_is_not_repeated_every_call(
    spacing: int,
) -> None:
    made = [k for k, m in enumerate(nibbled(spacing)) if m]
    # never two within `spacing` calls (the window is cut in between), so at most
    # ceil(calls / spacing) over the session
    assert made
    assert all(b - a >= spacing for a, b in zip(made, made[1:], strict=False))
    assert len(made) <= -(-41 // spacing)
