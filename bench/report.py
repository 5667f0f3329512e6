"""Write ``docs/benchmarks.md`` and its plots (``docs/img/bench-*.png``) from
``bench/results/*.json``, so the page always shows the last run's figures.

    python -m bench.report [--results bench/results] [--docs docs]

Every number on the page comes from the JSON; a benchmark that was not run says so. The
targets table compares each figure with its goal and says plainly when one is missed.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ._common import RESULTS_DIR
from ._report_billed import bills_section, savings_section, target_rows
from ._report_measures import measures_section
from ._report_never_dearer import never_dearer_section
from .grid import grid_section, unseen_section

__all__ = ["main", "render"]

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

Json = dict[str, Any]


def _load(results: Path, name: str) -> Json | None:
    path = results / f"{name}.json"
    if not path.exists():
        return None
    try:
        data: Json = json.loads(path.read_text())
    except ValueError:
        return None
    return data


def _ms(x: float | None) -> str:
    if x is None:
        return "–"
    if x >= 1000:
        return f"{x / 1000:.2f} s"
    if x >= 10:
        return f"{x:.0f} ms"
    if x >= 1:
        return f"{x:.1f} ms"
    return f"{x:.2f} ms"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.0%}"


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:,.0f}"


def _ratio(x: float) -> str:
    return f"x{x:,.0f}" if x >= 10 else f"x{x:.1f}" if x >= 0.1 else f"x{x:.2f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _verdict(ok: bool | None) -> str:
    return "–" if ok is None else ("met" if ok else "**missed**")


# -- plots ------------------------------------------------------------------------------------
def _plot(path: Path, draw: Callable[[Any], None]) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=110)
    draw(ax)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path.name


def _plot_overhead(data: Json, img: Path) -> str | None:
    def draw(ax: Any) -> None:
        styles = {"real": "-", "generated": "--"}
        colors = {
            ("lossless+window", "cold"): "#1f77b4",
            ("lossless+window", "warm"): "#2ca02c",
            ("full", "cold"): "#9467bd",
            ("full", "warm"): "#d62728",
        }
        for (setup, phase), color in colors.items():
            for kind, style in styles.items():
                cells = [r for r in data["rows"] if r["kind"] == kind and r["setup"] == setup]
                if not cells:
                    continue
                ax.plot(
                    [r["messages"] for r in cells],
                    [r[phase]["p50_ms"] for r in cells],
                    style,
                    marker="o",
                    color=color,
                    label=f"{setup}, {phase} ({kind})",
                )
        ax.axhline(1.0, color="grey", lw=0.8, ls=":")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("history length (messages)")
        ax.set_ylabel("Warden.transform p50 (ms)")
        ax.set_title("Transform latency: cold and warm")
        ax.legend(fontsize=7)

    return _plot(img / "bench-overhead.png", draw)


def _plot_peers(data: Json, img: Path) -> str | None:
    kind = "real" if any(r["kind"] == "real" for r in data["latency"]) else "generated"

    def draw(ax: Any) -> None:
        names = list(dict.fromkeys(r["peer"] for r in data["latency"]))
        for name in names:
            cells = [r for r in data["latency"] if r["peer"] == name and r["kind"] == kind]
            ax.plot(
                [r["messages"] for r in cells],
                [r["latency"]["p50_ms"] for r in cells],
                marker="o",
                label=name,
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("history length (messages)")
        ax.set_ylabel("p50 per call (ms)")
        ax.set_title(f"Peers, {kind} histories, {data['latency_window'] // 1000}k window")
        ax.legend(fontsize=7)

    return _plot(img / "bench-peers.png", draw)


def _plot_retention(data: Json, img: Path) -> str | None:
    rows = [s for s in data["summary"] if s["window"] == "all"]
    if not rows:
        return None

    def draw(ax: Any) -> None:
        facts = data["facts"]
        width = 0.8 / len(facts)
        for k, fact in enumerate(facts):
            ax.bar(
                [i + k * width for i in range(len(rows))],
                [r[fact] * 100 for r in rows],
                width,
                label=fact,
            )
        ax.set_xticks([i + width * (len(facts) - 1) / 2 for i in range(len(rows))])
        ax.set_xticklabels([r["who"] for r in rows], rotation=30, ha="right", fontsize=7)
        ax.set_ylabel("facts surviving verbatim (%)")
        ax.set_title("Retention of planted facts, all recordings and windows")
        ax.set_ylim(0, 122)  # room for the legend above the bars
        ax.legend(fontsize=8, loc="upper center", ncol=len(facts))

    return _plot(img / "bench-retention.png", draw)


# -- sections -----------------------------------------------------------------------------------
def _cell(rows: Sequence[Json], **match: Any) -> Json | None:
    return next((r for r in rows if all(r.get(k) == v for k, v in match.items())), None)


def _targets(
    ov: Json | None, cnt: Json | None, pe: Json | None, sv: Json | None, rt: Json | None
) -> str:
    rows: list[list[str]] = []
    if ov:
        kind = "real" if any(r["kind"] == "real" for r in ov["rows"]) else "generated"
        c = _cell(ov["rows"], kind=kind, setup="lossless+window", messages=1_000)
        f = _cell(ov["rows"], kind=kind, setup="full", messages=1_000)
        if c:
            p50 = c["warm"]["p50_ms"]
            rows.append(
                [
                    "warm transform < 1 ms at 1,000 messages (lossless layers + window)",
                    f"p50 {_ms(p50)}, p95 {_ms(c['warm']['p95_ms'])} ({kind})",
                    _verdict(p50 < 1),
                ]
            )
        if f:
            p50 = f["warm"]["p50_ms"]
            rows.append(
                [
                    "the same with the compaction engine on",
                    f"p50 {_ms(p50)}, p95 {_ms(f['warm']['p95_ms'])} ({kind})",
                    _verdict(p50 < 1),
                ]
            )
    if pe:
        kind = "real" if any(r["kind"] == "real" for r in pe["latency"]) else "generated"
        for peer in ("trim_messages", "trim_messages (cached counter)"):
            r = _cell(pe["latency"], kind=kind, messages=1_000, peer=peer)
            if r:
                rows.append(
                    [
                        f">= 100x faster than `{peer}` at 1,000 messages (warm)",
                        f"{_ratio(r['ratio_vs_warm'])} ({_ms(r['latency']['p50_ms'])} vs warm)",
                        _verdict(r["ratio_vs_warm"] >= 100),
                    ]
                )
    if cnt:
        ratio = cnt["text"]["speed_ratio_vs_tiktoken"]
        rows.append(
            [
                "counting at least as fast as tiktoken (same vocabulary, same text)",
                f"x{ratio:.2f} ({cnt['text']['contextwarden_tokens_per_s'] / 1e6:.2f} vs "
                f"{cnt['text']['tiktoken_tokens_per_s'] / 1e6:.2f} M tokens/s)",
                _verdict(ratio >= 1),
            ]
        )
    rows = target_rows(sv, pe) + rows
    if rt and rt.get("summary"):
        for who in ("+window", "+summaries"):
            s = _cell(rt["summary"], who=who, window="all")
            if s:
                ok = s["task"] == 1 and s["pinned"] == 1
                rows.append(
                    [
                        f"100% survival of pinned and task facts ({who})",
                        f"task {_pct(s['task'])}, pinned {_pct(s['pinned'])}",
                        _verdict(ok),
                    ]
                )
    if not rows:
        return "No results yet: run `python -m bench`."
    return _table(["target", "measured", "verdict"], rows)


def _findings(ov: Json | None, pe: Json | None, sv: Json | None, rt: Json | None) -> str:
    """Plain-language notes on the misses and surprises, with the run's own numbers."""
    notes: list[str] = []
    if ov:
        kind = "real" if any(r["kind"] == "real" for r in ov["rows"]) else "generated"
        lw = _cell(ov["rows"], kind=kind, setup="lossless+window", messages=1_000)
        f1 = _cell(ov["rows"], kind=kind, setup="full", messages=1_000)
        f3 = _cell(ov["rows"], kind=kind, setup="full", messages=3_000)
        if lw:
            slow = lw.get("warm_slow_fraction") or 0.0
            why = (
                f"{_pct(slow)} of the warm calls took over four times the median: the calls that "
                "re-plan the sliding window over the whole history rather than reuse the last plan "
                "(the same pattern with the garbage collector off, so not GC)"
                if slow
                else "no warm call took over four times the median"
            )
            notes.append(
                f"- **Warm tail**: p50 {_ms(lw['warm']['p50_ms'])}, p95 {_ms(lw['warm']['p95_ms'])}, "
                f"mean {_ms(lw['warm']['mean_ms'])} at 1,000 messages; {why}."
            )
        if f1 and f3:
            notes.append(
                f"- **The compaction engine on the warm path.** With it on, a warm call costs "
                f"{_ms(f1['warm']['p50_ms'])} at 1,000 messages and {_ms(f3['warm']['p50_ms'])} at 3,000 "
                f"(lossless layers + window: {_ms(lw['warm']['p50_ms']) if lw else '–'}). When the agent "
                "only appended, remembered compactions are re-applied from the last call's head and the "
                "task type from its tallies, so the cost is the new messages. The 3,000-message history "
                "glues several tasks together: its dozens of edited files do not fit one summary's cap, so "
                "most summaries are rejected for a missing path. After every strategy failed, the next "
                "calls skip them until the history grew by a tenth of the window, but a partial success "
                "(a compaction still over the target) records a new summary and the search runs again: "
                "those calls make the median and the p95 here."
            )
    if pe:
        kind = "real" if any(r["kind"] == "real" for r in pe["latency"]) else "generated"
        t = _cell(pe["latency"], kind=kind, messages=1_000, peer="trim_messages")
        tc = _cell(pe["latency"], kind=kind, messages=1_000, peer="trim_messages (cached counter)")
        if t and tc:
            notes.append(
                f"- **Against `trim_messages` the ratio depends on its counter.** With an exact counter "
                f"that re-tokenises, `trim_messages` costs {_ms(t['latency']['p50_ms'])} at 1,000 messages "
                f"(x{t['ratio_vs_warm']:,.0f} contextwarden's warm call): it counts about log2(n) prefixes "
                "of the history from scratch. Memoise that counter per message, as an agent keeping its "
                f"LangChain messages can, and it costs {_ms(tc['latency']['p50_ms'])} "
                f"(x{tc['ratio_vs_warm']:,.1f}): what is left is a binary search over cached sums. The "
                "100x target holds against the first, not the second; and on an agent history "
                "`trim_messages`'s output is the system message alone (section 3), so its speed buys "
                "nothing there."
            )
    if sv and sv.get("totals"):
        notes += _savings_notes(sv)
    if rt and rt.get("summary"):
        w = _cell(rt["summary"], who="+window", window="all")
        sm = _cell(rt["summary"], who="+summaries", window="all")
        if w and sm:
            notes.append(
                f"- **Retention**: the window alone keeps the task and pins but drops old turns whole, so "
                f"an early edit survives in {_pct(w['early_edit'])} of cases and a mid-run error in "
                f"{_pct(w['error'])}; the summaries carry edited files and errors forward "
                f"({_pct(sm['early_edit'])} and {_pct(sm['error'])}). An error survives only while its "
                "text, or the summary's extract of it, is in the request."
            )
    return "\n".join(notes)


