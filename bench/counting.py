"""Token counting: contextwarden's exact counter against tiktoken, same vocabulary, same text.

* **text throughput**: every text of every real recording (message text, tool output, call
  arguments, thinking) counted one string at a time by ``ExactCounter.count_text`` (uncached:
  the bpe-openai Rust backend) and by tiktoken's ``encode_ordinary`` (o200k_base, loaded offline
  by ``tests/tiktoken_offline.py``); tokens per second, best of several passes. The two totals
  must be equal (the counter is exact); the run records both.
* **history recount**: ``count_messages`` of a 1,000-message real history, cold (new counter,
  new message objects) and again unchanged (counts cached per message); tiktoken has no cache,
  so its recount costs a full count. Reported as the recount speed-up.
* **vocabulary load**: seconds to load each tokenizer in a fresh process.
* the chars/4 ``HeuristicCounter`` for reference.
"""

from __future__ import annotations

import gc
import importlib
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from contextwarden._messages import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from contextwarden._tokens import ExactCounter, HeuristicCounter

from ._common import Options, stats_ms, time_call, write_result
from ._data import fresh_copy, generated_history, have_real_data, real_history, real_trajectories

__all__ = ["corpus", "run", "tiktoken_encoding"]

ROOT = Path(__file__).resolve().parents[1]


def tiktoken_encoding(name: str = "o200k_base") -> Any:
    """tiktoken's encoding, built offline from bpe-openai's vocabulary (tests/tiktoken_offline)."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        module = importlib.import_module("tiktoken_offline")
    finally:
        sys.path.remove(str(ROOT / "tests"))
    return module.offline_encoding(name)


def _texts(messages: Sequence[Message]) -> Iterator[str]:
    for m in messages:
        for b in m.content:
            if isinstance(b, TextBlock):
                yield b.text
            elif isinstance(b, ThinkingBlock):
                yield b.thinking
            elif isinstance(b, ToolCallBlock):
                yield b.arguments
            elif isinstance(b, ToolResultBlock):
                if isinstance(b.content, str):
                    yield b.content
                else:
                    yield from (p.text for p in b.content if isinstance(p, TextBlock))


def corpus(opts: Options) -> list[str]:
    """The real texts (generated ones when the data are absent), non-empty, in file order."""
    if have_real_data():
        trajs = real_trajectories()
        if opts.quick:
            trajs = trajs[:2]
        return [t for tr in trajs for t in _texts(tr.messages) if t]
    return [t for t in _texts(generated_history(300 if opts.quick else 2_000)) if t]


def _count_all(texts: list[str], count: Any) -> int:
    return sum(count(t) for t in texts)


def _throughput(texts: list[str], count: Any, passes: int) -> tuple[int, list[float]]:
    total = 0
    samples: list[float] = []
    for _ in range(passes):
        gc.collect()
        dt, total = time_call(_count_all, texts, count)
        samples.append(dt)
    return total, samples


def _load_time(code: str) -> float | None:
    """Seconds a fresh interpreter takes for ``code`` beyond its imports (printed by it)."""
    try:
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
        )
        return float(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


_LOAD_OURS = (
    "import time; from contextwarden._tokens import ExactCounter; c = ExactCounter(); "
    "t = time.perf_counter(); c.count_text('hello'); print(time.perf_counter() - t)"
)
_LOAD_TIKTOKEN = (
    "import sys, time; sys.path.insert(0, 'tests'); import tiktoken; "
    "from tiktoken_offline import populate_cache, offline_encoding; populate_cache(); "
    "t = time.perf_counter(); offline_encoding('o200k_base').encode_ordinary('hello'); "
    "print(time.perf_counter() - t)"
)


def run(opts: Options) -> dict[str, Any]:
    """Run the counting benchmark; write ``counting.json``; return its payload."""
    texts = corpus(opts)
    chars = sum(len(t) for t in texts)
    ours = ExactCounter("o200k_base")
    heuristic = HeuristicCounter()
    enc = tiktoken_encoding("o200k_base")
    ours.count_text("warm up")
    enc.encode_ordinary("warm up")
    passes = opts.reps(5, 1)

    def tik_count(text: str) -> int:
        return len(enc.encode_ordinary(text))

    ours_total, ours_s = _throughput(texts, ours.count_text, passes)
    tik_total, tik_s = _throughput(texts, tik_count, passes)
    heu_total, heu_s = _throughput(texts, heuristic.count_text, passes)

    def rate(total: int, samples: list[float]) -> float:
        return total / min(samples)

    text: dict[str, Any] = {
        "strings": len(texts),
        "characters": chars,
        "tokens_contextwarden": ours_total,
        "tokens_tiktoken": tik_total,
        "tokens_heuristic": heu_total,
        "equal": ours_total == tik_total,
        "contextwarden_tokens_per_s": rate(ours_total, ours_s),
        "tiktoken_tokens_per_s": rate(tik_total, tik_s),
        "heuristic_tokens_per_s": rate(heu_total, heu_s),
        "speed_ratio_vs_tiktoken": rate(ours_total, ours_s) / rate(tik_total, tik_s),
        "contextwarden_s": stats_ms(ours_s),
        "tiktoken_s": stats_ms(tik_s),
    }
    print(
        f"  counting: contextwarden {text['contextwarden_tokens_per_s'] / 1e6:.2f} M tok/s, "
        f"tiktoken {text['tiktoken_tokens_per_s'] / 1e6:.2f} M tok/s "
        f"(x{text['speed_ratio_vs_tiktoken']:.2f}); equal totals: {text['equal']}",
        flush=True,
    )

    # recounting an unchanged history: per-message caching
    n = 300 if opts.quick else 1_000
    history = real_history(n) if have_real_data() else generated_history(n)
    reps = opts.reps(5, 1)
    cold: list[float] = []
    warm: list[float] = []
    tik: list[float] = []
    for _ in range(reps):
        counter = ExactCounter("o200k_base")
        msgs = fresh_copy(history)
        gc.collect()
        cold.append(time_call(counter.count_messages, msgs)[0])
        warm.extend(time_call(counter.count_messages, msgs)[0] for _ in range(20))
        tik.append(time_call(_count_all, list(_texts(msgs)), tik_count)[0])
    recount: dict[str, Any] = {
        "messages": n,
        "tokens": ExactCounter("o200k_base").count_messages(history),
        "cold": stats_ms(cold),
        "warm": stats_ms(warm),
        "tiktoken_each_time": stats_ms(tik),
        "speedup_warm_vs_cold": (stats_ms(cold)["p50_ms"] / stats_ms(warm)["p50_ms"]),
        "speedup_warm_vs_tiktoken": (stats_ms(tik)["p50_ms"] / stats_ms(warm)["p50_ms"]),
    }
    print(
        f"  recount {n} msgs: cold {recount['cold']['p50_ms']:.1f} ms, unchanged "
        f"{recount['warm']['p50_ms']:.3f} ms (x{recount['speedup_warm_vs_cold']:.0f})",
        flush=True,
    )
    load = {
        "contextwarden_s": _load_time(_LOAD_OURS),
        "tiktoken_s": None if opts.quick else _load_time(_LOAD_TIKTOKEN),
    }
    payload = {"encoding": "o200k_base", "text": text, "recount": recount, "vocabulary_load": load}
    write_result(opts, "counting", payload)
    return payload
