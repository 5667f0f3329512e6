"""The drop-in proxy: point an agent's base URL here and every request stays inside the window.

How it works: docs/proxy.md (`contextwarden.proxy`).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .config import ProxyConfig
from .stats import ProxyStats, RequestRecord

if TYPE_CHECKING:
    from .app import create_app

__all__ = ["ProxyConfig", "ProxyStats", "RequestRecord", "create_app"]


def __getattr__(name: str) -> Any:
    """``create_app``, from :mod:`contextwarden.proxy.app` (Starlette: the ``proxy`` extra)."""
    if name != "create_app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = import_module(".app", __name__).create_app
    globals()[name] = value  # later lookups skip this function
    return value
