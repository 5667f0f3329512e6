"""Overhead: what :meth:`Warden.transform` costs per call, against history length.

For each history kind (``real``: mini-swe-agent recordings concatenated; ``generated``), each
length (100, 300, 1,000, 3,000 messages) and two warden set-ups:

* ``lossless+window``: ``Warden(WardenConfig())`` with no compactor (truncate, mask, strip
  thinking, sliding window);
* ``full``: the warden an agent builds from the defaults (``_replay.make_warden``: the same
  plus the compaction engine with its embedded extractive summarizer),

we time

* **cold**: a new warden and a new counter on message objects never seen (the first call of a
  process: every message hashed and counted; the tokenizer itself is loaded beforehand, its
  one-off load time is in ``counting.json``);
* **warm**: the same warden after it transformed the history, on the history plus the agent's
  next step (the recorded assistant message and its tool result: what an agent appends
  between two calls), step after step;
* **warm_user**: the same, appending one user message per call (the one-message case).

The window is the model's (``deepseek-chat``: 128k), so the sliding window and compaction
engage from about 300 messages on. The scaling exponent is the log-log slope of p50 on length.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from typing import Any

from contextwarden._config import WardenConfig
from contextwarden._messages import Message, TextBlock
from contextwarden._replay import make_warden
from contextwarden._tokens import ExactCounter
from contextwarden._warden import Warden

from ._common import MODEL, Options, loglog_slope, stats_ms, time_call, write_result
from ._data import fresh_copy, generated_history, have_real_data, real_history

__all__ = ["boundaries", "histories", "new_warden", "run"]

SETUPS = ("lossless+window", "full")


def new_warden(setup: str) -> Warden:
    """A new warden for ``setup`` with a new exact counter (nothing cached)."""
    config = WardenConfig.model_validate({})
    warden = Warden(config) if setup == "lossless+window" else make_warden(config)
    warden.counter = ExactCounter("o200k_base")
    return warden


def histories(opts: Options) -> dict[str, Callable[[int], Sequence[Message]]]:
    """The history makers to sweep: real (when the data are present) and generated."""
    out: dict[str, Callable[[int], Sequence[Message]]] = {}
    if have_real_data():
        out["real"] = real_history
    out["generated"] = generated_history
    return out


def boundaries(messages: Sequence[Message]) -> list[int]:
    """Every length ``e`` at which ``messages[:e]`` is a history an agent would send: it ends
    on a user message or on a tool result that closes the calls before it."""
    out: list[int] = []
    open_calls: set[str] = set()
    for i, m in enumerate(messages):
        if m.role == "assistant":
            open_calls = {c.id for c in m.tool_calls}
        elif m.role == "tool":
            open_calls -= {r.tool_call_id for r in m.tool_results}
        if (m.role == "user" or (m.role == "tool" and not open_calls)) and i > 0:
            out.append(i + 1)
    return out


def _cold(setup: str, history: Sequence[Message], reps: int) -> tuple[list[float], Any]:
    samples: list[float] = []
    result: Any = None
    for _ in range(reps):
        warden = new_warden(setup)
        msgs = fresh_copy(history)
        gc.collect()
        dt, result = time_call(warden.transform, msgs, model=MODEL)
        samples.append(dt)
    return samples, result


def _warm_steps(setup: str, long: Sequence[Message], n: int, steps: int) -> list[float]:
    msgs = fresh_copy(long)
    ends = [e for e in boundaries(msgs) if e >= n // 2]
    start = max((e for e in ends if e <= n), default=ends[0])
    following = [e for e in ends if e > start][:steps]
    warden = new_warden(setup)
    warden.transform(msgs[:start], model=MODEL)
    gc.collect()
    samples: list[float] = []
    for end in following:
        samples.append(time_call(warden.transform, msgs[:end], model=MODEL)[0])
    return samples


def _warm_user(setup: str, history: Sequence[Message], steps: int) -> list[float]:
    current = fresh_copy(history)
    warden = new_warden(setup)
    warden.transform(current, model=MODEL)
    gc.collect()
    samples: list[float] = []
    for k in range(steps):
        current = [*current, Message("user", (TextBlock(f"Note {k}: keep going."),))]
        samples.append(time_call(warden.transform, current, model=MODEL)[0])
    return samples


def _slow_fraction(samples: Sequence[float]) -> float:
    """Share of ``samples`` above four times their median."""
    if not samples:
        return 0.0
    median = sorted(samples)[len(samples) // 2]
    return sum(1 for x in samples if x > 4 * median) / len(samples)


def _plan(opts: Options, setup: str, n: int) -> tuple[int, int]:
    """(cold repetitions, warm steps) for one cell: fewer where a call takes seconds."""
    if opts.quick:
        return 1, 3
    if setup == "full":
        return {100: 3, 300: 3, 1_000: 2}.get(n, 1), {100: 20, 300: 20, 1_000: 8}.get(n, 4)
    return {100: 10, 300: 7, 1_000: 5}.get(n, 3), 60


def run(opts: Options) -> dict[str, Any]:
    """Run the overhead benchmark; write ``overhead.json``; return its payload."""
    ExactCounter("o200k_base").count_text("load the vocabulary before timing")
    rows: list[dict[str, Any]] = []
    for kind, make in histories(opts).items():
        for setup in SETUPS:
            for n in opts.lengths:
                cold_reps, steps = _plan(opts, setup, n)
                history = make(n)
                long = make(n + 2 * steps + 40)
                cold, result = _cold(setup, history, cold_reps)
                warm = _warm_steps(setup, long, n, steps)
                warm_user = _warm_user(setup, history, max(3, steps // 2))
                rows.append(
                    {
                        "kind": kind,
                        "setup": setup,
                        "messages": n,
                        "tokens_before": result.tokens_before,
                        "tokens_after": result.tokens_after,
                        "messages_after": len(result.messages),
                        "compacted": result.compaction is not None,
                        "cold": stats_ms(cold),
                        "warm": stats_ms(warm),
                        # calls far above the median: the ones that re-plan from scratch
                        "warm_slow_fraction": _slow_fraction(warm),
                        "warm_user": stats_ms(warm_user),
                    }
                )
                print(
                    f"  overhead {kind:9} {setup:15} {n:>5} msgs: cold p50 "
                    f"{rows[-1]['cold']['p50_ms']:9.2f} ms, warm p50 "
                    f"{rows[-1]['warm']['p50_ms']:8.3f} ms (p95 {rows[-1]['warm']['p95_ms']:.3f})",
                    flush=True,
                )
    slopes: list[dict[str, Any]] = []
    for kind in {r["kind"] for r in rows}:
        for setup in SETUPS:
            cells = [r for r in rows if r["kind"] == kind and r["setup"] == setup]
            xs = [r["messages"] for r in cells]
            slopes.append(
                {
                    "kind": kind,
                    "setup": setup,
                    "cold": loglog_slope(xs, [r["cold"]["p50_ms"] for r in cells]),
                    "warm": loglog_slope(xs, [r["warm"]["p50_ms"] for r in cells]),
                }
            )
    payload = {
        "model": MODEL,
        "window": 128_000,
        "setups": list(SETUPS),
        "rows": rows,
        "scaling_exponents": sorted(slopes, key=lambda s: (s["kind"], s["setup"])),
    }
    write_result(opts, "overhead", payload)
    return payload
