"""The billed sweep the savings and peer benchmarks share: every recording replayed as an agent
loop (``bench/_agent.py``) through every sender at every window, raw ("send everything")
included, with tokens, cache hits, validity and three bills per cell.

Bills of the same requests:

* ``judged``: Anthropic's ratios (cache reads 0.1x, writes 1.25x the input price, no minimum),
  in input-price tokens: the measure the team is judged on;
* ``usd_recorded``: USD at the cache prices the registry lists for the model that made the
  recording (``contextwarden._billing.CachePricing.for_model``: DeepSeek reads 0.1x, writes at
  the input price);
* ``usd_model``: USD at the replay model's cache prices (gpt-4o: reads 0.5x, 1,024-token
  minimum).

Every recording is replayed with :data:`REPLAY_MODEL` (o200k counts): its own window and 32k.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ._agent import JUDGED, ReplayStats, Sender, model_pricing, replay_sender
from ._common import Options
from ._data import RealTrajectory, real_trajectories

__all__ = [
    "JUDGED_SOURCE",
    "RAW",
    "REPLAY_MODEL",
    "aggregate",
    "histories",
    "sweep",
    "sweep_windows",
    "target_lines",
]

#: The model every recording is replayed with: the judge's (o200k counts, 128k window).
REPLAY_MODEL = "gpt-4o"
#: The recordings the targets are judged on.
JUDGED_SOURCE = "mini-swe-agent"
#: The row name of "send everything".
RAW = "raw"

SenderFactory = Callable[[str, int], Sender]


def sweep_windows(quick: bool) -> tuple[int, ...]:
    """The model's own window and 32k."""
    from contextwarden._models import model_info

    own = model_info(REPLAY_MODEL).context_window
    return (own, 32_000)


def histories(quick: bool) -> list[tuple[int, RealTrajectory]]:
    """``(index, recording)`` of the recordings to replay: all of them, or the shortest
    mini-swe-agent one in a quick run."""
    trajs = list(enumerate(real_trajectories()))
    if quick:
        judged = [(i, t) for i, t in trajs if t.source == JUDGED_SOURCE]
        return sorted(judged, key=lambda it: len(it[1].messages))[:1]
    return trajs


_HISTORY: dict[int, list[dict[str, Any]]] = {}


def _history(index: int) -> list[dict[str, Any]]:
    from contextwarden.formats import to_openai

    if index not in _HISTORY:
        _HISTORY[index] = to_openai(list(real_trajectories()[index].messages))
    return _HISTORY[index]


# the sender factories of the current sweep, set before the workers fork
_FACTORIES: dict[str, SenderFactory] = {}


