"""``contextwarden sessions [FOLDER...] [--json] [--plot spend.png] [--no-estimate]``: the
agents' sessions on this machine, what each was billed and would have been billed with
contextwarden, with totals per day and agent (see docs/sessions.md)."""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from .._plot import pyplot
from ..store.sqlite import data_dir
from ..transcripts.inventory import SessionSummary, find_session_files, summarize_files
from ._common import (
    FormatOption,
    ModelOption,
    WindowOption,
    check_format,
    check_output_path,
    err,
    fail,
    guarded,
    out,
    plural,
    progress,
    warn_about,
)

__all__ = ["sessions_command"]


def _money(value: float | None) -> str:
    """Dollars: cents above a dollar, four decimals below (a short session costs fractions)."""
    if value is None:
        return "-"
    return f"${value:,.2f}" if abs(value) >= 1 else f"${value:.4f}"


def _tokens(count: int) -> str:
    """A token count briefly: ``950``, ``12.3k``, ``46.7M``."""
    if count >= 1_000_000:
        return f"{count / 1_000_000:,.1f}M"
    if count >= 10_000:
        return f"{count / 1000:,.0f}k"
    return f"{count:,}"


def _saved(billed: float | None, ours: float | None) -> str:
    if billed is None or ours is None or not billed:
        return "-"
    ratio = 1 - ours / billed
    if ratio >= 0:
        return f"[green]{ratio:.1%}[/green]"
    return f"[red]{ratio:.1%}[/red]"  # negative: dearer with contextwarden


def totals_by_day_and_agent(rows: list[SessionSummary]) -> list[dict[str, Any]]:
    """Sessions, calls, tokens, billed and contextwarden's bill summed per (day, agent)."""
    groups: dict[tuple[str, str], dict[str, Any]] = defaultdict(
        lambda: {"sessions": 0, "calls": 0, "tokens": 0, "billed": None, "contextwarden": None}
    )
    for s in rows:
        if s.error is not None:
            continue
        g = groups[(s.day, s.agent)]
        g["sessions"] += 1
        g["calls"] += s.calls
        g["tokens"] += s.tokens
        for key, value in (("billed", s.billed), ("contextwarden", s.contextwarden)):
            if value is not None:
                g[key] = (g[key] or 0.0) + value
    return [
        {"day": day, "agent": agent, **values} for (day, agent), values in sorted(groups.items())
    ]


def _sessions_table(rows: list[SessionSummary], width: int, terminal: bool) -> Table:
    """One row per session; the file's name is shown on terminals of 120 columns or more and
    in a pipe or a file, where nothing is cut."""
    wide = width >= 120 or not terminal
    table = Table(
        title="Sessions",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=0,  # the box's column rule is the one space between columns
        show_edge=False,
    )
    names = ["started", "agent", "model", "calls", "tokens", "billed", "with cw", "saved"]
    for name in names + ["session"] if wide else names:
        named = name in ("started", "agent", "model", "session")
        cut = terminal and name in ("model", "session")
        table.add_column(
            name,
            justify="left" if named else "right",
            no_wrap=True,
            overflow="ellipsis",
            max_width=(24 if wide else 16) if cut else None,
        )
    for s in rows:
        if s.error is not None:
            continue
        billed = _money(s.billed) + ("" if s.billed_basis == "recorded-usage" else "*")
        if s.billed is None:
            billed = "-"
        where = Path(s.path).name + (f" (run {s.run}/{s.runs})" if s.runs > 1 else "")
        cells = [
            (s.started or "?")[: 16 if wide else 10].replace("T", " "),
            s.agent,
            escape(s.model or "?"),
            f"{s.calls:,}",
            _tokens(s.tokens),
            billed,
            _money(s.contextwarden),
            _saved(s.billed, s.contextwarden),
        ]
        table.add_row(*cells, *([escape(where)] if wide else []))
    table.caption = (
        "billed: the provider usage the session records (* estimated from what the agent "
        "sent, calls over the window left out); with cw: with contextwarden, replayed at the "
        "model's window, against the same baseline; saved < 0: dearer"
    )
    table.caption_justify = "left"
    return table


def _totals_table(totals: list[dict[str, Any]]) -> Table:
    table = Table(title="Per day and agent", title_justify="left", box=box.SIMPLE_HEAD)
    for name in ("day", "agent", "sessions", "calls", "tokens", "billed", "with cw"):
        table.add_column(
            name, justify="left" if name in ("day", "agent") else "right", no_wrap=True
        )
    for g in totals:
        table.add_row(
            g["day"],
            g["agent"],
            f"{g['sessions']:,}",
            f"{g['calls']:,}",
            _tokens(g["tokens"]),
            _money(g["billed"]),
            _money(g["contextwarden"]),
        )
    return table


