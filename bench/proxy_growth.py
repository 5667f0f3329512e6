"""The proxy's cost per request as a Claude Code-like session grows (its body about 15 kB more
each step, never compacted by the client, which sees the small usage the proxy's requests
report).

    .venv/bin/python -m bench.proxy_growth [--steps 300] [--step-bytes 15000] [--runs 3]

Each step is what the proxy runs in its worker thread for one POST ``/v1/messages``: the
client's warden as :class:`~contextwarden.proxy.warden.WardenFactory` builds it, the client's
:class:`~contextwarden.formats._body.BodyReader`,
:func:`~contextwarden.proxy.transform.transform_body` with the proxy's defaults (cache
breakpoints on) and the recall tool's offer (:func:`~contextwarden.proxy.recall_rounds.recall_body`),
with the collector tuned as in the proxy's process; no HTTP, no upstream (their cost per byte
is the network's).

Two clients of one proxy run the same session: one is taken to step 40, the other to step
``steps - 20``, then their next 20 steps are run in turns (41, then ``steps - 19``, ...), so
that the load of the machine falls on both windows alike. Each request is timed in wall time
and in the CPU time of its thread. Per run: the median and the best of each window's requests
that made no new compaction, and the ratio late / early of each (the target: at most 1.5 at
step 300). Over ``--runs`` runs (new clients each): the median and the best of those ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Iterator
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
TASK = {"role": "user", "content": [{"type": "text", "text": "Port the parser to Rust."}]}
WINDOW = 20  # requests per window
EARLY = 40  # the early window's steps are EARLY + 1 .. EARLY + WINDOW


def step_messages(i: int, size: int) -> list[dict[str, Any]]:
    """Step ``i``: an assistant turn calling Read, and the user turn with its ``size``-byte
    result (lines of code that differ from step to step)."""
    lines: list[str] = []
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


def dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def bodies(step_bytes: int) -> Iterator[bytes]:
    """The session's request bodies, step 1 on: compact JSON, as ``json.dumps`` of the whole
    body would write it (the messages written once each, the body joined around them)."""
    head = f'{{"model":{dump(MODEL)},"max_tokens":32000,"system":{dump(SYSTEM)},'
    head += f'"tools":{dump(TOOLS)},"messages":['
    written = [dump(TASK)]
    i = 0
    while True:
        written += map(dump, step_messages(i, step_bytes))
        yield (head + ",".join(written) + '],"stream":true}').encode()
        i += 1


class Client:
    """One client of the proxy: its warden, its body reader and its session's bodies."""

    def __init__(self, factory: WardenFactory, config: ProxyConfig, name: str, step_bytes: int):
        self.warden = factory(name)
        self.reader = BodyReader(max_bytes=config.client_state_bytes // 4)
        self.bodies = bodies(step_bytes)
        self.size = 0

    def step(self) -> tuple[float, float, bool]:
        """The next request: its wall and CPU time in ms, and whether it compacted."""
        raw = next(self.bodies)
        self.size = len(raw)
        wire = WIRES["anthropic"]
        wall, cpu = time.perf_counter(), time.thread_time()
        outcome = transform_body(
            self.warden, wire, raw, path="/v1/messages", cache_breakpoints=True, bodies=self.reader
        )
        recall_body(wire, outcome)
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
        return wall * 1000, cpu * 1000, bool(outcome.compacted)


def run(steps: int, step_bytes: int, tag: str) -> dict[str, list[float]]:
    """One run: the early and the late window's non-compacting requests, wall and CPU ms."""
    config = ProxyConfig.model_validate({"upstream": "http://127.0.0.1:9", "cache": "memory"})
    factory = WardenFactory(config, None)
    early = Client(factory, config, f"{tag}-early", step_bytes)
    late = Client(factory, config, f"{tag}-late", step_bytes)
    for _ in range(EARLY):
        early.step()
    for _ in range(steps - WINDOW):
        late.step()
    times: dict[str, list[float]] = {
        "early wall": [],
        "early cpu": [],
        "late wall": [],
        "late cpu": [],
    }
    compactions = 0
    for _ in range(WINDOW):
        for name, client in (("early", early), ("late", late)):
            wall, cpu, compacted = client.step()
            compactions += compacted
            if not compacted:
                times[f"{name} wall"].append(wall)
                times[f"{name} cpu"].append(cpu)
    print(
        f"{tag}: body at step {steps} {late.size / 1e6:.2f} MB, compactions in the windows "
        f"{compactions}"
    )
    for clock in ("wall", "cpu"):
        em, eb, lm, lb = figures(times, clock)
        print(
            f"  {clock:4}: steps {EARLY + 1}-{EARLY + WINDOW} median {em:.2f} best {eb:.2f} ms | "
            f"steps {steps - WINDOW + 1}-{steps} median {lm:.2f} best {lb:.2f} ms | "
            f"ratio median {lm / em:.2f} best {lb / eb:.2f}"
        )
    return times


def figures(times: dict[str, list[float]], clock: str) -> tuple[float, float, float, float]:
    """The median and the best of the early window, then of the late one."""
    early, late = times[f"early {clock}"], times[f"late {clock}"]
    return statistics.median(early), min(early), statistics.median(late), min(late)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--step-bytes", type=int, default=15_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    if args.steps < EARLY + 2 * WINDOW:
        ap.error(f"--steps must be at least {EARLY + 2 * WINDOW}")
    tune_gc()  # as the proxy's process does
    ratios: dict[str, list[float]] = {}
    for r in range(args.runs):
        times = run(args.steps, args.step_bytes, f"run {r + 1}")
        for clock in ("wall", "cpu"):
            em, eb, lm, lb = figures(times, clock)
            ratios.setdefault(f"{clock} median", []).append(lm / em)
            ratios.setdefault(f"{clock} best", []).append(lb / eb)
    print(f"ratio step {args.steps} / step {EARLY + WINDOW // 2} over {args.runs} runs:")
    for name, values in ratios.items():
        print(
            f"  {name:11}: median {statistics.median(values):.2f}, best {min(values):.2f}, "
            f"worst {max(values):.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
