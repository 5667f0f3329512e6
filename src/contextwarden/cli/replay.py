"""``contextwarden replay FILE --model M --window N [--json] [--plot out.png]``: what the
session would have sent, call by call, without and with contextwarden."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .._replay import ReplayCall, ReplayReport, count_calls, provider_for, replay
from ._common import (
    ConfigOption,
    FileArgument,
    ModelOption,
    WindowOption,
    err,
    fail,
    guarded,
    out,
    recorded_model,
)
from ._tables import pct

__all__ = ["replay_command"]

#: Files with more calls than this get a progress bar (on a terminal).
PROGRESS_FROM = 20


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:,.4f}"


def _did(c: ReplayCall) -> str:
    """What the warden did on one call, briefly: the lossy step if any, else the lossless."""
    if c.summaries_written:
        return f"[green]compacted[/green] ({c.strategy})"
    if c.compacted:
        return f"summary reused ({c.strategy})"
    parts = [
        f"{label} {c.events[kind]}"
        for kind, label in (
            ("dropped", "dropped"),
            ("truncated", "truncated"),
            ("masked", "masked"),
            ("thinking_stripped", "thinking stripped"),
        )
        if c.events.get(kind)
    ]
    return ", ".join(parts) or "-"


def _calls_table(report: ReplayReport, every: int | None) -> Table:
    calls = report.calls
    step = every or max(1, len(calls) // 20)
    table = Table(
        title=f"Per call (every {step}th, the first of each run of compactions, any invalid)"
        if step > 1
        else "Per call",
        title_justify="left",
    )
    for name in ("call", "without", "with", "saved", "cumulative with"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("warden")
    table.add_column("valid", no_wrap=True)
    shown = [
        c
        for i, c in enumerate(calls)
        if c.call % step == 0
        or not c.valid
        or (c.summaries_written and (i == 0 or not calls[i - 1].summaries_written))
    ]
    if calls and calls[0] not in shown:
        shown.insert(0, calls[0])
    if calls and calls[-1] not in shown:
        shown.append(calls[-1])
    for c in shown:
        table.add_row(
            str(c.call),
            f"{c.tokens_without:,}",
            f"{c.tokens_with:,}",
            pct(c.tokens_without - c.tokens_with, c.tokens_without),
            f"{c.cumulative_with:,}",
            _did(c),
            "[green]yes[/green]" if c.valid else f"[red]no: {escape('; '.join(c.problems))}[/red]",
        )
    return table


def _totals_table(report: ReplayReport) -> Table:
    t = report.totals
    table = Table(title="Totals", title_justify="left", show_header=True)
    table.add_column("")
    table.add_column("without contextwarden", justify="right")
    table.add_column("with contextwarden", justify="right")
    table.add_row("calls", f"{t.calls:,}", f"{t.calls:,}")
    table.add_row(
        "input tokens (cumulative)",
        f"{t.input_tokens_without:,}",
        f"[bold]{t.input_tokens_with:,}[/bold]",
    )
    table.add_row("largest context", f"{t.max_context_without:,}", f"{t.max_context_with:,}")
    price = report.input_price_per_mtok
    label = f"input cost (${price}/M tokens)" if price is not None else "input cost (no price)"
    table.add_row(label, _money(t.cost_without), _money(t.cost_with))
    table.add_row(
        f"calls over the {report.window:,} window",
        f"{t.over_window_without:,}",
        f"{t.over_window_with:,}",
    )
    table.add_row("compactions (summaries written)", "-", f"{t.compactions:,}")
    invalid = f"[red]{t.invalid_requests:,}[/red]" if t.invalid_requests else "[green]0[/green]"
    table.add_row("invalid requests", "-", invalid)
    return table


@guarded
def replay_command(
    file: FileArgument,
    model: ModelOption = None,
    window: WindowOption = None,
    config: ConfigOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print exactly one JSON object: calls and totals.")
    ] = False,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", help="Write a PNG of context size per call (folders created)."),
    ] = None,
    every: Annotated[
        int | None,
        typer.Option("--every", min=1, help="Per-call table: every Nth call (default: ~20 rows)."),
    ] = None,
) -> None:
    """Replay a recorded session call by call and show what contextwarden saves.

    The context of call k is everything before assistant message k; the warden transforms a
    copy of it, as an agent would before each call. Reports tokens sent without and with
    contextwarden, cumulative input tokens, cost at the model's list price, compactions, and
    whether every request is valid for the provider.
    """
    transcript, cfg, name = recorded_model(file, config, model=model, window=window)
    total = count_calls(transcript.messages)
    if total == 0:
        raise fail(f"{file}: no assistant message to replay")
    progress = Progress(
        TextColumn("replaying"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("calls"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=total < PROGRESS_FROM or not err.is_terminal,
    )
    with progress:
        task = progress.add_task("replay", total=total)

        def advance(_call: ReplayCall) -> None:
            progress.advance(task)

        report = replay(
            transcript.messages,
            model=name,
            window=cfg.context_window,
            config=cfg,
            tools=transcript.tools or None,
            provider=provider_for(transcript.format),
            on_call=advance,
        )
    written = None
    if plot is not None:
        from .._plot import plot_replay

        written = plot_replay(report, plot)
    if as_json:
        data = {"file": str(file), "format": transcript.format, **report.as_dict()}
        if written is not None:
            data["plot"] = str(written)
        sys.stdout.write(json.dumps(data) + "\n")
        return
    t = report.totals
    out.print(
        f"[bold]{file}[/bold]: {transcript.format}, {t.calls} calls, model {name}, "
        f"window {report.window:,} (limit {report.limit:,}, trigger {report.trigger:,})"
    )
    out.print(_calls_table(report, every))
    out.print(_totals_table(report))
    colour = "green" if t.saved_ratio > 0 else "yellow"
    out.print(
        f"[bold {colour}]contextwarden saves {t.saved_ratio:.1%} of input tokens[/bold {colour}] "
        f"({t.input_tokens_without - t.input_tokens_with:,} of {t.input_tokens_without:,})"
        + (
            f", {_money((t.cost_without or 0) - (t.cost_with or 0))} at list price"
            if t.cost_without is not None
            else ""
        )
    )
    if written is not None:
        out.print(f"plot written to {written}")
