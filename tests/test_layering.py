"""The package's layering, read from its source: no import circle, every import at the top of its
module, no private name imported from another module, and no module-level state that changes.

An import is an edge from the importing module to the module it names and to every package above
that one it does not already sit in (importing ``contextwarden.analysis.shell`` runs
``contextwarden/summarizers/__init__.py``). ``TYPE_CHECKING`` imports count, and so do the names
a package's façade imports on first use (its ``_HOMES`` table) and a literal
``importlib.import_module("contextwarden...")``: a circle closed by any of them is a circle.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "contextwarden"

#: The only packages a function may import (each behind one helper of its module, which says
#: why): optional extras, and bpe-openai's extension module reached without its package's
#: ``__init__`` (``contextwarden._tokens._load_bindings``), asyncio in the async paths only
#: (the caller's event loop has loaded it there; importing the package for it costs 20 ms), and
#: imagesize at the first inline WebP or JPEG image (its import, xml.etree included, costs 20 ms),
#: and hashlib at the first fingerprint (OpenSSL's bindings, 6 ms, are not loaded with the warden).
LAZY_PACKAGES = frozenset(
    {"matplotlib", "redis", "bpe_openai", "asyncio", "imagesize", "yaml", "hashlib"}
)

#: Module-level state that changes, kept on purpose: the tokenizers, loaded once per process and
#: read-only after.
KEPT_STATE = frozenset({("contextwarden._tokens", "_TOKENIZERS")})
#: Module-level caches another change turns into caches of the objects that use them (bounded
#: in bytes as well as entries). Drop an entry when its cache goes; an entry whose cache is gone
#: already is not an error.
CACHES_MOVING = frozenset({("contextwarden._tokens", "_COUNTERS")})

_MUTATORS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "add",
        "update",
        "setdefault",
        "pop",
        "popitem",
        "clear",
        "remove",
        "discard",
        "move_to_end",
        "appendleft",
        "popleft",
    }
)
_CONTAINERS = frozenset(
    {"dict", "list", "set", "OrderedDict", "defaultdict", "deque", "Counter", "bytearray"}
)


@dataclass
class Module:
    name: str
    path: Path
    is_package: bool
    tree: ast.Module
    #: the ids of the nodes run as the module is imported (its body, and inside its top-level
    #: ``if`` / ``try`` blocks)
    top: set[int] = field(default_factory=set)


@functools.cache
def _modules() -> dict[str, Module]:
    """Every module of the package, parsed (on first use, not at collection)."""
    out: dict[str, Module] = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        module = Module(".".join(parts), path, is_package, tree)
        for node in tree.body:
            module.top.add(id(node))
            if isinstance(node, ast.If | ast.Try):
                module.top.update(id(n) for n in ast.walk(node))
        out[module.name] = module
    return out


def _resolve(module: Module, level: int, name: str | None) -> str:
    """The absolute name of ``from <level dots><name> import ...`` in ``module``."""
    if not level:
        return name or ""
    base = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _targets(module: Module, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The package's modules ``node`` names."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = _resolve(module, node.level, node.module)
        names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
    return [n for n in names if n in _modules()]


def _imports(module: Module) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def _by_name(module: Module) -> Iterator[str]:
    """The modules ``module`` imports by name: its façade's ``_HOMES`` and literal
    ``import_module(...)`` calls."""
    for node in ast.walk(module.tree):
        if (
            isinstance(node, ast.Assign | ast.AnnAssign)
            and id(node) in module.top
            and any(
                isinstance(t, ast.Name) and t.id == "_HOMES"
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            )
            and isinstance(node.value, ast.Dict)
        ):
            for value in node.value.values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    dots = len(value.value) - len(value.value.lstrip("."))
                    yield _resolve(module, dots, value.value.lstrip(".") or None)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name | ast.Attribute)
            and (node.func.id if isinstance(node.func, ast.Name) else node.func.attr)
            == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            target = node.args[0].value
            dots = len(target) - len(target.lstrip("."))
            yield _resolve(module, dots, target.lstrip(".") or None) if dots else target


def _graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {name: set() for name in _modules()}
    for name, module in _modules().items():
        own = set(_ancestors(name))
        named = [t for node in _imports(module) for t in _targets(module, node)]
        named += [t for t in _by_name(module) if t in _modules()]
        for target in named:
            edges[name].add(target)
            edges[name].update(a for a in _ancestors(target) if a not in own and a in _modules())
        edges[name].discard(name)
    return edges


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_graph_is_read() -> None:
    edges = _graph()
    assert len(_modules()) > 100
    assert "contextwarden._models" in edges["contextwarden._warden"] | {
        t for s in edges["contextwarden._warden"] for t in edges[s]
    }
    # a package above the module imported is an edge; the importer's own packages are not
    assert "contextwarden.analysis" in edges["contextwarden.layers.mask"]
    assert "contextwarden.layers" not in edges["contextwarden.layers.mask"]
    # the façade's names imported on first use are edges
    assert "contextwarden._warden" in edges["contextwarden"]
    assert "contextwarden.proxy.server" in edges["contextwarden.proxy.cli"]


def test_layers_and_the_analysis_floor_import_no_summarizer() -> None:
    """Layers plan edits and the analysis floor reads histories; both stand below the
    summarizers, which import them (never the other way)."""
    edges = _graph()
    below = [m for m in edges if m.startswith(("contextwarden.layers", "contextwarden.analysis"))]
    assert below
    reaching = {
        m: sorted(t for t in edges[m] if t.startswith("contextwarden.summarizers")) for m in below
    }
    assert {m: ts for m, ts in reaching.items() if ts} == {}


def test_no_import_circle() -> None:
    circles = _circles(_graph())
    assert circles == [], "import circles (TYPE_CHECKING and first-use imports included):\n" + (
        "\n".join(" <-> ".join(c) for c in circles)
    )


def test_no_import_of_the_package_inside_a_function() -> None:
    found = [
        f"{module.path.relative_to(SRC)}:{node.lineno}: {ast.unparse(node)}"
        for module in _modules().values()
        for node in _imports(module)
        if id(node) not in module.top
        and (_targets(module, node) or (isinstance(node, ast.ImportFrom) and node.level))
    ]
    assert found == [], "imports of the package's own modules inside a function:\n" + "\n".join(
        found
    )


def test_every_other_import_is_at_the_top_or_of_an_optional_package_behind_one_helper() -> None:
    found: list[str] = []
    for module in _modules().values():
        helpers: set[str] = set()
        for scope in ast.walk(module.tree):
            if not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(scope):
                if not isinstance(node, ast.Import | ast.ImportFrom):
                    continue
                if isinstance(node, ast.ImportFrom) and node.level:
                    continue  # the package's own: the test above
                names = (
                    [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
                )
                roots = {(n or "").split(".")[0] for n in names}
                where = f"{module.path.relative_to(SRC)}:{node.lineno}: {ast.unparse(node)}"
                if not roots <= LAZY_PACKAGES:
                    found.append(where + " (not an optional package: import it at the top)")
                helpers.add(scope.name)
        if len(helpers) > 1:
            found.append(f"{module.name}: imports inside {sorted(helpers)}: one helper at most")
    assert found == [], "\n".join(found)


def test_no_private_name_is_imported_from_another_module() -> None:
    found = [
        f"{module.path.relative_to(SRC)}:{node.lineno}: {ast.unparse(node)}"
        for module in _modules().values()
        for node in _imports(module)
        if isinstance(node, ast.ImportFrom)
        and (node.level or (node.module or "").split(".")[0] == PACKAGE)
        and any(a.name.startswith("_") and not a.name.startswith("__") for a in node.names)
    ]
    assert found == [], "\n".join(found)


def _module_state(module: Module) -> Iterator[tuple[str, str]]:
    """(name, why) for each module-level name whose value changes after import: a container
    some function of the module mutates, a ``global`` statement, a memoised function, a class
    attribute set by a function."""
    containers: set[str] = set()
    for node in module.tree.body:
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        mutable = isinstance(
            value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp
        ) or (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name | ast.Attribute)
            and (value.func.id if isinstance(value.func, ast.Name) else value.func.attr)
            in _CONTAINERS
        )
        if mutable:
            containers.update(t.id for t in targets if isinstance(t, ast.Name))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                text = ast.unparse(decorator)
                if "cache" in text.split("(")[0]:
                    yield node.name, f"memoised (@{text})"
    for scope in ast.walk(module.tree):
        if not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(scope):
            if isinstance(node, ast.Global):
                yield from ((n, "rebound (global)") for n in node.names)
            target: ast.expr | None = None
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
                for t in (
                    node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
                ):
                    if isinstance(t, ast.Subscript):
                        target = t.value
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _MUTATORS
            ):
                target = node.func.value
            if isinstance(target, ast.Name) and target.id in containers:
                yield target.id, f"mutated at line {node.lineno}"
            if isinstance(node, ast.Assign | ast.AugAssign):
                for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if (
                        isinstance(t, ast.Attribute)
                        and isinstance(t.value, ast.Name)
                        and t.value.id[:1].isupper()
                    ):  # a class's attribute: shared by every instance in the process
                        yield f"{t.value.id}.{t.attr}", f"set at line {node.lineno}"


def test_no_module_level_state_changes_after_import() -> None:
    found = sorted(
        f"{module.name}.{name}: {why}"
        for module in _modules().values()
        for name, why in _module_state(module)
        if (module.name, name) not in KEPT_STATE | CACHES_MOVING
    )
    assert found == [], "module-level state (keep it in the object that uses it):\n" + "\n".join(
        found
    )


@pytest.mark.parametrize(
    "source",
    [
        "_SEEN = {}\ndef f(k):\n    _SEEN[k] = 1\n",
        "_SEEN: list[int] = []\ndef f(k):\n    _SEEN.append(k)\n",
        "N = 0\ndef f():\n    global N\n    N += 1\n",
        "import functools\n@functools.lru_cache(maxsize=8)\ndef f(k):\n    return k\n",
        "from x import Protocol\ndef serve(t):\n    Protocol.timeout = t\n",
    ],
)
def test_the_state_check_sees_each_kind(source: str) -> None:
    tree = ast.parse(source)
    module = Module("m", Path("m.py"), False, tree, {id(n) for n in tree.body})
    assert list(_module_state(module)) != []
