"""``contextwarden inspect FILE --model M [--window N]``: where the tokens are, the largest
messages, and a budget bar against the model's window."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from .._breakdown import token_breakdown
from .._budget import Budget, reply_tokens
from .._messages import Message
from .._model_overrides import registry_for
from .._tokens import get_counter
from ._common import (
    ConfigOption,
    FileArgument,
    ModelOption,
    WindowOption,
    fail,
    guarded,
    load_recording,
    out,
    progress,
)
from ._tables import breakdown_tables, header, pct

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
    top: Annotated[int, typer.Option("--top", min=1, help="How many largest messages.")] = 10,
) -> None:
    """Tokens by role and block kind, the largest messages, and the budget against the window.

    The model picks the tokenizer and the window (default: the recording's model); --window
    overrides the window; the reserve and trigger come from the config.
    """
    transcript, cfg, name = load_recording(file, config, model=model, window=window)
    if name is None and cfg.context_window is None:
        raise fail(f"{file}: the recording names no model; give --model (or --window)")
    models = registry_for(cfg)  # the config's models: section, then the built-in tables
    # before any output: fail early
    budget = Budget.for_config(cfg, name, cfg.context_window, overrides=models)
    size = budget.window
    counter = get_counter(name, kind=cfg.counter, models=models)
    with progress("counting tokens", len(transcript.messages)) as advance:
        b = token_breakdown(
            transcript.messages, counter, tools=transcript.tools or None, on_message=advance
        )
    out.print(header(transcript, counter.name))
    for table in breakdown_tables(b):
        out.print(table)

    largest = Table(title=f"The {top} largest messages", title_justify="left")
    largest.add_column("#", justify="right", no_wrap=True)
    largest.add_column("role", no_wrap=True)
    largest.add_column("tokens", justify="right", no_wrap=True)
    largest.add_column("share", justify="right", no_wrap=True)
    room = max(20, out.width - 40)  # what the four narrow columns and borders leave
    largest.add_column("starts with", no_wrap=True, max_width=room)
    for i in b.largest(top):
        m = transcript.messages[i]
        tokens = b.per_message[i]
        preview = escape(_preview(m, room))
        largest.add_row(str(i), m.role, f"{tokens:,}", pct(tokens, b.total), preview)
    out.print(largest)

    # the reserve the next call keeps: fitted to the replies so far, as the warden fits it
    longest = max(
        (
            reply_tokens(b.per_message[i], m.usage)
            for i, m in enumerate(transcript.messages)
            if m.role == "assistant"
        ),
        default=0,
    )
    budget = budget.for_reply(longest)
    out.print(f"[bold]Budget[/bold] ({name or 'given window'}, window {size:,} tokens)")
    out.print(budget_bar(b.total, budget))
    out.print(
        f"used {b.total:,} tokens ({pct(b.total, size)} of the window); "
        f"trigger | {budget.trigger:,} ({cfg.trigger_ratio:.0%}); "
        f"limit : {budget.limit:,} (window - {budget.reserve:,} reserved for the reply"
        + (", fitted to the longest so far)" if budget.fits_replies and longest else ")")
    )
    if b.total > budget.limit:
        again = f"contextwarden replay {file} --model {name}" + (
            f" --window {size}" if window else ""
        )
        out.print(
            f"[red]over the limit by {b.total - budget.limit:,} tokens:[/red] "
            f"`{escape(again)}` shows what the warden would send instead"
        )
