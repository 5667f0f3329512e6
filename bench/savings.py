"""Savings: every real recording replayed call by call at 8k, 16k, 32k and 64k windows, with
each layer added in turn (the ablation), through ``contextwarden._replay.replay``.

The context of call *k* is everything before the *k*-th assistant message; "without" is that
context as recorded, "with" is what the warden sends. Per recording, window and configuration
the run records the cumulative input tokens without and with, the final call's context
without and with, the largest context, list-price cost (``contextwarden._models`` price of the
recording's model), and how many requests were invalid: structurally (the provider
validator) or only over the window (the lossless-only configurations do not guard the window).

Configurations (cumulative, built with ``WardenConfig`` toggles):

* ``mask``: observation masking only;
* ``+thinking``: and old thinking stripped;
* ``+truncate``: and oversized tool output truncated (all lossless layers);
* ``+window``: and the sliding window (no summaries);
* ``+summaries``: the defaults: and the compaction engine (embedded extractive summarizer).

Tokens are counted with the recording's model's counter (o200k; Claude x its calibration
factor). Recordings run in parallel worker processes (``--jobs``); results are not timings.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from contextwarden._config import WardenConfig
from contextwarden._models import model_info
from contextwarden._replay import provider_for, replay

from ._common import MODEL, Options, write_result
from ._data import RealTrajectory, have_real_data, real_trajectories

__all__ = ["ALL_CONFIGS", "CONFIGS", "EXTRA_CONFIGS", "config", "model_for", "run"]

_OFF = {"enabled": False}
#: The ablation, as WardenConfig overrides (each adds one layer to the one before).
CONFIGS: Mapping[str, Mapping[str, Any]] = {
    "mask": {"truncate": _OFF, "thinking": _OFF, "window": _OFF, "compaction": _OFF},
    "+thinking": {"truncate": _OFF, "window": _OFF, "compaction": _OFF},
    "+truncate": {"window": _OFF, "compaction": _OFF},
    "+window": {"compaction": _OFF},
    "+summaries": {},
}
#: Outside the chain: masking plus thinking stripped even inside the current tool loop
#: (``keep_current_turn=false``). A one-user-message agent run is a single turn, so the
#: default keeps all its thinking; this shows what the providers' rule costs there.
EXTRA_CONFIGS: Mapping[str, Mapping[str, Any]] = {
    "mask+thinking(any turn)": {
        "truncate": _OFF,
        "window": _OFF,
        "compaction": _OFF,
        "thinking": {"keep_current_turn": False},
    },
}
ALL_CONFIGS: Mapping[str, Mapping[str, Any]] = {**CONFIGS, **EXTRA_CONFIGS}


def config(name: str) -> WardenConfig:
    """The :class:`WardenConfig` of ablation step ``name``."""
    return WardenConfig.model_validate(dict(ALL_CONFIGS[name]))


def model_for(traj: RealTrajectory) -> str:
    """The recording's model when the registry knows it, else the default bench model."""
    if traj.model:
        try:
            model_info(traj.model)
            return traj.model
        except KeyError:
            pass
    return MODEL


def _one(task: tuple[int, int, str]) -> dict[str, Any]:
    index, window, name = task
    traj = real_trajectories()[index]
    model = model_for(traj)
    t0 = time.perf_counter()
    report = replay(
        traj.messages,
        model=model,
        window=window,
        config=config(name),
        provider=provider_for(traj.format),
    )
    calls = report.calls
    structural = sum(1 for c in calls if any("window" not in p for p in c.problems))
    totals = report.totals
    return {
        "trajectory": traj.name,
        "source": traj.source,
        "model": model,
        "window": window,
        "config": name,
        "calls": totals.calls,
        "input_without": totals.input_tokens_without,
        "input_with": totals.input_tokens_with,
        "saved_ratio": totals.saved_ratio,
        "final_without": calls[-1].tokens_without if calls else 0,
        "final_with": calls[-1].tokens_with if calls else 0,
        "max_context_without": totals.max_context_without,
        "max_context_with": totals.max_context_with,
        "cost_without": totals.cost_without,
        "cost_with": totals.cost_with,
        "invalid_requests": totals.invalid_requests,
        "structurally_invalid": structural,
        "over_window_with": totals.over_window_with,
        "summaries_written": totals.compactions,
        "compacted_calls": totals.compacted_calls,
        "seconds": time.perf_counter() - t0,
    }