def _savings_notes(sv: Json) -> list[str]:
    notes: list[str] = []
    small = min(sv["windows"])
    aggs = [t for t in sv["totals"] if t["source"] == "mini-swe-agent" and t["window"] == small]
    m = next((a for a in aggs if a["sender"] == "mask"), None)
    th = next((a for a in aggs if a["sender"] == "+thinking"), None)
    anyt = next((a for a in aggs if a["sender"] == "mask+thinking(any turn)"), None)
    if m and th and anyt:
        notes.append(
            f"- **Stripping thinking saves {_pct(m['tokens_ratio'] - th['tokens_ratio'])} of the "
            "tokens here** because a mini-swe-agent run is one user turn, and the thinking of the "
            "current turn is kept by default (Anthropic requires it back unchanged; DeepSeek's "
            "thinking mode asks the same). Stripping it in any turn would save "
            f"{_pct(m['tokens_ratio'] - anyt['tokens_ratio'])} (`mask+thinking(any turn)`), at the "
            "risk of a provider error."
        )
    oh = [r for r in sv["rows"] if r["source"] == "openhands" and r["window"] == small]
    om = next((r for r in oh if r["sender"] == "mask" and "error" not in r), None)
    ot = next((r for r in oh if r["sender"] == "+truncate" and "error" not in r), None)
    if om and ot and om["tokens_ratio"] - ot["tokens_ratio"] > 0.01:
        notes.append(
            f"- **Truncation matters on one recording**: the OpenHands run sends "
            f"{_pct(om['tokens_ratio'])} of the raw tokens with masking alone and "
            f"{_pct(ot['tokens_ratio'])} with truncation; mini-swe-agent caps its own outputs at "
            "10,000 characters, so truncation never fires there."
        )
    elif om and ot:
        notes.append(
            "- **Truncation does not fire on these recordings**: the agents cut their own "
            "outputs before they send them (mini-swe-agent at 10,000 characters, OpenHands at "
            f"its `max_message_chars`, 30,000), so the OpenHands run sends {_pct(om['tokens_ratio'])} "
            f"of the raw tokens with masking alone and {_pct(ot['tokens_ratio'])} with "
            "truncation too."
        )
    return notes


