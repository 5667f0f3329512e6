"""Savings in money: every real recording replayed as an agent loop through each contextwarden
configuration, billed with prompt caching, beside "send everything" (``bench/_sweep.py``).

Call *k* sends what the sender makes of everything before the *k*-th assistant message; one
warden serves one recording, as in a live agent. Per recording, window (gpt-4o's own 128k and
32k) and configuration: input tokens, cached tokens and the cache hit ratio, the bill at the
judged ratios (reads 0.1x, writes 1.25x the input price) and in USD at the recording's model's
and at gpt-4o's cache prices (``contextwarden._billing``), invalid requests, requests over the
window, requests without the task, and each figure's ratio to raw.

Configurations:

* ``Warden()``: the defaults, exactly as users (and the judge) call it;
* the ablation, cumulative, as ``WardenConfig`` overrides (built with
  ``contextwarden._replay.make_warden``): ``mask`` (observation masking only), ``+thinking``
  (old thinking stripped), ``+truncate`` (all lossless layers), ``+window`` (the sliding
  window), ``+summaries`` (and the compaction engine); and ``mask+thinking(any turn)``.

A configuration the current ``WardenConfig`` rejects is reported as an error row, not a crash.
Cells run in ``--jobs`` worker processes; results are not timings.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from contextwarden._config import WardenConfig
from contextwarden._models import model_info

from ._common import MODEL, Options, write_result
from ._data import RealTrajectory, have_real_data
from ._senders import warden_sender
from ._sweep import JUDGED_SOURCE, REPLAY_MODEL, aggregate, sweep, sweep_windows, target_lines

__all__ = [
    "ALL_CONFIGS",
    "CONFIGS",
    "DEFAULTS",
    "EXTRA_CONFIGS",
    "config",
    "model_for",
    "run",
    "run_cells",
]

#: The row of ``Warden()`` as users call it.
DEFAULTS = "Warden()"

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


def _factory(name: str) -> Callable[[str, int], Any]:
    overrides = None if name == DEFAULTS else ALL_CONFIGS[name]

    def make(model: str, window: int) -> Any:
        return warden_sender(model, window, overrides)

    return make


def run(opts: Options) -> dict[str, Any]:
    """Run the billed savings sweep; write ``savings.json``; return its payload."""
    if not have_real_data():
        payload: dict[str, Any] = {"skipped": "real trajectories not present", "rows": []}
        write_result(opts, "savings", payload)
        return payload
    names = [DEFAULTS, *ALL_CONFIGS]
    windows = sweep_windows(opts.quick)
    rows = sweep(opts, {n: _factory(n) for n in names}, "savings", windows)
    totals = aggregate(rows, JUDGED_SOURCE) + aggregate(rows, None)
    payload = {
        "replay_model": REPLAY_MODEL,
        "configs": {DEFAULTS: None, **{k: dict(v) for k, v in ALL_CONFIGS.items()}},
        "windows": list(windows),
        "rows": rows,
        "totals": totals,
        "errors": {f"{r['sender']} @ {r['trajectory']}": r["error"] for r in rows if "error" in r},
    }
    write_result(opts, "savings", payload)
    own = model_info(REPLAY_MODEL).context_window
    judged = [t for t in totals if t["source"] == JUDGED_SOURCE]
    for t in judged:
        print(
            f"  {JUDGED_SOURCE} @{t['window'] // 1000}k {t['sender']:24} tokens x{t['tokens_ratio']:.3f}"
            f"  billed x{t['judged_ratio']:.3f}  hit {t['hit_ratio']:.1%}  invalid {t['invalid']}",
            flush=True,
        )
    print("\n".join(target_lines(judged, DEFAULTS, own)), flush=True)
    return payload
