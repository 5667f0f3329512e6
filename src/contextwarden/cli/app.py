"""The typer app: one command per module, registered here and nowhere else."""

from __future__ import annotations

import importlib
from typing import Annotated, Any

import typer

from .._version import __version__
from ._common import HELP_LAYOUT, fail
from .compact import compact
from .config_cmd import config_app
from .count import count
from .inspect import inspect
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


def proxy(ctx: typer.Context) -> None:
    """Run the OpenAI/Anthropic-compatible proxy (see `contextwarden proxy --help`): forwards
    to :mod:`contextwarden.proxy.cli`, imported only when the command runs, so the CLI starts
    without the proxy's server dependencies."""
    try:
        module: Any = importlib.import_module("contextwarden.proxy.cli")
    except ImportError as exc:
        raise fail(
            f"the proxy is not available ({exc}); install it with: "
            "pip install 'contextwarden[proxy]'"
        ) from None
    module.main(list(ctx.args))


app.command(
    "proxy",
    short_help="Run the OpenAI/Anthropic-compatible proxy.",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)(proxy)