def _overhead_section(ov: Json, img: str | None) -> str:
    rows = [
        [
            r["kind"],
            r["setup"],
            f"{r['messages']:,}",
            _num(r["tokens_before"]),
            _num(r["tokens_after"]),
            _ms(r["cold"]["p50_ms"]),
            _ms(r["cold"]["p95_ms"]),
            _ms(r["warm"]["p50_ms"]),
            _ms(r["warm"]["p95_ms"]),
            _ms(r["warm_user"]["p50_ms"]),
        ]
        for r in ov["rows"]
    ]
    slopes = [
        [
            s["kind"],
            s["setup"],
            "–" if s["cold"] is None else f"{s['cold']:.2f}",
            "–" if s["warm"] is None else f"{s['warm']:.2f}",
        ]
        for s in ov["scaling_exponents"]
    ]
    out = [
        "## 1. Overhead: `Warden.transform` per call",
        "",
        f"Model `{ov['model']}` ({ov['window'] // 1000}k window, o200k counts). *Cold*: a new warden and counter on "
        "message objects never seen. *Warm*: the same warden after transforming the history, given the "
        "history plus the agent's next step (the recorded assistant message and its tool result). "
        "*+1 user msg*: one user message appended per call. `full` adds the compaction engine.",
        "",
        _table(
            [
                "history",
                "setup",
                "messages",
                "tokens in",
                "tokens out",
                "cold p50",
                "cold p95",
                "warm p50",
                "warm p95",
                "+1 user msg p50",
            ],
            rows,
        ),
        "",
        "Scaling exponents (log-log slope of p50 on length; 1.0 = linear):",
        "",
        _table(["history", "setup", "cold", "warm"], slopes),
    ]
    if img:
        out += ["", f"![transform latency](img/{img})"]
    return "\n".join(out)


