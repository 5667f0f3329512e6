"""The public façade: a small sorted ``__all__``, every name documented with an example, the
docs importing only what is public, and an import that loads nothing heavy."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

import contextwarden

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
#: At most this many names in the façade; the rest live in the sub-packages.
MAX_NAMES = 45


def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), re.DOTALL)


def _documented() -> dict[str, list[str]]:
    """For each name imported from ``contextwarden`` in a doc's Python block that also uses it
    (an example, not a bare import), the docs that do."""
    found: dict[str, list[str]] = {}
    for path in DOCS:
        for block in _python_blocks(path):
            tree = ast.parse(block)
            imported = {
                alias.asname or alias.name: alias.name
                for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module == "contextwarden"
                for alias in node.names
            }
            used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
            used |= {
                node.attr
                for node in ast.walk(tree)
                if isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in {"contextwarden", "cw"}
            }
            for local, name in imported.items():
                if local in used:
                    found.setdefault(name, []).append(path.name)
            for name in used & set(contextwarden.__all__):
                if re.search(rf"\b(contextwarden|cw)\.{name}\b", block):
                    found.setdefault(name, []).append(path.name)
    return found


def test_all_is_sorted_unique_and_small() -> None:
    assert contextwarden.__all__ == sorted(set(contextwarden.__all__))
    assert len(contextwarden.__all__) <= MAX_NAMES


def test_all_names_resolve() -> None:
    for name in contextwarden.__all__:
        assert getattr(contextwarden, name) is not None, name
    assert set(dir(contextwarden)) >= set(contextwarden.__all__)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = contextwarden.no_such_name  # type: ignore[attr-defined]


def test_every_public_name_has_an_example_in_the_docs() -> None:
    documented = _documented()
    missing = [name for name in contextwarden.__all__ if name not in documented]
    assert missing == []


def test_docs_and_examples_import_only_public_names() -> None:
    problems = []
    sources = [(p.name, b) for p in DOCS for b in _python_blocks(p)]
    sources += [(p.name, p.read_text(encoding="utf-8")) for p in EXAMPLES]
    for where, code in sources:
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.ImportFrom) and node.module:
                module = node.module
                if module == "contextwarden":
                    problems += [
                        f"{where}: {a.name}"
                        for a in node.names
                        if a.name not in contextwarden.__all__
                    ]
                elif module.startswith("contextwarden."):
                    if any(part.startswith("_") for part in module.split(".")):
                        problems.append(f"{where}: private module {module}")
                    else:
                        try:
                            sub = importlib.import_module(module)
                        except ImportError:  # an integration whose framework is not installed
                            continue
                        problems += [
                            f"{where}: {module}.{a.name}"
                            for a in node.names
                            if not hasattr(sub, a.name)
                        ]
            elif isinstance(node, ast.Import):
                problems += [
                    f"{where}: private module {a.name}"
                    for a in node.names
                    if a.name.startswith("contextwarden.")
                    and any(part.startswith("_") for part in a.name.split("."))
                ]
    assert problems == []


#: Pages not checked for private names in prose: the benchmark method names the internals it
#: measures, and the configuration reference is generated from the config classes' docstrings.
PROSE_EXEMPT = {"benchmarks.md", "configuration.md"}


def test_docs_name_no_private_module() -> None:
    """Prose too: a reader cannot follow ``contextwarden._tokens``."""
    hits = [
        f"{p.name}: {m}"
        for p in DOCS
        if p.name not in PROSE_EXEMPT
        for m in re.findall(r"contextwarden\._\w+", p.read_text(encoding="utf-8"))
    ]
    assert hits == []


HEAVY = (
    "pydantic",
    "httpx",
    "yaml",
    "sqlite3",
    "bpe_openai",
    "starlette",
    "uvicorn",
    "matplotlib",
    "openai",
    "anthropic",
    "typer",
    "rich",
    "redis",
    "numpy",
)


def test_import_loads_nothing_heavy() -> None:
    """``import contextwarden`` loads the package alone: no sub-module of ours (the model
    registry, the tokenizers) and no third-party package; names load on first use."""
    code = (
        "import sys, contextwarden; "
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]; "
        "ours = sorted(m for m in sys.modules if m.startswith('contextwarden.')); "
        "print(heavy, ours)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] []"


def test_a_name_loads_only_what_it_needs() -> None:
    code = (
        "import sys; from contextwarden import count_tokens; "
        "print([m for m in ('starlette', 'uvicorn', 'matplotlib', 'httpx', 'sqlite3', 'typer') "
        "if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_importing_the_warden_loads_no_hashing() -> None:
    """``from contextwarden import Warden`` leaves :mod:`hashlib` and OpenSSL's bindings to the
    first fingerprint."""
    code = (
        "import sys; from contextwarden import Warden; "
        "print([m for m in ('hashlib', '_hashlib') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_default_warden_loads_no_file_reader_store_or_plugin_scan() -> None:
    """``Warden()`` and its first call read no YAML file, open no store and build no pydantic
    validator (whose first build scans every installed distribution for plugins)."""
    code = (
        "import sys; from contextwarden import Warden; "
        "Warden().transform_openai([{'role': 'user', 'content': 'hi'}], model='gpt-4o'); "
        "print([m for m in ('yaml', 'sqlite3', 'httpx', 'importlib.metadata') "
        "if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_version_is_the_installed_distributions() -> None:
    try:
        expected = version("contextwarden")
    except PackageNotFoundError:
        expected = "0+unknown"
    assert contextwarden.__version__ == expected
