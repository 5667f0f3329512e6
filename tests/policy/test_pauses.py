"""Masks made after a pause are free in the bill: when more than the cache's life passed since
the previous call, the request is written whole anyway, for the warden and for sending
everything alike. On generated sessions with pauses (replayed at their times, billed with the
cache's five minutes), the warden's requests cost at no call more than 1% over sending
everything; and a session with pauses saves by the masks made after them."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwarden import Warden, WardenConfig, from_openai, get_counter
from contextwarden._markers import MASK_MARKER_RE

MODEL = "claude-sonnet-4-5"  # a 5-minute cache: a pause longer than that makes masks free

#: one step: a read of file ``k`` (an int) or a command run (None), its output's lines, and the
#: seconds since the previous call
Step = tuple[int | None, int, int]


def _call(cid: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": f"Next: {name}.",
        "tool_calls": [
            {
                "id": cid,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ],
    }


def session(steps: list[Step]) -> tuple[list[dict[str, Any]], list[float], dict[str, int]]:
    """The history, the time of each message, and each read's file."""
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Find why the report is wrong and fix it."},
    ]
    times = [0.0, 0.0]
    reads: dict[str, int] = {}
    now = 0.0
    for n, (file, lines, pause) in enumerate(steps):
        now += pause
        cid = f"c{n}"
        if file is None:
            msgs.append(_call(cid, "Bash", {"command": f"python -m pytest tests/test_{n}.py"}))
            body = "\n".join(f"tests/test_{n}.py::test_case_{k} PASSED" for k in range(lines))
        else:
            reads[cid] = file
            msgs.append(_call(cid, "Read", {"file_path": f"src/module_{file}.py"}))
            body = "\n".join(
                f"{k:>4}\tdef handler_{file}_{k}(value): return value * {k + n}"
                for k in range(lines)
            )
        msgs.append({"role": "tool", "tool_call_id": cid, "content": body})
        times += [now, now]
    return msgs, times, reads


def bills(requests: list[list[dict[str, Any]]], times: list[float]) -> list[float]:
    """The running bill of ``requests`` sent at ``times``, at Anthropic's cache prices (read
    0.1x, write 1.25x): the leading messages identical to the previous request's are read,
    unless more than the cache's five minutes passed; the rest is written."""
    counter = get_counter(kind="heuristic")
    prev: list[str] = []
    total, last, out = 0.0, None, []
    for req, at in zip(requests, times, strict=True):
        keys = [json.dumps(m, sort_keys=True) for m in req]
        if last is not None and at - last > 300:
            prev = []
        same = 0
        while same < min(len(keys), len(prev)) and keys[same] == prev[same]:
            same += 1
        sizes = [counter.count_message(m) for m in from_openai(req)]
        total += sum(sizes[:same]) * 0.1 + sum(sizes[same:]) * 1.25
        out.append(total)
        prev, last = keys, at
    return out


def replay(steps: list[Step]) -> tuple[list[float], list[float], list[list[dict[str, Any]]]]:
    """The running bills of sending everything and of the warden, and the warden's requests."""
    msgs, times, _ = session(steps)
    warden = Warden(WardenConfig.model_validate({"counter": "heuristic"}))
    raw: list[list[dict[str, Any]]] = []
    ours: list[list[dict[str, Any]]] = []
    at: list[float] = []
    for k, m in enumerate(msgs):
        if m["role"] == "assistant":
            raw.append(msgs[:k])
            ours.append(
                warden.transform_openai(msgs[:k], model=MODEL, window=1_000_000, now=times[k - 1])[
                    0
                ]
            )
            at.append(times[k - 1])
    return bills(raw, at), bills(ours, at), ours


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.tuples(
            st.one_of(st.none(), st.integers(0, 5)),
            st.integers(20, 160),
            st.sampled_from([2, 5, 30, 400, 900]),
        ),
        min_size=8,
        max_size=50,
    )
)
def test_with_pauses_no_call_costs_more_than_one_percent_over_sending_everything(
    steps: list[Step],
) -> None:
    raw, ours, _ = replay(steps)
    for k, (a, b) in enumerate(zip(raw, ours, strict=True)):
        assert b <= a * 1.01 + 1, f"call {k}: {b:.0f} against {a:.0f} sending everything"


def test_the_masks_made_after_pauses_save() -> None:
    # test runs, with a pause longer than the cache's life every tenth call
    steps: list[Step] = [(None, 120, 900 if n % 10 == 9 else 5) for n in range(40)]
    raw, ours, requests = replay(steps)
    assert any(MASK_MARKER_RE.search(x["content"]) for x in requests[-1] if x["role"] == "tool")
    assert ours[-1] < 0.8 * raw[-1]
