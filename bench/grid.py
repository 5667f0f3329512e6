"""The policy's grid: every recording x window x price structure x fixed part.

    python -m bench.grid                                   # the whole grid (long: run it once)
    python -m bench.grid --windows 32000 --prices anthropic --fixed 19000 --only django
    python -m bench.grid --json bench/results/grid.json --markdown

Recordings: ``bench/_recordings.py`` (the shared trajectories and the repository's, as plain
OpenAI chat lists). Windows: 16k, 32k, 128k and the price model's own. Price structures: the
four the cost model is judged at, each as its model (the warden is told that model, and the
bill uses its cache ratios): Anthropic (claude-sonnet-4-5: read 0.1x, write 1.25x, 5-minute
TTL), OpenAI (gpt-4o: read 0.5x, write 1x), DeepSeek (deepseek-chat: read 0.1x, write 1x, an
hour) and Gemini (gemini-2.5-pro: read 0.1x, write 1x). Fixed parts: the recording as it is
(0), and a client's system prompt and tools of about 19k tokens prepended (Claude Code's size)
as a system message.

Each cell replays the recording's requests (before the k-th assistant message the sender gets
``msgs[:k]``, as the judges' ``requests`` does) through ``Warden()`` defaults with the cell's
model and window, and through ``raw`` (the whole history). Where the agent wrote timestamps
(Claude Code, Codex, Gemini CLI, opencode, pi), each call is made at its recorded time (that of
the newest message before it), so the warden sees pauses, and both bills read nothing from the
cache after a pause longer than the model's cache TTL; recordings without them are replayed
back to back. Per cell:

* ``saved``: billed saved against raw, both billed as ``measures.billed`` bills (leading
  messages identical to the previous request's are cache reads, the rest writes; o200k tokens)
  at the cell's cache ratios; ``dearer``: the cell's bill over raw's by more than 1%, where
  raw could be sent (``raw_peak``, its largest request plus the reply the model gave to it,
  in the model's own tokens, within the window: a provider refuses a prompt that leaves the
  reply no room; the cells where it is not are counted apart: no agent could have sent that);
* ``compactions``: compactions made; ``summary calls``: the LLM calls they would make with an
  LLM summarizer (one per compaction, by construction: the embedded summarizer makes none) and
  ``summary tokens``: what those calls would read (the tokens each compaction replaced);
* ``names``, ``edits``: ``measures.name_recall`` and ``measures.edit_recall``, from
  ``../shared/measures/measures.py`` used exactly as given (see ``bench/measures_run.py``).

Aggregated per (window, price, fixed) over the recordings, and written as a markdown table
(``--markdown``) for ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from ._recordings import recordings
from .measures_run import measures

__all__ = ["PRICES", "WINDOWS", "bill", "cell", "grid_section", "main", "table", "unseen_section"]

Msg = dict[str, Any]

#: Price structure -> (model the warden is told, cache read ratio, cache write ratio).
PRICES: dict[str, tuple[str, float, float]] = {
    "anthropic": ("claude-sonnet-4-5", 0.1, 1.25),
    "openai": ("gpt-4o", 0.5, 1.0),
    "deepseek": ("deepseek-chat", 0.1, 1.0),
    "gemini": ("gemini-2.5-pro", 0.1, 1.0),
}
#: 0: the model's own window.
WINDOWS = (16_000, 32_000, 128_000, 0)
FIXED = (0, 19_000)
#: A cell this much dearer than raw counts as dearer.
DEARER = 0.01
#: The warden's config for every cell (``--config``; empty: the defaults).
_CONFIG: dict[str, Any] = {}
#: Where the recordings are read (``--root``; empty: the shared trajectories).
_ROOT: list[Path] = []


def _recs() -> tuple[Any, ...]:
    return recordings(_ROOT[0]) if _ROOT else recordings()


@cache
def _encoder() -> Any:
    return measures()._encoder()


@cache
def _fixed_text(tokens: int) -> str:
    """A client's system prompt and tools of about ``tokens`` o200k tokens."""
    if tokens <= 0:
        return ""
    enc = _encoder()
    lines: list[str] = []
    k = 0
    while True:
        chunk = "\n".join(
            f"- Tool rule {k + i}: when calling tool_{(k + i) % 37} pass arguments as JSON and "
            f"never exceed limit {(k + i) * 7 % 1000}."
            for i in range(50)
        )
        lines.append(chunk)
        k += 50
        if len(enc.encode("\n".join(lines))) >= tokens:
            return "\n".join(lines)


def with_fixed(msgs: Sequence[Msg], tokens: int) -> list[Msg]:
    """``msgs`` with a fixed part of about ``tokens`` tokens: prepended to the first system
    message, or as a new one."""
    text = _fixed_text(tokens)
    out = [dict(m) for m in msgs]
    if not text:
        return out
    if out and out[0].get("role") == "system" and isinstance(out[0].get("content"), str):
        out[0]["content"] = text + "\n\n" + out[0]["content"]
        return out
    return [{"role": "system", "content": text}, *out]


