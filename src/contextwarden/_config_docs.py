"""The configuration reference, rendered from :class:`WardenConfig` itself.

``python -m contextwarden config docs > docs/configuration.md`` writes it; a test compares the
committed file with :func:`config_reference` so the two cannot drift. The output depends only on
the classes (no dates, no paths), so it is stable from run to run.
"""

from __future__ import annotations

import json
import types
from typing import Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from ._config import (
    CONFIG_FILENAME,
    ENV_CONFIG_PATH,
    ENV_PREFIX,
    SEED_CONVERSIONS,
    SEED_KEYS,
    WardenConfig,
    model_at,
)

__all__ = ["config_reference"]

_INTRO = f"""\
# Configuration reference

<!-- Generated from WardenConfig by `python -m contextwarden config docs`. Do not edit by hand:
tests/test_config.py fails when this file and the code disagree. -->

Every setting has a default taken from the design seeds, so contextwarden runs with no
configuration at all. Settings come from three layers, each overriding the one before:

1. **A YAML file**: the path given to `load_config(path)` or `--config FILE`; otherwise
   `${ENV_CONFIG_PATH}` when set; otherwise `./{CONFIG_FILENAME}` when it exists. Besides the keys
   below, the file may hold the blocks the seeds define (`context_compaction:` from seed 001,
   `contextGuard:` from seed 004, at the top or under `agent:`); see
   [Seed keys](#seed-keys).
2. **Environment variables** `{ENV_PREFIX}<KEY>`, with `__` between nesting levels:
   `{ENV_PREFIX}RESERVE_TOKENS=4096`, `{ENV_PREFIX}MASK__KEEP_RECENT=3`. Lists take JSON
   (`["a", "b"]`) or comma-separated items; an empty value means "none" for optional settings.
   Variables that name no setting (such as `{ENV_PREFIX}DATA_DIR`) belong to other parts of
   contextwarden and are not read here.
3. **Code**: `load_config(path, reserve_tokens=4096, mask={{"keep_recent": 3}})`, or build
   `WardenConfig(...)` directly. A dict merges into its section; a config object replaces it.

Unknown keys and bad values are errors, never ignored: `load_config` raises one `ConfigError`
listing every problem as `source path: problem`, and `contextwarden config check FILE` prints
them one a line (exit status 1) or `ok`. Every layer has an `enabled` switch.

```python
from contextwarden import Warden, load_config

warden = Warden(load_config("{CONFIG_FILENAME}", reserve_tokens=4096))
```

A complete file with every default:

```yaml
"""


def _type_name(annotation: Any) -> str:
    """A reader's name for a field type: ``integer``, ``integer or null``, ``"a" | "b"``..."""
    origin = get_origin(annotation)
    args = get_args(annotation)
    if annotation is type(None):
        return "null"
    if origin is Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin in (list, tuple):
        inner = args[0] if args else Any
        return f"list of {_type_name(inner)}"
    if origin is dict:
        return f"mapping of {_type_name(args[0])} to {_type_name(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    names = {bool: "boolean", int: "integer", float: "number", str: "string"}
    if isinstance(annotation, type) and annotation in names:
        return names[annotation]
    return str(annotation)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _constraints(info: FieldInfo) -> str:
    """``>= 1``, ``> 0, <= 1``... from the field's annotated-types metadata."""
    parts: list[str] = []
    for meta in info.metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            bound = getattr(meta, attr, None)
            if bound is not None:
                parts.append(f"{sign} {bound}")
    return ", ".join(parts)


def _section(model: type[BaseModel], prefix: tuple[str, ...]) -> list[str]:
    rows = [
        "| key | type | default | environment variable | description |",
        "|---|---|---|---|---|",
    ]
    subs: list[tuple[str, type[BaseModel]]] = []
    for name, info in model.model_fields.items():
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            subs.append((name, ann))
            first = (ann.__doc__ or "").strip().splitlines()[0] if ann.__doc__ else ""
            rows.append(f"| `{name}` | section | | | {_cell(first)} See [`{name}`](#{name}). |")
            continue
        path = (*prefix, name)
        env = ENV_PREFIX + "__".join(p.upper() for p in path)
        kind = _type_name(ann)
        bounds = _constraints(info)
        if bounds:
            kind += f" ({bounds})"
        default = info.get_default(call_default_factory=True, validated_data={})
        default = json.dumps(list(default) if isinstance(default, tuple) else default)
        rows.append(
            f"| `{name}` | {_cell(kind)} | `{_cell(default)}` | `{env}` | "
            f"{_cell(info.description or '')} |"
        )
    out = rows
    for name, sub in subs:
        doc = (sub.__doc__ or "").strip()
        out += ["", f"## `{name}`", "", doc, ""] if doc else ["", f"## `{name}`", ""]
        out += _section(sub, (*prefix, name))
    return out


def _seed_table() -> list[str]:
    rows = [
        "## Seed keys",
        "",
        "The design seeds spell some settings their own way; those blocks are read as aliases.",
        "A file may set one value both ways only when both agree.",
        "",
        "| block | key | sets |",
        "|---|---|---|",
    ]
    for block, table in SEED_KEYS.items():
        where = f"`{block}:`" + ("" if block == "context_compaction" else f" or `agent: {block}:`")
        for key, targets in table.items():
            sets = ", ".join(f"`{'.'.join(t)}`" for t in targets if model_at(t, field=True))
            sets = sets or "not supported yet (reported as an error)"
            if (block, key) in SEED_CONVERSIONS:
                sets += f" ({SEED_CONVERSIONS[block, key][1]})"
            rows.append(f"| {where} | `{key}` | {sets} |")
    return rows


def config_reference() -> str:
    """The Markdown reference of every setting: key, type, bounds, default, environment
    variable and description, section by section, then the seed aliases."""
    data = WardenConfig.model_validate({}).model_dump(mode="json")
    example: str = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=88)
    lines = [_INTRO + example.rstrip("\n"), "```", "", "## Top level", ""]
    lines += _section(WardenConfig, ())
    lines += [""] + _seed_table()
    return "\n".join(lines).rstrip("\n") + "\n"