def _counting_section(c: Json) -> str:
    t, r, load = c["text"], c["recount"], c["vocabulary_load"]
    rows = [
        [
            "contextwarden `ExactCounter.count_text`",
            f"{t['contextwarden_tokens_per_s'] / 1e6:.2f} M",
            _num(t["tokens_contextwarden"]),
        ],
        [
            "tiktoken `encode_ordinary`",
            f"{t['tiktoken_tokens_per_s'] / 1e6:.2f} M",
            _num(t["tokens_tiktoken"]),
        ],
        [
            "chars/4 heuristic (reference)",
            f"{t['heuristic_tokens_per_s'] / 1e6:,.0f} M",
            _num(t["tokens_heuristic"]),
        ],
    ]
    return "\n".join(
        [
            "## 2. Token counting",
            "",
            f"{t['strings']:,} real texts ({t['characters']:,} characters), one string at a time, "
            f"{c['encoding']}, best of the passes. Totals equal: **{t['equal']}**.",
            "",
            _table(["counter", "tokens/s", "tokens"], rows),
            "",
            f"Recounting an unchanged {r['messages']:,}-message history ({_num(r['tokens'])} tokens): cold "
            f"{_ms(r['cold']['p50_ms'])}, unchanged {_ms(r['warm']['p50_ms'])} (x{r['speedup_warm_vs_cold']:,.0f}; "
            f"tiktoken recounts everything: {_ms(r['tiktoken_each_time']['p50_ms'])}, "
            f"x{r['speedup_warm_vs_tiktoken']:,.0f}). Vocabulary load in a fresh process: contextwarden "
            f"{_ms(None if load['contextwarden_s'] is None else load['contextwarden_s'] * 1e3)}, tiktoken "
            f"{_ms(None if load['tiktoken_s'] is None else load['tiktoken_s'] * 1e3)}.",
        ]
    )


