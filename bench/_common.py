"""What every benchmark shares: run options, timing statistics, the log-log fit, the machine
and package description stamped on each result, and writing ``bench/results/<name>.json``."""

from __future__ import annotations

import gc
import json
import math
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = [
    "MODEL",
    "RESULTS_DIR",
    "WINDOWS",
    "Options",
    "environment",
    "loglog_slope",
    "stats_ms",
    "time_call",
    "write_result",
]

RESULTS_DIR = Path(__file__).resolve().parent / "results"
#: The model the synthetic and concatenated histories are measured against (o200k counts,
#: 128k window, a list price): the mini-swe-agent recordings were made with it.
MODEL = "deepseek-chat"
#: Context windows the savings, peer and retention benchmarks sweep.
WINDOWS: tuple[int, ...] = (8_000, 16_000, 32_000, 64_000)

_PACKAGES = (
    "contextwarden",
    "bpe-openai",
    "tiktoken",
    "langchain-core",
    "langchain",
    "autogen-core",
    "matplotlib",
)


@dataclass
class Options:
    """How big a run is. ``quick`` is the smoke run (small lengths, few repetitions, a
    subset of recordings); ``out`` is where the JSON goes; ``jobs`` the worker processes the
    untimed benchmarks (savings, retention) may use."""

    quick: bool = False
    out: Path = RESULTS_DIR
    jobs: int = 2
    lengths: tuple[int, ...] = (100, 300, 1_000, 3_000)
    windows: tuple[int, ...] = WINDOWS
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def make(cls, *, quick: bool, out: Path | None, jobs: int | None) -> Options:
        opts = cls(quick=quick, out=out or RESULTS_DIR, jobs=jobs or min(2, os.cpu_count() or 1))
        if quick:
            opts.lengths = (100, 200)
            opts.windows = (8_000, 32_000)
        return opts

    def reps(self, full: int, quick: int = 2) -> int:
        return quick if self.quick else full


def time_call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    """``(seconds, result)`` of one call ``fn(*args, **kwargs)`` (perf_counter; the garbage
    collector stays on, as in an agent)."""
    t0 = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - t0, result


def stats_ms(samples: Sequence[float]) -> dict[str, float | int]:
    """p50, p95, mean, min and max in milliseconds of samples in seconds (nearest-rank p95)."""
    if not samples:
        return {"n": 0}
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
    return {
        "n": len(samples),
        "p50_ms": statistics.median(ordered) * 1e3,
        "p95_ms": p95 * 1e3,
        "mean_ms": statistics.fmean(ordered) * 1e3,
        "min_ms": ordered[0] * 1e3,
        "max_ms": ordered[-1] * 1e3,
    }


def loglog_slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Least-squares slope of log(y) on log(x): the scaling exponent (1.0 = linear). ``None``
    with fewer than two usable points."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if x > 0 and y > 0]
    if len(pts) < 2:
        return None
    mx = statistics.fmean(p[0] for p in pts)
    my = statistics.fmean(p[1] for p in pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    if sxx == 0:
        return None
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _git_commit() -> str | None:
    # a run from an exported snapshot (``git archive``) has no repository: it names its commit
    if os.environ.get("CONTEXTWARDEN_BENCH_COMMIT"):
        return os.environ["CONTEXTWARDEN_BENCH_COMMIT"]
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def environment() -> dict[str, Any]:
    """The machine, Python and package versions a result was measured with."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "packages": {name: _version(name) for name in _PACKAGES},
        "commit": _git_commit(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        # other work on the machine skews timings: say how busy it was when this was written
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def write_result(opts: Options, name: str, payload: dict[str, Any]) -> Path:
    """Write ``payload`` (plus the environment and options) to ``<out>/<name>.json``."""
    opts.out.mkdir(parents=True, exist_ok=True)
    path = opts.out / f"{name}.json"
    doc = {
        "benchmark": name,
        "quick": opts.quick,
        "environment": environment(),
        **payload,
    }
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n")
    tmp.replace(path)
    gc.collect()
    return path
