"""The section of ``docs/benchmarks.md`` for the judges' measures (``bench/measures_run.py``):
``bench/results/measures.json`` side by side with the peers, the figures before the summarizer
changes (``measures_before.json``) and the masking experiment (``mask_experiment.json``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["measures_section"]

Json = dict[str, Any]

#: The issue's bars, on ``Warden()`` defaults: (window, what, bar, also).
TARGETS = (
    (16_000, "name recall", 0.85, "tokens sent at most 35% of raw"),
    (32_000, "name recall", 0.93, "tokens sent at most 50% of raw"),
    (128_000, "edit recall", 0.70, ""),
    (32_000, "edit recall", 0.45, ""),
)


def _w(window: int) -> str:
    return "128k (model)" if window == 128_000 else f"{window // 1000}k"


def _row(a: Json) -> list[str]:
    dearer = a.get("dearer_than_raw") or []
    return [
        _w(a["window"]),
        a["sender"],
        f"{a['name_recall']:.1%} ({a['names_wanted']:.0f})",
        f"{a['edit_recall']:.1%} ({a['edits_wanted']:.0f})" if a["edits_wanted"] else "–",
        f"{a['tokens_share']:.1%}",
        f"{a['billed_saved']:.1%}",
        f"{a['invalid']:.0f}",
        str(len(dearer)) if a["sender"] != "raw" else "–",
    ]


def _table(aggs: Sequence[Json], skip_raw: bool = True) -> str:
    head = [
        "window",
        "sender",
        "name recall (names)",
        "edit recall (lines)",
        "tokens sent / raw",
        "billed saved",
        "invalid requests",
        "recordings dearer than raw",
    ]
    rows = [_row(a) for a in aggs if not (skip_raw and a["sender"] == "raw")]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _cell(aggs: Sequence[Json], window: int, sender: str) -> Json | None:
    return next((a for a in aggs if a["window"] == window and a["sender"] == sender), None)


def _targets(m: Json) -> list[str]:
    out: list[str] = []
    for window, what, bar, also in TARGETS:
        a = _cell(m["all"], window, "contextwarden")
        if a is None:
            continue
        got = a["name_recall"] if what == "name recall" else a["edit_recall"]
        extra = f"; tokens sent {a['tokens_share']:.1%}" if also else ""
        ok = got >= bar and (not also or a["tokens_share"] <= (0.35 if window == 16_000 else 0.5))
        out.append(
            f"- {what} at {_w(window)}: {got:.1%}{extra} (bar {bar:.0%}{', ' + also if also else ''}): "
            f"{'met' if ok else '**not met**'}"
        )
    for window, bar in ((128_000, 0.17), (32_000, 0.38)):
        a = _cell(m["judged"], window, "contextwarden")
        if a is not None:
            out.append(
                f"- billed saved on the mini-swe-agent recordings at {_w(window)}: "
                f"{a['billed_saved']:.1%} (bar {bar:.0%}): "
                f"{'met' if a['billed_saved'] >= bar else '**not met**'}"
            )
    dearer = sorted(
        {r for a in m["all"] if a["sender"] == "contextwarden" for r in a["dearer_than_raw"]}
    )
    out.append("- recordings dearer than raw: " + (", ".join(dearer) if dearer else "none"))
    return out


def measures_section(m: Json, before: Json | None, exp: Json | None) -> str:
    """The Markdown of the section."""
    parts = [
        "## The judges' measures, side by side with the peers",
        "",
        "`python -m bench.measures_run` (also run by `python -m bench`): the judges' "
        "`../shared/measures/measures.py`, imported by path and unchanged, on every recording "
        "in `../shared/data/trajectories` converted to plain OpenAI chat lists "
        "(`bench/_recordings.py`; mini-swe-agent's final `exit` record dropped). One sender per "
        "recording, called before every assistant message with the history so far (the judges' "
        "`requests`); replay model gpt-4o (o200k counts). `contextwarden` is `Warden()` defaults "
        "through `transform_openai`, built by the judges' own `_contextwarden` (its summaries are "
        "extractive, in process: no summary calls to add to the bill). The peers get the "
        "warden's trigger and target for the window. Name recall and edit recall are the "
        "judges' (held / wanted, counts in brackets); tokens sent and billed cost (cache reads "
        "0.1x, writes 1.25x) are against sending the whole history; invalid requests have an "
        "orphan tool call or result.",
        "",
        "### All recordings",
        "",
        _table(m["all"]),
        "",
        "### The mini-swe-agent recordings (the billed-cost bars)",
        "",
        _table(m["judged"]),
        "",
        "### Against the issue's bars (`Warden()` defaults)",
        "",
        "On these recordings; the judges use recordings kept apart from the repository.",
        "",
        *_targets(m),
    ]
    if before:
        rows = [a for a in before["all"] if a["sender"] == "contextwarden"]
        if rows:
            commit = (before.get("environment") or {}).get("commit", "?")
            parts += [
                "",
                "### Before the names index and the mask plans",
                "",
                f"`Warden()` defaults at commit `{commit}`, before the summaries' names index, the "
                "masks' names lines, the summaries written from what a mask hid and the plans "
                "recorded in mask edits (`bench/results/measures_before.json`), all recordings:",
                "",
                _table(rows),
            ]
    if exp:
        rows = [a for a in exp["all"] if a["sender"] != "raw"]
        if rows:
            parts += [
                "",
                "### Experiment: masking that keeps protected reads (not a product figure)",
                "",
                "`python -m bench.measures_run --experiment` (`bench/mask_experiment.py`): "
                "`Warden()` defaults, then each tool result the warden masks is judged once by "
                "`contextwarden.layers.mask.mask_plan` on the history of that call: a protected "
                "read keeps its text (masked again, oldest first and in one batch, only where the "
                "warden rewrote its request anyway or the window would overflow), a superseded "
                "output gets the one-line marker. Dropped and summarised messages stay dropped. "
                f"Measured at commit `{(exp.get('environment') or {}).get('commit', '?')}`, before "
                "the core recorded mask plans itself (`mask.plan`: kept reads of the files an "
                "agent edits by quoting them, within `mask.protect_ratio` of the window; "
                "`mask.supersede`, off by default); not what `Warden()` does. All recordings:",
                "",
                _table(rows),
            ]
    return "\n".join(parts)