def plot_spend(rows: list[SessionSummary], path: Path) -> Path:
    """A PNG of spend per day, billed and with contextwarden, stacked by agent for the bill."""
    plt = pyplot()
    totals = totals_by_day_and_agent(rows)
    days = sorted({g["day"] for g in totals if g["day"] != "?"})
    agents = sorted({g["agent"] for g in totals})
    fig, ax = plt.subplots(figsize=(10, 4.5))
    bottom = [0.0] * len(days)
    for agent in agents:
        values = [
            sum(g["billed"] or 0.0 for g in totals if g["day"] == d and g["agent"] == agent)
            for d in days
        ]
        ax.bar(days, values, bottom=bottom, label=f"{agent} (billed)")
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ours = [sum(g["contextwarden"] or 0.0 for g in totals if g["day"] == d) for d in days]
    if any(ours):
        ax.plot(days, ours, color="black", marker="o", label="with contextwarden")
    ax.set_ylabel("USD (input, cache-aware)")
    ax.set_title("Spend per day")
    ax.legend(loc="upper left", fontsize="small")
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


@guarded
def sessions_command(
    folders: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Folders (or files) to look in; default: where Claude Code, Codex CLI, Gemini "
            "CLI, pi and Cline keep their sessions under your home folder.",
            show_default=False,
            metavar="FOLDER",
        ),
    ] = None,
    model: ModelOption = None,
    window: WindowOption = None,
    fmt: FormatOption = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print one JSON object: sessions, totals, unreadable files."),
    ] = False,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot", metavar="PNG", help="Write a PNG of spend per day (folders created)."
        ),
    ] = None,
    estimate: Annotated[
        bool,
        typer.Option(
            "--estimate/--no-estimate",
            help="Replay each session to show what contextwarden would have billed (the slow "
            "part; results are cached per file).",
        ),
    ] = True,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers", min=1, metavar="N", help="Worker processes (default: one per CPU)."
        ),
    ] = None,
    cache: Annotated[
        bool,
        typer.Option(
            "--cache/--no-cache",
            help="Reuse the figures of files unchanged since the last run "
            "($CONTEXTWARDEN_DATA_DIR/sessions-cache.json).",
        ),
    ] = True,
) -> None:
    """List the agent sessions on this machine with what each cost and would cost.

    For each session: agent, model, calls, prompt tokens, what it was billed (its recorded
    usage, else estimated from what the agent sent) and what contextwarden would have billed
    at the model's window; then totals per day and agent. The model and window of each
    session are settled as count, inspect, replay and compact settle them (--model and
    --window apply to every session).
    """
    for folder in folders or ():
        if not folder.exists():
            raise fail(f"{folder}: no such file or folder", 2)
    check_format(fmt)
    plot = check_output_path(plot) if plot is not None else None
    files = find_session_files(folders or ())
    with progress("reading sessions", len(files)) as advance:
        rows = summarize_files(
            files,
            estimate=estimate,
            workers=workers,
            cache=data_dir() / "sessions-cache.json" if cache else None,
            on_done=lambda _path, _rows: advance(1),
            model=model,
            window=window,
            format=fmt,  # type: ignore[arg-type]
        )
    rows.sort(key=lambda s: (s.started or "", s.path, s.run))
    errors = [s for s in rows if s.error is not None]
    good = [s for s in rows if s.error is None]
    totals = totals_by_day_and_agent(good)
    written = plot_spend(good, plot) if plot is not None else None
    if as_json:
        data: dict[str, Any] = {
            "sessions": [s.as_dict() for s in good],
            "totals": totals,
            "unreadable": [{"path": s.path, "error": s.error} for s in errors],
            "billed": sum(s.billed or 0.0 for s in good),
            "contextwarden": sum(s.contextwarden or 0.0 for s in good) if estimate else None,
        }
        if written is not None:
            data["plot"] = str(written)
        sys.stdout.write(json.dumps(data) + "\n")
        return
    if not rows:
        where = ", ".join(map(str, folders)) if folders else "the agents' folders in your home"
        out.print(f"no sessions found in {escape(where)}")
        return
    out.print(_sessions_table(good, out.width, out.is_terminal))
    out.print(_totals_table(totals))
    billed = sum(s.billed or 0.0 for s in good)
    line = f"{plural(len(good), 'session')}, billed {_money(billed)}"
    both = [s for s in good if s.billed is not None and s.contextwarden is not None]
    if estimate and both:
        paid = sum(s.billed or 0.0 for s in both)
        ours = sum(s.contextwarden or 0.0 for s in both)
        line += (
            f"; on the {len(both):,} priced sessions {_money(paid)} -> {_money(ours)} "
            f"with contextwarden ({_saved(paid, ours)})"
        )
    out.print(line)
    for s in good:  # what count, inspect, replay and compact say about the file, once
        if s.run == 1 or s.runs == 1:
            warn_about(Path(s.path), s.warnings, (s.assumed,) if s.assumed else ())
    for s in errors:
        err.print(f"[yellow]skipped:[/yellow] {escape(s.error or '')}", soft_wrap=True)
    if written is not None:
        out.print(f"plot written to {escape(str(written))}")
