"""Names a sub-package gives on first use (PEP 562): the module that defines a name is imported
when the name is first read. (The top-level package keeps its own: ``import contextwarden``
loads no module of ours.)"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_names(
    package: str, homes: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` (or a module): ``homes`` maps each name to the
    module that defines it (relative to the package); a name found is put in ``namespace`` (the
    module's globals), so later reads skip the function."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(home, namespace["__package__"]), name)
        namespace[name] = value
        return value

    return __getattr__
