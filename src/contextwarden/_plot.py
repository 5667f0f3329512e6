"""A picture of a replay: context size per call, without and with contextwarden, against the
window, and below it what the provider would bill (cumulative, prompt caching counted, beside
the list price). matplotlib (the ``plot`` extra) is imported only here, by :func:`pyplot`, when
a plot is asked for."""

from __future__ import annotations

import os
from collections.abc import Mapping
from itertools import accumulate
from pathlib import Path
from typing import Any

from ._exceptions import ContextWardenError
from ._replay import ReplayReport

__all__ = ["plot_replay", "pyplot"]


def _masked(events: Mapping[str, int]) -> bool:
    return bool(events.get("masked") or events.get("thinking_stripped"))


def _without_and_with(ax: Any, calls: list[int], without: list[Any], with_: list[Any]) -> None:
    """The two series every panel compares: without contextwarden (grey), with it (blue)."""
    ax.fill_between(calls, without, color="#9e9e9e", alpha=0.15, linewidth=0)
    ax.plot(calls, without, color="#757575", linewidth=1.8, label="without contextwarden")
    ax.fill_between(calls, with_, color="#1f77b4", alpha=0.18, linewidth=0)
    ax.plot(calls, with_, color="#1f77b4", linewidth=2.2, label="with contextwarden")


def pyplot() -> Any:
    """``matplotlib.pyplot`` drawing to files (the Agg backend: no display needed); a
    :class:`~contextwarden.ContextWardenError` naming the ``plot`` extra without matplotlib.
    The one place matplotlib is imported, when a plot is asked for."""
    try:
        import matplotlib
    except ImportError as exc:
        raise ContextWardenError(
            "plotting needs matplotlib: pip install 'contextwarden[plot]'"
        ) from exc
    matplotlib.use("Agg")  # files only: no display needed, works on a headless machine
    import matplotlib.pyplot as plt

    return plt


