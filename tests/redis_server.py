"""A throw-away redis-server on loopback for tests (shared by the summary-cache and proxy tests)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["free_port", "redis_server"]


def free_port() -> int:
    """A TCP port nobody listens on right now, on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def redis_server(folder: Path) -> Iterator[str | None]:
    """Start ``redis-server`` on a free loopback port (no persistence, files in ``folder``) and
    yield its URL; yield ``None`` when the binary is not installed or does not start."""
    import redis

    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    port = free_port()
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(folder),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + 10
    try:
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    url = None  # type: ignore[assignment]
                    break
                time.sleep(0.05)
        client.close()
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
