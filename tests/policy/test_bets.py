"""Optional edits are small bets that pay: on generated agent sessions that fit the window
(so sending everything was always possible), the warden's requests, billed the way a provider
bills them (the leading messages identical to the previous request's at the cached-read
price, the rest at the write price), cost at no point more than 1% over sending everything,
at Anthropic's cache prices (the dearest writes, the cheapest reads: the hardest case for a
bet); and on a session long enough for masks to pay, they save."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwarden import Warden, WardenConfig, from_openai, get_counter

READ, WRITE = 0.1, 1.25
MODEL = "claude-sonnet-4-5"


def history(sizes: list[int], seed: int) -> list[dict[str, Any]]:
    """An agent's history: a task, then one command and its output (``sizes`` characters)
    per step."""
    out: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. " * 40},
        {"role": "user", "content": "Fix the failing test in src/app.py"},
    ]
    for k, size in enumerate(sizes):
        out.append(
            {
                "role": "assistant",
                "content": f"Step {k}: looking further.",
                "tool_calls": [
                    {
                        "id": f"c{k}",
                        "type": "function",
                        "function": {
                            "name": "bash",
                            "arguments": json.dumps({"command": f"grep -rn item_{k} src"}),
                        },
                    }
                ],
            }
        )
        line = f"src/mod_{(k * 7 + seed) % 13}.py:{k}: value_{k} = compute({k}, {seed})\n"
        out.append(
            {
                "role": "tool",
                "tool_call_id": f"c{k}",
                "content": (line * (size // len(line) + 1))[:size],
            }
        )
    return out


def bills(requests: list[list[dict[str, Any]]]) -> list[float]:
    """The running bill of ``requests`` sent one after another, in tokens at the input price."""
    counter = get_counter(kind="heuristic")
    prev: list[str] = []
    total = 0.0
    out = []
    for req in requests:
        keys = [json.dumps(m, sort_keys=True) for m in req]
        same = 0
        while same < min(len(keys), len(prev)) and keys[same] == prev[same]:
            same += 1
        sizes = [counter.count_message(m) for m in from_openai(req)]
        read = sum(sizes[:same])
        total += read * READ + (sum(sizes) - read) * WRITE
        out.append(total)
        prev = keys
    return out


def run(sizes: list[int], seed: int) -> tuple[list[float], list[float]]:
    """The running bills of sending everything and of the warden, call by call."""
    msgs = history(sizes, seed)
    warden = Warden(WardenConfig.model_validate({"counter": "heuristic"}))
    raw, ours = [], []
    for k, m in enumerate(msgs):
        if m["role"] != "assistant":
            continue
        raw.append(list(msgs[:k]))
        ours.append(warden.transform_openai(msgs[:k], model=MODEL, window=1_000_000)[0])
    return bills(raw), bills(ours)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(200, 30_000), min_size=5, max_size=60),
    seed=st.integers(0, 1000),
)
def test_no_prefix_of_a_session_costs_more_than_one_percent_over_sending_everything(
    sizes: list[int], seed: int
) -> None:
    raw, ours = run(sizes, seed)
    for k, (a, b) in enumerate(zip(raw, ours, strict=True)):
        assert b <= a * 1.01 + 1, f"call {k}: {b:.0f} against {a:.0f} sending everything"


def test_a_long_session_saves_with_masks_that_start_near_the_tail() -> None:
    """160 calls with large outputs: once the bill has grown enough that masking the old
    results is a small bet, the masks are made and pay."""
    raw, ours = run([6_000, 400, 9_000, 1_500] * 40, seed=3)
    assert ours[-1] < 0.85 * raw[-1]


def test_masks_start_at_the_tail_when_the_whole_backlog_is_too_large_a_bet() -> None:
    """Small outputs, many calls: masking everything old at once rewrites nearly the whole
    request, a bet never small next to 1% of the bill; masking the results that just left
    the recent ones, the older kept whole in the cached prefix, rewrites only the short
    suffix after them, and pays."""
    raw, ours = run([6_000, 600, 600] * 50, seed=5)
    assert ours[-1] < 0.95 * raw[-1]


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(300, 4_000), min_size=60, max_size=140),
    seed=st.integers(0, 1000),
)
def test_tail_masks_keep_every_prefix_within_one_percent(sizes: list[int], seed: int) -> None:
    """Long sessions of small outputs, where the optional masks start near the tail (and
    are batched until waiting has cost as much as their rewrite): still never more than 1%
    over sending everything, at any call."""
    raw, ours = run(sizes, seed)
    for k, (a, b) in enumerate(zip(raw, ours, strict=True)):
        assert b <= a * 1.01 + 1, f"call {k}: {b:.0f} against {a:.0f} sending everything"
