"""The typer app: one command per module, registered here and nowhere else."""

from __future__ import annotations

from typing import Annotated

import typer

from .._version import __version__
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
    help="Keep an LLM agent's history inside the context window: count, inspect, replay and "
    "compact recorded sessions.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # a message list in a traceback is unreadable
    add_completion=False,
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


app.command("count")(count)
app.command("inspect")(inspect)
app.command("replay")(replay_command)
app.command("compact")(compact)
app.command("sessions")(sessions_command)
app.add_typer(config_app, name="config")
app.command(
    "proxy",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)(proxy)
