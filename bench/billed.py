"""Quick check: contextwarden's defaults against sending everything, billed, per recording.

    python -m bench.billed --window 32000 --model gpt-4o
    python -m bench.billed --window model,32000          # the model's own window, then 32k
    python -m bench.billed --config '{"mask": {"keep_last": 10}}' --only django

Every mini-swe-agent recording is replayed as an agent loop: one ``Warden()`` per recording,
``warden.transform_openai(history[:k], model=M, window=W)`` before the k-th assistant message
(see ``bench/_agent.py``). Printed per recording: calls, input tokens raw and with the warden,
token ratio, cache hit ratios, billed ratio (with / raw; cache reads 0.1x and writes 1.25x
the input price unless ``--read``/``--write`` say otherwise), invalid requests and requests
over the window. The last lines compare the totals with the targets the team is judged on:

* at the model's own window: billed at least 15% below raw, no recording dearer than raw;
* at 32k: billed at least 40% below raw, input tokens at least 50% below;
* every request valid.

Runs the recordings in ``--jobs`` processes (default 2); about a minute on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from contextwarden._billing import CachePricing

from ._agent import ReplayStats, Sender, replay_sender

__all__ = ["Cell", "main", "run_cell", "targets"]


@dataclass(frozen=True)
class Cell:
    """One recording at one window: raw and contextwarden replayed."""

    name: str
    window: int
    raw: ReplayStats
    warden: ReplayStats
    seconds: float


def _warden_sender(model: str, window: int, config: dict[str, Any] | None) -> Sender:
    from contextwarden import Warden

    if config is None:
        warden = Warden()
    else:
        from contextwarden._config import WardenConfig

        warden = Warden(WardenConfig.model_validate(config))

    def send(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        request, _ = warden.transform_openai(history, model=model, window=window)
        return request

    return send


def _raw(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return history


def recordings(only: str = "") -> list[tuple[str, list[dict[str, Any]]]]:
    """The mini-swe-agent recordings as OpenAI dicts, ``(name, history)``, filtered by a
    substring of the name."""
    from contextwarden.formats import to_openai

    from ._data import real_trajectories

    return [
        (t.name, to_openai(list(t.messages)))
        for t in real_trajectories()
        if t.format == "mini-swe-agent" and only in t.name
    ]


def run_cell(task: tuple[str, list[dict[str, Any]], str, int, dict[str, Any] | None]) -> Cell:
    """Replay one recording raw and through a fresh ``Warden`` (module level: picklable)."""
    from contextwarden._tokens import get_counter

    name, history, model, window, config = task
    counter = get_counter(model)
    t0 = time.perf_counter()
    raw = replay_sender(history, _raw, counter=counter, window=window)
    cw = replay_sender(
        history, _warden_sender(model, window, config), counter=counter, window=window
    )
    return Cell(name, window, raw, cw, time.perf_counter() - t0)


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def targets(cells: Sequence[Cell], window: int, own: int, ratios: CachePricing) -> list[str]:
    """The judged targets for ``cells`` at ``window`` (``own``: the model's window), one line
    each, with PASS/FAIL."""
    raw_bill = sum(c.raw.billed(ratios) for c in cells)
    cw_bill = sum(c.warden.billed(ratios) for c in cells)
    raw_tok = sum(c.raw.tokens for c in cells)
    cw_tok = sum(c.warden.tokens for c in cells)
    invalid = sum(c.warden.invalid for c in cells)
    over = sum(c.warden.over_window for c in cells)
    billed = 1 - _ratio(cw_bill, raw_bill)
    tokens = 1 - _ratio(cw_tok, raw_tok)
    dearer = [c.name for c in cells if c.warden.billed(ratios) > c.raw.billed(ratios)]

    def mark(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    lines = []
    if window >= own:
        lines.append(f"  {mark(billed >= 0.15)} billed saving {billed:6.1%} (target >= 15%)")
        lines.append(
            f"  {mark(not dearer)} recordings dearer than raw: {len(dearer)}"
            + (f" ({', '.join(dearer)})" if dearer else "")
        )
    else:
        lines.append(f"  {mark(billed >= 0.40)} billed saving {billed:6.1%} (target >= 40%)")
        lines.append(f"  {mark(tokens >= 0.50)} token saving  {tokens:6.1%} (target >= 50%)")
        if dearer:
            lines.append(f"  note: dearer than raw: {', '.join(dearer)}")
    lost = sum(c.warden.task_lost for c in cells)
    lines.append(f"  {mark(invalid == 0)} invalid requests: {invalid}")
    lines.append(f"  {mark(lost == 0)} requests without the task: {lost}")
    lines.append(f"  {mark(over == 0)} requests over the window: {over}")
    return lines


def _table(cells: Sequence[Cell], ratios: CachePricing) -> list[str]:
    head = (
        f"  {'recording':58} {'calls':>5} {'raw tok':>9} {'cw tok':>9} {'tok':>6} "
        f"{'hit raw':>7} {'hit cw':>7} {'billed':>7} {'inval':>5} {'over':>4} {'s':>5}"
    )
    lines = [head]
    for c in cells:
        lines.append(
            f"  {c.name[:58]:58} {len(c.raw.calls):>5} {c.raw.tokens:>9,} {c.warden.tokens:>9,} "
            f"{_ratio(c.warden.tokens, c.raw.tokens):>6.3f} {c.raw.hit_ratio:>7.1%} "
            f"{c.warden.hit_ratio:>7.1%} "
            f"{_ratio(c.warden.billed(ratios), c.raw.billed(ratios)):>7.3f} "
            f"{c.warden.invalid:>5} {c.warden.over_window:>4} {c.seconds:>5.1f}"
        )
    raw_tok = sum(c.raw.tokens for c in cells)
    cw_tok = sum(c.warden.tokens for c in cells)
    raw_cached = sum(c.raw.cached for c in cells)
    cw_cached = sum(c.warden.cached for c in cells)
    lines.append(
        f"  {'TOTAL':58} {sum(len(c.raw.calls) for c in cells):>5} {raw_tok:>9,} {cw_tok:>9,} "
        f"{_ratio(cw_tok, raw_tok):>6.3f} {_ratio(raw_cached, raw_tok):>7.1%} "
        f"{_ratio(cw_cached, cw_tok):>7.1%} "
        f"{_ratio(sum(c.warden.billed(ratios) for c in cells), sum(c.raw.billed(ratios) for c in cells)):>7.3f} "
        f"{sum(c.warden.invalid for c in cells):>5} {sum(c.warden.over_window for c in cells):>4}"
    )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.billed", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--model", default="gpt-4o", help="model for counting and window")
    parser.add_argument(
        "--window",
        default="model",
        help="comma-separated windows; 'model' is the model's own (default: model)",
    )
    parser.add_argument("--read", type=float, default=0.1, help="cache read x input price")
    parser.add_argument("--write", type=float, default=1.25, help="cache write x input price")
    parser.add_argument("--only", default="", help="only recordings whose name contains this")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument(
        "--config", default=None, help="WardenConfig as JSON (default: Warden() as is)"
    )
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args(argv)

    from contextwarden._models import model_info

    own = model_info(args.model).context_window
    try:
        windows = [
            own if w.strip() == "model" else int(w) for w in args.window.split(",") if w.strip()
        ]
    except ValueError:
        parser.error(f"--window: expected integers or 'model', got {args.window!r}")
    config = json.loads(args.config) if args.config else None
    ratios = CachePricing.ratios(1_000_000.0, args.read, args.write, None, 0)
    label = f"read {args.read}x / write {args.write}x"
    recs = recordings(args.only)
    if not recs:
        print("no mini-swe-agent recordings found (is ../shared/data present?)", file=sys.stderr)
        return 1
    out: dict[str, Any] = {"model": args.model, "ratios": label, "windows": {}}
    for window in windows:
        tasks = [(name, hist, args.model, window, config) for name, hist in recs]
        t0 = time.perf_counter()
        if args.jobs > 1:
            with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
                cells = pool.map(run_cell, tasks, chunksize=1)
        else:
            cells = [run_cell(t) for t in tasks]
        print(
            f"\n{args.model} at a {window:,}-token window, {label} "
            f"({len(cells)} recordings, {time.perf_counter() - t0:.0f} s); "
            "tok/billed = with contextwarden / raw"
        )
        print("\n".join(_table(cells, ratios)))
        print("\n".join(targets(cells, window, own, ratios)))
        out["windows"][str(window)] = [
            {
                "recording": c.name,
                "raw": c.raw.summary(ratios),
                "contextwarden": c.warden.summary(ratios),
            }
            for c in cells
        ]
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
