"""The judges' measures, exactly as judged, on every recording: ``python -m bench.measures_run``.

``../shared/measures/measures.py`` is imported by path and used as it is: every recording
(``bench/_recordings.py``: plain OpenAI chat lists) is replayed with its ``requests`` (before the
k-th assistant message the sender gets ``msgs[:k]``), and every run of requests is scored with
its ``name_recall``, ``edit_recall``, ``billed`` (o200k, cache reads 0.1x, writes 1.25x) and
``orphans``. Senders, one instance per recording, at 16k, 32k and the model's own window
(gpt-4o, 128k), on the same calls:

* ``raw``: the whole history;
* ``contextwarden``: ``Warden()`` defaults through ``transform_openai``, made by the judges'
  own ``measures._contextwarden`` (the defaults make no summary calls: the extractive
  summarizer runs in process; a run that made some would add them to its requests);
* the peers of ``bench/_senders.py`` the issue names: LangChain ``ClearToolUsesEdit``,
  pydantic-ai-harness ``SlidingWindowCompaction``, ``ClearToolResults`` and
  ``TieredCompaction`` (clear, then slide), each on the warden's trigger and target.

Per cell: name recall, edit recall, tokens sent as a share of raw, billed saved against raw,
requests with orphans ("invalid"). Written to ``bench/results/measures.json`` and rendered by
``bench/report.py`` into ``docs/benchmarks.md``. ``--experiment`` adds the rows of
``bench/mask_experiment.py`` (a measurement of protected masking, not a product).
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from ._common import RESULTS_DIR, Options, write_result
from ._data import DATA_DIR
from ._recordings import recordings

__all__ = ["MEASURES_PATH", "WINDOWS", "measures", "run", "score"]

#: The judges' measures (read-only, outside the repository): ``../shared/measures/measures.py``
#: beside the data folder; ``CONTEXTWARDEN_MEASURES`` overrides it.
MEASURES_PATH = Path(
    os.environ.get("CONTEXTWARDEN_MEASURES")
    or next(
        (
            p
            for p in (
                DATA_DIR.parents[1] / "measures" / "measures.py",
                Path(__file__).resolve().parents[2] / "shared" / "measures" / "measures.py",
            )
            if p.exists()
        ),
        DATA_DIR.parents[1] / "measures" / "measures.py",
    )
)
MODEL = "gpt-4o"
#: 16k, 32k and gpt-4o's own window.
WINDOWS = (16_000, 32_000, 128_000)
JUDGED_SOURCE = "mini-swe-agent"
PEERS = (
    "ClearToolUsesEdit",
    "SlidingWindowCompaction",
    "ClearToolResults",
    "TieredCompaction (clear, slide)",
)

Send = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


@cache
def measures() -> ModuleType:
    """The judges' ``measures.py``, imported by path, unchanged."""
    spec = importlib.util.spec_from_file_location("judged_measures", MEASURES_PATH)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"the judges' measures are not at {MEASURES_PATH}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def _encoder() -> Any:
    return measures()._encoder()


def senders(window: int, experiment: bool = False) -> dict[str, Callable[[], Send]]:
    """Sender factories by row name (one sender per recording)."""
    from ._senders import PEER_SENDERS, available

    m = measures()
    out: dict[str, Callable[[], Send]] = {
        "raw": lambda: lambda history: list(history),
        "contextwarden": m._contextwarden(window, MODEL),
    }
    ok, _ = available()
    names = {p.name for p in ok}
    for peer in PEER_SENDERS:
        if peer.name in PEERS and peer.name in names:
            out[peer.name] = (lambda p: lambda: p.make(MODEL, window))(peer)
    if experiment:
        from .mask_experiment import EXPERIMENTS

        for name, make in EXPERIMENTS.items():
            out[name] = (lambda mk: lambda: mk(MODEL, window))(make)
    return out


def score(
    msgs: Sequence[dict[str, Any]], reqs: Sequence[Sequence[dict[str, Any]]]
) -> dict[str, float]:
    """Every judged figure of one run of requests (sums, so cells add up)."""
    m = measures()
    enc = _encoder()
    nh, nn = m.name_recall(msgs, reqs)
    eh, en = m.edit_recall(msgs, reqs)
    tok, cost = m.billed(reqs, enc)
    return {
        "tokens": tok,
        "cost": cost,
        "names_held": nh,
        "names_wanted": nn,
        "edits_held": eh,
        "edits_wanted": en,
        "invalid": sum(1 for r in reqs if m.orphans(r)),
        "requests": len(reqs),
    }


def _cell(job: tuple[int, int, str, bool]) -> dict[str, Any]:
    index, window, name, experiment = job
    rec = recordings()[index]
    msgs = list(rec.messages)
    make = senders(window, experiment)[name]
    t0 = time.perf_counter()
    try:
        reqs = measures().requests(msgs, make())
    except Exception as exc:  # the judges' main prints these as "not measured"
        return {
            "recording": rec.name,
            "source": rec.source,
            "window": window,
            "sender": name,
            "error": f"{type(exc).__name__}: {str(exc)[:200]}",
        }
    seconds = time.perf_counter() - t0
    return {
        "recording": rec.name,
        "source": rec.source,
        "window": window,
        "sender": name,
        "seconds": round(seconds, 2),
        **score(msgs, reqs),
    }