def plot_replay(
    report: ReplayReport, path: str | os.PathLike[str], *, title: str | None = None
) -> Path:
    """Draw ``report`` as a PNG at ``path`` (parent folders are created); returns the path.

    Top panel: tokens sent per call without contextwarden (grey) and with it (blue); the
    window (red), the limit (window minus the reply's reserve, per call, dashed) and the trigger
    (dotted); calls where a compaction ran, and those where old tool results were masked or
    old thinking stripped, are marked. The title gives the cumulative saving.
    Bottom panel (when the model has a price): the cumulative billed input cost without and
    with contextwarden, cache-aware; its title gives the same totals as the text report (the
    whole session, and the calls that fit without contextwarden) and the cache hit ratios.
    """
    plt = pyplot()
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ContextWardenError(
            f"{target}: cannot create its folder ({exc.strerror or exc})"
        ) from None
    calls = [c.call for c in report.calls]
    without = [c.tokens_without for c in report.calls]
    with_ = [c.tokens_with for c in report.calls]
    t = report.totals

    billed = t.billed_cost_without is not None and report.calls
    if billed:
        fig, (ax, money) = plt.subplots(
            2, 1, figsize=(10, 8), dpi=120, sharex=True, height_ratios=(3, 2)
        )
    else:
        fig, ax = plt.subplots(figsize=(10, 5.2), dpi=120)
    _without_and_with(ax, calls, without, with_)
    ax.axhline(report.window, color="#d62728", linewidth=1.6, label=f"window ({report.window:,})")
    limits = [c.limit or report.limit for c in report.calls]
    # one line, not two drawn on top of each other
    same = all(limit == report.trigger for limit in limits)
    ax.step(
        calls,
        limits,
        where="mid",
        color="#d62728",
        linewidth=1,
        linestyle="--",
        alpha=0.7,
        label=f"limit (window - output reserve) = compaction trigger ({report.limit:,})"
        if same
        else f"limit: window - reply reserve ({report.limit:,} at the end)",
    )
    if not same:
        ax.axhline(
            report.trigger,
            color="#ff7f0e",
            linewidth=1,
            linestyle=":",
            label=f"compaction trigger ({report.trigger:,})",
        )
    # Summaries written; lossless edits (old tool results masked, old thinking stripped); bad requests.
    masking = {"marker": "o", "facecolors": "none", "edgecolors": "#9467bd", "linewidths": 1.5}
    invalid = {"marker": "x", "color": "#d62728", "s": 60, "zorder": 6}
    kinds: list[tuple[Any, str, dict[str, Any]]] = [
        (lambda c: c.summaries_written, "compaction", {"marker": "v", "color": "#2ca02c"}),
        (lambda c: not c.summaries_written and _masked(c.events), "masking edit", masking),
        (lambda c: not c.valid, "invalid request", invalid),
    ]
    for keep, name, style in kinds:
        points = [(c.call, c.tokens_with) for c in report.calls if keep(c)]
        if points:
            xs, ys = zip(*points, strict=True)
            style = {"s": 46, "zorder": 5, **style}
            ax.scatter(xs, ys, label=f"{name} ({len(points)})", **style)

    ax.set_ylabel(f"input tokens per call ({report.model})")
    ax.set_xlim(left=min(calls, default=0), right=max(calls, default=1))
    ax.set_ylim(bottom=0, top=max([report.window, *without, *with_]) * 1.08)
    ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _pos: f"{v / 1000:.0f}k"))
    ax.grid(True, alpha=0.25)
    fit = (
        f"\n{t.not_payable_without} of {t.calls} calls do not fit the window without "
        f"contextwarden, {t.not_payable_with} with it"
        if t.not_payable_without
        else ""
    )
    ax.set_title(
        title
        or f"Context per call: {t.input_tokens_without:,} -> {t.input_tokens_with:,} input "
        f"tokens in total ({t.saved_ratio:.1%} fewer){fit}",
        fontsize=11,
    )
    ax.legend(loc="upper left", fontsize=8.5, framealpha=0.9)
    if billed:
        _money_panel(money, report, calls)
        money.set_xlabel("LLM call")
    else:
        ax.set_xlabel("LLM call")
    fig.tight_layout()
    try:
        fig.savefig(target)
    except OSError as exc:
        raise ContextWardenError(
            f"{target}: cannot write the plot ({exc.strerror or exc})"
        ) from None
    finally:
        plt.close(fig)
    return target


def _money_panel(ax: Any, report: ReplayReport, calls: list[int]) -> None:
    """Cumulative billed cost (cache-aware), without and with; the list price goes in the
    title (drawn, it would dwarf the bill)."""
    t = report.totals
    bill_without = list(accumulate(c.billed_cost_without or 0.0 for c in report.calls))
    bill_with = list(accumulate(c.billed_cost_with or 0.0 for c in report.calls))
    _without_and_with(ax, calls, bill_without, bill_with)
    p = report.cache_pricing
    # Dollars escaped: a bare "$" starts matplotlib's mathtext. The figures are the report's
    # totals, the same the text and the JSON give.
    whole = f"\\${t.billed_cost_without or 0:,.4f} -> \\${t.billed_cost_with or 0:,.4f}"
    line = f"Billed input cost, cache-aware, whole session: {whole}"
    if t.not_payable_without and t.payable_billed_cost_without is not None:
        line += (
            f"\non the {t.calls - t.not_payable_without} calls that fit without contextwarden: "
            f"\\${t.payable_billed_cost_without:,.4f} -> "
            f"\\${t.billed_cost_with_on_payable or 0:,.4f}"
        )
    rates = f"read \\${p.read_per_mtok:g}/M, write \\${p.write_per_mtok:g}/M; " if p else ""
    ax.set_title(
        f"{line}\n{rates}cache hit ratio {t.cache_hit_ratio_without:.0%} without, "
        f"{t.cache_hit_ratio_with:.0%} with",
        fontsize=10,
    )
    ax.set_ylabel("cumulative billed input cost (USD)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.25)
    ax.legend(loc="upper left", fontsize=8.5, framealpha=0.9)
