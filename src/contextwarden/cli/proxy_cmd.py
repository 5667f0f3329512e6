"""``contextwarden proxy ...``: forwards to :mod:`contextwarden.proxy.cli`, imported only when
the command runs, so the CLI starts without the proxy's server dependencies."""

from __future__ import annotations

import importlib
from typing import Any

import typer

from ._common import fail

__all__ = ["proxy"]


def proxy(ctx: typer.Context) -> None:
    """Run the OpenAI/Anthropic-compatible proxy (see `contextwarden proxy --help`)."""
    try:
        module: Any = importlib.import_module("contextwarden.proxy.cli")
    except ImportError as exc:
        raise fail(
            f"the proxy is not available ({exc}); install it with: "
            "pip install 'contextwarden[proxy]'"
        ) from None
    module.main(list(ctx.args))