def _peers_section(p: Json, img: str | None) -> str:
    kind = "real" if any(r["kind"] == "real" for r in p["latency"]) else "generated"
    lengths = sorted({r["messages"] for r in p["latency"]})
    names = list(dict.fromkeys(r["peer"] for r in p["latency"]))
    lat_rows = []
    for name in names:
        row = [name]
        for n in lengths:
            r = _cell(p["latency"], kind=kind, messages=n, peer=name)
            row.append(
                "–"
                if r is None
                else f"{_ms(r['latency']['p50_ms'])} ({_ratio(r['ratio_vs_warm'])})"
            )
        lat_rows.append(row)
    val_rows = [
        [
            s["peer"],
            str(s["cases"]),
            _pct(s["valid_rate"]),
            _pct(s["task_kept_rate"]),
            _pct(s["within_window_rate"]),
            _num(s["mean_tokens"]),
        ]
        for s in p["validity_summary"]
    ]
    out = [
        "## 3. Peers on the same histories and budgets",
        "",
        f"Budget: the warden's trigger for a {p['latency_window'] // 1000}k window "
        f"({p['budget']['trigger']:,} tokens). Latency p50 per call on {kind} histories, and in brackets the "
        "ratio to contextwarden's warm call:",
        "",
        _table(["peer", *[f"{n:,} msgs" for n in lengths]], lat_rows),
    ]
    if img:
        out += ["", f"![peer latency](img/{img})"]
    if val_rows:
        out += [
            "",
            "Validity on the last call of every real recording at every window (the request converted to "
            "OpenAI messages and checked by `validate_openai`; *task kept* = the first user message is "
            "in the request verbatim; *fits* = within the window by the exact count):",
            "",
            _table(["peer", "cases", "valid", "task kept", "fits window", "mean tokens"], val_rows),
        ]
        overflow = p.get("validity_overflow") or []
        if overflow:
            out += [
                "",
                "Left out, as no request can fit: "
                + "; ".join(f"{o['trajectory']} at {o['window']:,}" for o in overflow)
                + " (the system prompt, tool definitions and task alone are over the window; "
                "contextwarden raises `ContextOverflowError` saying so).",
            ]
    trim = [
        v
        for v in p["validity"]
        if v["source"] == "mini-swe-agent"
        and v["peer"] in ("trim_messages", "trim_messages (cached counter)")
    ]
    no_start = [
        v
        for v in p["validity"]
        if v["source"] == "mini-swe-agent" and v["peer"] == "trim_messages (no start_on)"
    ]
    if trim:
        only_system = sum(1 for v in trim if v["roles_head"] == ["system"])
        orphan = sum(1 for v in no_start if v["orphans"])
        lost = sum(1 for v in no_start if not v["task_kept"])
        example = next((v["problems"][0] for v in no_start if v["problems"]), None)
        out += [
            "",
            "`trim_messages` (uncached counter) gives the same output as its cached-counter row (same "
            "counts), so the validity sweep runs it once; likewise contextwarden cold and warm.",
            "",
            "**`trim_messages` on an agent history.** An agent history has one user message (the task) "
            'followed by hundreds of assistant/tool turns. With `start_on="human"` (the docs\' recipe) '
            "the trimmed tail must start at a human message, and the only one is the task at the very "
            f"beginning, so the request is the system message alone in {only_system} of {len(trim)} "
            "mini-swe-agent cases: valid, but the model is asked nothing. Without `start_on`, the tail "
            f"starts wherever the budget falls: an orphan tool message in {orphan} of {len(no_start)} "
            f"cases and the task dropped in {lost}"
            + (f" (for example: `{example}`)." if example else "."),
        ]
    if p.get("skipped"):
        out += ["", "Skipped: " + "; ".join(f"{k}: {v}" for k, v in p["skipped"].items())]
    return "\n".join(out)