def _raw(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return history


def _cell(task: tuple[int, int, str, int | None]) -> dict[str, Any]:
    from contextwarden._tokens import get_counter

    index, window, name, limit = task
    traj = real_trajectories()[index]
    history = _history(index)
    counter = get_counter(REPLAY_MODEL)
    t0 = time.perf_counter()
    row: dict[str, Any] = {
        "trajectory": traj.name,
        "source": traj.source,
        "recorded_model": traj.model,
        "window": window,
        "sender": name,
    }
    try:
        sender = _raw if name == RAW else _FACTORIES[name](REPLAY_MODEL, window)
        stats = replay_sender(history, sender, counter=counter, window=window, limit_calls=limit)
    except Exception as exc:  # a peer that breaks on a recording is reported, not fatal
        row["error"] = f"{type(exc).__name__}: {exc}"[:300]
        row["seconds"] = time.perf_counter() - t0
        return row
    row.update(_figures(stats, traj))
    row["seconds"] = time.perf_counter() - t0
    return row


def _figures(stats: ReplayStats, traj: RealTrajectory) -> dict[str, Any]:
    recorded = model_pricing(traj.model) if traj.model else None
    model = model_pricing(REPLAY_MODEL)
    list_price = model.input_per_mtok if model is not None else None
    return {
        **stats.summary(JUDGED),
        "judged": stats.billed(JUDGED),
        "usd_recorded": stats.billed(recorded) if recorded is not None else None,
        "usd_model": stats.billed(model) if model is not None else None,
        "usd_list": stats.tokens * list_price / 1e6 if list_price is not None else None,
        "per_call": [[c.tokens, c.cached, int(not c.problems)] for c in stats.calls],
    }


def sweep(
    opts: Options,
    factories: Mapping[str, SenderFactory],
    label: str,
    windows: Sequence[int] | None = None,
) -> list[dict[str, Any]]:
    """Replay every recording at every window through ``raw`` and each of ``factories``;
    rows carry the figures and, per sender, the ratios to raw of the same recording and
    window (``*_ratio``)."""
    _FACTORIES.clear()
    _FACTORIES.update(factories)
    windows = tuple(windows or sweep_windows(opts.quick))
    limit = 60 if opts.quick else None
    recs = histories(opts.quick)
    for index, _ in recs:  # convert once in the parent: forked workers share it
        _history(index)
    names = [RAW, *factories]
    tasks = [(i, w, n, limit) for i, t in recs for w in windows for n in names]
    # long recordings first, so the workers finish together
    tasks.sort(key=lambda t: -len(real_trajectories()[t[0]].messages))
    rows = _run(opts, tasks, label)
    _ratios(rows)
    order = {n: k for k, n in enumerate(names)}
    rows.sort(key=lambda r: (r["source"], r["trajectory"], -r["window"], order[r["sender"]]))
    return rows


def _run(
    opts: Options, tasks: Iterable[tuple[int, int, str, int | None]], label: str
) -> list[dict[str, Any]]:
    tasks = list(tasks)
    if opts.jobs <= 1:
        return [_cell(t) for t in tasks]
    rows: list[dict[str, Any]] = []
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(opts.jobs) as pool:
        for k, row in enumerate(pool.imap_unordered(_cell, tasks), 1):
            rows.append(row)
            if k % 10 == 0 or k == len(tasks):
                print(f"  {label}: {k}/{len(tasks)} cells", flush=True)
    return rows


_MEASURES = ("tokens", "judged", "usd_recorded", "usd_model", "usd_list")


def _ratios(rows: list[dict[str, Any]]) -> None:
    raw = {(r["trajectory"], r["window"]): r for r in rows if r["sender"] == RAW}
    for r in rows:
        base = raw.get((r["trajectory"], r["window"]))
        for m in _MEASURES:
            a = r.get(m)
            b = base.get(m) if base is not None else None
            r[f"{m}_ratio"] = a / b if a is not None and b else None


def aggregate(rows: Sequence[dict[str, Any]], source: str | None) -> list[dict[str, Any]]:
    """Totals per window and sender over the recordings of ``source`` (all: ``None``), with
    ratios to raw over the same recordings, and how many recordings cost more than raw."""
    out: list[dict[str, Any]] = []
    ok = [r for r in rows if "error" not in r and (source is None or r["source"] == source)]
    for window in sorted({r["window"] for r in ok}, reverse=True):
        names = list(dict.fromkeys(r["sender"] for r in ok if r["window"] == window))
        raw = {r["trajectory"]: r for r in ok if r["window"] == window and r["sender"] == RAW}
        for name in names:
            cells = [
                r
                for r in ok
                if r["window"] == window and r["sender"] == name and r["trajectory"] in raw
            ]
            if not cells:
                continue
            agg: dict[str, Any] = {
                "source": source or "all",
                "window": window,
                "sender": name,
                "recordings": len(cells),
                "calls": sum(r["calls"] for r in cells),
                "invalid": sum(r["invalid"] for r in cells),
                "over_window": sum(r["over_window"] for r in cells),
                "task_lost": sum(r["task_lost"] for r in cells),
                "cached": sum(r["cached"] for r in cells),
                "dearer_than_raw": sum(
                    1 for r in cells if r["judged"] > raw[r["trajectory"]]["judged"] * (1 + 1e-9)
                ),
            }
            for m in _MEASURES:
                vals = [r[m] for r in cells]
                bases = [raw[r["trajectory"]][m] for r in cells]
                if any(v is None for v in vals + bases):
                    agg[m] = agg[f"{m}_ratio"] = None
                    continue
                agg[m] = sum(vals)
                agg[f"{m}_ratio"] = sum(vals) / sum(bases) if sum(bases) else None
            agg["hit_ratio"] = agg["cached"] / agg["tokens"] if agg["tokens"] else 0.0
            out.append(agg)
    return out


def target_lines(totals: Sequence[dict[str, Any]], sender: str, own_window: int) -> list[str]:
    """The judged targets for ``sender`` in ``totals`` (mini-swe-agent aggregates), one line
    each with PASS/FAIL."""
    lines: list[str] = []

    def mark(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    for agg in totals:
        if agg["sender"] != sender:
            continue
        billed = 1 - agg["judged_ratio"]
        tokens = 1 - agg["tokens_ratio"]
        w = agg["window"]
        head = f"  {sender} at {w:,}:"
        if w >= own_window:
            lines.append(f"{head} {mark(billed >= 0.15)} billed saving {billed:.1%} (>= 15%)")
            lines.append(
                f"{head} {mark(agg['dearer_than_raw'] == 0)} recordings dearer than raw: "
                f"{agg['dearer_than_raw']}"
            )
        else:
            lines.append(f"{head} {mark(billed >= 0.40)} billed saving {billed:.1%} (>= 40%)")
            lines.append(f"{head} {mark(tokens >= 0.50)} token saving {tokens:.1%} (>= 50%)")
        bad = agg["invalid"] + agg["task_lost"]
        lines.append(
            f"{head} {mark(bad == 0)} invalid requests {agg['invalid']}, "
            f"without the task {agg['task_lost']}, over the window {agg['over_window']}"
        )
    return lines
