"""The billed part of ``docs/benchmarks.md``: the judged targets, contextwarden against the peers
in money, the ablation in money, and their plots (from ``savings.json`` and ``peers.json``'s
``billed`` sweep; see ``bench/_sweep.py``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["bills_section", "savings_section", "target_rows"]

Json = dict[str, Any]
DEFAULTS = "Warden()"
JUDGED_SOURCE = "mini-swe-agent"


def _x(v: float | None) -> str:
    return "–" if v is None else f"{v:.3f}"


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v:.1%}"


def _usd(v: float | None) -> str:
    return "–" if v is None else f"${v:,.2f}" if v >= 10 else f"${v:.3f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def _k(window: int) -> str:
    return f"{window // 1000}k"


def _totals(data: Json | None, key: str) -> list[Json]:
    if not data:
        return []
    return [t for t in data.get(key) or [] if t["source"] == JUDGED_SOURCE]


def target_rows(sv: Json | None, pe: Json | None) -> list[list[str]]:
    """The judged targets for ``Warden()`` on the mini-swe-agent recordings (gpt-4o, reads 0.1x,
    writes 1.25x): rows of the page's targets table."""
    totals = _totals(sv, "totals") or _totals(pe, "billed_totals")
    rows: list[list[str]] = []
    if not totals:
        return rows
    own = max(t["window"] for t in totals)
    for t in totals:
        if t["sender"] != DEFAULTS:
            continue
        billed = 1 - t["judged_ratio"]
        tokens = 1 - t["tokens_ratio"]
        w = _k(t["window"])
        if t["window"] >= own:
            rows.append(
                [
                    f"billed cost >= 15% below raw at gpt-4o's own window ({w})",
                    _pct(billed),
                    _verdict(billed >= 0.15),
                ]
            )
            rows.append(
                [
                    f"no recording dearer than raw ({w})",
                    f"{t['dearer_than_raw']} of {t['recordings']}",
                    _verdict(t["dearer_than_raw"] == 0),
                ]
            )
        else:
            rows.append(
                [f"billed cost >= 40% below raw at {w}", _pct(billed), _verdict(billed >= 0.40)]
            )
            rows.append(
                [f"input tokens >= 50% below raw at {w}", _pct(tokens), _verdict(tokens >= 0.50)]
            )
        bad = t["invalid"] + t["over_window"] + t["task_lost"]
        rows.append(
            [
                f"every request valid, within the window, task kept ({w})",
                f"{t['calls'] - bad:,} / {t['calls']:,}",
                _verdict(bad == 0),
            ]
        )
    return rows


def _sender_table(totals: Sequence[Json]) -> str:
    rows = []
    for t in totals:
        rows.append(
            [
                _k(t["window"]),
                t["sender"],
                f"{t['tokens']:,}",
                _x(t["tokens_ratio"]),
                _pct(t["hit_ratio"]),
                _x(t["judged_ratio"]),
                _x(t["usd_recorded_ratio"]),
                _x(t["usd_model_ratio"]),
                f"{t['dearer_than_raw']}/{t['recordings']}",
                str(t["invalid"]),
                str(t["over_window"]),
                str(t["task_lost"]),
            ]
        )
    return _table(
        [
            "window",
            "sender",
            "input tokens",
            "tokens / raw",
            "cache hits",
            "billed / raw (0.1x/1.25x)",
            "billed / raw (recorded model, USD)",
            "billed / raw (gpt-4o, USD)",
            "dearer than raw",
            "invalid",
            "over window",
            "task lost",
        ],
        rows,
    )


def _per_recording(rows: Sequence[Json], sender: str) -> str:
    out = []
    raw = {
        (r["trajectory"], r["window"]): r for r in rows if r["sender"] == "raw" and "error" not in r
    }
    for r in rows:
        if r["sender"] != sender or "error" in r:
            continue
        base = raw.get((r["trajectory"], r["window"]))
        out.append(
            [
                r["trajectory"],
                _k(r["window"]),
                str(r["calls"]),
                _x(r["tokens_ratio"]),
                f"{_pct(base['hit_ratio']) if base else '–'} → {_pct(r['hit_ratio'])}",
                _x(r["judged_ratio"]),
                f"{_usd(base['usd_recorded']) if base else '–'} → {_usd(r['usd_recorded'])}",
                str(r["invalid"]),
                str(r["over_window"]),
            ]
        )
    return _table(
        [
            "recording",
            "window",
            "calls",
            "tokens / raw",
            "cache hits raw → with",
            "billed / raw (0.1x/1.25x)",
            "USD at the recorded model's prices, raw → with",
            "invalid",
            "over window",
        ],
        out,
    )


def _matrix(rows: Sequence[Json], window: int) -> str:
    """Recordings x senders at ``window``: billed / raw (tokens / raw)."""
    cells = [r for r in rows if r["window"] == window and r["sender"] != "raw"]
    senders = list(dict.fromkeys(r["sender"] for r in cells))
    names = list(dict.fromkeys(r["trajectory"] for r in cells))
    out = []
    for name in names:
        line = [name]
        for sender in senders:
            r = next((c for c in cells if c["trajectory"] == name and c["sender"] == sender), None)
            if r is None or "error" in r:
                line.append("error" if r is not None else "–")
            else:
                flag = "" if r["invalid"] == 0 else f", {r['invalid']} invalid"
                line.append(f"{_x(r['judged_ratio'])} ({_x(r['tokens_ratio'])}{flag})")
        out.append(line)
    return _table(["recording", *senders], out)


