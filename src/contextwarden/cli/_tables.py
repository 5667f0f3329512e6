"""Rich tables shared by ``count`` and ``inspect``."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from .._breakdown import Breakdown, Row

__all__ = ["breakdown_tables", "ordinal", "pct"]


def pct(part: int | float, whole: int | float) -> str:
    """``part`` as a percentage of ``whole`` (``-`` when there is no whole)."""
    return f"{100 * part / whole:.1f}%" if whole else "-"


def ordinal(n: int) -> str:
    """``n`` as an English ordinal: 1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st, 102nd."""
    if n % 100 in (11, 12, 13):
        return f"{n}th"
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th') }"


#: Rows that are overhead, not items: their count column stays blank and out of the total.
_OVERHEAD = frozenset({"framing", "reply priming", "tool definitions"})


def _table(title: str, first: str, unit: str, rows: Sequence[Row], total: int) -> Table:
    items = sum(r.count for r in rows if r.name not in _OVERHEAD)
    table = Table(title=title, title_justify="left", show_footer=True)
    table.add_column(first, footer="total")
    table.add_column(unit, justify="right", footer=f"{items:,}")
    table.add_column("tokens", justify="right", footer=f"{total:,}")
    table.add_column("share", justify="right", footer=pct(total, total))
    for row in rows:
        shown = "" if row.name in _OVERHEAD else f"{row.count:,}"
        table.add_row(row.name, shown, f"{row.tokens:,}", pct(row.tokens, total))
    return table


def breakdown_tables(b: Breakdown) -> tuple[Table, Table]:
    """The by-role and the by-block-kind tables; both add up to the request's total."""
    roles = [*b.by_role, *([Row("tool definitions", 1, b.tools)] if b.tools else [])]
    roles.append(Row("reply priming", 1, b.total - sum(r.tokens for r in roles)))
    return (
        _table("Tokens by role", "role", "messages", roles, b.total),
        _table("Tokens by block kind", "kind", "blocks", b.by_kind, b.total),
    )
