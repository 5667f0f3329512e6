"""Issue 21 item 4, "never dearer than raw": replay's payable comparison on every recording.

    python -m bench.never_dearer                       # model window and 32k, every recording
    python -m bench.never_dearer --windows 32000 --only fastjson2 --jobs 1
    python -m bench.never_dearer --json /tmp/never_dearer.json

Every run of every recording (the shared folder ``../shared/data/trajectories``, the
repository's ``tests/data/recordings`` where a file of the same name is not already in the
shared folder, and the demo ``examples/data/demo-session.traj.json`` at ``deepseek-v4-flash``)
is replayed exactly as ``contextwarden replay FILE [--window N]`` replays it: the model and
window the file records (or the registry's, or what :func:`assume_model` takes it for), the
model's own cache prices, the agent's own compactions applied to the baseline, calls over the
window not payable. Printed per recording and window: the payable calls, the payable baseline's
billed cost and contextwarden's on the same calls (summary calls included: the defaults'
extractive summarizer makes none), their ratio, and DEARER where contextwarden's is above.
A model without a known price (marked ``*``) is billed at Anthropic's cache ratios (read 0.1x,
write 1.25x) on a nominal $1 per million input tokens. Exit status 1 when any recording is
dearer.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._data import DATA_DIR

__all__ = ["Row", "files", "main", "run_one"]

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "examples" / "data" / "demo-session.traj.json"
DEMO_MODEL = "deepseek-v4-flash"


@dataclass(frozen=True)
class Row:
    """One run of one recording at one window, as replay's payable comparison reports it."""

    name: str
    run: int
    model: str
    window: int
    calls: int
    payable: int
    baseline: str
    without: float | None
    with_: float | None
    invalid: int
    seconds: float
    worst: float | None = None
    worst_call: int = 0
    prefixes: int = 0
    dearer_prefixes: int = 0

    @property
    def ratio(self) -> float | None:
        if self.without is None or self.with_ is None or not self.without:
            return None
        return self.with_ / self.without

    @property
    def dearer(self) -> bool:
        return (
            self.without is not None
            and self.with_ is not None
            and self.with_ > self.without + 1e-12
        )


def files(only: str = "") -> list[tuple[str, Path, str | None]]:
    """``(name, path, model)`` for every recording: the shared folder's, the repository's that
    the shared folder does not hold, and the demo (at ``deepseek-v4-flash``)."""
    seen: set[str] = set()
    out: list[tuple[str, Path, str | None]] = []
    for root in (DATA_DIR, REPO / "tests" / "data" / "recordings"):
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*")):
            if not path.is_file() or path.name == "README.md" or path.name in seen:
                continue
            seen.add(path.name)
            out.append((f"{path.parent.name}/{path.name}", path, None))
    out.append(("demo/" + DEMO.name, DEMO, DEMO_MODEL))
    return [f for f in out if only in f[0]]


def run_one(task: tuple[str, Path, str | None, int | None]) -> list[Row]:
    """Replay every run of one file at ``window`` (None: the model's own), as the CLI does."""
    from contextwarden._billing import CachePricing
    from contextwarden._replay import count_calls, replay, resolve_model
    from contextwarden._transcripts import load_transcripts, provider_for
    from contextwarden.cli._common import config_for

    name, path, model, window = task
    rows = []
    runs = load_transcripts(path)
    cfg = config_for(None, model=model, window=window)
    for number, t in enumerate(runs, 1):
        if not count_calls(t.messages):
            continue
        resolved = resolve_model(cfg, t.model, t.window)
        run_cfg, key = resolved.config, resolved.name
        t0 = time.perf_counter()
        options: dict[str, Any] = dict(
            model=key,
            window=run_cfg.context_window,
            config=run_cfg,
            tools=t.tools or None,
            provider=provider_for(t.format),
            compactions=t.compactions,
        )
        report = replay(t.messages, **options)
        nominal = report.cache_pricing is None
        if nominal:  # no price known: Anthropic's cache ratios on a nominal $1 per Mtok
            report = replay(t.messages, pricing=CachePricing.ratios(1.0), **options)
        tot = report.totals
        worst, worst_call, prefixes, dearer_prefixes = _prefixes(report)
        rows.append(
            Row(
                name=name,
                run=number,
                model=("*" if nominal else "") + key,
                window=report.window,
                calls=tot.calls,
                payable=tot.calls - tot.not_payable_without,
                baseline=tot.baseline,
                without=tot.payable_billed_cost_without,
                with_=tot.billed_cost_with_on_payable,
                invalid=tot.invalid_requests,
                seconds=time.perf_counter() - t0,
                worst=worst,
                worst_call=worst_call,
                prefixes=prefixes,
                dearer_prefixes=dearer_prefixes,
            )
        )
    return rows


