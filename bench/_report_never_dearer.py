"""The section of ``docs/benchmarks.md`` for replay's payable comparison
(``bench/never_dearer.py --json bench/results/never_dearer.json``): every recording at the
model's window and at 32k, contextwarden's bill against the payable baseline's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["never_dearer_section"]

Json = dict[str, Any]


def _money(v: float | None) -> str:
    return "–" if v is None else f"${v:,.4f}"


def never_dearer_section(rows: Sequence[Json]) -> str:
    """A table of the runs with payable calls, and what is dearer."""
    shown = [r for r in rows if r.get("payable") and r.get("ratio") is not None]
    dearer = [r for r in shown if r.get("dearer")]
    lines = [
        "## Never dearer than the payable baseline",
        "",
        "`python -m bench.never_dearer` replays every recording as `contextwarden replay` does, "
        "at the model's own window and at 32k, at the model's cache prices (`*`: no price "
        "known, Anthropic's ratios on a nominal $1 per million): the baseline is what the agent "
        "sent, its own compactions applied, and a call that does not fit the window with room "
        "for its reply is not payable. Below, the bills on the payable calls and their ratio "
        "(contextwarden / baseline).",
        "",
        "| recording | run | model | window | payable calls | baseline | with contextwarden "
        "| ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in shown:
        lines.append(
            f"| {r['name']} | {r['run']} | {r['model']} | {r['window']:,} | "
            f"{r['payable']} of {r['calls']} | {_money(r['without'])} | {_money(r['with_'])} | "
            f"{r['ratio']:.3f}{' (dearer)' if r.get('dearer') else ''} |"
        )
    lines += [
        "",
        f"{len(shown)} runs with payable calls, {len(dearer)} dearer"
        + (
            ": "
            + "; ".join(f"{r['name']} at {r['window']:,}, {r['ratio'] - 1:+.1%}" for r in dearer)
            if dearer
            else ""
        )
        + f"; invalid requests: {sum(int(r.get('invalid') or 0) for r in rows)}.",
    ]
    return "\n".join(lines)