def aggregate(rows: Sequence[dict[str, Any]], source: str | None = None) -> list[dict[str, Any]]:
    """Per (window, sender): the judged ratios over the recordings every sender measured."""
    ok = [r for r in rows if "error" not in r and (source is None or r["source"] == source)]
    failed = {(r["window"], r["recording"]) for r in rows if "error" in r}
    out: list[dict[str, Any]] = []
    for window in sorted({r["window"] for r in ok}):
        raw = {
            r["recording"]: r
            for r in ok
            if r["window"] == window
            and r["sender"] == "raw"
            and (window, r["recording"]) not in failed
        }
        for sender in dict.fromkeys(r["sender"] for r in ok if r["window"] == window):
            cells = [
                r
                for r in ok
                if r["window"] == window and r["sender"] == sender and r["recording"] in raw
            ]
            if not cells:
                continue
            s = {
                k: sum(c[k] for c in cells)
                for k in cells[0]
                if isinstance(cells[0][k], (int, float))
            }
            rt = sum(raw[c["recording"]]["tokens"] for c in cells)
            rc = sum(raw[c["recording"]]["cost"] for c in cells)
            dearer = [
                c["recording"] for c in cells if c["cost"] > raw[c["recording"]]["cost"] * 1.0000001
            ]
            out.append(
                {
                    "window": window,
                    "sender": sender,
                    "recordings": len(cells),
                    "name_recall": s["names_held"] / max(s["names_wanted"], 1),
                    "names_wanted": s["names_wanted"],
                    "edit_recall": s["edits_held"] / max(s["edits_wanted"], 1),
                    "edits_wanted": s["edits_wanted"],
                    "tokens_share": s["tokens"] / rt if rt else 0.0,
                    "billed_saved": 1 - s["cost"] / rc if rc else 0.0,
                    "invalid": s["invalid"],
                    "requests": s["requests"],
                    "dearer_than_raw": dearer,
                }
            )
    return out


def sweep(
    windows: Sequence[int],
    jobs: int,
    only: str = "",
    experiment: bool = False,
    names: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Every (recording, window, sender) cell, in ``jobs`` processes."""
    recs = recordings()
    idx = [i for i, r in enumerate(recs) if not only or only in f"{r.source}/{r.name}"]
    work = [
        (i, w, name, experiment)
        for w in windows
        for name in senders(w, experiment)
        if not names or name in names or name == "raw"
        for i in idx
    ]
    # the longest recordings first, so the pool does not end on one straggler
    work.sort(key=lambda j: -len(recs[j[0]].messages))
    if jobs <= 1:
        return [_cell(j) for j in work]
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        return list(pool.imap_unordered(_cell, work))


def report_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """A plain-text table of :func:`aggregate` (all recordings, then mini-swe-agent)."""
    lines: list[str] = []
    for label, source in (("all recordings", None), ("mini-swe-agent", JUDGED_SOURCE)):
        lines.append(f"== {label}")
        for a in aggregate(rows, source):
            lines.append(
                f"{a['window']:>7} {a['sender']:<34} names {a['name_recall']:6.1%} "
                f"edits {a['edit_recall']:6.1%} ({a['edits_wanted']:.0f}) tokens {a['tokens_share']:6.1%} "
                f"billed saved {a['billed_saved']:6.1%} invalid {a['invalid']:.0f}"
                + (f" dearer: {len(a['dearer_than_raw'])}" if a["dearer_than_raw"] else "")
            )
    return lines


def run(opts: Options) -> None:
    """``python -m bench --only measures_run``: the whole sweep (the quick run: 32k, one
    mini-swe-agent recording)."""
    if not recordings():
        print("[measures_run] no recordings: skipped", flush=True)
        return
    windows = (32_000,) if opts.quick else WINDOWS
    only = "django__django-15695" if opts.quick else ""
    rows = sweep(windows, opts.jobs, only)
    write_result(
        opts,
        "measures",
        {
            "measures": str(MEASURES_PATH),
            "model": MODEL,
            "windows": list(windows),
            "rows": sorted(
                rows, key=lambda r: (r["window"], r["sender"], r["source"], r["recording"])
            ),
            "all": aggregate(rows),
            "judged": aggregate(rows, JUDGED_SOURCE),
        },
    )
    print("\n".join(report_lines(rows)), flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.measures_run", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--windows", default=",".join(str(w) for w in WINDOWS))
    ap.add_argument("--only", default="", help="recordings whose source/name contains this")
    ap.add_argument("--senders", default="", help="comma-separated row names (raw is always run)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--experiment", action="store_true", help="add bench/mask_experiment.py rows")
    ap.add_argument("--out", type=Path, default=RESULTS_DIR, help="results folder")
    ap.add_argument(
        "--name",
        default=None,
        help="result file name without .json (default measures, mask_experiment with --experiment)",
    )
    a = ap.parse_args(argv)
    name = a.name or ("mask_experiment" if a.experiment else "measures")
    windows = tuple(int(w) for w in a.windows.split(",") if w.strip())
    names = [n.strip() for n in a.senders.split(",") if n.strip()]
    t0 = time.perf_counter()
    rows = sweep(windows, a.jobs, a.only, a.experiment, names)
    opts = Options.make(quick=False, out=a.out, jobs=a.jobs)
    write_result(
        opts,
        name,
        {
            "measures": str(MEASURES_PATH),
            "model": MODEL,
            "windows": list(windows),
            "rows": sorted(
                rows, key=lambda r: (r["window"], r["sender"], r["source"], r["recording"])
            ),
            "all": aggregate(rows),
            "judged": aggregate(rows, JUDGED_SOURCE),
        },
    )
    print("\n".join(report_lines(rows)))
    print(f"{len(rows)} cells in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
