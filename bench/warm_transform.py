"""The warm call (issue 3): append one message to a 1,000-message real history and transform
again. Median milliseconds for contextwarden and for LangChain's ``trim_messages`` with the
same exact counter, then the peer failure the issue names.

    .venv/bin/pip install langchain-core      # bench only
    .venv/bin/python bench/warm_transform.py [--appends 60] [--window 32000]

The history is real: the mini-swe-agent recordings replayed one after another
(``bench._data.real_history``: the first recording's system prompt and task, then every
recording's tool loop), 1,000 messages, then ``--appends`` more real messages appended one at a
time (assistant messages with their calls, then the results). Each timed call is one
``Warden.transform`` of the whole grown history, after the previous one (the agent-loop
pattern). ``trim_messages`` gets the same histories, already converted to LangChain messages
(conversion is not timed), ``max_tokens`` = the warden's trigger, and a per-message o200k
counter framed exactly like contextwarden's (same numbers): uncached (what a plain counter
function does), and memoised per message object (its fairest warm figure).

No timing assertions live in the tests; this script prints the figures (and writes JSON when
``--json`` is given).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._convert import openai_to_lc, tiktoken_message_counter  # noqa: E402
from bench._data import have_real_data, real_history  # noqa: E402
from contextwarden._messages import Message  # noqa: E402
from contextwarden._tokens import REPLY_PRIMING_TOKENS, get_counter  # noqa: E402
from contextwarden._warden import Warden  # noqa: E402
from contextwarden.formats import to_openai, validate_openai  # noqa: E402

MODEL = "deepseek-chat"
HISTORY = 1_000


def _median_ms(samples: Sequence[float]) -> float:
    return statistics.median(samples) * 1e3


def _per_message(counter: Callable[[Any], int], cached: bool) -> Callable[..., int]:
    """A per-message counter for trim_messages (it checks the parameter annotation to call it
    one message at a time), optionally memoised per message object."""
    from langchain_core.messages import BaseMessage

    memo: dict[int, tuple[Any, int]] = {}

    def count(message: BaseMessage) -> int:
        if cached:
            hit = memo.get(id(message))
            if hit is not None and hit[0] is message:
                return hit[1]
        n = counter(message)
        if cached:
            memo[id(message)] = (message, n)
        return n

    count.__annotations__["message"] = BaseMessage
    return count


def _encoding() -> Any:
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from tiktoken_offline import offline_encoding
    finally:
        sys.path.remove(str(ROOT / "tests"))
    return offline_encoding("o200k_base")


def warm_contextwarden(
    history: Sequence[Message], appends: int, window: int
) -> tuple[float, list[float], Any]:
    counter = get_counter(MODEL)
    warden = Warden(counter=counter)
    gc.collect()
    t0 = time.perf_counter()
    warden.transform(history[:HISTORY], model=MODEL, window=window)
    cold = time.perf_counter() - t0
    samples = []
    result = None
    for n in range(HISTORY + 1, HISTORY + appends + 1):
        msgs = list(history[:n])  # the agent's list, one message longer
        t0 = time.perf_counter()
        result = warden.transform(msgs, model=MODEL, window=window)
        samples.append(time.perf_counter() - t0)
    return cold, samples, result


def warm_trim(
    history: Sequence[Message], appends: int, max_tokens: int, *, cached: bool, **kwargs: Any
) -> tuple[list[float], Any]:
    from langchain_core.messages import trim_messages

    lc = openai_to_lc(to_openai(list(history)))
    count = _per_message(tiktoken_message_counter(_encoding()), cached)
    opts: dict[str, Any] = dict(
        max_tokens=max_tokens, token_counter=count, strategy="last", include_system=True
    )
    opts.update(kwargs)
    trim_messages(lc[:HISTORY], **opts)  # warm the memo (cached) / the imports (uncached)
    samples = []
    out = None
    for n in range(HISTORY + 1, HISTORY + appends + 1):
        msgs = lc[:n]
        t0 = time.perf_counter()
        out = trim_messages(msgs, **opts)
        samples.append(time.perf_counter() - t0)
    return samples, out


def peer_failure(history: Sequence[Message], windows: Sequence[int]) -> dict[str, Any]:
    """trim_messages on a one-user-message agent history (the usual shape), at each window's
    trigger, with and without ``start_on="human"``; contextwarden on the same."""
    from langchain_core.messages import SystemMessage, ToolMessage, trim_messages

    from bench._convert import lc_to_openai

    msgs = list(history[:HISTORY])
    lc = openai_to_lc(to_openai(msgs))
    task = lc[1]
    count = _per_message(tiktoken_message_counter(_encoding()), True)
    counter = get_counter(MODEL)
    report: dict[str, Any] = {}
    for window in windows:
        result = Warden(counter=counter).transform(msgs, model=MODEL, window=window)
        assert result.budget is not None
        base: dict[str, Any] = dict(
            max_tokens=result.budget.trigger - REPLY_PRIMING_TOKENS,
            token_counter=count,
            strategy="last",
            include_system=True,
        )
        rows: dict[str, Any] = {}
        for label, extra in (('start_on="human"', {"start_on": "human"}), ("no start_on", {})):
            out = trim_messages(lc, **base, **extra)
            body = out[1:] if out and isinstance(out[0], SystemMessage) else out
            rows[label] = {
                "kept": len(out),
                "only system": len(out) == 1 and isinstance(out[0], SystemMessage),
                "task kept": any(m is task for m in out),
                "orphan first": bool(body) and isinstance(body[0], ToolMessage),
                "openai problems": len(validate_openai(lc_to_openai(out))),
            }
        rows["contextwarden"] = {
            "kept": len(result.messages),
            "only system": False,
            "task kept": msgs[1] in result.messages,
            "orphan first": result.messages[2].role == "tool",
            "openai problems": len(validate_openai(to_openai(result.messages))),
        }
        report[str(window)] = rows
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--appends", type=int, default=60, help="timed warm calls (default 60)")
    parser.add_argument("--window", type=int, default=32_000, help="context window (32000)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    if not have_real_data():
        print("real trajectories not present (../shared/data): nothing to measure")
        return 0
    history = real_history(HISTORY + args.appends)
    cold, samples, result = warm_contextwarden(history, args.appends, args.window)
    budget = result.budget
    max_tokens = budget.trigger - REPLY_PRIMING_TOKENS
    cw = _median_ms(samples)
    print(f"history: {HISTORY:,} real messages (+{args.appends} appended one at a time), ")
    print(f"model {MODEL}, window {args.window:,}, trigger {budget.trigger:,} tokens")
    print(f"input {result.tokens_before:,} tokens -> output {result.tokens_after:,} tokens, ")
    print(
        f"{len(result.messages)} messages, valid: {validate_openai(to_openai(result.messages)) == []}"
    )
    print()
    print(f"contextwarden cold (first call)        {cold * 1e3:10.1f} ms")
    print(
        f"contextwarden warm (median)            {cw:10.3f} ms   p90 "
        f"{sorted(samples)[int(len(samples) * 0.9)] * 1e3:.3f} ms"
    )
    figures: dict[str, Any] = {
        "history": HISTORY,
        "appends": args.appends,
        "window": args.window,
        "cold_ms": cold * 1e3,
        "warm_median_ms": cw,
    }
    try:
        import langchain_core  # noqa: F401
    except ImportError:
        print("langchain-core not installed: .venv/bin/pip install langchain-core")
        return 0
    reps = max(5, args.appends // 6)  # trim_messages is slow: fewer samples
    for label, cached in (
        ("trim_messages (exact counter)", False),
        ("trim_messages (memoised counter)", True),
    ):
        trim_samples, _ = warm_trim(history, reps, max_tokens, cached=cached)
        tm = _median_ms(trim_samples)
        print(f"{label:<38} {tm:10.3f} ms   contextwarden is {tm / cw:,.0f}x faster")
        figures[label] = {"median_ms": tm, "ratio": tm / cw}
    print()
    print("peer failure: trim_messages on this one-user-message agent history (1,000 messages)")
    failure = peer_failure(history, (8_000, 16_000, 32_000, 64_000))
    for window, rows in failure.items():
        for label, rep in rows.items():
            print(
                f"  {int(window):>6,} {label:<18} kept {rep['kept']:>4}, task kept: "
                f"{str(rep['task kept']):<5}, only system: {str(rep['only system']):<5}, "
                f"orphan tool result first: {str(rep['orphan first']):<5}, "
                f"OpenAI problems: {rep['openai problems']}"
            )
    figures["peer_failure"] = failure
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
