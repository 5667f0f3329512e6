"""``contextwarden config check FILE``, ``config docs``, ``config show``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
import yaml

from .._config import config_problems
from .._config_docs import config_reference
from ._common import HELP_LAYOUT, ConfigOption, config_for, fail, guarded, out, require_file

__all__ = ["config_app"]

config_app = typer.Typer(
    name="config",
    help="Check a configuration file, print the effective configuration or the reference.",
    no_args_is_help=True,
    **HELP_LAYOUT,
)


@config_app.command("check", short_help="Report every bad key or value of a file.")
@guarded
def check(
    file: Annotated[
        Path, typer.Argument(help="The YAML file to check.", show_default=False, metavar="FILE")
    ],
) -> None:
    """Report every bad key or value in FILE, one line each (exit 1), or print "ok"."""
    require_file(file)
    problems = config_problems(file)
    if problems:
        raise fail("\n".join(problems))
    out.print("ok")


@config_app.command("docs", short_help="Print the configuration reference.")
def docs() -> None:
    """Print the configuration reference (Markdown) generated from WardenConfig."""
    sys.stdout.write(config_reference())


@config_app.command("show", short_help="Print the effective configuration.")
@guarded
def show(config: ConfigOption = None) -> None:
    """Print the effective configuration as YAML: defaults, the file, then CONTEXTWARDEN_*."""
    data = config_for(config).model_dump(mode="json")
    sys.stdout.write(yaml.safe_dump(data, sort_keys=False))
