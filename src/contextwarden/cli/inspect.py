"""``contextwarden inspect FILE [--model M] [--window N]``: where the tokens are, the largest
messages, and a budget bar against the model's window."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from .._breakdown import Breakdown
from .._budget import Budget, reply_tokens
from .._messages import Message
from .._model_overrides import registry_for
from .._policy import tight, tight_warning
from .._task import fixed_part
from ._common import (
    ConfigOption,
    FileArgument,
    FormatOption,
    JsonOption,
    ModelOption,
    Reading,
    RunOption,
    WindowOption,
    guarded,
    one_or_runs,
    out,
    read_session,
)
from ._tables import breakdown_tables, pct
from .count import counted

__all__ = ["budget_bar", "inspect"]

BAR_WIDTH = 50


def budget_bar(used: int, budget: Budget, width: int = BAR_WIDTH) -> Text:
    """``[#####|####:   ]`` scaled to the window: filled up to ``used`` (green under the
    trigger, yellow over it, red over the limit), ``|`` at the trigger, ``:`` at the limit."""
    scale = width / budget.window
    fill = min(width, round(used * scale))
    trigger_at = min(width - 1, round(budget.trigger * scale))
    limit_at = min(width - 1, round(budget.limit * scale))
    colour = "green" if used <= budget.trigger else "yellow" if used <= budget.limit else "red"
    bar = Text("[")
    for i in range(width):
        mark = "|" if i == trigger_at else ":" if i == limit_at else None
        if i < fill:
            bar.append(mark or "#", style=f"bold {colour}")
        else:
            bar.append(mark or " ", style="dim")
    bar.append("]")
    if used > budget.window:
        bar.append(f" +{used - budget.window:,} over the window", style="bold red")
    return bar


def _preview(message: Message, width: int = 60) -> str:
    parts = [message.text]
    parts += [f"{c.name}({c.arguments})" for c in message.tool_calls]
    parts += [r.text for r in message.tool_results]
    parts += [t.thinking for t in message.thinking]
    text = " ".join(" ".join(p.split()) for p in parts if p)
    return text if len(text) <= width else text[: width - 1] + "…"


@guarded
def inspect(
    file: FileArgument,
    model: ModelOption = None,
    window: WindowOption = None,
    config: ConfigOption = None,
    fmt: FormatOption = None,
    run: RunOption = None,
    as_json: JsonOption = False,
    top: Annotated[
        int, typer.Option("--top", min=1, metavar="N", help="How many largest messages.")
    ] = 10,
) -> None:
    """Tokens by role and block kind, the largest messages, and the budget against the window.

    The model picks the tokenizer and the window: --model, else the recording's (an unknown
    model is assumed to have 128,000 tokens, with a warning); --window overrides the window;
    the reserve and trigger come from the config.
    """
    readings = read_session(file, config, model=model, window=window, fmt=fmt, run=run)
    items: list[dict[str, Any]] = []
    for r in readings:
        counter, b = counted(r)
        budget = _budget(r, b)
        room = _room(r, b, budget)
        if as_json:
            largest = [
                {"index": i, "role": r.transcript.messages[i].role, "tokens": b.per_message[i]}
                for i in b.largest(top)
            ]
            items.append(
                {**r.as_json(), "tokenizer": counter.name}
                | b.as_dict()
                | {"largest": largest, "trigger": budget.trigger, "limit": budget.limit}
                | room
            )
            continue
        _print(r, counter.name, b, budget, top, model, window)
        if room["tight"]:
            out.print(f"[yellow]warning:[/yellow] {escape(room['warning'])}")
    if as_json:
        sys.stdout.write(json.dumps(one_or_runs(file, items)) + "\n")


def _budget(r: Reading, b: Breakdown) -> Budget:
    """The budget of the next call: the reserve fitted to the replies so far, as the warden
    fits it."""
    cfg = r.config
    budget = Budget.for_config(cfg, r.model, r.window, overrides=registry_for(cfg))
    longest = max(
        (
            reply_tokens(b.per_message[i], m.usage)
            for i, m in enumerate(r.transcript.messages)
            if m.role == "assistant"
        ),
        default=0,
    )
    return budget.for_reply(longest)


def _room(r: Reading, b: Breakdown, budget: Budget) -> dict[str, Any]:
    """The fixed part (tools, system messages, pins, the task), the growth per call so far,
    and whether that leaves too little room for a summary to buy ``summary_spacing`` calls
    (the warning the warden gives once, as it would give it on this session)."""
    messages = r.transcript.messages
    fixed = b.tools + fixed_part(messages, b.per_message.__getitem__)[1]
    calls = sum(1 for m in messages if m.role == "assistant")
    growth = max(b.total - fixed, 0) / max(calls, 1)
    room = budget.for_reply(0, fixed=fixed)
    narrow = tight(room, growth, r.config.policy)
    out: dict[str, Any] = {"fixed": fixed, "growth_per_call": round(growth), "tight": narrow}
    if narrow:
        out["warning"] = tight_warning(room, growth, r.config.policy)
    return out


def _print(
    r: Reading,
    counter: str,
    b: Breakdown,
    budget: Budget,
    top: int,
    model: str | None,
    window: int | None,
) -> None:
    messages = r.transcript.messages
    out.print(f"{r.title()}; tokens counted with {counter}")
    for table in breakdown_tables(b):
        out.print(table)
    largest = Table(title=f"The {top} largest messages", title_justify="left")
    for name in ("#", "role", "tokens", "share"):
        largest.add_column(name, justify="left" if name == "role" else "right", no_wrap=True)
    room = max(20, out.width - 40)  # what the four narrow columns and borders leave
    largest.add_column("starts with", no_wrap=True, max_width=room)
    for i in b.largest(top):
        tokens = b.per_message[i]
        preview = escape(_preview(messages[i], room))
        largest.add_row(str(i), messages[i].role, f"{tokens:,}", pct(tokens, b.total), preview)
    out.print(largest)
    size = r.window
    out.print(f"[bold]Budget[/bold] ({escape(r.model)}, window {size:,} tokens)")
    out.print(budget_bar(b.total, budget))
    out.print(
        f"used {b.total:,} tokens ({pct(b.total, size)} of the window); "
        f"trigger | {budget.trigger:,} ({r.config.trigger_ratio:.0%}); "
        f"limit : {budget.limit:,} (window - {budget.reserve:,} reserved for the reply"
        + (", fitted to the longest so far)" if budget.fits_replies else ")")
    )
    if b.total > budget.limit:
        options = [f"--model {model}"] if model else []
        options += [f"--window {window}"] if window else []
        again = " ".join(["contextwarden replay", str(r.file), *options])
        out.print(
            f"[red]over the limit by {b.total - budget.limit:,} tokens:[/red] "
            f"`{escape(again)}` shows what the warden would send instead"
        )
