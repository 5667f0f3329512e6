"""The public façade: one sorted ``__all__``, complete, and a light import."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import contextwarden

# Private modules whose ``__all__`` is re-exported whole by the package.
REEXPORTED = [
    name
    for info in pkgutil.iter_modules(contextwarden.__path__)
    if (name := info.name).startswith("_") and name not in {"__main__", "_plot", "_codec"}
]


def test_all_is_sorted_and_unique() -> None:
    assert contextwarden.__all__ == sorted(set(contextwarden.__all__))


def test_all_names_resolve() -> None:
    for name in contextwarden.__all__:
        assert hasattr(contextwarden, name), name


def test_every_private_module_export_is_public() -> None:
    missing = []
    for modname in REEXPORTED:
        module = importlib.import_module(f"contextwarden.{modname}")
        for name in getattr(module, "__all__", []):
            if name not in contextwarden.__all__:
                missing.append(f"{modname}.{name}")
    assert missing == []


def test_import_stays_light() -> None:
    code = (
        "import sys, contextwarden; "
        "heavy = [m for m in ('starlette', 'uvicorn', 'matplotlib', 'openai', 'anthropic', "
        "'typer', 'rich', 'redis', 'numpy') if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
