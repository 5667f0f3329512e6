"""Memory: peak RSS of transforming the 3,000-message history, each case in a fresh process.

Each case runs ``python -m bench.memory --child CASE`` and reports the peak resident set size
of that process (``VmHWM``; ``ru_maxrss`` where there is no /proc) and tracemalloc's peak of
Python allocations during the call:

* ``baseline``: build the history and load the tokenizer, transform nothing;
* ``lossless+window``: the same, then one cold ``Warden.transform`` (a 128k window);
* ``full``: the same with the compaction engine;
* ``trim_messages``: LangChain's ``trim_messages`` with the exact tiktoken counter (its own
  baseline, with LangChain and tiktoken imported, is ``baseline_langchain``).

The transform's cost is the case's peak minus its baseline's. tracemalloc sees Python objects
only (not the Rust tokenizer's buffers), and slows the call, which is why it runs after the
RSS figure is taken, on a second copy of the history.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

from ._common import MODEL, Options, write_result

__all__ = ["CASES", "run"]

CASES = ("baseline", "lossless+window", "full", "baseline_langchain", "trim_messages")
ROOT = Path(__file__).resolve().parents[1]


def _peak_mib() -> float:
    """This process's peak RSS in MiB. Linux's ``VmHWM`` first: ``ru_maxrss`` survives
    ``execve``, so a child started by a big parent would report the parent's peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    # ru_maxrss is in KiB on Linux, bytes on macOS
    scale = 1 / 1024 if sys.platform != "darwin" else 1 / 1024 / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def _child(case: str, n: int) -> dict[str, Any]:
    from contextwarden._tokens import ExactCounter

    from ._data import fresh_copy, generated_history, have_real_data, real_history

    history = real_history(n) if have_real_data() else generated_history(n)
    ExactCounter("o200k_base").count_text("load the vocabulary")
    call: Any = None
    if case in ("lossless+window", "full"):
        from .overhead import new_warden

        def call() -> Any:
            return new_warden(case).transform(fresh_copy(history), model=MODEL)

    elif case in ("baseline_langchain", "trim_messages"):
        from langchain_core.messages import trim_messages

        from contextwarden.formats import to_openai

        from ._convert import openai_to_lc, tiktoken_message_counter
        from .counting import tiktoken_encoding
        from .peers import _per_message, budget_for

        lc = openai_to_lc(to_openai(list(history)))
        counter = _per_message(tiktoken_message_counter(tiktoken_encoding("o200k_base")))
        budget = budget_for(32_000)
        if case == "trim_messages":

            def call() -> Any:
                return trim_messages(
                    lc,
                    max_tokens=budget.trigger,
                    token_counter=counter,
                    strategy="last",
                    include_system=True,
                    start_on="human",
                    end_on=("human", "tool"),
                )

    before = _peak_mib()
    traced = None
    if call is not None:
        call()
        after = _peak_mib()
        tracemalloc.start()
        call()
        traced = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    else:
        after = before
    return {
        "case": case,
        "messages": len(history),
        "peak_rss_before_mib": before,
        "peak_rss_mib": after,
        "tracemalloc_peak_mib": traced,
    }


def run(opts: Options) -> dict[str, Any]:
    """Measure every case in its own process; write ``memory.json``; return its payload."""
    n = 300 if opts.quick else 3_000
    rows: list[dict[str, Any]] = []
    for case in CASES:
        proc = subprocess.run(
            [sys.executable, "-m", "bench.memory", "--child", case, "--messages", str(n)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=600,
        )
        if proc.returncode != 0:
            rows.append({"case": case, "error": proc.stderr.strip().splitlines()[-1:]})
            continue
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    base = {r["case"]: r.get("peak_rss_mib") for r in rows}
    for r in rows:
        ref = base.get("baseline_langchain" if r["case"] == "trim_messages" else "baseline")
        if "peak_rss_mib" in r and ref is not None and not r["case"].startswith("baseline"):
            r["added_peak_rss_mib"] = r["peak_rss_mib"] - ref
        print(
            f"  memory {r['case']:20} peak RSS {r.get('peak_rss_mib', float('nan')):8.1f} MiB"
            f"  (+{r.get('added_peak_rss_mib', 0.0):.1f})",
            flush=True,
        )
    payload = {"messages": n, "model": MODEL, "rows": rows}
    write_result(opts, "memory", payload)
    return payload


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", choices=CASES, required=True)
    parser.add_argument("--messages", type=int, default=3_000)
    args = parser.parse_args()
    print(json.dumps(_child(args.child, args.messages)))


if __name__ == "__main__":
    main()
