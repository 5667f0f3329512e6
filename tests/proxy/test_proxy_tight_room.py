"""A client whose system prompt and tools take most of a small window (Claude Code's 19k tokens at
32k): through the real proxy, the cost model says so once (the request record's warning and
``/stats``) and compacts at most every ``summary_spacing`` calls instead of on every call."""

from __future__ import annotations

import json
import math
from typing import Any

import httpx
from fake_upstream import FakeUpstream
from proxy_doubles import StartProxy

Upstream = tuple[FakeUpstream, str]
STEPS = 14


def _bodies() -> list[dict[str, Any]]:
    system = " ".join(f"rule{i % 89} applies" for i in range(5_400))  # about 19k tokens
    history: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": "Port the parser in src/parse.py to the new API"},
    ]
    out = []
    for k in range(STEPS):
        out.append({"model": "gpt-4o", "messages": [dict(m) for m in history]})
        notes = " ".join(f"step {k} finding {j} about parse_{k}_{j}" for j in range(400))
        call = {"id": f"c{k}", "type": "function"}
        call["function"] = {"name": "bash", "arguments": json.dumps({"cmd": f"cat m{k}.py"})}
        history.append({"role": "assistant", "content": notes, "tool_calls": [call]})
        history.append({"role": "tool", "tool_call_id": f"c{k}", "content": f"ok {k}"})
    return out


def test_a_tight_room_is_reported_once_and_compactions_are_spaced(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    _, url = upstream
    proxy = start_proxy(url, window=32_000)
    warned = 0
    for body in _bodies():
        r = httpx.post(f"{proxy}/v1/chat/completions", json=body, timeout=60)
        assert r.status_code == 200
        warned += r.headers.get("x-contextwarden-warning", "").startswith("tight_room")
    stats = httpx.get(f"{proxy}/stats").json()
    assert warned == 1 and stats["tight_room_warnings"] == 1
    assert 1 <= stats["compactions"] <= math.ceil(STEPS / 6)
