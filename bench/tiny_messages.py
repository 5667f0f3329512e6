"""One request of 100,000 tiny messages (issue 20: "100,000 tiny messages take under 5 s").

    PYTHONPATH=src .venv/bin/python bench/tiny_messages.py [--messages 100000] [--repeat 3]

Each timed call is the first call of a fresh warden on one request (nothing of it is known, so
every message is read, counted, repaired and the whole history compacted), in two paths:

* ``in-process``: ``Warden().transform_openai(messages, model="gpt-4o", window=...)``;
* ``proxy body``: what the proxy runs in its worker thread for one POST: a client's warden as
  :class:`~contextwarden.proxy.warden.WardenFactory` builds it, reading the raw JSON body with
  the client's :class:`~contextwarden.formats._body.BodyReader` and writing it back
  (:func:`~contextwarden.proxy.transform.transform_body`; no HTTP, no upstream).

Two shapes of tiny message: ``chat`` (the audit's: a system prompt, then user and assistant
turns ``m0``, ``m1``...) and ``tools`` (a user task, then assistant tool calls and their tiny
results). ``--scaling`` also times a quarter and a half of the size: the time per message must
not grow with the size (the work is linear in the number of messages).

Prints the best and the median of ``--repeat`` runs and the least CPU time one took (on a
shared machine the best is the figure that says what the code costs), and for the best run the
garbage collector's full (generation 2) passes and their time: each walks every object the
collector tracks, so what a message keeps tracked (its objects, the caches' entries) is what
bends the time per message as the request grows. No timing assertion lives in the tests; over HTTP, with
the proxy in its own process: ``tests/proxy/measure_attacks.py tiny``.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# the contextwarden on the path (PYTHONPATH=src for a checkout's own), not one this script picks
from contextwarden import Warden
from contextwarden.formats._body import BodyReader
from contextwarden.proxy.config import ProxyConfig
from contextwarden.proxy.transform import transform_body
from contextwarden.proxy.warden import WardenFactory

MODEL = "gpt-4o"


class FullCollections:
    """The collector's full passes while open: how many, and the seconds they took."""

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        self._start = 0.0

    def __enter__(self) -> FullCollections:
        gc.callbacks.append(self._seen)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._seen)

    def _seen(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.count += 1
            self.seconds += time.perf_counter() - self._start

    def __str__(self) -> str:
        return f"{self.count} full gc {self.seconds:.2f} s"


def chat(n: int) -> list[dict[str, Any]]:
    """The audit's body: a system prompt and ``n`` alternating user/assistant turns."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "s"}]
    msgs += [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(n)]
    return msgs


def tools(n: int) -> list[dict[str, Any]]:
    """A task, then tool calls with tiny results (every other message a call, ``n`` in all)."""
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "run the steps"},
    ]
    for i in range(n // 2):
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "bash", "arguments": f'{{"cmd": "echo {i}"}}'},
        }
        msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": str(i)})
    return msgs


SHAPES: dict[str, Callable[[int], list[dict[str, Any]]]] = {"chat": chat, "tools": tools}


def in_process(messages: list[dict[str, Any]], window: int) -> tuple[float, float, str]:
    warden = Warden()
    gc.collect()
    with FullCollections() as full:
        t0, c0 = time.perf_counter(), time.process_time()
        out, result = warden.transform_openai(messages, model=MODEL, window=window)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    return (
        elapsed,
        cpu,
        f"{result.tokens_before:,} -> {result.tokens_after:,} tokens, {len(out):,} sent; {full}",
    )


def proxy_body(messages: list[dict[str, Any]], window: int) -> tuple[float, float, str]:
    config = ProxyConfig(upstream="http://127.0.0.1:9", cache="memory", window=window)
    warden = WardenFactory(config, None)("bench-client")
    bodies = BodyReader()
    raw = json.dumps({"model": MODEL, "messages": messages}).encode()
    gc.collect()
    with FullCollections() as full:
        t0, c0 = time.perf_counter(), time.process_time()
        outcome = transform_body(warden, "openai", raw, window_cap=window, bodies=bodies)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    return (
        elapsed,
        cpu,
        (
            f"{len(raw) / 1e6:.1f} MB body, {outcome.tokens_before:,} -> {outcome.tokens_after:,} "
            f"tokens, {len(outcome.body) / 1e6:.2f} MB sent; {full}"
        ),
    )


PATHS = {"in-process": in_process, "proxy body": proxy_body}


def measure(
    shape: str, path: str, n: int, window: int, repeat: int
) -> tuple[list[float], list[float], str]:
    messages = SHAPES[shape](n)
    samples: list[float] = []
    cpus: list[float] = []
    note = ""
    for _ in range(repeat):
        elapsed, cpu, said = PATHS[path](messages, window)
        if not samples or elapsed < min(samples):
            note = said  # the best run's
        samples.append(elapsed)
        cpus.append(cpu)
    return samples, cpus, note


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000, help="messages (100000)")
    parser.add_argument("--window", type=int, default=128_000, help="context window (128000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each case (3)")
    parser.add_argument("--shapes", default="chat,tools", help="chat,tools")
    parser.add_argument("--paths", default="in-process,proxy body", help="in-process,proxy body")
    parser.add_argument("--scaling", action="store_true", help="also time n/4 and n/2")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    sizes = (
        [args.messages // 4, args.messages // 2, args.messages] if args.scaling else [args.messages]
    )
    figures: list[dict[str, Any]] = []
    print(f"model {MODEL}, window {args.window:,}, best and median of {args.repeat} runs")
    for shape in args.shapes.split(","):
        for path in args.paths.split(","):
            for n in sizes:
                samples, cpus, note = measure(shape, path, n, args.window, args.repeat)
                best, median = min(samples), statistics.median(samples)
                print(
                    f"  {shape:<5} {path:<10} {n:>8,} messages  best {best:6.2f} s  "
                    f"median {median:6.2f} s  cpu {min(cpus):6.2f} s  "
                    f"({best / n * 1e6:5.1f} us/message; {note})",
                    flush=True,
                )
                figures.append(
                    {
                        "shape": shape,
                        "path": path,
                        "messages": n,
                        "best_s": best,
                        "median_s": median,
                        "samples_s": samples,
                        "cpu_s": cpus,
                    }
                )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
