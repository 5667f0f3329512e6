"""Requests of different conversations run in parallel through the proxy: no lock is held around
the warden but each conversation's own. A request whose conversation is in the middle of a slow
compaction does not hold up another agent's request, which goes upstream and back meanwhile."""

from __future__ import annotations

import threading
from typing import Any

import httpx
from fake_upstream import FakeUpstream
from proxy_doubles import StartProxy

from contextwarden import Warden


class GatedCompactor:
    """Blocks in ``compact`` until released, then declines (the warden cuts the window)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def compact(self, messages: Any, **kwargs: Any) -> None:
        self.entered.set()
        assert self.release.wait(30), "never released"
        return None


def _history(task: str, steps: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "user", "content": task}]
    for i in range(steps):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
        out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        out.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"line {i}\n" * 80})
    return out


def test_a_conversation_compacting_does_not_hold_up_another(
    upstream: tuple[FakeUpstream, str], start_proxy: StartProxy
) -> None:
    fake, url = upstream
    gate = GatedCompactor()
    proxy = start_proxy(url, warden=Warden(compactor=gate), window=8_000)
    headers = {"Authorization": "Bearer sk-test"}
    slow: dict[str, Any] = {}

    def post_big() -> None:
        body = {"model": "gpt-4o", "messages": _history("TASK-A", 40)}
        slow["r"] = httpx.post(
            f"{proxy}/v1/chat/completions", json=body, headers=headers, timeout=60
        )

    a = threading.Thread(target=post_big)
    a.start()
    try:
        assert gate.entered.wait(30)  # A's call is inside its compaction, holding its conversation
        small = {"model": "gpt-4o", "messages": _history("TASK-B", 2)}
        r = httpx.post(f"{proxy}/v1/chat/completions", json=small, headers=headers, timeout=20)
        assert r.status_code == 200
        assert "TASK-B" in str(fake.last.json["messages"])
        assert "r" not in slow  # B went upstream and back while A was still held
    finally:
        gate.release.set()
        a.join(60)
    assert slow["r"].status_code == 200
    assert "TASK-A" in str(fake.last.json["messages"])
