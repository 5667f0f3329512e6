"""``python -m bench``: every benchmark in one run, then the report.

    python -m bench                      # everything (6-15 min on 2 cores), writes bench/results
    python -m bench --quick              # smoke run: small lengths, few repetitions
    python -m bench --only overhead,peers
    python -m bench --quick --only overhead --out /tmp/x --no-report

Benchmarks, in run order: overhead, counting, peers, savings, retention, memory,
measures_run (the judges' ``measures.py`` on every recording, peers side by side; this package), then the scripts other parts own, each run as its own process when present:
calibrate (``bench/calibrate_claude.py``), warm_transform, proxy_load, tiny_messages. ``docs/benchmarks.md``
and ``docs/img/*.png`` are rewritten from the JSON at the end (``bench/report.py``) unless
``--no-report`` or ``--out`` elsewhere is given.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ._common import RESULTS_DIR, Options

__all__ = ["BENCHMARKS", "SCRIPTS", "main"]

BENCHMARKS = ("overhead", "counting", "peers", "savings", "retention", "memory", "measures_run")
#: Scripts owned by other parts of the project: run as-is, their output kept as text.
SCRIPTS = {
    "calibrate": "calibrate_claude.py",
    "warm_transform": "warm_transform.py",
    "proxy_load": "proxy_load.py",
    "tiny_messages": "tiny_messages.py",
}
HERE = Path(__file__).resolve().parent


def _run_script(name: str, opts: Options) -> None:
    path = HERE / SCRIPTS[name]
    if not path.exists():
        print(f"[{name}] {path.name} not present, skipped", flush=True)
        return
    args = [sys.executable, str(path)]
    if name == "proxy_load":  # it writes its own JSON; keep quick runs out of bench/results
        args += ["--out", str(opts.out / "proxy_load.json")] + (["--quick"] if opts.quick else [])
    if name == "tiny_messages" and opts.quick:
        args += ["--messages", "10000", "--repeat", "1"]
    proc = subprocess.run(args, capture_output=True, text=True, cwd=HERE.parent, timeout=900)
    opts.out.mkdir(parents=True, exist_ok=True)
    (opts.out / f"{name}.txt").write_text(proc.stdout + proc.stderr)
    status = "ok" if proc.returncode == 0 else f"exit {proc.returncode}"
    print(f"[{name}] {status}; output in {opts.out / (name + '.txt')}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run (small, few repetitions)")
    parser.add_argument(
        "--only",
        default="",
        help=f"comma-separated subset of {', '.join(BENCHMARKS + tuple(SCRIPTS))}",
    )
    parser.add_argument("--out", type=Path, default=None, help=f"results folder ({RESULTS_DIR})")
    parser.add_argument("--jobs", type=int, default=None, help="worker processes (default 2)")
    parser.add_argument(
        "--lengths", default="", help="history lengths to sweep, e.g. 60,120 (default 100..3000)"
    )
    parser.add_argument("--no-report", action="store_true", help="do not rewrite the docs")
    args = parser.parse_args(argv)

    names = [n.strip() for n in args.only.split(",") if n.strip()] or [
        *BENCHMARKS,
        *SCRIPTS,
    ]
    unknown = [n for n in names if n not in BENCHMARKS and n not in SCRIPTS]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    opts = Options.make(quick=args.quick, out=args.out, jobs=args.jobs)
    if args.lengths:
        try:
            opts.lengths = tuple(int(x) for x in args.lengths.split(",") if x.strip())
        except ValueError:
            parser.error(f"--lengths: expected comma-separated integers, got {args.lengths!r}")
    started = time.perf_counter()
    for name in names:
        t0 = time.perf_counter()
        print(f"[{name}] running{' (quick)' if opts.quick else ''}", flush=True)
        if name in SCRIPTS:
            _run_script(name, opts)
        else:
            importlib.import_module(f"bench.{name}").run(opts)
        print(f"[{name}] done in {time.perf_counter() - t0:.1f} s", flush=True)
    if not args.no_report and opts.out == RESULTS_DIR and not opts.quick:
        from .report import main as report

        report([])  # the report has its own options; not the runner's argv
    print(f"all done in {time.perf_counter() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