def bill(
    reqs: Sequence[Sequence[Msg]],
    read: float,
    write: float,
    ats: Sequence[float | None] = (),
    ttl: float | None = None,
) -> tuple[float, float]:
    """``(tokens, cost in input-token units)`` of a run of requests, billed the way
    ``measures.billed`` bills them, at ``read`` and ``write`` times the input price. With the
    requests' times ``ats`` and the cache's ``ttl`` (seconds), a request sent more than ``ttl``
    after the previous one finds the cache gone: all of it is written."""
    m = measures()
    enc = _encoder()
    prev: list[str] = []
    sizes: dict[str, int] = {}
    tokens = cost = 0.0
    last: float | None = None
    for i, req in enumerate(reqs):
        keys = [json.dumps(x, sort_keys=True, ensure_ascii=False) for x in req]
        at = ats[i] if i < len(ats) else None
        if ttl is not None and at is not None and last is not None and at - last > ttl:
            prev = []  # a cold cache: nothing is read
        last = at if at is not None else last
        n = 0
        while n < min(len(keys), len(prev)) and keys[n] == prev[n]:
            n += 1
        per = [sizes.setdefault(k, m.ntok(enc, [x])) for k, x in zip(keys, req, strict=True)]
        total, hit = sum(per), sum(per[:n])
        tokens += total
        cost += hit * read + (total - hit) * write
        prev = keys
    return tokens, cost


def call_times(msgs: Sequence[Msg], times: Sequence[float | None]) -> list[float | None]:
    """When each call of ``msgs`` was sent, from its messages' ``times`` (aligned with the end
    of ``msgs``: a fixed part prepended has none): the time of the newest message of its
    context, else of the reply; empty when the recording has no times."""
    if not times:
        return []
    at = [None] * (len(msgs) - len(times)) + list(times)
    sent = [at[k - 1] if k and at[k - 1] is not None else at[k] for k in measures().calls(msgs)]
    # a call with no time of its own goes with the one before (never the clock's, which would
    # read as a pause of months)
    known = [t for t in sent if t is not None]
    out: list[float | None] = []
    for t in sent:
        out.append(t if t is not None else (out[-1] if out else known[0] if known else None))
    return out


def _warden_sender(
    model: str,
    window: int,
    stats: dict[str, int],
    ats: Sequence[float | None] = (),
    msgs: Sequence[Msg] = (),
) -> Callable[[list[Msg]], list[Msg]]:
    from contextwarden import Warden, WardenConfig, count_tokens
    from contextwarden.formats import from_openai

    warden = Warden(WardenConfig.model_validate(_CONFIG)) if _CONFIG else Warden()
    calls = iter(ats)

    def reply(k: int) -> int:
        # the reply the model gave to call k, in its own tokens: a prompt that leaves less
        # room than that is refused, so raw could not have been sent
        if k >= len(msgs):
            return 0
        return count_tokens(from_openai([msgs[k]]), model)

    def send(history: list[Msg]) -> list[Msg]:
        # the recorded time where there is one (a pause past the cache's TTL makes edits
        # free), else the clock's: the calls back to back
        now = next(calls, None)
        request, result = warden.transform_openai(history, model=model, window=window, now=now)
        # the whole history and its reply in the model's own tokens (Claude's are about
        # 1.18 o200k's)
        stats["raw_peak"] = max(stats["raw_peak"], result.tokens_before + reply(len(history)))
        if result.compaction is not None:
            stats["compactions"] += 1
            stats["summary_tokens"] += result.compaction.original_token_count
        return request

    return send


def cell(job: tuple[int, int, str, int]) -> dict[str, Any]:
    """One (recording, window, price, fixed) cell, raw and contextwarden."""
    from contextwarden._models import find_model

    index, window, price, fixed = job
    rec = _recs()[index]
    model, read, write = PRICES[price]
    info = find_model(model)
    if window == 0:
        window = info.context_window if info is not None else 128_000
    ttl = info.cache_ttl_s if info is not None else None
    msgs = with_fixed(rec.messages, fixed)
    ats = call_times(msgs, rec.times)
    m = measures()
    out: dict[str, Any] = {
        "recording": f"{rec.source}/{rec.name}",
        "window": window,
        "price": price,
        "fixed": fixed,
    }
    stats = {"compactions": 0, "summary_tokens": 0, "raw_peak": 0}
    t0 = time.perf_counter()
    try:
        raw = m.requests(msgs, lambda history: list(history))
        ours = m.requests(msgs, _warden_sender(model, window, stats, ats, msgs))
    except Exception as exc:  # an overflow at a tiny window: reported, not fatal
        return {**out, "error": f"{type(exc).__name__}: {str(exc)[:160]}"}
    raw_tokens, raw_cost = bill(raw, read, write, ats, ttl)
    tokens, cost = bill(ours, read, write, ats, ttl)
    nh, nn = m.name_recall(msgs, ours)
    eh, en = m.edit_recall(msgs, ours)
    return {
        **out,
        "seconds": round(time.perf_counter() - t0, 2),
        "requests": len(ours),
        "raw_cost": raw_cost,
        "raw_tokens": raw_tokens,
        "cost": cost,
        "tokens": tokens,
        "names_held": nh,
        "names_wanted": nn,
        "edits_held": eh,
        "edits_wanted": en,
        **stats,
    }


