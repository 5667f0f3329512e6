"""Measure the proxy under the attacks of a hostile audit, on loopback, bounded in count and time.

    PYTHONPATH=src python tests/proxy/measure_attacks.py memory    # slow uploads + trickled heads
    PYTHONPATH=src python tests/proxy/measure_attacks.py state     # 120 conversations of 6.8 MB
    PYTHONPATH=src python tests/proxy/measure_attacks.py hang      # 45 compactions hang
    PYTHONPATH=src python tests/proxy/measure_attacks.py tiny      # 100,000 tiny messages
    PYTHONPATH=src python tests/proxy/measure_attacks.py timing    # hit vs miss across clients

The proxy runs as its own process (``python -m contextwarden proxy``), so its RSS is its own; the
fake upstream (tests/proxy/fake_upstream.py) runs in this one. Figures print as JSON lines. Not a
test: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1])]
from fake_upstream import FakeUpstream, serve  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def proxy_process(upstream: str, *args: str) -> Iterator[tuple[str, int]]:
    """``contextwarden proxy`` in a child process; yields its URL and pid."""
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "contextwarden",
        "proxy",
        "--upstream",
        upstream,
        "--port",
        str(port),
        "--cache",
        "memory",
        *args,
    ]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    child = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                httpx.get(f"{url}/stats", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        yield url, child.pid
    finally:
        child.terminate()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def history(task: str, steps: int, line: int = 60) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": task},
    ]
    for i in range(steps):
        body = "\n".join(f"line {j} of src/mod_{i}.py: value = {i * j} {task}" for j in range(line))
        call = {"id": f"call_{i}", "type": "function"}
        call["function"] = {"name": "bash", "arguments": f'{{"cmd": "cat {i}"}}'}
        out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        out.append({"role": "tool", "tool_call_id": f"call_{i}", "content": body})
    return out


def _latencies(url: str, n: int, key: str = "sk-bystander") -> list[float]:
    out = []
    small = {"model": "gpt-4o", "messages": [{"role": "user", "content": "ping"}]}
    with httpx.Client(timeout=120) as client:
        for _ in range(n):
            t = time.perf_counter()
            client.post(
                f"{url}/v1/chat/completions",
                json=small,
                headers={"Authorization": f"Bearer {key}"},
            )
            out.append((time.perf_counter() - t) * 1000)
    return out


# -- memory: 40 slow 30 MiB uploads and 1,000 trickled heads ----------------------------------
def memory(uploads: int, heads: int, seconds: float) -> None:
    fake = FakeUpstream(record=False)
    with serve(fake.app, log_level="critical") as up, proxy_process(up) as (url, pid):
        port = int(url.rsplit(":", 1)[1])
        base = rss_mb(pid)
        closed_uploads: list[tuple[float, str]] = []
        started = time.monotonic()
        stop = threading.Event()

        def upload() -> None:
            sock = socket.create_connection(("127.0.0.1", port))
            sock.settimeout(5)
            head = (
                "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                "content-type: application/json\r\ncontent-length: 31457280\r\n\r\n"
            )
            status = "open"
            try:
                sock.sendall(head.encode() + b'{"model":"gpt-4o","messages":[')
                chunk = b" " * (1 << 20)
                for _ in range(29):  # most of it at once, the rest a byte every 5 s
                    sock.sendall(chunk)
                while not stop.is_set():
                    sock.sendall(b" ")
                    try:
                        got = sock.recv(200)
                    except TimeoutError:
                        continue
                    status = got.split(b"\r\n", 1)[0].decode() if got else "closed"
                    break
            except OSError as exc:
                status = f"closed ({type(exc).__name__})"
            closed_uploads.append((time.monotonic() - started, status))
            sock.close()

        socks: list[socket.socket] = []
        for _ in range(heads):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
            s.setblocking(False)
            socks.append(s)
        threads = [threading.Thread(target=upload, daemon=True) for _ in range(uploads)]
        for t in threads:
            t.start()
        peak = 0.0
        heads_closed_at: list[float] = []
        open_heads = set(range(heads))
        latencies: list[float] = []
        tick = 0
        while time.monotonic() - started < seconds:
            time.sleep(1)
            tick += 1
            peak = max(peak, rss_mb(pid))
            for i in list(open_heads):
                try:
                    if tick % 5 == 0:
                        socks[i].sendall(f"X-Pad-{tick}: 1\r\n".encode())
                    if socks[i].recv(100) == b"":
                        raise ConnectionResetError
                except BlockingIOError:
                    continue
                except OSError:
                    open_heads.discard(i)
                    heads_closed_at.append(time.monotonic() - started)
            latencies += _latencies(url, 2)
        stop.set()
        for t in threads:
            t.join(10)
        for s in socks:
            s.close()
        emit(
            attack="slow uploads + trickled heads",
            uploads=uploads,
            heads=heads,
            rss_start_mb=round(base),
            rss_peak_mb=round(peak),
            uploads_ended=sorted({status for _, status in closed_uploads}, key=str),
            uploads_ended_by_s=round(max((t for t, _ in closed_uploads), default=0), 1),
            heads_closed=heads - len(open_heads),
            heads_closed_by_s=round(max(heads_closed_at, default=0), 1),
            bystander_p50_ms=round(statistics.median(latencies), 1),
            bystander_max_ms=round(max(latencies), 1),
        )


# -- state: 120 conversations of 6.8 MB ---------------------------------------------------------
def state(conversations: int, budget: int) -> None:
    fake = FakeUpstream(record=False)
    # a model the registry does not know, no --window: the lossless layers run, nothing is dropped
    # (the audit's setting: the whole history is held)
    args = ["--max-state-bytes", str(budget), "--summarizer", "extractive"]
    with serve(fake.app, log_level="critical") as up, proxy_process(up, *args) as (url, pid):
        base = rss_mb(pid)
        peak = 0.0
        with httpx.Client(timeout=300) as client:
            for c in range(conversations):
                h = history(f"conversation {c}", 900, line=130)  # about 6.8 MB of JSON
                body = json.dumps({"model": "local-llm", "messages": h}).encode()
                client.post(
                    f"{url}/v1/chat/completions",
                    content=body,
                    headers={
                        "Authorization": f"Bearer sk-{c % 8}",
                        "content-type": "application/json",
                    },
                )
                peak = max(peak, rss_mb(pid))
                if c % 20 == 19:
                    stats = client.get(f"{url}/stats").json()
                    emit(
                        conversations=c + 1,
                        body_mb=round(len(body) / 1e6, 2),
                        rss_mb=round(rss_mb(pid)),
                        state_mb=round(stats["state_bytes"] / 1e6),
                        clients=stats["clients"],
                        evicted=stats["evicted_conversations"],
                    )
        emit(
            attack="120 big conversations",
            budget_mb=round(budget / 1e6),
            rss_start_mb=round(base),
            rss_peak_mb=round(peak),
        )


# -- hang: 45 compactions on a hanging summarizer ------------------------------------------------
def hang(compactions: int, timeout_s: float, keys: int) -> None:
    fake = FakeUpstream(record=False, sign_summaries=True, summary_delay=120)
    config = Path(f"/tmp/cw-measure-{os.getpid()}.yaml")
    config.write_text(f"summarizer:\n  timeout_s: {timeout_s}\n")
    try:
        with (
            serve(fake.app, log_level="critical") as up,
            proxy_process(up, "--window", "8000", "--config", str(config)) as (url, pid),
        ):
            durations: list[float] = []

            def compacting(i: int) -> None:
                t = time.perf_counter()
                httpx.post(
                    f"{url}/v1/chat/completions",
                    json={"model": "gpt-4o", "messages": history(f"job {i}", 60)[:100]},
                    headers={"Authorization": f"Bearer sk-{i % keys}"},
                    timeout=300,
                )
                durations.append(time.perf_counter() - t)

            with ThreadPoolExecutor(compactions) as pool:
                for i in range(compactions):
                    pool.submit(compacting, i)
                # until the summary calls under way stop growing (each client's summary pool
                # full; the other compactions got the extractive summary)
                seen = -1
                while fake.summary_calls != seen or fake.summary_calls == 0:
                    seen = fake.summary_calls
                    time.sleep(1)
                hanging = compactions - len(durations)
                latencies = _latencies(url, 20)
                still = compactions - len(durations)
            fake.summary_gate.set()
            emit(
                attack="compactions hanging on the summarizer",
                compactions=compactions,
                timeout_s=timeout_s,
                keys=keys,
                bystander_p50_ms=round(statistics.median(latencies), 1),
                bystander_max_ms=round(max(latencies), 1),
                compaction_max_s=round(max(durations), 2),
                bystander_ms=[round(x) for x in latencies],
                summary_calls=fake.summary_calls,
                hanging_while_measured=[hanging, still],
            )
    finally:
        config.unlink(missing_ok=True)


# -- tiny: 100,000 tiny messages -----------------------------------------------------------------
def tiny(n: int) -> None:
    fake = FakeUpstream(record=False)
    with (
        serve(fake.app, log_level="critical") as up,
        proxy_process(up, "--summarizer", "extractive") as (url, pid),
    ):
        msgs = [{"role": "system", "content": "s"}]
        msgs += [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(n)
        ]
        body = json.dumps({"model": "gpt-4o", "messages": msgs}).encode()
        t = time.perf_counter()
        r = httpx.post(
            f"{url}/v1/chat/completions",
            content=body,
            headers={"content-type": "application/json"},
            timeout=600,
        )
        emit(
            attack="tiny messages",
            messages=n,
            body_mb=round(len(body) / 1e6, 2),
            seconds=round(time.perf_counter() - t, 2),
            status=r.status_code,
            compacted=r.headers.get("x-contextwarden-compacted"),
            skipped=r.headers.get("x-contextwarden-skipped"),
        )


# -- timing: can client B tell whether client A sent a history? -----------------------------------
def timing(trials: int) -> None:
    fake = FakeUpstream(record=False)
    with (
        serve(fake.app, log_level="critical") as up,
        proxy_process(up, "--window", "8000", "--summarizer", "extractive") as (url, pid),
    ):
        hit: list[float] = []
        miss: list[float] = []
        hit_headers: list[tuple[str, str]] = []
        miss_headers: list[tuple[str, str]] = []
        with httpx.Client(timeout=120) as client:

            def send(h: list[dict[str, Any]], key: str) -> tuple[float, tuple[str, str]]:
                t = time.perf_counter()
                r = client.post(
                    f"{url}/v1/chat/completions",
                    json={"model": "gpt-4o", "messages": h},
                    headers={"Authorization": f"Bearer {key}"},
                )
                return (time.perf_counter() - t) * 1000, (
                    r.headers.get("x-contextwarden-tokens-after", ""),
                    r.headers.get("x-contextwarden-compacted", ""),
                )

            for i in range(trials):
                sent = history(f"victim task {i}", 60)[:110]
                fresh = history(f"other task {i}", 60)[:110]
                send(sent, "sk-victim")  # A sends it: a "hit" for B if state were shared
                if i % 2:
                    ms, hd = send(sent, "sk-prober")
                    hit.append(ms)
                    hit_headers.append(hd)
                    ms, hd = send(fresh, "sk-prober")
                    miss.append(ms)
                    miss_headers.append(hd)
                else:
                    ms, hd = send(fresh, "sk-prober")
                    miss.append(ms)
                    miss_headers.append(hd)
                    ms, hd = send(sent, "sk-prober")
                    hit.append(ms)
                    hit_headers.append(hd)
        h, m = statistics.median(hit), statistics.median(miss)
        emit(
            attack="hit vs miss across clients",
            trials=trials,
            hit_median_ms=round(h, 1),
            miss_median_ms=round(m, 1),
            diff_pct=round(abs(h - m) / m * 100, 1),
            headers_same=[x[1] for x in hit_headers] == [x[1] for x in miss_headers],
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("memory")
    p.add_argument("--uploads", type=int, default=40)
    p.add_argument("--heads", type=int, default=1000)
    p.add_argument("--seconds", type=float, default=80)
    p = sub.add_parser("state")
    p.add_argument("--conversations", type=int, default=120)
    p.add_argument("--budget", type=int, default=512 << 20)
    p = sub.add_parser("hang")
    p.add_argument("--compactions", type=int, default=45)
    p.add_argument("--timeout-s", type=float, default=4)
    p.add_argument("--keys", type=int, default=45, help="credentials the compactions use")
    p = sub.add_parser("tiny")
    p.add_argument("--messages", type=int, default=100_000)
    p = sub.add_parser("timing")
    p.add_argument("--trials", type=int, default=30)
    a = parser.parse_args()
    if a.what == "memory":
        memory(min(a.uploads, 100), min(a.heads, 2000), min(a.seconds, 300))
    elif a.what == "state":
        state(min(a.conversations, 200), a.budget)
    elif a.what == "hang":
        hang(min(a.compactions, 100), a.timeout_s, max(1, a.keys))
    elif a.what == "tiny":
        tiny(min(a.messages, 200_000))
    else:
        timing(min(a.trials, 100))


if __name__ == "__main__":
    main()