def _prefixes(report: Any, skip: int = 10) -> tuple[float | None, int, int, int]:
    """The same session cut after each payable call from call ``skip`` on, had it ended there
    (the replay is causal: the warden's decisions at a call depend only on the calls before
    it): the highest with/without ratio of the bills summed so far, its call, how many cuts
    were compared and how many of them were dearer."""
    without = with_ = 0.0
    worst: float | None = None
    at = seen = dearer = 0
    for c in report.calls:
        if not c.payable or c.billed_cost_without is None or c.billed_cost_with is None:
            continue
        without += c.billed_cost_without
        with_ += c.billed_cost_with
        if c.call < skip or without <= 0:
            continue
        seen += 1
        dearer += with_ > without + 1e-12
        if worst is None or with_ / without > worst:
            worst, at = with_ / without, c.call
    return worst, at, seen, dearer


def _money(v: float | None) -> str:
    return "-" if v is None else f"${v:,.4f}"


def table(rows: Sequence[Row]) -> list[str]:
    lines = [
        f"  {'recording':64} {'run':>3} {'model':22} {'window':>8} {'calls':>5} {'pay':>4} "
        f"{'baseline':>12} {'with cw':>12} {'ratio':>7} {'inval':>5} {'worst prefix':>13} "
        f"{'dearer cuts':>11}"
    ]
    for r in rows:
        ratio = "-" if r.ratio is None else f"{r.ratio:.3f}"
        lines.append(
            f"  {r.name[:64]:64} {r.run:>3} {r.model[:22]:22} {r.window:>8,} {r.calls:>5} "
            f"{r.payable:>4} {_money(r.without):>12} {_money(r.with_):>12} {ratio:>7} "
            f"{r.invalid:>5} "
            + (f"{r.worst:>6.3f} @{r.worst_call:<5}" if r.worst is not None else f"{'-':>13}")
            + f" {r.dearer_prefixes:>4}/{r.prefixes:<5}"
            + ("  DEARER" if r.dearer else "")
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.never_dearer", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--windows", default="model,32000", help="comma-separated; 'model' is the model's own"
    )
    parser.add_argument("--only", default="", help="only recordings whose name contains this")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    args = parser.parse_args(argv)
    windows: list[int | None] = []
    for w in args.windows.split(","):
        w = w.strip()
        if w:
            windows.append(None if w == "model" else int(w))
    found = files(args.only)
    if not found:
        print("no recordings found", file=sys.stderr)
        return 2
    tasks = [(n, p, m, w) for w in windows for n, p, m in found]
    t0 = time.perf_counter()
    if args.jobs > 1:
        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            done = pool.map(run_one, tasks, chunksize=1)
    else:
        done = [run_one(t) for t in tasks]
    rows = [r for rs in done for r in rs]
    print(
        f"replay's payable comparison, {len(found)} recordings, "
        f"{time.perf_counter() - t0:.0f} s; ratio = with contextwarden / payable baseline"
    )
    print("\n".join(table(rows)))
    dearer = [r for r in rows if r.dearer]
    invalid = sum(r.invalid for r in rows)
    print(
        f"  {'PASS' if not dearer else 'FAIL'} dearer than the payable baseline: {len(dearer)}"
        + "".join(
            f"\n    {r.name} run {r.run} at {r.window:,}: {(r.ratio or 1) - 1:+.1%}" for r in dearer
        )
    )
    print(f"  {'PASS' if not invalid else 'FAIL'} invalid requests: {invalid}")
    cuts = sum(r.prefixes for r in rows)
    print(
        f"  sessions cut after each call (10th on): {sum(r.dearer_prefixes for r in rows)} of "
        f"{cuts} dearer; worst "
        + max(
            (
                f"{r.worst:.3f} ({r.name} at {r.window:,}, call {r.worst_call})"
                for r in rows
                if r.worst is not None
            ),
            default="-",
            key=lambda t: float(t.split()[0]),
        )
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                [{**r.__dict__, "ratio": r.ratio, "dearer": r.dearer} for r in rows], fh, indent=2
            )
    return 1 if dearer else 0


if __name__ == "__main__":
    raise SystemExit(main())
