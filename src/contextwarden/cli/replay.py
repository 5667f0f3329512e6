"""``contextwarden replay FILE [--model M] [--window N] [--run N] [--json] [--plot out.png]``:
what the session would have sent and been billed, call by call, without and with contextwarden
(the replay itself is :func:`contextwarden._replay.replay`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from .._plot import plot_replay
from .._replay import PricingMode, ReplayCall, ReplayReport, count_calls, replay
from .._transcripts import provider_for
from ._common import (
    ConfigOption,
    FileArgument,
    FormatOption,
    ModelOption,
    Reading,
    RunOption,
    SummarizerOption,
    WindowOption,
    check_output_path,
    fail,
    guarded,
    one_or_runs,
    out,
    plural,
    progress,
    read_session,
)
from ._tables import ordinal, pct

__all__ = ["replay_command"]

#: Files with more calls than this get a progress bar (on a terminal).
PROGRESS_FROM = 20


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:,.4f}"


def _cache(cached: int, written: int) -> str:
    """Tokens read from the cache / written to it, in thousands (``12.3k/0.4k``)."""
    return f"{cached / 1000:,.1f}k/{written / 1000:,.1f}k"


def _prices(report: ReplayReport) -> str:
    """Whose cache prices bill the replay, for the headline and the totals."""
    if report.pricing == "anthropic":
        return f"Anthropic's cache ratios on {report.model}'s input price"
    if report.pricing == "custom" or report.cache_pricing is None:
        return "the given cache prices"
    return f"{report.model}'s prices"


def _price_detail(report: ReplayReport) -> str:
    p = report.cache_pricing
    if p is None:
        return "no price known"
    ttl = "no TTL" if p.ttl_s is None else f"TTL {p.ttl_s:g} s"
    return (
        f"read ${p.read_per_mtok:g}, write ${p.write_per_mtok:g}, "
        f"input ${p.input_per_mtok:g} per M; {ttl}"
    )


def _did(c: ReplayCall) -> str:
    """What the warden did on one call, briefly: the lossy step if any, else the lossless."""
    if c.summaries_written:
        return f"[green]compacted[/green] ({c.strategy})"
    if c.compacted:
        return f"summary reused ({c.strategy})"
    kinds = ("dropped", "truncated", "masked", "thinking_stripped")
    parts = [f"{kind.replace('_', ' ')} {c.events[kind]}" for kind in kinds if c.events.get(kind)]
    return ", ".join(parts) or "-"


def _calls_table(report: ReplayReport, every: int | None, width: int) -> Table:
    """The per-call table; under 100 columns the "saved" column (tokens without/with) is left
    out so the rest fits an 80-column terminal."""
    calls = report.calls
    narrow = width < 100
    step = every or max(1, len(calls) // 20)
    table = Table(
        title=f"Per call (every {ordinal(step)}, the first of each run of compactions, any invalid)"
        if step > 1
        else "Per call",
        title_justify="left",
        box=box.SIMPLE_HEAD,  # no column rules: ten columns fit a narrow terminal
        padding=(0, 1),
        collapse_padding=True,
        pad_edge=False,
        caption="read/written: tokens read from the provider's prompt cache / written to it",
        caption_justify="left",
    )
    billed = report.cache_pricing is not None
    names = ["\n\ncall", "\ntokens\nwithout", "\ntokens\nwith", *([] if narrow else ["\n\nsaved"])]
    # Read from the provider's cache / written to it: what the bill is made of.
    names += ["read/\nwritten\nwithout", "read/\nwritten\nwith"]
    names += ["\nbilled\nwithout", "\nbilled\nwith"] if billed else []
    for name in names:
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("\n\nwarden", min_width=7, overflow="fold")
    table.add_column("\n\nvalid", no_wrap=True)
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
        money = [_money(c.billed_cost_without), _money(c.billed_cost_with)] if billed else []
        saved = [] if narrow else [pct(c.tokens_without - c.tokens_with, c.tokens_without)]
        table.add_row(
            str(c.call),
            f"{c.tokens_without:,}",
            f"{c.tokens_with:,}",
            *saved,
            _cache(c.cached_without, c.written_without),
            _cache(c.cached_with, c.written_with),
            *money,
            _did(c),
            "[green]yes[/green]" if c.valid else f"[red]no: {escape('; '.join(c.problems))}[/red]",
        )
    return table


def _totals_table(report: ReplayReport) -> Table:
    t = report.totals
    caption = f"billed: {_prices(report)} ({_price_detail(report)})"
    table = Table(title="Totals", title_justify="left", caption=caption, caption_justify="left")
    table.add_column("")
    table.add_column("without contextwarden", justify="right")
    table.add_column("with contextwarden", justify="right")
    table.add_row("calls", f"{t.calls:,}", f"{t.calls:,}")
    table.add_row(
        f"calls that do not fit the {report.window:,}-token window with room for the reply",
        f"{t.not_payable_without:,}",
        f"{t.not_payable_with:,}",
    )
    table.add_row(
        "input tokens (cumulative)",
        f"{t.input_tokens_without:,}",
        f"[bold]{t.input_tokens_with:,}[/bold]",
    )
    table.add_row("largest context", f"{t.max_context_without:,}", f"{t.max_context_with:,}")
    table.add_row(
        "[bold]billed input cost[/bold], whole session (cache-aware)",
        _money(t.billed_cost_without),
        f"[bold]{_money(t.billed_cost_with)}[/bold]",
    )
    if t.not_payable_without:
        table.add_row(
            f"billed input cost, the {plural(t.calls - t.not_payable_without, 'call')} that "
            "fit without contextwarden",
            _money(t.payable_billed_cost_without),
            _money(t.billed_cost_with_on_payable),
        )
    table.add_row(
        "cache hit ratio (tokens read)",
        f"{t.cache_hit_ratio_without:.1%}",
        f"{t.cache_hit_ratio_with:.1%}",
    )
    price = report.input_price_per_mtok
    label = (
        f"input cost at list price (${price:g}/M, no cache)"
        if price is not None
        else "input cost at list price (no price)"
    )
    table.add_row(label, _money(t.cost_without), _money(t.cost_with))
    table.add_row(
        "compactions (summaries written)",
        f"{t.agent_compactions:,} by the agent",
        f"{t.compactions:,}",
    )
    if t.recorded_calls and t.baseline != "recorded-usage":  # else it is the bill above
        table.add_row(
            f"recorded usage ({plural(t.recorded_calls, 'call')})",
            _money(t.recorded_billed_cost),
            "-",
        )
    invalid = f"[red]{t.invalid_requests:,}[/red]" if t.invalid_requests else "[green]0[/green]"
    table.add_row("invalid requests", "-", invalid)
    return table


BASELINES = {
    "recorded-usage": "the provider usage the recording states for every call",
    "agent-compactions": "the agent's history with its own compactions applied (estimated)",
    "full-history": "the recorded history as the agent sent it (it made no compaction)",
}


def baseline_line(report: ReplayReport) -> str:
    """Which baseline the report used."""
    line = f"without contextwarden: {BASELINES[report.totals.baseline]}"
    if report.totals.baseline == "recorded-usage":
        line += "; with it: the recorded bill plus the difference it makes"
    return line


def _change(before: float, after: float) -> str:
    """``12.3% less``, ``the same``, ``4.5% more``: what ``after`` bills beside ``before``."""
    ratio = 1 - after / before if before else 0.0
    if abs(ratio) < 0.0005:
        return "the same"
    return f"{abs(ratio):.1%} {'less' if ratio > 0 else 'more'}"


def headline(report: ReplayReport, named: bool = True) -> str:
    """The closing line, in the order a newcomer asks: did every call fit, what did the calls
    that could be sent anyway cost, what does the whole session cost, and the tokens.
    ``named``: the recording (or the user) named the model."""
    t = report.totals
    parts: list[str] = []
    unchanged = not (t.saved_ratio or t.compactions or t.not_payable_without or t.invalid_requests)
    if unchanged:
        parts.append(
            f"contextwarden left every request as the agent sent it: all "
            f"{plural(t.calls, 'call')} fit the {report.window:,}-token window"
        )
    payable = t.calls - t.not_payable_without
    if t.not_payable_without:
        made = t.not_payable_without - t.not_payable_with
        parts.append(
            f"contextwarden made {made:,} of the {plural(t.calls, 'call')} fit the "
            f"{report.window:,}-token window that did not fit without it"
            + (f" ({t.not_payable_with:,} still do not)" if t.not_payable_with else "")
        )
    p = report.cache_pricing
    if not named:
        parts.append("no bill: the recording names no model (give --model)")
    elif p is None or t.billed_cost_without is None or t.payable_billed_cost_without is None:
        parts.append(f"no bill: no price known for {report.model}")
    elif p.input_per_mtok == 0:
        parts.append(f"no bill: {report.model} is billed at $0 (a local model)")
    else:
        on = t.billed_cost_with_on_payable or 0.0
        change = _change(t.payable_billed_cost_without, on)
        money = f"{_money(t.payable_billed_cost_without)} -> {_money(on)}"
        if t.not_payable_without:
            parts.append(
                f"on the {plural(payable, 'call')} that fit without it, it bills {change} "
                f"({money}); the whole session costs {_money(t.billed_cost_with)} with it "
                f"({_money(t.billed_cost_without)} had every call fit without it)"
            )
        else:
            who = "contextwarden bills" if not parts else "billed"
            parts.append(f"{who} {change} ({money})")
        parts[-1] += f", cache-aware at {_prices(report)}"
    tokens = (
        f"{t.saved_ratio:.1%} fewer input tokens "
        f"({t.input_tokens_without - t.input_tokens_with:,} of {t.input_tokens_without:,})"
    )
    if not unchanged:
        parts.append(tokens if t.saved_ratio >= 0 else f"{-t.saved_ratio:.1%} more input tokens")
    colour = "yellow" if t.dearer or t.invalid_requests or t.not_payable_with else "green"
    if t.invalid_requests:
        parts.append(f"{plural(t.invalid_requests, 'invalid request')}")
    return f"[bold {colour}]{escape('; '.join(parts))}[/bold {colour}]"


@guarded
def replay_command(
    file: FileArgument,
    model: ModelOption = None,
    window: WindowOption = None,
    config: ConfigOption = None,
    summarizer: SummarizerOption = None,
    fmt: FormatOption = None,
    run: RunOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print exactly one JSON object: calls and totals.")
    ] = False,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            metavar="PNG",
            help="Write a PNG of context size and bill per call (folders created).",
        ),
    ] = None,
    every: Annotated[
        int | None,
        typer.Option(
            "--every",
            min=1,
            metavar="N",
            help="Per-call table: every Nth call (default: about 20 rows).",
        ),
    ] = None,
    pricing: Annotated[
        Literal["model", "anthropic"],
        typer.Option(
            "--pricing",
            help="Cache prices for the billed cost: the model's own (model) or Anthropic's "
            "ratios on its input price, read 0.1x and write 1.25x (anthropic).",
        ),
    ] = "model",
) -> None:
    """Replay a recorded session call by call and show what contextwarden saves.

    The context of call k is everything before assistant message k; the warden transforms a
    copy of it, as an agent would before each call. Reports tokens sent without contextwarden
    (what the agent really sent: its own compactions applied, its recorded usage where the file
    has it) and with it, the tokens a provider's prompt cache would read and write, the billed
    input cost (cache-aware), the calls that could not have been sent without it, compactions,
    and whether every request is valid for the provider.
    """
    plot = check_output_path(plot, inputs=(file,)) if plot is not None else None
    readings = read_session(
        file, config, model=model, window=window, fmt=fmt, run=run, summarizer=summarizer
    )
    playable = [r for r in readings if count_calls(r.transcript.messages)]
    if not playable:
        raise fail(f"{file}: no assistant message to replay")
    reports = [(r, _replay_one(r, pricing)) for r in playable]
    written = None
    if plot is not None:
        written = plot_replay(reports[-1][1], plot)
    if as_json:
        data = one_or_runs(file, [{**r.as_json(), **report.as_dict()} for r, report in reports])
        if written is not None:
            data["plot"] = str(written)
        sys.stdout.write(json.dumps(data) + "\n")
        return
    for r, report in reports:
        _print_report(r, report, every)
    if written is not None:
        out.print(f"plot written to {escape(str(written))}")


def _replay_one(r: Reading, pricing: str) -> ReplayReport:
    t = r.transcript
    mode: PricingMode = "anthropic" if pricing == "anthropic" else "model"
    total = count_calls(t.messages)
    with progress(
        f"replaying {total:,} calls", total if total >= PROGRESS_FROM else None
    ) as advance:
        return replay(
            t.messages,
            model=r.model,
            window=r.window,
            config=r.config,
            tools=t.tools or None,
            provider=provider_for(t.format),
            on_call=lambda _call: advance(1),
            pricing=mode,
            compactions=t.compactions,
        )


def _print_report(r: Reading, report: ReplayReport, every: int | None) -> None:
    out.print(
        f"{r.title()}: {plural(report.totals.calls, 'call')} (limit {report.limit:,}, "
        f"trigger {report.trigger:,})"
    )
    out.print(_calls_table(report, every, out.width))
    out.print(_totals_table(report))
    out.print(escape(baseline_line(report)))
    out.print(headline(report, named=r.transcript.model is not None or r.model != "unknown"))
