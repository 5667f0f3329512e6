"""The drop-in proxy: point an agent's base URL here and every request stays inside the window.

``create_app(ProxyConfig(upstream=...))`` is a Starlette ASGI app; ``contextwarden proxy`` runs it
on uvicorn. Importing this package does not import Starlette or uvicorn (the ``proxy`` extra):
:func:`create_app` imports them when called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .config import ProxyConfig
from .stats import ProxyStats, RequestRecord

if TYPE_CHECKING:
    from collections.abc import MutableMapping

    from starlette.applications import Starlette

    from .transform import BodyWarden

__all__ = ["ProxyConfig", "ProxyStats", "RequestRecord", "create_app"]


def create_app(
    config: ProxyConfig,
    *,
    warden: BodyWarden | None = None,
    cache: MutableMapping[str, str] | None = None,
) -> Starlette:
    """The proxy ASGI app (see :func:`contextwarden.proxy.app.create_app`); needs the ``proxy``
    extra (starlette, uvicorn)."""
    from .app import create_app as _create_app

    return _create_app(config, warden=warden, cache=cache)
