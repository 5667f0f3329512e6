"""What the proxy adds per request when a team's agents run at once: N concurrent agents, each
growing its own conversation call by call (a real mini-swe-agent recording each, or a generated
history without the shared data), first straight to the fake upstream, then through the real
``contextwarden proxy`` command, in the same run. Prints one JSON object.

Three processes, as in use: the fake upstream (streamed replies), the proxy, and this one
running the agents (asyncio + httpx). An agent's call ``k`` carries its history up to its
``k``-th tool result, as an agent loop sends it; every agent's first user message names the
agent, so no two conversations share an identity.

    python tests/proxy/measure_agents.py [--agents 16] [--messages 300] [--window 32000] [--workers 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # fake_upstream; shared_data

import httpx  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(url: str, proc: subprocess.Popen[Any], what: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start") from None
            time.sleep(0.1)


def _histories(
    agents: int, messages: int, shared_task: bool = False
) -> tuple[list[list[dict[str, Any]]], str]:
    """One OpenAI history of about ``messages`` messages per agent, each its own conversation."""
    from contextwarden._transcripts import load_transcript
    from contextwarden.formats import to_openai

    folder = Path(os.environ.get("CONTEXTWARDEN_SHARED_DATA", "/work/shared/data/trajectories"))
    files = sorted((folder / "mini-swe-agent").glob("*.traj.json"))
    base: list[list[dict[str, Any]]] = []
    for path in files:
        history = to_openai(list(load_transcript(path).messages))
        if len(history) >= messages:
            base.append(history[:messages])
    source = f"real mini-swe-agent recordings ({len(base)} distinct)"
    if not base:
        from contextwarden.testing import ConversationBuilder

        builder = ConversationBuilder().system("You are a coding agent.").user("Fix the bug.")
        for i in range(messages // 2):
            out = "\n".join(f"src/m{i}.py:{j}: value = {j * 7 + i}" for j in range(60))
            builder.tool_loop(
                "bash", {"command": f"grep -n value src/m{i}.py"}, out, text=f"Step {i}"
            )
        base, source = [to_openai(builder.build())[:messages]], "generated history"
    out = []
    for a in range(agents):
        history = [dict(m) for m in base[a % len(base)]]
        first = next(i for i, m in enumerate(history) if m["role"] == "user")
        if not shared_task:  # else: the same job run by several agents, one identity
            history[first]["content"] = f"[agent {a}] {history[first]['content']}"
        out.append(history)
    return out, source


async def _one(client: httpx.AsyncClient, url: str, payload: bytes) -> tuple[float, bool]:
    start = time.perf_counter()
    try:
        async with client.stream("POST", url, content=payload, timeout=120) as r:
            async for _ in r.aiter_raw():
                pass
            ok = r.status_code == 200
    except httpx.HTTPError:
        ok = False
    return (time.perf_counter() - start) * 1000, ok


async def _agents(url: str, histories: list[list[dict[str, Any]]], model: str) -> list[float]:
    """Every agent runs its calls in order, all agents at once; the latency of each call (ms)."""
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    headers = {"Authorization": "Bearer sk-measure", "Content-Type": "application/json"}
    async with httpx.AsyncClient(limits=limits, headers=headers) as client:

        async def agent(history: list[dict[str, Any]]) -> list[tuple[float, bool]]:
            ends = [i + 1 for i, m in enumerate(history) if m["role"] == "tool"]
            out = []
            for end in ends:
                body = {"model": model, "messages": history[:end], "stream": True}
                out.append(await _one(client, url, json.dumps(body).encode()))
            return out

        results = await asyncio.gather(*(agent(h) for h in histories))
    samples = [s for rs in results for s in rs]
    failed = sum(not ok for _, ok in samples)
    if failed:
        raise RuntimeError(f"{failed} of {len(samples)} requests failed at {url}")
    return [ms for ms, _ in samples]


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far (Linux; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))], 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--agents", type=int, default=16)
    ap.add_argument(
        "--messages", type=int, default=300, help="messages per conversation at the end"
    )
    ap.add_argument("--window", type=int, default=32_000, help="the proxy's --window")
    ap.add_argument("--chunks", type=int, default=20, help="SSE events per reply")
    ap.add_argument("--workers", type=int, default=1, help="the proxy's --workers")
    ap.add_argument(
        "--shared-task",
        action="store_true",
        help="agents on one recording share its task unchanged (the same job run N times)",
    )
    ap.add_argument("--serve-upstream", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_upstream:
        import uvicorn
        from fake_upstream import FakeUpstream

        fake = FakeUpstream(chunks=args.chunks, record=False)
        uvicorn.run(fake.app, host="127.0.0.1", port=args.serve_upstream, log_level="warning")
        return 0

    histories, source = _histories(args.agents, args.messages, args.shared_task)
    tmp = Path(tempfile.mkdtemp(prefix="cw-measure-"))
    up_port, proxy_port = _free_port(), _free_port()
    upstream, proxy = f"http://127.0.0.1:{up_port}", f"http://127.0.0.1:{proxy_port}"
    env = {**os.environ, "CONTEXTWARDEN_DATA_DIR": str(tmp)}
    cmd = [sys.executable, __file__, "--serve-upstream", str(up_port), "--chunks", str(args.chunks)]
    up = subprocess.Popen(cmd, env=env)
    log_path = tmp / "proxy.log"
    with log_path.open("w") as log:
        px = subprocess.Popen(
            [sys.executable, "-m", "contextwarden", "proxy", "--upstream", upstream,
             "--port", str(proxy_port), "--window", str(args.window), "--cache", "memory",
             "--workers", str(args.workers)],
            env=env,
            stderr=log,
        )  # fmt: skip
    try:
        _wait(f"{upstream}/health", up, "fake upstream")
        _wait(f"{proxy}/stats", px, "proxy")
        model = "gpt-4o"
        started = time.monotonic()
        direct = asyncio.run(_agents(f"{upstream}/v1/chat/completions", histories, model))
        direct_s = time.monotonic() - started
        started = time.monotonic()
        cpu = _cpu_seconds(px.pid)
        proxied = asyncio.run(_agents(f"{proxy}/v1/chat/completions", histories, model))
        proxied_s = time.monotonic() - started
        cpu = _cpu_seconds(px.pid) - cpu
        stats = httpx.get(f"{proxy}/stats").json()
    finally:
        px.terminate()
        up.terminate()
        px.wait(timeout=30)
        up.wait(timeout=30)
    lines = [json.loads(x) for x in log_path.read_text().splitlines() if x.startswith("{")]
    transform = [x["transform_ms"] for x in lines if "transform_ms" in x]
    report = {
        "agents": args.agents,
        "messages_per_conversation": args.messages,
        "requests_per_phase": len(direct),
        "history": source,
        "window": args.window,
        "proxy_workers": args.workers,
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "direct_ms": {"p50": _pct(direct, 50), "p90": _pct(direct, 90), "p99": _pct(direct, 99)},
        "proxy_ms": {"p50": _pct(proxied, 50), "p90": _pct(proxied, 90), "p99": _pct(proxied, 99)},
        "added_p50_ms": round(_pct(proxied, 50) - _pct(direct, 50), 1),
        "added_p90_ms": round(_pct(proxied, 90) - _pct(direct, 90), 1),
        "added_p99_ms": round(_pct(proxied, 99) - _pct(direct, 99), 1),
        "added_mean_ms": round(statistics.mean(proxied) - statistics.mean(direct), 1),
        "proxy_transform_ms": {"p50": _pct(transform, 50), "p99": _pct(transform, 99)},
        # the proxy process's CPU (all threads) per request: what 16 agents queue for
        "proxy_cpu_ms_per_request": round(cpu * 1000 / len(proxied), 2),
        "wall_s": {"direct": round(direct_s, 1), "proxy": round(proxied_s, 1)},
        "tokens": {"before": stats["tokens_before"], "after": stats["tokens_after"]},
        "proxy_errors": stats["errors"],
        "skipped": stats["skipped"],
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
