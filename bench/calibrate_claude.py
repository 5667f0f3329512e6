"""Measure how real provider input-token counts relate to our o200k counts.

Claude's tokenizer is not public, so contextwarden counts Claude requests as o200k tokens
times a factor (``contextwarden._tokens.CALIBRATION_FACTORS``). This script measures that
factor from recorded sessions that carry the provider's own ``usage``:

* ``pi/large-session.jsonl``: claude-sonnet-4-5 (pi coding agent; 431 successful calls);
* ``claude-code/python-to-rust-port.jsonl``: claude-opus-4-5 (Claude Code; 39 calls);
* ``mini-swe-agent/*.traj.json``: deepseek-chat / deepseek-reasoner, for the direction of
  error of plain o200k on a non-OpenAI model.

Method. For every call ``i`` the provider reports the tokens it read:
``real_i = input + cacheRead + cacheWrite`` (Anthropic: ``input_tokens +
cache_read_input_tokens + cache_creation_input_tokens``; OpenAI-style: ``prompt_tokens``).
That call saw every message recorded before it, plus a system prompt and tool definitions
the recording does not show. So ``real_i = hidden + factor * ours_i``, where ``ours_i`` is our
count of the visible messages (framing, tool calls, ids for Claude).

* Anchored fit (the one we use): the first call pins the hidden part,
  ``hidden = real_0 - factor * ours_0``, and ``factor`` is the least-squares slope of
  ``real_i - real_0`` against ``ours_i - ours_0`` (a line through the first call).
* Free fit (for comparison): an ordinary least-squares line, slope and intercept both free.
  Its intercept comes out larger than the first call's entire input on pi (impossible for a
  constant prefix): the ratio drifts with the kind of content, and a free intercept soaks
  that up. The anchored slope describes growth from a known start instead.

Failed calls (``stopReason`` error/aborted, zero usage) are not points, and their partial
messages are not part of later context (the data say pi leaves them out of the next request:
keeping them makes the fit clearly worse).

The script also reports how the chars/4 heuristic errs against o200k, per message and per
transcript, on every trajectory, and how long a cold and a warm count of a 1,000-message
history take.

Run: ``python bench/calibrate_claude.py [DATA_DIR]`` (default ``../shared/data/trajectories``).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contextwarden._messages import (
    Block,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from contextwarden._tokens import CALIBRATION_FACTORS, ExactCounter, HeuristicCounter

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories"


@dataclass
class Call:
    """One provider call: the messages it saw (visible part) and the tokens it was billed."""

    context: list[Message]
    real: int


# -- parsers (deliberately minimal and independent of contextwarden's loaders) ---------------
def _args(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def pi_calls(path: Path) -> tuple[str, list[Call]]:
    """Successful assistant calls of a pi session, with the messages before each."""
    model = "?"
    history: list[Message] = []
    calls: list[Call] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        if entry.get("type") != "message":
            continue
        msg = entry["message"]
        role = msg["role"]
        content = msg.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        blocks: list[Block] = []
        for b in content or []:
            kind = b.get("type")
            if kind == "text":
                blocks.append(TextBlock(b["text"]))
            elif kind == "thinking":
                blocks.append(ThinkingBlock(b["thinking"], signature=b.get("thinkingSignature")))
            elif kind == "toolCall":
                blocks.append(ToolCallBlock(b["id"], b["name"], _args(b.get("arguments", {}))))
        if role == "assistant":
            usage = msg.get("usage") or {}
            real = usage.get("input", 0) + usage.get("cacheRead", 0) + usage.get("cacheWrite", 0)
            failed = msg.get("stopReason") in ("error", "aborted")
            if real > 0 and not failed:
                calls.append(Call(list(history), real))
                model = msg.get("model", model)
            if failed:
                continue
            history.append(Message("assistant", tuple(blocks)))
        elif role == "toolResult":
            text = "\n".join(b.text for b in blocks if isinstance(b, TextBlock))
            result = ToolResultBlock(msg["toolCallId"], text, is_error=bool(msg.get("isError")))
            history.append(Message("tool", (result,)))
        else:
            history.append(Message("user", tuple(blocks)))
    return model, calls


def _anthropic_blocks(content: Any) -> tuple[list[Block], list[ToolResultBlock]]:
    if isinstance(content, str):
        return [TextBlock(content)], []
    blocks: list[Block] = []
    results: list[ToolResultBlock] = []
    for b in content or []:
        kind = b.get("type")
        if kind == "text":
            blocks.append(TextBlock(b["text"]))
        elif kind == "thinking":
            blocks.append(ThinkingBlock(b.get("thinking", ""), signature=b.get("signature")))
        elif kind == "tool_use":
            blocks.append(ToolCallBlock(b["id"], b["name"], _args(b.get("input", {}))))
        elif kind == "tool_result":
            inner = b.get("content", "")
            if isinstance(inner, list):
                inner = "\n".join(x.get("text", "") for x in inner if x.get("type") == "text")
            results.append(ToolResultBlock(b["tool_use_id"], inner, bool(b.get("is_error"))))
    return blocks, results


def claude_code_calls(path: Path) -> tuple[str, list[Call]]:
    """Calls of a Claude Code session: one per assistant message id (its blocks come as
    separate entries that repeat the call's usage)."""
    model = "?"
    history: list[Message] = []
    calls: list[Call] = []
    current: str | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        if entry.get("type") not in ("user", "assistant") or entry.get("isSidechain"):
            continue
        msg = entry["message"]
        blocks, results = _anthropic_blocks(msg.get("content"))
        if entry["type"] == "assistant":
            if msg["id"] != current:
                usage = msg["usage"]
                real = (
                    usage["input_tokens"]
                    + usage.get("cache_read_input_tokens", 0)
                    + usage.get("cache_creation_input_tokens", 0)
                )
                calls.append(Call(list(history), real))
                model = msg.get("model", model)
                current = msg["id"]
                history.append(Message("assistant", tuple(blocks)))
            else:  # another block of the same reply
                last = history[-1]
                history[-1] = last.replace(content=last.content + tuple(blocks))
        else:
            current = None
            if results:
                history.append(Message("tool", (*results, *blocks)))
            elif blocks:
                history.append(Message("user", tuple(blocks)))
    return model, calls


def mini_swe_calls(path: Path) -> tuple[str, list[Call]]:
    """Calls of a mini-swe-agent trajectory (OpenAI-style messages, ``prompt_tokens``)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    model = data["info"]["config"]["model"]["model_name"]
    history: list[Message] = []
    calls: list[Call] = []
    for msg in data["messages"]:
        role = msg["role"]
        if role == "exit":
            break
        if role == "assistant":
            usage = (msg.get("extra") or {}).get("response", {}).get("usage") or {}
            if usage.get("prompt_tokens"):
                calls.append(Call(list(history), int(usage["prompt_tokens"])))
            blocks: list[Block] = []
            if msg.get("reasoning_content"):
                blocks.append(ThinkingBlock(msg["reasoning_content"]))
            if msg.get("content"):
                blocks.append(TextBlock(msg["content"]))
            for tc in msg.get("tool_calls") or []:
                fn = tc["function"]
                blocks.append(ToolCallBlock(tc["id"], fn["name"], fn.get("arguments") or ""))
            history.append(Message("assistant", tuple(blocks)))
        elif role == "tool":
            history.append(
                Message("tool", (ToolResultBlock(msg["tool_call_id"], _text(msg["content"])),))
            )
        else:
            history.append(Message(role, (TextBlock(_text(msg["content"])),)))
    return model, calls


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


# -- fitting -----------------------------------------------------------------------------------
@dataclass
class Fit:
    factor: float
    hidden: float
    rmse: float
    worst_late: float  # worst relative error over calls in the last 80% of the real range
    mean_late: float  # mean signed relative error over the same calls (negative: we undercount)

    def __str__(self) -> str:
        return (
            f"factor {self.factor:.3f}, hidden {self.hidden:,.0f}, rmse {self.rmse:,.0f}, "
            f"late calls: mean {self.mean_late:+.2%}, worst {self.worst_late:.2%}"
        )


def _fit(xs: Sequence[float], ys: Sequence[float], slope: float, intercept: float) -> Fit:
    pred = [intercept + slope * x for x in xs]
    n = len(xs)
    rmse = (sum((p - y) ** 2 for p, y in zip(pred, ys, strict=True)) / n) ** 0.5
    cutoff = 0.2 * max(ys)
    late = [(p - y) / y for p, y in zip(pred, ys, strict=True) if y >= cutoff]
    return Fit(slope, intercept, rmse, max(abs(e) for e in late), sum(late) / len(late))


def free_fit(xs: Sequence[float], ys: Sequence[float]) -> Fit:
    """Ordinary least squares: ys = intercept + slope * xs."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return _fit(xs, ys, slope, my - slope * mx)


def anchored_fit(xs: Sequence[float], ys: Sequence[float]) -> Fit:
    """Least squares through the first point: ys - ys[0] = slope * (xs - xs[0])."""
    dx = [x - xs[0] for x in xs]
    dy = [y - ys[0] for y in ys]
    slope = sum(a * b for a, b in zip(dx, dy, strict=True)) / sum(a * a for a in dx)
    return _fit(xs, ys, slope, ys[0] - slope * xs[0])


def measure(label: str, model: str, calls: list[Call], counter: ExactCounter) -> Fit:
    xs = [float(counter.count_messages(c.context)) for c in calls]
    ys = [float(c.real) for c in calls]
    anchored = anchored_fit(xs, ys)
    print(f"  {label}: {model}, {len(calls)} calls; first {ys[0]:,.0f} real / {xs[0]:,.0f} ours,")
    print(f"    last {ys[-1]:,.0f} real / {xs[-1]:,.0f} ours (naive ratio {ys[-1] / xs[-1]:.3f})")
    print(f"    anchored: {anchored}")
    print(f"    free:     {free_fit(xs, ys)}")
    return anchored


# -- heuristic error -----------------------------------------------------------------------------
def all_messages(data: Path) -> Iterator[tuple[str, list[Message]]]:
    pi = data / "pi" / "large-session.jsonl"
    if pi.exists():
        _, calls = pi_calls(pi)
        yield pi.name, calls[-1].context
    for path in sorted((data / "claude-code").glob("*.jsonl")):
        _, calls = claude_code_calls(path)
        yield path.name, calls[-1].context
    for path in sorted((data / "mini-swe-agent").glob("*.traj.json")):
        _, calls = mini_swe_calls(path)
        yield path.name, calls[-1].context


def heuristic_report(transcripts: Iterable[tuple[str, list[Message]]]) -> None:
    exact = ExactCounter("o200k_base")
    rough = HeuristicCounter()
    per_message: list[float] = []
    totals_exact = totals_rough = 0
    print("\nchars/4 heuristic vs o200k (content of each message, framing excluded):")
    for name, msgs in transcripts:
        te = sum(exact.count_message(m) for m in msgs)
        tr = sum(rough.count_message(m) for m in msgs)
        totals_exact += te
        totals_rough += tr
        print(f"  {name[:60]:60s} {tr / te - 1:+.1%} over {len(msgs)} messages")
        for m in msgs:
            e = exact.count_message(m) - 4
            r = rough.count_message(m) - 4
            if e >= 50:  # tiny messages are all framing; their ratio means nothing
                per_message.append(r / e - 1)
    per_message.sort()
    q = statistics.quantiles(per_message, n=100)
    print(f"  whole corpus: {totals_rough / totals_exact - 1:+.1%}")
    print(
        f"  per message (>= 50 tokens, n={len(per_message)}): min {per_message[0]:+.0%}, "
        f"p1 {q[0]:+.0%}, p5 {q[4]:+.0%}, median {statistics.median(per_message):+.0%}, "
        f"p95 {q[94]:+.0%}, p99 {q[98]:+.0%}, max {per_message[-1]:+.0%}"
    )


def timing_report(transcripts: list[tuple[str, list[Message]]]) -> None:
    pool = [m for _, msgs in transcripts for m in msgs]

    def fresh() -> list[Message]:  # equal messages, new objects: nothing stored on them yet
        return [Message(m.role, m.content, name=m.name) for m in pool[:1000]]

    counter = ExactCounter("o200k_base", cache_size=10_000)
    history = fresh()
    cold = _time(lambda: counter.count_messages(history))
    rebuilt = fresh()
    by_fingerprint = _time(lambda: counter.count_messages(rebuilt))
    warm = min(_time(lambda: counter.count_messages(history)) for _ in range(50))
    tokens = counter.count_messages(history)
    assert tokens == counter.count_messages(rebuilt)
    print(f"\ncounting a {len(history)}-message history ({tokens:,} o200k tokens):")
    print(f"  cold (tokenize everything)       {1e3 * cold:8.2f} ms")
    print(
        f"  rebuilt messages (fingerprints)  {1e3 * by_fingerprint:8.2f} ms "
        f"({cold / by_fingerprint:.0f}x faster; includes hashing the new values)"
    )
    print(f"  warm (count stored on message)   {1e3 * warm:8.3f} ms ({cold / warm:.0f}x faster)")


def _time(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv: Sequence[str]) -> int:
    data = Path(argv[1]) if len(argv) > 1 else DEFAULT_DATA
    if not data.is_dir():
        print(f"no trajectories at {data}", file=sys.stderr)
        return 1
    claude = ExactCounter("o200k_base", count_ids=True)
    claude_no_ids = ExactCounter("o200k_base")
    plain = ExactCounter("o200k_base")
    print("real input tokens = hidden prefix + factor * our o200k count (least squares):")
    pi = data / "pi" / "large-session.jsonl"
    if pi.exists():
        model, calls = pi_calls(pi)
        measure("pi, ids counted", model, calls, claude)
        measure("pi, ids not counted", model, calls, claude_no_ids)
    for path in sorted((data / "claude-code").glob("*.jsonl")):
        model, calls = claude_code_calls(path)
        measure(f"claude-code {path.stem}", model, calls, claude)
    slopes = []
    for path in sorted((data / "mini-swe-agent").glob("*.traj.json")):
        model, calls = mini_swe_calls(path)
        xs = [float(plain.count_messages(c.context)) for c in calls]
        ys = [float(c.real) for c in calls]
        result = anchored_fit(xs, ys)
        slopes.append(result.factor)
        print(f"  {path.name[:44]:44s} {len(calls):3d} calls, anchored {result}")
    if slopes:
        print(
            f"  deepseek: anchored factor median {statistics.median(slopes):.3f}, "
            f"range {min(slopes):.3f}-{max(slopes):.3f} over {len(slopes)} runs"
        )
    print(f"\nfactors in use: {dict(CALIBRATION_FACTORS)}")
    transcripts = list(all_messages(data))
    heuristic_report(transcripts)
    timing_report(transcripts)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
