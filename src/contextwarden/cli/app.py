"""The typer app: one command per module, registered here and nowhere else."""

from __future__ import annotations

from typing import Annotated

import typer

from .._version import __version__
from ._common import HELP_LAYOUT
from .compact import compact
from .config_cmd import config_app
from .count import count
from .inspect import inspect
from .proxy_cmd import proxy
from .replay import replay_command
from .sessions import sessions_command

__all__ = ["app"]

app = typer.Typer(
    name="contextwarden",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # a message list in a traceback is unreadable
    add_completion=False,
    **HELP_LAYOUT,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"contextwarden {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            callback=_print_version,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """Keep an LLM agent's history inside the context window: count, inspect, replay and
    compact recorded sessions, or run the proxy."""


# The command list shows these whole (click would cut each docstring's first line to fit).
app.command("count", short_help="Tokens by role and by block kind.")(count)
app.command("inspect", short_help="Tokens, the largest messages and the budget.")(inspect)
app.command("replay", short_help="What contextwarden would send and bill, call by call.")(
    replay_command
)
app.command("compact", short_help="Write the compacted history.")(compact)
app.command("sessions", short_help="Your agents' sessions: what each cost and would cost.")(
    sessions_command
)
app.add_typer(config_app, name="config", short_help="Check or print a configuration.")
app.command(
    "proxy",
    short_help="Run the OpenAI/Anthropic-compatible proxy.",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)(proxy)