def aggregate(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (window, price, fixed): the recordings' sums and ratios."""
    ok = [r for r in rows if "error" not in r]
    keys = sorted({(r["fixed"], r["price"], r["window"]) for r in ok})
    out = []
    for fixed, price, window in keys:
        cells = [r for r in ok if (r["fixed"], r["price"], r["window"]) == (fixed, price, window)]
        raw = sum(c["raw_cost"] for c in cells)
        cost = sum(c["cost"] for c in cells)
        # raw could not be sent where its largest request and the reply to it, in the model's
        # tokens, are over the window: no bill to be dearer than
        sendable = [c for c in cells if c.get("raw_peak", 0) <= c["window"]]
        dearer = [c["recording"] for c in sendable if c["cost"] > c["raw_cost"] * (1 + DEARER)]
        worst = max((c["cost"] / c["raw_cost"] for c in sendable if c["raw_cost"]), default=1.0)
        out.append(
            {
                "fixed": fixed,
                "price": price,
                "window": window,
                "recordings": len(cells),
                "saved": 1 - cost / raw if raw else 0.0,
                "dearer": dearer,
                "worst": worst,
                "unsendable": len(cells) - len(sendable),
                "compactions": sum(c["compactions"] for c in cells),
                "requests": sum(c["requests"] for c in cells),
                "summary_tokens": sum(c["summary_tokens"] for c in cells),
                "names": sum(c["names_held"] for c in cells)
                / max(sum(c["names_wanted"] for c in cells), 1),
                "edits": sum(c["edits_held"] for c in cells)
                / max(sum(c["edits_wanted"] for c in cells), 1),
                "edits_wanted": sum(c["edits_wanted"] for c in cells),
            }
        )
    return out


def table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The grid as a markdown table."""
    lines = [
        "| fixed part | prices | window | recordings (raw over the window) | billed saved "
        "| dearer > 1% (worst) | compactions / requests | summary calls | summary tokens | names "
        "| edit lines |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for a in aggregate(rows):
        # no edit the measure recognises (an agent whose edit tool it does not know)
        edits = f"{a['edits']:.1%}" if a["edits_wanted"] else "none to recall"
        over = f" ({a['unsendable']})" if a["unsendable"] else ""
        lines.append(
            f"| {a['fixed']:,} | {a['price']} | {a['window']:,} | {a['recordings']}{over} "
            f"| {a['saved']:.1%} | {len(a['dearer'])} ({a['worst']:.3f}) "
            f"| {a['compactions']} / {a['requests']} | {a['compactions']} "
            f"| {a['summary_tokens']:,} | {a['names']:.1%} | {edits} |"
        )
    return lines


def unseen_section(data: dict[str, Any]) -> str:
    """The section of ``docs/benchmarks.md`` for a grid over sessions the policy was not made
    on (``--root``; ``bench/results/grid_unseen*.json``): its ``title`` and ``about`` say which
    sessions (``seen``: how they were used, when they were), and a set of several agents gets a
    line per agent too."""
    rows = data.get("rows") or []
    ok = [r for r in rows if "error" not in r]
    about = data.get("about") or (
        "Claude Code (2.1.x) and Codex CLI sessions that the Entire CLI committed to the public "
        "entireio/entire-graph repository (MIT; branch `entire/checkpoints/v1`, each "
        "`full.jsonl` of 30 or more replies, duplicates left out)"
    )
    seen = data.get("seen") or "were not looked at while the policy was made"
    lines = [
        f"### {data.get('title') or 'Sessions the policy was not made on'}",
        "",
        f"The same grid over {len({r['recording'] for r in rows})} real sessions that are not "
        f"in the repository and {seen}: {about}, read "
        "with contextwarden's own readers and replayed as above (`python -m bench.grid --root "
        "DIR --windows 32000,model --fixed 0`, the four price structures).",
        "",
        *table(ok),
    ]
    agents = sorted({r["recording"].split("/")[0] for r in ok})
    if len(agents) > 1:
        lines += ["", "Per agent:", "", "| agent " + table(ok)[0], "|---" + table(ok)[1]]
        for agent in agents:
            mine = [r for r in ok if r["recording"].startswith(agent + "/")]
            lines += [f"| {agent} {row}" for row in table(mine)[2:]]
    return "\n".join(lines + _not_measured(rows))


def _not_measured(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The cells that could not run (the fixed part alone is over the limit), as a paragraph."""
    failed = [r for r in rows if "error" in r]
    if not failed:
        return []
    cells = "; ".join(f"{r['recording']} at {r['window']:,} ({r['price']})" for r in failed)
    return [
        "",
        f"Not measured (the system prompt, tools and task alone are over the limit): {cells}.",
    ]


def grid_section(data: dict[str, Any]) -> str:
    """The section of ``docs/benchmarks.md`` for ``bench/results/grid.json``."""
    rows = data.get("rows") or []
    lines = [
        "## The policy's grid (`bench/grid.py`)",
        "",
        "`python -m bench.grid --json bench/results/grid.json` replays every recording (the "
        "shared trajectories and the repository's"
        + (f"; {data['note']}" if data.get("note") else "")
        + ") at 16k, 32k, 128k and the price model's own window, for each of the four price "
        "structures (the warden is told the model: claude-sonnet-4-5, gpt-4o, deepseek-chat, "
        "gemini-2.5-pro; the bill uses its cache ratios) and two fixed parts: the recording as "
        "it is, and about 19,000 tokens of system prompt and tools prepended (Claude Code's "
        "size). Billed saved is against sending the whole history on every call, billed the "
        "way `measures.billed` bills (leading messages identical to the previous request's are "
        "cache reads); where the agent wrote timestamps, each call is made at its recorded "
        "time and a pause past the model's cache TTL reads nothing, for raw and contextwarden "
        "alike. Summary calls are those an LLM summarizer would make (one per "
        "compaction; the default embedded summarizer makes none), summary tokens what they "
        "would read. Names and edit lines: `../shared/measures/measures.py`, as given. In "
        "brackets after the recordings: those whose whole history, with the reply the model gave "
        "to it, grows over the window in the model's own tokens (Claude's count about 1.18 "
        "o200k's), which no agent could have sent whole; they are not counted as dearer, and the worst ratio is over the others.",
        "",
        *table(rows),
    ]
    before = data.get("before_rows") or []
    if before:
        lines += [
            "",
            f"Before the cost model ({data.get('before', 'the previous policy')}), on the same "
            "recordings, windows, fixed parts and the two price structures it was run at:",
            "",
            *table(before),
        ]
    return "\n".join(lines + _not_measured(rows))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.grid", description=__doc__.split("\n")[0])
    ap.add_argument("--windows", default="16000,32000,128000,model")
    ap.add_argument("--prices", default=",".join(PRICES))
    ap.add_argument("--fixed", default=",".join(str(f) for f in FIXED))
    ap.add_argument("--only", default="", help="recordings whose source/name contains this")
    ap.add_argument("--skip", default="", help="leave out recordings whose name contains this")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None, help="write the rows here")
    ap.add_argument("--markdown", action="store_true", help="print the markdown table")
    ap.add_argument("--config", default="", help="the warden's config as JSON (default: none)")
    ap.add_argument(
        "--root", type=Path, default=None, help="read the recordings under this folder instead"
    )
    a = ap.parse_args(argv)
    _CONFIG.update(json.loads(a.config) if a.config else {})
    windows = [0 if w == "model" else int(w) for w in a.windows.split(",") if w.strip()]
    prices = [p for p in a.prices.split(",") if p.strip()]
    fixed = [int(f) for f in a.fixed.split(",") if f.strip()]
    if a.root is not None:
        _ROOT.append(a.root)
    recs = _recs()
    idx = [
        i
        for i, r in enumerate(recs)
        if (not a.only or a.only in f"{r.source}/{r.name}")
        and not (a.skip and a.skip in f"{r.source}/{r.name}")
    ]
    work = [(i, w, p, f) for f in fixed for p in prices for w in windows for i in idx]
    work.sort(key=lambda j: -len(recs[j[0]].messages))
    t0 = time.perf_counter()
    if a.jobs <= 1:
        rows = [cell(j) for j in work]
    else:
        with multiprocessing.get_context("fork").Pool(a.jobs) as pool:
            rows = list(pool.imap_unordered(cell, work))
    if a.json is not None:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        note = f"leaving out {a.skip}" if a.skip else ""
        a.json.write_text(
            json.dumps({"rows": rows, "cells": aggregate(rows), "note": note}, indent=1)
        )
    for r in rows:
        if "error" in r:
            print(f"not measured: {r['recording']} {r['window']} {r['price']}: {r['error']}")
    print("\n".join(table(rows)))
    print(f"{len(rows)} cells in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
