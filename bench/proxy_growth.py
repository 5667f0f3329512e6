"""The proxy's cost per request as a Claude Code-like session grows (its body about 15 kB more
each step, never compacted by the client, which sees the small usage the proxy's requests
report).

    PYTHONPATH=src .venv/bin/python bench/proxy_growth.py [--steps 300] [--step-bytes 15000]

Each step is what the proxy runs in its worker thread for one POST ``/v1/messages``: the
client's warden as :class:`~contextwarden.proxy.warden.WardenFactory` builds it, the client's
:class:`~contextwarden.formats._body.BodyReader`, :func:`~contextwarden.proxy.transform.transform_body`
with the proxy's defaults (cache breakpoints on) and the recall tool's offer
(:func:`~contextwarden.proxy.recall_rounds.recall_body`), with the collector tuned as in the
proxy's process; no HTTP, no upstream (their cost per byte is the network's). Prints the median time of the requests that made no new compaction at
steps 41-50 and 291-300, and their ratio (the target: at most 1.5).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from contextwarden.formats._body import BodyReader
from contextwarden.proxy.app import tune_gc
from contextwarden.proxy.config import ProxyConfig
from contextwarden.proxy.recall_rounds import recall_body
from contextwarden.proxy.transform import transform_body
from contextwarden.proxy.warden import WardenFactory
from contextwarden.proxy.wire import WIRES

MODEL = "claude-sonnet-4-6"
TOOLS = [
    {
        "name": name,
        "description": f"The {name} tool. " + "It does what its name says. " * 40,
        "input_schema": {"type": "object", "properties": {"arg": {"type": "string"}}},
    }
    for name in ("Bash", "Read", "Edit", "Write", "Grep", "Glob", "TodoWrite", "Task")
]
SYSTEM = [{"type": "text", "text": "You are Claude Code. " + "Follow the rules. " * 800}]


def step_messages(i: int, size: int) -> list[dict[str, Any]]:
    """Step ``i``: an assistant turn calling Read, and the user turn with its ``size``-byte
    result (lines of code that differ from step to step)."""
    lines = []
    n = 0
    while n < size:
        line = f"{i:04d}:{len(lines):04d}    value_{i}_{len(lines)} = compute({i}, {len(lines)})"
        lines.append(line)
        n += len(line) + 1
    call = {"type": "tool_use", "id": f"toolu_{i:06d}", "name": "Read", "input": {"arg": f"f{i}"}}
    return [
        {"role": "assistant", "content": [{"type": "text", "text": f"Reading f{i}."}, call]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": f"toolu_{i:06d}",
                    "content": "\n".join(lines),
                }
            ],
        },
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--step-bytes", type=int, default=15_000)
    args = ap.parse_args(argv)
    config = ProxyConfig.model_validate({"upstream": "http://127.0.0.1:9", "cache": "memory"})
    tune_gc()  # as the proxy's process does
    factory = WardenFactory(config, None)
    warden = factory("bench-client")
    bodies = BodyReader(max_bytes=config.client_state_bytes // 4)
    wire = WIRES["anthropic"]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "Port the parser to Rust."}]}
    ]
    times: list[tuple[int, float, int, bool]] = []
    for i in range(args.steps):
        messages += step_messages(i, args.step_bytes)
        raw = json.dumps(
            {
                "model": MODEL,
                "max_tokens": 32_000,
                "system": SYSTEM,
                "tools": TOOLS,
                "messages": messages,
                "stream": True,
            },
            separators=(",", ":"),
        ).encode()
        started = time.perf_counter()
        outcome = transform_body(
            warden, wire, raw, path="/v1/messages", cache_breakpoints=True, bodies=bodies
        )
        recall_body(wire, outcome)
        elapsed = (time.perf_counter() - started) * 1000
        times.append((i + 1, elapsed, len(raw), bool(outcome.compacted)))

    def window(lo: int, hi: int) -> tuple[float, float, int]:
        picked = [t for s, t, _, c in times if lo <= s <= hi and not c]
        return statistics.median(picked), min(picked), len(picked)

    compactions = sum(1 for *_, c in times if c)
    print(
        f"steps {args.steps}, body at the end {times[-1][2] / 1e6:.2f} MB, compactions {compactions}"
    )
    early = window(41, 60)
    late = window(args.steps - 19, args.steps)
    for (lo, hi), (median, best, n) in zip(
        ((41, 60), (args.steps - 19, args.steps)), (early, late), strict=True
    ):
        print(f"steps {lo}-{hi}: median {median:.1f} ms, best {best:.1f} ms ({n} non-compacting)")
    print(f"ratio: median {late[0] / early[0]:.2f}, best {late[1] / early[1]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
