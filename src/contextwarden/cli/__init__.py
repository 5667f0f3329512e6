"""The ``contextwarden`` command line: a thin typer app over the library.

One module per command (``count``, ``inspect``, ``replay``, ``compact``, ``config``; ``proxy``
lives with the proxy). :func:`main` is the console-script entry point and what
``python -m contextwarden`` runs.
"""

from __future__ import annotations

from .app import app

__all__ = ["app", "main"]


def main() -> None:
    """Run the CLI (the ``contextwarden`` console script)."""
    app(prog_name="contextwarden")
