"""Where the names the next action needs were lost: for each name ``measures.name_recall``
wants and the request does not hold, the fate of the newest history message that showed it.

    python -m bench.names_lost --root /work/extra --windows 16000,32000 --jobs 2
    python -m bench.names_lost --only codex --windows 32000 --examples 20

Replays each recording as ``bench.grid`` does (``Warden()`` defaults, the price structure's
model) and keeps the conversation's edit log (every call's ``result.edits``). A wanted name
missing from the request is put down to the newest message before the last ten that held it:

* ``compacted``: the message is in a compaction's removed span, and the summary in the request
  does not list the name (``compacted, summary cut``: a window cut later took the summary too;
  ``compacted, dropped later``: an earlier summary of the run listed it, and a later one, which
  absorbed that summary, let it go);
* ``cut``: a window cut removed the message with no summary;
* ``masked``: a tool result shrunk by a mask whose stub does not list the name;
* ``thinking``: the name was in reasoning that a strip removed;
* ``repaired``: a repair took the message out (a tool result without its call);
* ``truncated``: the message is in the request but shortened as it came in;
* ``other``: none of those (the name is in the message and the message is sent whole).

Two causes no edit can mend are counted apart, whatever the message's fate: ``escape artefact``
(the measure reads tool-call arguments as JSON text, so ``\\tEvidence`` in a Go patch is read
as the name ``tEvidence``, which only the escaped text holds) and ``argument key`` (the name
occurs only as a JSON key of tool-call arguments, ``"file_path":``: a parameter of the agent's
tool, which a real request holds in its tool definitions).

``--measure edits`` does the same for the lines an edit call must reproduce
(``measures.edit_recall``: seen more than ten messages before the call, not in the task).

``--parts`` also tells where the budget went and what it bought: the tokens of every request
by part (system, the client's opening up to the agent's first reply, summaries, the agent's
messages, tool results whole or masked, the user's own words, user messages of nothing but
what a client injects: reminders, sub-agent reports) and, of the names held, the part that
alone held each (``several`` when more than one did). It also says, of each name a summary let
go (``compacted``), whether the embedded summarizer's names index had it (``ranked``: the cap
cut it; ``filtered``: found in the span, left out of the index by its rules) or never found it
in the span (``not extracted``).

Also per cell: names held/wanted (and without the two artefacts) and tokens sent/raw (o200k,
as the judges count).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._recordings import recordings
from .grid import PRICES
from .measures_run import measures

__all__ = ["lost", "main"]

Msg = dict[str, Any]
_ROOT: list[Path] = []


def _recs() -> tuple[Any, ...]:
    return recordings(_ROOT[0]) if _ROOT else recordings()


#: What each kind of edit does to a message, as this diagnostic names it.
_KIND = {"window_cut": "cut", "mask": "masked", "strip_thinking": "thinking?", "repair": "repaired"}


def _fates(edits: Sequence[Any], n: int) -> dict[int, str]:
    """History position -> how the edit log took it out or changed it (positions < n), from
    :func:`contextwarden._log.taken_by` (the fold the request is made by)."""
    from contextwarden._log import WindowCut, taken_by

    cut_summaries = {d for e in edits if isinstance(e, WindowCut) for d in e.dropped}
    fate: dict[int, str] = {}
    for i, number in enumerate(taken_by(edits, n)):
        if number is None:
            continue
        kind = edits[number].kind
        if kind == "compaction":
            fate[i] = "compacted, summary cut" if number in cut_summaries else "compacted"
        else:
            fate[i] = _KIND[kind]
    return fate


def _escaped(name: str, text: str) -> bool:
    """True when ``name`` occurs in ``text`` only right after a backslash: a JSON escape
    (``\\n\\tFilePath``) the measure reads as part of the name (``tFilePath``)."""
    return all(
        text[i - 1 : i] == "\\" for i in (mt.start() for mt in re.finditer(re.escape(name), text))
    )


def _argument_key(name: str, text: str) -> bool:
    """True when ``name`` occurs in ``text`` only as a JSON key (``"file_path":``): the name of
    a tool's parameter, which every real request holds in its tool definitions (the measure
    replays messages only, without the tools)."""
    at = [mt.start() for mt in re.finditer(re.escape(name), text)]
    keys = {mt.start() + 1 for mt in re.finditer(rf'"{re.escape(name)}"\s*:', text)}
    return bool(at) and all(i in keys for i in at)


def _wanted(m: Any, msgs: Sequence[Msg], k: int, task: str, measure: str) -> set[str]:
    """What call ``k`` needs from more than ten messages back: the names its action refers to,
    or the lines its edits must reproduce."""
    ctx = msgs[:k]
    raw, recent = m.blob(ctx), m.blob(ctx[-m.RECENT :])
    if measure == "edits":
        lines = {ln for tc in msgs[k].get("tool_calls") or [] for ln in m.edit_lines(tc)}
        early = m.blob(ctx[: max(0, k - m.RECENT)])
        return {ln for ln in lines if ln in early and ln not in recent and ln not in task}
    act = msgs[k].get("content") or ""
    act = act if isinstance(act, str) else m.blob([msgs[k]])
    act += "\n".join(c["function"]["arguments"] for c in msgs[k].get("tool_calls") or [])
    return {r for r in m.refs(act) if r in raw and r not in task and r not in recent}


def _part(m: Msg, opening: bool) -> str:
    """Which part of a request message ``m`` is (see ``--parts``)."""
    from contextwarden._markers import MASK_MARKER_RE, SUPERSEDED_MARKER_RE
    from contextwarden._task import strip_injected
    from contextwarden.analysis.sections import looks_like_summary

    content = m.get("content")
    text = content if isinstance(content, str) else json.dumps(content or "")
    role = str(m["role"])
    if role == "tool":
        masked = MASK_MARKER_RE.search(text) or SUPERSEDED_MARKER_RE.search(text)
        return "tool masked" if masked else "tool whole"
    if role != "user":
        return role
    if looks_like_summary(text):
        return "summary"
    if opening:
        return "opening"
    return "user words" if strip_injected(text) else "client notices"


class _Candidates:
    """What the embedded summarizer's names index had, compaction by compaction: every name
    it ranked (the lines it returned, before the summary's cap) and every name the span's
    mentions held."""

    def __init__(self) -> None:
        import contextwarden.summarizers.extractive as extractive

        self.ranked: set[str] = set()
        self.found: set[str] = set()
        original = getattr(extractive, "names_index")  # noqa: B009 (imported there, not its own)

        def names_index(code: Any, earlier: Any = None, **kw: Any) -> Any:
            lines = original(code, earlier, **kw)
            self.ranked.update(n for ln in lines for n in (*ln.names, ln.path) if n)
            self.found.update(x.name for x in (*code.paths, *code.names))
            return lines

        setattr(extractive, "names_index", names_index)  # noqa: B010 (this worker's replay only)

    def fate(self, name: str) -> str:
        if any(name in r for r in self.ranked):
            return "ranked"
        return "filtered" if name in self.found else "not extracted"


def lost(job: tuple[int, int, str, str, bool]) -> dict[str, Any]:
    """One (recording, window, price) cell: names held/wanted, tokens, and the lost names'
    causes (with a few examples); with ``parts``, the tokens by part and what each held."""
    from contextwarden import Warden

    index, window, price, measure, with_parts = job
    candidates = _Candidates() if with_parts else None
    parts: Counter[str] = Counter()
    holders: Counter[str] = Counter()
    summarised: Counter[str] = Counter()
    sizes: dict[str, int] = {}
    rec = _recs()[index]
    msgs = list(rec.messages)
    model = PRICES[price][0]
    m = measures()
    enc = m._encoder()
    warden = Warden()
    edits: list[Any] = []
    task = m.blob(msgs[:2])
    causes: Counter[str] = Counter()
    examples: list[str] = []
    held = wanted = sent_tok = raw_tok = odd_held = odd_wanted = 0
    for k in m.calls(msgs):
        ctx = msgs[:k]
        try:
            req, result = warden.transform_openai(list(ctx), model=model, window=window)
        except Exception as exc:  # an overflow at a tiny window: reported, not fatal
            return {
                "recording": f"{rec.source}/{rec.name}",
                "window": window,
                "price": price,
                "error": f"{type(exc).__name__}: {str(exc)[:160]}",
            }
        edits.extend(result.edits)
        if with_parts:
            first = next((i for i, x in enumerate(req) if x["role"] == "assistant"), len(req))
            labels = [_part(x, i < first) for i, x in enumerate(req)]
            for x, label in zip(req, labels, strict=True):
                key = json.dumps(x, sort_keys=True)
                if key not in sizes:
                    sizes[key] = m.ntok(enc, [x])
                parts[label] += sizes[key]
                sent_tok += sizes[key]
            texts = [(label, m.blob([x])) for x, label in zip(req, labels, strict=True)]
        else:
            sent_tok += m.ntok(enc, req)
        raw_tok += m.ntok(enc, ctx)
        raw = m.blob(ctx)
        want = _wanted(m, msgs, k, task, measure)
        sent = m.blob(req)
        miss = sorted(r for r in want if r not in sent)
        wanted += len(want)
        held += len(want) - len(miss)
        if with_parts:
            for r in want:
                where = {label for label, text in texts if r in text}
                if where:
                    holders[where.pop() if len(where) == 1 else "several"] += 1
        odd = {
            r for r in want if measure == "names" and (_escaped(r, raw) or _argument_key(r, raw))
        }
        odd_wanted += len(odd)
        odd_held += sum(1 for r in odd if r in sent)
        if not miss:
            continue
        fate = _fates(edits, k)
        summaries = [e.summary for e in edits if e.kind == "compaction" and e.summary]
        for r in miss:
            at = next(i for i in range(k - 1, -1, -1) if r in m.blob([ctx[i]]))
            why = fate.get(at, "other")
            if r in odd and _escaped(r, raw):
                why = "escape artefact"
            elif r in odd:
                why = "argument key"
            if why == "thinking?":
                why = (
                    "thinking"
                    if r not in m.blob([{**ctx[at], "reasoning_content": None}])
                    else "other"
                )
            if why == "other" and ctx[at]["role"] == "tool":
                why = "truncated"
            if why == "compacted" and any(r in text for text in summaries):
                why = "compacted, dropped later"
            causes[why] += 1
            if candidates is not None and why.startswith("compacted"):
                summarised[candidates.fate(r)] += 1
            if len(examples) < 400:
                examples.append(
                    f"{rec.source}/{rec.name} call@{k} {why} {r!r} from msg {at} ({ctx[at]['role']})"
                )
    return {
        "recording": f"{rec.source}/{rec.name}",
        "window": window,
        "price": price,
        "held": held,
        "wanted": wanted,
        "artefacts_held": odd_held,
        "artefacts_wanted": odd_wanted,
        "tokens": sent_tok,
        "raw_tokens": raw_tok,
        "causes": dict(causes),
        "examples": examples,
        "parts": dict(parts),
        "holders": dict(holders),
        "summarised": dict(summarised),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.names_lost", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--root", type=Path, default=None)
    ap.add_argument("--windows", default="16000,32000")
    ap.add_argument("--prices", default="anthropic")
    ap.add_argument("--only", default="")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--examples", type=int, default=0, help="print this many lost names per cell")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--measure", choices=("names", "edits"), default="names")
    ap.add_argument(
        "--parts",
        action="store_true",
        help="also the tokens by request part, the part holding each name held, and whether "
        "the summarizer's index had the names summaries let go",
    )
    a = ap.parse_args(argv)
    if a.root is not None:
        _ROOT.append(a.root)
    recs = _recs()
    jobs = [
        (i, int(w), p, a.measure, a.parts)
        for w in a.windows.split(",")
        for p in a.prices.split(",")
        for i, r in enumerate(recs)
        if a.only in f"{r.source}/{r.name}"
    ]
    if a.jobs > 1:
        with multiprocessing.get_context("fork").Pool(a.jobs) as pool:
            rows = pool.map(lost, jobs, chunksize=1)
    else:
        rows = [lost(j) for j in jobs]
    for w, p in sorted({(r["window"], r["price"]) for r in rows}):
        cell = [r for r in rows if r["window"] == w and r["price"] == p and "error" not in r]
        for r in rows:
            if r["window"] == w and r["price"] == p and "error" in r:
                print(f"{w} {p} {r['recording']}: {r['error']}")
        for source in sorted({r["recording"].split("/")[0] for r in cell}) + ["all"]:
            part = [r for r in cell if source == "all" or r["recording"].startswith(source + "/")]
            h, n = sum(r["held"] for r in part), sum(r["wanted"] for r in part)
            oh = h - sum(r["artefacts_held"] for r in part)
            on = n - sum(r["artefacts_wanted"] for r in part)
            t, raw = sum(r["tokens"] for r in part), sum(r["raw_tokens"] for r in part)
            c: Counter[str] = Counter()
            for r in part:
                c.update(r["causes"])
            lost_n = sum(c.values()) or 1
            shares = ", ".join(f"{k} {v} ({100 * v / lost_n:.0f}%)" for k, v in c.most_common())
            print(
                f"{w} {p} {source}: {a.measure} {h}/{n} = {100 * h / max(n, 1):.1f}% "
                f"({100 * oh / max(on, 1):.1f}% without the two artefacts), "
                f"tokens {100 * t / max(raw, 1):.1f}% of raw; lost: {shares}"
            )
            if a.parts:
                tok: Counter[str] = Counter()
                held_by: Counter[str] = Counter()
                fates: Counter[str] = Counter()
                for r in part:
                    tok.update(r["parts"])
                    held_by.update(r["holders"])
                    fates.update(r["summarised"])
                share = ", ".join(f"{k} {100 * v / max(t, 1):.1f}%" for k, v in tok.most_common())
                print(f"    tokens by part: {share}")
                print(
                    f"    held only by: {', '.join(f'{k} {v}' for k, v in held_by.most_common())}"
                )
                print(
                    f"    let go by a summary: {', '.join(f'{k} {v}' for k, v in fates.most_common())}"
                )
        for r in cell:
            for line in r["examples"][: a.examples]:
                print("   ", line)
    if a.json is not None:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