def _plot(path: Path, draw: Callable[[Any], None]) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=110)
    draw(ax)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path.name


def _plot_tokens_vs_bill(totals: Sequence[Json], img: Path) -> str | None:
    if not totals:
        return None

    def draw(ax: Any) -> None:
        markers = {w: m for w, m in zip(sorted({t["window"] for t in totals}), "o^s", strict=False)}
        names = list(dict.fromkeys(t["sender"] for t in totals if t["sender"] != "raw"))
        colors = {n: f"C{i}" for i, n in enumerate(names)}
        for t in totals:
            if t["sender"] == "raw":
                continue
            broken = t["invalid"] + t["task_lost"] > 0
            ax.scatter(
                t["tokens_ratio"],
                t["judged_ratio"],
                marker=markers[t["window"]],
                facecolors="none" if broken else colors[t["sender"]],
                edgecolors=colors[t["sender"]],
                s=55,
                label=f"{t['sender']} ({_k(t['window'])})" + (" *" if broken else ""),
            )
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.axvline(1.0, color="grey", lw=0.8, ls="--")
        ax.plot([0, 1.05], [0, 1.05], color="lightgrey", lw=0.8, ls=":")
        ax.set_xlabel("input tokens / raw")
        ax.set_ylabel("billed cost / raw (reads 0.1x, writes 1.25x)")
        ax.set_title(
            "Tokens are not the bill: mini-swe-agent recordings, gpt-4o\n"
            "(hollow, *: invalid requests or the task dropped)",
            fontsize=10,
        )
        ax.legend(fontsize=6, ncol=2, loc="best")

    return _plot(img / "bench-billed.png", draw)


def _plot_cumulative(rows: Sequence[Json], img: Path, window: int) -> str | None:
    cells = [r for r in rows if r["source"] == JUDGED_SOURCE and r["window"] == window]
    if not cells:
        return None
    longest = max(cells, key=lambda r: r.get("calls", 0))["trajectory"]
    mine = [r for r in cells if r["trajectory"] == longest and "per_call" in r]
    if not mine:
        return None

    def draw(ax: Any) -> None:
        for r in mine:
            total = 0.0
            ys = []
            for tokens, cached, _valid in r["per_call"]:
                total += cached * 0.1 + (tokens - cached) * 1.25
                ys.append(total / 1e6)
            style = "-" if r["sender"] in ("raw", DEFAULTS) else "--"
            lw = 2.2 if r["sender"] in ("raw", DEFAULTS) else 1.0
            ax.plot(range(1, len(ys) + 1), ys, style, lw=lw, label=r["sender"])
        ax.set_xlabel("call")
        ax.set_ylabel("cumulative bill (M input-price tokens)")
        ax.set_title(f"{longest}, {_k(window)} window")
        ax.legend(fontsize=7)

    return _plot(img / "bench-billed-calls.png", draw)


def _notes(totals: Sequence[Json]) -> list[str]:
    """What the table shows, in words, from its own numbers."""
    notes: list[str] = []
    for w in sorted({t["window"] for t in totals}, reverse=True):
        at = [t for t in totals if t["window"] == w and t["sender"] != "raw"]
        cw = next((t for t in at if t["sender"] == DEFAULTS), None)
        peers = [t for t in at if t["sender"] != DEFAULTS]
        if cw is None:
            continue
        line = (
            f"- **{_k(w)}**: `Warden()` sends {_pct(1 - cw['tokens_ratio'])} fewer tokens and "
            f"is billed {_pct(1 - cw['judged_ratio'])} less than raw (cache hits "
            f"{_pct(cw['hit_ratio'])})"
        )
        if peers and all(abs(t["judged_ratio"] - 1) < 0.005 for t in peers):
            line += "; no peer changes the requests at this window (all within 0.5% of raw)"
        elif peers:
            best = min(peers, key=lambda t: t["judged_ratio"])
            valid_best = min(
                (t for t in peers if t["invalid"] == 0 and t["task_lost"] == 0),
                key=lambda t: t["judged_ratio"],
                default=None,
            )
            line += (
                f"; the cheapest peer is {best['sender']} at {_x(best['judged_ratio'])} of raw"
                f" ({best['invalid']} invalid requests, {best['task_lost']} without the task,"
                f" {best['over_window']} over the window)"
            )
            if valid_best is not None and valid_best is not best:
                line += (
                    f", the cheapest with every request valid and the task kept is "
                    f"{valid_best['sender']} at {_x(valid_best['judged_ratio'])}"
                )
            gap = [
                t
                for t in peers
                if t["tokens_ratio"] < 0.9 and t["judged_ratio"] > t["tokens_ratio"] + 0.2
            ]
            if gap:
                line += "; tokens and bill part ways for " + ", ".join(
                    f"{t['sender']} (tokens x{t['tokens_ratio']:.2f}, bill "
                    f"x{t['judged_ratio']:.2f})"
                    for t in gap
                )
        notes.append(line + ".")
    return notes