def _retention_section(r: Json, img: str | None) -> str:
    facts = r["facts"]
    rows = [
        [s["who"], *[_pct(s[f]) for f in facts], _pct(s["valid_rate"]), _pct(s.get("fits_rate"))]
        for s in r["summary"]
        if s["window"] == "all"
    ]
    by_window = [
        [s["who"], str(s["window"] // 1000) + "k", *[_pct(s[f]) for f in facts]]
        for s in r["summary"]
        if s["window"] != "all" and s["who"] in ("+window", "+summaries")
    ]
    out = [
        "## 5. Retention of planted facts",
        "",
        "Four facts with unique tokens planted in every real recording: a constraint in the task (depth 0), "
        "a file path edited by a `sed -i` call at 10% of the loop, a pytest `ValueError` at 50%, a "
        "`<Pin>` user note at 30%. Survival = the token is in the last call's request, verbatim. "
        "The `SummarizationMiddleware` peer summarises with a fake model (a fixed sentence), so it "
        "shows only what it keeps verbatim. *valid*: the request passes `validate_openai`; *fits window*: "
        "within the window by the exact count (the lossless-only configurations keep every fact "
        "because they never drop anything, and so do not fit).",
        "",
        _table(["config / peer", *facts, "valid", "fits window"], rows),
        "",
        "By window, for the guarded configurations:",
        "",
        _table(["config", "window", *facts], by_window),
    ]
    if img:
        out += ["", f"![retention](img/{img})"]
    return "\n".join(out)


def _memory_section(m: Json) -> str:
    rows = [
        [
            r["case"],
            f"{r.get('peak_rss_mib', 0):.1f}",
            "–" if "added_peak_rss_mib" not in r else f"{r['added_peak_rss_mib']:+.1f}",
            "–" if r.get("tracemalloc_peak_mib") is None else f"{r['tracemalloc_peak_mib']:.1f}",
        ]
        for r in m["rows"]
        if "error" not in r
    ]
    return "\n".join(
        [
            "## 6. Memory",
            "",
            f"Peak RSS (`VmHWM`) of a fresh process per case, {m['messages']:,}-message history; the "
            "added figure is the case's peak over its baseline; tracemalloc counts Python allocations of "
            "the call only (not the Rust tokenizer's).",
            "",
            _table(["case", "peak RSS (MiB)", "added (MiB)", "tracemalloc peak (MiB)"], rows),
        ]
    )


def _proxy_section(p: Json) -> str:
    rows = []
    for name, sc in p.get("scenarios", {}).items():
        added = sc.get("added_ms", {})
        rows.append(
            [
                name,
                _ms(added.get("ttfb_p50")),
                _ms(added.get("ttfb_p99")),
                _ms(added.get("total_p50")),
                _ms(added.get("total_p99")),
            ]
        )
    cfg = p.get("config", {})
    return "\n".join(
        [
            "## 7. Proxy under load (`bench/proxy_load.py`)",
            "",
            f"{cfg.get('clients', '?')} concurrent streaming clients x {cfg.get('requests_per_client', '?')} requests "
            "on loopback; latency the proxy adds over direct calls to the fake upstream:",
            "",
            _table(
                ["scenario", "added TTFB p50", "TTFB p99", "added total p50", "total p99"], rows
            ),
        ]
    )


def render(results: Path = RESULTS_DIR, docs: Path = DOCS) -> str:
    """The page's Markdown (plots written to ``docs/img`` as a side effect)."""
    img = docs / "img"
    ov, cnt, pe = _load(results, "overhead"), _load(results, "counting"), _load(results, "peers")
    sv, rt, mem = _load(results, "savings"), _load(results, "retention"), _load(results, "memory")
    px = _load(results, "proxy_load")
    # the machine and package of the newest result file (each file's own commit follows)
    env = max(
        (d["environment"] for d in (ov, cnt, pe, sv, rt, mem) if d and "environment" in d),
        key=lambda e: str(e.get("date") or ""),
        default=None,
    )
    parts = [
        "# Benchmarks",
        "",
        "<!-- Generated by `python -m bench.report` from bench/results/*.json: do not edit by hand. -->",
        "",
        "Reproduce with `make bench` (installs the `bench` extra, then `python -m bench`; 25 to 40 minutes "
        "on 2 cores, depending on what else runs; `savings` and `peers`, the billed sweeps, took 2.4 and "
        "4.5 minutes at a load average near 1, about 7 and 11 under a load of 9) or `python -m bench --only overhead,peers`; `python -m bench --quick` is a smoke run. "
        "`python -m bench.billed --window model,32000 --model gpt-4o` checks the billed targets "
        "alone (`Warden()` against raw, per recording, in a minute or two). "
        "Real data: the recorded trajectories in `../shared/data/trajectories` (see its README); without "
        "them only the generated histories run.",
    ]
    if env:
        parts += [
            "",
            f"Measured on {env['cpu']}, {env['cores']} cores, Python {env['python']}, commit "
            f"`{env['commit']}`, {env['date']}; load average at the time "
            f"{', '.join(f'{x:.1f}' for x in env.get('load_average') or [])} (other work on the machine "
            "inflates the timings, never the token figures). Packages: "
            + ", ".join(f"{k} {v}" for k, v in env["packages"].items() if v)
            + ".",
        ]
    named = {
        "overhead": ov,
        "counting": cnt,
        "peers": pe,
        "savings": sv,
        "retention": rt,
        "memory": mem,
    }
    stamps = [
        f"{name} `{d['environment'].get('commit')}` ({d['environment'].get('date')})"
        for name, d in named.items()
        if d and "environment" in d
    ]
    if stamps:
        parts += [
            "",
            "Each result file was measured at its own commit (the package as it was then): "
            + "; ".join(stamps)
            + ".",
        ]
    parts += ["", "## Targets", "", _targets(ov, cnt, pe, sv, rt)]
    findings = _findings(ov, pe, sv, rt)
    if findings:
        parts += ["", "## What the figures say", "", findings]
    judged = _load(results, "measures")
    if judged and judged.get("all"):
        parts += [
            "",
            measures_section(
                judged, _load(results, "measures_before"), _load(results, "mask_experiment")
            ),
        ]
    never_file = results / "never_dearer.json"  # a list of rows (bench/never_dearer.py --json)
    never = json.loads(never_file.read_text()) if never_file.exists() else None
    if isinstance(never, list) and never:
        parts += ["", never_dearer_section(never)]
    grid = _load(results, "grid")
    if grid and grid.get("rows"):
        parts += ["", grid_section(grid)]
    held_out = sorted(results.glob("grid_unseen*.json"), key=lambda p: (len(p.stem), p.stem))
    for name in (p.stem for p in held_out):
        unseen = _load(results, name)
        if unseen and unseen.get("rows"):
            parts += ["", unseen_section(unseen)]
    bills = bills_section(pe, sv, img)
    if bills:
        parts += ["", bills]
    if ov:
        parts += ["", _overhead_section(ov, _plot_overhead(ov, img))]
    if cnt:
        parts += ["", _counting_section(cnt)]
    if pe:
        parts += ["", _peers_section(pe, _plot_peers(pe, img))]
    if sv and sv.get("rows"):
        parts += ["", savings_section(sv)]
    if rt and rt.get("rows"):
        parts += ["", _retention_section(rt, _plot_retention(rt, img))]
    if mem:
        parts += ["", _memory_section(mem)]
    if px:
        parts += ["", _proxy_section(px)]
    return "\n".join(parts) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.report")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR)
    parser.add_argument("--docs", type=Path, default=DOCS)
    args = parser.parse_args(argv)
    text = render(args.results, args.docs)
    out = args.docs / "benchmarks.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