def _tasks(opts: Options, trajs: tuple[RealTrajectory, ...]) -> list[tuple[int, int, str]]:
    tasks = [(i, w, name) for i in range(len(trajs)) for w in opts.windows for name in ALL_CONFIGS]

    # the slow cells first (long recordings, summaries, small windows) so workers finish together
    def cost(t: tuple[int, int, str]) -> float:
        heavy = 20.0 if t[2] == "+summaries" else 1.0
        return float(len(trajs[t[0]].messages) * heavy * (64_000 / t[1]) ** 0.5)

    return sorted(tasks, key=cost, reverse=True)


def run_cells(
    opts: Options,
    fn: Callable[[tuple[int, int, str]], dict[str, Any]],
    tasks: Iterable[tuple[int, int, str]],
    label: str,
) -> list[dict[str, Any]]:
    """Run ``fn`` (a module-level function) over ``tasks`` in ``opts.jobs`` processes (forked:
    the recordings loaded by the parent are shared), printing progress."""
    tasks = list(tasks)
    if opts.jobs <= 1:
        return [fn(t) for t in tasks]
    rows: list[dict[str, Any]] = []
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(opts.jobs) as pool:
        for k, row in enumerate(pool.imap_unordered(fn, tasks), 1):
            rows.append(row)
            if k % 20 == 0 or k == len(tasks):
                print(f"  {label}: {k}/{len(tasks)} cells", flush=True)
    return rows


def _aggregate(rows: list[dict[str, Any]], source: str | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    windows = sorted({r["window"] for r in rows})
    for window in windows:
        for name in ALL_CONFIGS:
            cells = [
                r
                for r in rows
                if r["window"] == window
                and r["config"] == name
                and (source is None or r["source"] == source)
            ]
            if not cells:
                continue
            without = sum(r["input_without"] for r in cells)
            with_ = sum(r["input_with"] for r in cells)
            costs = [r for r in cells if r["cost_without"] is not None]
            out.append(
                {
                    "source": source or "all",
                    "window": window,
                    "config": name,
                    "recordings": len(cells),
                    "calls": sum(r["calls"] for r in cells),
                    "input_without": without,
                    "input_with": with_,
                    "saved_ratio": 1 - with_ / without if without else 0.0,
                    "final_without": sum(r["final_without"] for r in cells),
                    "final_with": sum(r["final_with"] for r in cells),
                    "cost_without": sum(r["cost_without"] for r in costs),
                    "cost_with": sum(r["cost_with"] for r in costs),
                    "structurally_invalid": sum(r["structurally_invalid"] for r in cells),
                    "over_window_with": sum(r["over_window_with"] for r in cells),
                    "valid_rate": 1
                    - sum(r["invalid_requests"] for r in cells)
                    / max(1, sum(r["calls"] for r in cells)),
                }
            )
    return out


def run(opts: Options) -> dict[str, Any]:
    """Run the savings ablation; write ``savings.json``; return its payload."""
    if not have_real_data():
        payload: dict[str, Any] = {"skipped": "real trajectories not present", "rows": []}
        write_result(opts, "savings", payload)
        return payload
    trajs = real_trajectories()
    if opts.quick:
        trajs = tuple(t for t in trajs if t.format == "mini-swe-agent")[:2]
        keep = {t.name for t in trajs}
        index = [i for i, t in enumerate(real_trajectories()) if t.name in keep]
        tasks = [(i, w, n) for i in index for w in opts.windows for n in ALL_CONFIGS]
    else:
        tasks = _tasks(opts, trajs)
    rows = run_cells(opts, _one, tasks, "savings")
    rows.sort(
        key=lambda r: (
            r["source"],
            r["trajectory"],
            r["window"],
            list(ALL_CONFIGS).index(r["config"]),
        )
    )
    payload = {
        "configs": {k: dict(v) for k, v in ALL_CONFIGS.items()},
        "windows": list(opts.windows),
        "rows": rows,
        "by_source": _aggregate(rows, "mini-swe-agent") + _aggregate(rows, None),
    }
    write_result(opts, "savings", payload)
    for agg in payload["by_source"]:
        if agg["source"] == "mini-swe-agent" and agg["window"] == 32_000:
            print(
                f"  mini-swe-agent @32k {agg['config']:11} saved {agg['saved_ratio']:.1%}"
                f" (valid {agg['valid_rate']:.1%})",
                flush=True,
            )
    return payload