def bills_section(pe: Json | None, sv: Json | None, img: Path) -> str:
    """Section 0: contextwarden and the peers in money (``peers.json``'s billed sweep)."""
    totals = _totals(pe, "billed_totals")
    rows = (pe or {}).get("billed") or []
    if not totals:
        return ""
    windows = sorted({t["window"] for t in totals})
    notes = _notes(totals)
    out = [
        "## Bills: what a provider would charge",
        "",
        "Every recording replayed as an agent loop: before the *k*-th assistant message the agent "
        "hands its whole history to the context manager and sends what comes back; one warden (one "
        "peer instance) per recording, as in a live agent; `Warden().transform_openai(history[:k], "
        'model="gpt-4o", window=W)` for contextwarden. Each request is billed with prompt caching '
        "(`contextwarden._billing.bill_requests`): its leading messages equal to the previous "
        "request's are cache reads, the rest cache writes, the calls back to back (the recordings have "
        "no timestamps). *billed / raw (0.1x/1.25x)* prices reads at 0.1x and writes at 1.25x the "
        "input price (Anthropic's 5-minute cache; the judged measure); the USD columns use the cache "
        "prices the model registry lists for the recording's model (DeepSeek: reads 0.1x, writes "
        "1x) and for gpt-4o (reads 0.5x, writes 1x, 1,024-token minimum). *raw* sends everything; "
        "over the window it is what the provider would reject. *invalid*: rejected for its shape "
        "(a tool result without its call, ...); *task lost*: the first user message is not in the "
        f"request. mini-swe-agent recordings, windows {', '.join(_k(w) for w in windows)}:",
        "",
        _sender_table(totals),
    ]
    if notes:
        out += ["", *notes]
    scatter = _plot_tokens_vs_bill(totals, img)
    if scatter:
        out += ["", f"![tokens against the bill](img/{scatter})"]
    calls = _plot_cumulative(rows, img, min(windows))
    if calls:
        out += [
            "",
            "The bill call by call on the longest recording at the smaller window:",
            "",
            f"![cumulative bill per call](img/{calls})",
        ]
    out += [
        "",
        "Peer settings (the warden's own budget for each window: fire above its trigger, cut to its "
        "target, exact o200k counts): LangChain `ClearToolUsesEdit(trigger=trigger)` (keep 3) and with "
        "`clear_at_least=trigger - target`, through `ContextEditingMiddleware.wrap_model_call`, which "
        "edits a deep copy of the history on every call; `trim_messages(max_tokens=trigger, "
        'strategy="last", include_system=True)` with and without `start_on="human"`; '
        "pydantic-ai-harness `SlidingWindowCompaction(max_tokens=trigger, keep_tokens=target)` and "
        "`TieredCompaction(tiers=[ClearToolResults, SlidingWindowCompaction], target_tokens=trigger)` "
        "through their `before_model_request` hook, whose cut persists in the run's history.",
    ]
    skipped = (pe or {}).get("billed_skipped") or {}
    if skipped:
        out += ["", "Skipped or failed: " + "; ".join(f"{k}: {v}" for k, v in skipped.items())]
    for w in sorted({r["window"] for r in rows}, reverse=True):
        out += [
            "",
            f"Per recording at {_k(w)}: billed / raw at 0.1x/1.25x (tokens / raw in brackets):",
            "",
            _matrix(rows, w),
        ]
    everything = [t for t in (pe or {}).get("billed_totals") or [] if t["source"] == "all"]
    if everything:
        out += [
            "",
            "All recordings (mini-swe-agent, pi, Claude Code, OpenHands), same replay:",
            "",
            _sender_table(everything),
        ]
    if sv and sv.get("rows"):
        out += [
            "",
            "`Warden()` per recording:",
            "",
            _per_recording(sv["rows"], DEFAULTS),
        ]
    return "\n".join(out)


def savings_section(sv: Json) -> str:
    """The ablation in money (``savings.json``)."""
    totals = _totals(sv, "totals")
    out = [
        "## 4. Savings in money, layer by layer",
        "",
        "The same billed replay (gpt-4o counts and window) for `Warden()` and each step of the "
        "ablation, built with `make_warden(WardenConfig)`: `mask` (observation masking only), "
        "`+thinking` (old thinking stripped), `+truncate` (oversized output cut: all lossless "
        "layers), `+window` (the sliding window), `+summaries` (the compaction engine), and "
        "`mask+thinking(any turn)`. mini-swe-agent recordings:",
        "",
        _sender_table(totals),
    ]
    everything = [t for t in sv.get("totals") or [] if t["source"] == "all"]
    if everything:
        out += ["", "All recordings:", "", _sender_table(everything)]
    if sv.get("errors"):
        out += ["", "Errors: " + "; ".join(f"{k}: {v}" for k, v in sv["errors"].items())]
    return "\n".join(out)
