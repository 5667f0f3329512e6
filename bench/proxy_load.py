"""Load check for the proxy (issue 6): N concurrent streaming clients on loopback, the latency the
proxy adds (p50, p99) side by side with the same clients calling the fake upstream directly.

Three processes, as in use: the fake upstream (``tests/proxy/fake_upstream.py``, streaming
``--chunks`` SSE events ``--chunk-delay`` seconds apart), the real ``contextwarden proxy`` command
in front of it, and this process running the clients (asyncio + httpx, every request streamed).
Two scenarios:

* ``small``: a 3-message chat per request: the cost of the extra hop, parsing and a trivial
  transform;
* ``agent``: each client is an agent with its own conversation (the first user message names the
  client) replaying an agent loop on a long real history (mini-swe-agent recordings, or a
  generated one without the shared data): request ``j`` carries the history up to its
  ``cut + j``-th unit, as a stateless proxy sees successive calls. The proxy reduces it to
  ``--window``, so this is the cost of the warden under concurrency. Calls of different
  conversations run in parallel in the proxy's worker threads (no lock is held around the
  warden); being one Python process, they share one core's worth of interpreter time.

For each: time to first byte and to last byte, per request, direct and through the proxy; the
difference of the percentiles is the proxy's added latency. The proxy's own log lines give the
transform time. Loops are bounded (``--clients`` x ``--requests``, a timeout on every request).
Writes ``bench/results/proxy_load.json``.

    python bench/proxy_load.py [--clients 16] [--requests 20] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [
    str(ROOT),
    str(ROOT / "tests"),
    str(ROOT / "tests" / "proxy"),
]  # bench._data; the fake upstream

import httpx  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "proxy_load.json"
REQUEST_TIMEOUT = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_upstream(port: int, chunks: int, chunk_delay: float) -> None:
    """Run the fake upstream in this process (the child mode of this script)."""
    import uvicorn
    from fake_upstream import FakeUpstream

    fake = FakeUpstream(chunks=chunks, chunk_delay=chunk_delay, record=False)
    uvicorn.run(fake.app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def wait_ready(url: str, proc: subprocess.Popen[Any], what: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start") from None
            time.sleep(0.1)


def histories(messages: int) -> tuple[list[dict[str, Any]], str]:
    """A long agent history as OpenAI messages, and where it came from."""
    from bench._data import generated_history, have_real_data, real_history
    from contextwarden.formats import to_openai

    if have_real_data():
        return to_openai(list(real_history(messages))), f"real mini-swe-agent, {messages} messages"
    return to_openai(list(generated_history(messages))), f"generated, {messages} messages"


def unit_ends(history: list[dict[str, Any]]) -> list[int]:
    """Lengths at which the history ends on a tool result (a request an agent would send)."""
    return [i + 1 for i, m in enumerate(history) if m["role"] == "tool"]


def own_conversation(history: list[dict[str, Any]], client: int) -> list[dict[str, Any]]:
    """``history`` with its first user message naming ``client``: a conversation of its own."""
    out = [dict(m) for m in history]
    first = next(i for i, m in enumerate(out) if m["role"] == "user")
    out[first]["content"] = f"[client {client}] {out[first]['content']}"
    return out


def body(model: str, messages: list[dict[str, Any]]) -> bytes:
    return json.dumps({"model": model, "messages": messages, "stream": True}).encode()


async def one(client: httpx.AsyncClient, url: str, payload: bytes) -> tuple[float, float, bool]:
    """(time to first byte, time to last byte, ok) for one streamed request, in ms."""
    start = time.perf_counter()
    first = None
    try:
        async with client.stream("POST", url, content=payload, timeout=REQUEST_TIMEOUT) as r:
            async for _ in r.aiter_raw():
                if first is None:
                    first = time.perf_counter()
            ok = r.status_code == 200
    except httpx.HTTPError:
        ok = False
    end = time.perf_counter()
    return ((first or end) - start) * 1000, (end - start) * 1000, ok


async def run_clients(url: str, plans: list[list[bytes]]) -> list[tuple[float, float, bool]]:
    """Every client runs its plan (a list of bodies) in order; all clients at once."""
    limits = httpx.Limits(max_connections=len(plans) * 2, max_keepalive_connections=len(plans) * 2)
    headers = {"Authorization": "Bearer sk-bench", "Content-Type": "application/json"}
    async with httpx.AsyncClient(limits=limits, headers=headers) as client:

        async def client_loop(plan: list[bytes]) -> list[tuple[float, float, bool]]:
            return [await one(client, url, payload) for payload in plan]

        results = await asyncio.gather(*(client_loop(p) for p in plans))
    return [r for rs in results for r in rs]


def pct(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return round(ordered[k], 2)


def summary(samples: list[tuple[float, float, bool]]) -> dict[str, Any]:
    ok = [s for s in samples if s[2]]
    ttfb, total = [s[0] for s in ok], [s[1] for s in ok]
    return {
        "requests": len(samples),
        "errors": len(samples) - len(ok),
        "ttfb_ms": {"p50": pct(ttfb, 50), "p99": pct(ttfb, 99)} if ok else None,
        "total_ms": {"p50": pct(total, 50), "p99": pct(total, 99)} if ok else None,
    }


def added(direct: dict[str, Any], proxied: dict[str, Any]) -> dict[str, float]:
    return {
        f"{kind}_{p}": round(proxied[f"{kind}_ms"][p] - direct[f"{kind}_ms"][p], 2)
        for kind in ("ttfb", "total")
        for p in ("p50", "p99")
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--clients", type=int, default=16, help="concurrent clients (default 16)")
    ap.add_argument("--requests", type=int, default=20, help="requests per client (default 20)")
    ap.add_argument("--chunks", type=int, default=20, help="SSE events per reply (default 20)")
    ap.add_argument("--chunk-delay", type=float, default=0.002, help="seconds between events")
    ap.add_argument("--history", type=int, default=300, help="agent history length (messages)")
    ap.add_argument("--window", type=int, default=32_000, help="the proxy's --window")
    ap.add_argument("--workers", type=int, default=1, help="the proxy's --workers (default 1)")
    ap.add_argument("--quick", action="store_true", help="4 clients x 5 requests (a smoke run)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--serve-upstream", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve_upstream:
        serve_upstream(args.serve_upstream, args.chunks, args.chunk_delay)
        return 0
    if args.quick:
        args.clients, args.requests = 4, 5

    model = "gpt-4o"
    history, source = histories(args.history)
    ends = unit_ends(history)
    per_client = args.requests
    if len(ends) < per_client + args.clients:
        raise SystemExit(f"history too short: {len(ends)} tool results for the plan")
    small = body(
        model,
        [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "hi"},
        ],
    )
    # Client i starts at a different unit so the clients do not send identical bodies.
    start = max(0, len(ends) - per_client - args.clients)
    agent_plans = [
        [body(model, own[: ends[start + i + j]]) for j in range(per_client)]
        for i, own in ((i, own_conversation(history, i)) for i in range(args.clients))
    ]
    small_plans = [[small] * per_client for _ in range(args.clients)]

    tmp = Path(tempfile.mkdtemp(prefix="cw-proxy-bench-"))
    up_port, proxy_port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{up_port}"
    proxy = f"http://127.0.0.1:{proxy_port}"
    env = {**os.environ, "CONTEXTWARDEN_DATA_DIR": str(tmp)}
    up_proc = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--serve-upstream",
            str(up_port),
            "--chunks",
            str(args.chunks),
            "--chunk-delay",
            str(args.chunk_delay),
        ],
        env=env,
    )
    log = (tmp / "proxy.log").open("w")
    proxy_proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "contextwarden",
            "proxy",
            "--upstream",
            upstream,
            "--port",
            str(proxy_port),
            "--window",
            str(args.window),
            "--workers",
            str(args.workers),
        ],
        env=env,
        stderr=log,
    )
    report: dict[str, Any] = {
        "what": "added latency of the proxy: N concurrent streaming clients, direct vs through it",
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        },
        "config": {
            "clients": args.clients,
            "requests_per_client": per_client,
            "chunks": args.chunks,
            "chunk_delay_s": args.chunk_delay,
            "window": args.window,
            "proxy_workers": args.workers,
            "agent_history": source,
            "agent_body_kb": round(
                sum(len(b) for p in agent_plans for b in p) / (args.clients * per_client) / 1024, 1
            ),
        },
        "scenarios": {},
    }
    try:
        wait_ready(f"{upstream}/health", up_proc, "fake upstream")
        wait_ready(f"{proxy}/stats", proxy_proc, "proxy")
        for name, plans in (("small", small_plans), ("agent", agent_plans)):
            # warm both paths (connections, tokenizer tables) outside the measurement
            asyncio.run(run_clients(f"{upstream}/v1/chat/completions", [p[:1] for p in plans[:2]]))
            asyncio.run(run_clients(f"{proxy}/v1/chat/completions", [p[:1] for p in plans[:2]]))
            direct = summary(asyncio.run(run_clients(f"{upstream}/v1/chat/completions", plans)))
            proxied = summary(asyncio.run(run_clients(f"{proxy}/v1/chat/completions", plans)))
            report["scenarios"][name] = {
                "direct": direct,
                "proxy": proxied,
                "added_ms": added(direct, proxied),
            }
            print(
                f"{name:6s} direct  ttfb p50 {direct['ttfb_ms']['p50']:8.1f} p99 "
                f"{direct['ttfb_ms']['p99']:8.1f} | total p50 {direct['total_ms']['p50']:8.1f} "
                f"p99 {direct['total_ms']['p99']:8.1f} ms"
            )
            print(
                f"{'':6s} proxy   ttfb p50 {proxied['ttfb_ms']['p50']:8.1f} p99 "
                f"{proxied['ttfb_ms']['p99']:8.1f} | total p50 {proxied['total_ms']['p50']:8.1f} "
                f"p99 {proxied['total_ms']['p99']:8.1f} ms  (errors {proxied['errors']})"
            )
        report["proxy_stats"] = httpx.get(f"{proxy}/stats").json()
    finally:
        for proc in (proxy_proc, up_proc):
            proc.terminate()
            proc.wait(timeout=30)
        log.close()
    lines = [
        json.loads(x) for x in (tmp / "proxy.log").read_text().splitlines() if x.startswith("{")
    ]
    chat = [x for x in lines if x.get("route") == "openai"]
    big = [x for x in chat if (x.get("tokens_before") or 0) > 1000]
    if big:
        report["proxy_transform_ms_agent"] = {
            "p50": pct([x["transform_ms"] for x in big], 50),
            "p99": pct([x["transform_ms"] for x in big], 99),
            "tokens_before_p50": pct([x["tokens_before"] for x in big], 50),
            "tokens_after_p50": pct([x["tokens_after"] for x in big], 50),
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
