"""The ``contextwarden`` command line: a thin typer app over the library.

One module per command (``count``, ``inspect``, ``replay``, ``compact``, ``config``; ``proxy``
lives with the proxy). :func:`main` is the console-script entry point and what
``python -m contextwarden`` runs.
"""

from __future__ import annotations

import os
import sys

import typer

from .app import app

__all__ = ["app", "main"]


def main() -> None:
    """Run the CLI (the ``contextwarden`` console script).

    A usage error (an unknown command or option, a bad value, a missing argument) is one line on
    stderr naming it and where to find help, exit status 2; bare ``contextwarden`` prints the
    help."""
    try:
        status = app(prog_name="contextwarden", standalone_mode=False)
    except typer.TyperException as exc:
        ctx = getattr(exc, "ctx", None)
        code = getattr(exc, "exit_code", 2)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            typer.echo(ctx.get_help())
            sys.exit(0)
        text = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        where = f" (see {ctx.command_path} --help)" if ctx is not None else ""
        sys.stderr.write(f"error: {' '.join(text.split())}{where}\n")
        sys.exit(code)
    except typer.Abort:  # Ctrl-C at a prompt
        sys.exit(130)
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    if isinstance(status, int) and status:
        sys.exit(status)
