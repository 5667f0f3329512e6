"""The path a warm call takes through the package: ``python -m bench.call_path``.

One real history of 1,000 messages (``bench._data.real_history``) goes through
``Warden.transform_openai``; one message is appended and the call is traced (``sys.setprofile``)
while it runs again. Of the calls from one contextwarden module into another:

* ``stops``: how many there are (a call inside one module is not a stop);
* ``modules``: how many modules the path enters;
* ``returns``: stops into a module the path entered before and left;
* ``climbs``: stops from a module into one that imports it (a lower module calling back up:
  the import graph says ``B`` uses ``A``, and here ``A`` calls ``B``).

Per module, the stops into it. The figures describe the code's shape (how far a call bounces
between modules), not its speed (``bench/warm_transform.py``).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "contextwarden"
sys.path.insert(0, str(ROOT))


def _module(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def importers() -> dict[str, set[str]]:
    """For each module of the package, the package's modules that import it."""
    out: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        me = _module(path)
        package = me if path.name == "__init__.py" else me.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")
                    up = up[: len(up) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                names = [base, *(f"{base}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if name.startswith("contextwarden"):
                    out.setdefault(name, set()).add(me)
    return out


def trace(history: list[dict[str, Any]], extra: dict[str, Any]) -> list[tuple[str, str]]:
    """The (caller module, callee module) of every call between two package modules made by
    one warm ``transform_openai``."""
    from contextwarden import Warden

    warden = Warden()
    warden.transform_openai(history, model="gpt-4o", window=32_000)
    src = str(SRC)
    names: dict[str, str | None] = {}

    def module_of(frame: FrameType | None) -> str | None:
        if frame is None:
            return None
        file = frame.f_code.co_filename
        if file not in names:
            names[file] = _module(Path(file)) if file.startswith(src) else None
        return names[file]

    hops: list[tuple[str, str]] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event != "call":
            return
        callee = module_of(frame)
        if callee is None:
            return
        back = frame.f_back
        while back is not None and module_of(back) is None:  # through library frames
            back = back.f_back
        caller = module_of(back)
        if caller is not None and caller != callee:
            hops.append((caller, callee))

    sys.setprofile(profile)
    try:
        warden.transform_openai([*history, extra], model="gpt-4o", window=32_000)
    finally:
        sys.setprofile(None)
    return hops


def figures(hops: list[tuple[str, str]]) -> dict[str, Any]:
    users = importers()
    left: set[str] = set()
    current: str | None = None
    returns = climbs = 0
    for caller, callee in hops:
        if current is not None and caller != current:
            left.add(current)
        if callee in left:
            returns += 1
        if caller in users.get(callee, set()):
            pass  # the usual direction: a module calls what it imports
        elif callee in users.get(caller, set()):
            climbs += 1
        left.add(caller)
        current = callee
    per = Counter(callee for _, callee in hops)
    return {
        "stops": len(hops),
        "modules": len({m for hop in hops for m in hop}),
        "returns": returns,
        "climbs": climbs,
        "per_module": dict(per.most_common()),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.call_path", description=__doc__)
    ap.add_argument("--messages", type=int, default=1_000)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    from bench._data import real_history
    from contextwarden.formats import to_openai

    history = to_openai(list(real_history(a.messages + 1)))
    *before, extra = history
    out = figures(trace(before, extra))
    if a.json is not None:
        a.json.write_text(json.dumps(out, indent=1))
    print(
        f"warm transform_openai at {len(before):,} messages: {out['stops']} stops in "
        f"{out['modules']} modules, {out['returns']} returns to a module already left, "
        f"{out['climbs']} climbs back up"
    )
    for name, n in list(out["per_module"].items())[:15]:
        print(f"  {n:4}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
