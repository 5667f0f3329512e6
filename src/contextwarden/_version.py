"""The installed distribution's version (``contextwarden.__version__``), read as this module is
imported.

A module of its own because :mod:`importlib.metadata` takes about 30 ms to import, three times
``import contextwarden``: the package imports this module only when ``__version__`` is read.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__: str = version("contextwarden")
except PackageNotFoundError:  # run from a bare source tree
    __version__ = "0+unknown"
