"""Test doubles for the proxy tests (kept out of conftest.py so test modules can import them)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from contextwarden import FormatError, UnknownModelError

__all__ = ["StartProxy", "StubResult", "StubWarden", "agent_history"]

#: ``start_proxy(upstream_url, warden=None, **config) -> proxy URL`` (the fixture's type).
StartProxy = Callable[..., str]


@dataclass(frozen=True)
class StubResult:
    tokens_before: int
    tokens_after: int
    compaction: Any = None


class StubWarden:
    """A predictable warden for protocol tests: keeps the first message and the last ``keep``
    (OpenAI) or the last ``keep`` (Anthropic, so the user turn stays first); "tokens" are JSON
    characters / 4. ``unknown-model`` without a window raises UnknownModelError; a message that is
    not an object raises FormatError. Records every call."""

    def __init__(self, keep: int = 2) -> None:
        self.keep = keep
        self.calls: list[dict[str, Any]] = []

    @staticmethod
    def _size(obj: Any) -> int:
        return len(json.dumps(obj)) // 4

    def _check(self, messages: list[dict[str, Any]], model: str | None, window: int | None) -> None:
        if model == "unknown-model" and window is None:
            raise UnknownModelError("no context window known for model 'unknown-model'")
        for i, m in enumerate(messages):
            if not isinstance(m, dict):
                raise FormatError("expected an object", index=i)

    def transform_openai(
        self,
        messages: list[dict[str, Any]],
        *,
        model: str | None = None,
        window: int | None = None,
        tools: Sequence[Any] | None = None,
    ) -> tuple[list[dict[str, Any]], StubResult]:
        self.calls.append({"api": "openai", "model": model, "window": window, "tools": tools})
        self._check(messages, model, window)
        out = messages if len(messages) <= self.keep + 1 else [messages[0], *messages[-self.keep :]]
        compaction = (
            None
            if out is messages
            else type("C", (), {"compacted_count": len(messages) - len(out)})()
        )
        return list(out), StubResult(self._size(messages), self._size(out), compaction)

    def transform_anthropic(
        self,
        messages: list[dict[str, Any]],
        *,
        system: Any = None,
        model: str | None = None,
        window: int | None = None,
        tools: Sequence[Any] | None = None,
    ) -> tuple[Any, list[dict[str, Any]], StubResult]:
        self.calls.append(
            {"api": "anthropic", "model": model, "window": window, "tools": tools, "system": system}
        )
        self._check(messages, model, window)
        out = messages if len(messages) <= self.keep else messages[-self.keep :]
        return system, list(out), StubResult(self._size(messages), self._size(out))


def agent_history(task: str, steps: int) -> list[dict[str, Any]]:
    """An OpenAI chat history: a system prompt, the task, then ``steps`` tool calls, each with
    a 60-line result."""
    out: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": task},
    ]
    for i in range(steps):
        body = "\n".join(f"line {j} of src/mod_{i}.py: value = {i * j}" for j in range(60))
        out.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": f'{{"cmd": "cat {i}"}}'},
                    }
                ],
            }
        )
        out.append({"role": "tool", "tool_call_id": f"call_{i}", "content": body})
    return out


def wait_listening(proc: subprocess.Popen[Any], base: str, seconds: float = 30) -> None:
    """Wait (bounded) until the proxy process ``proc`` answers on ``base``."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            httpx.get(f"{base}/stats")
            return
        except httpx.TransportError:
            assert proc.poll() is None and time.monotonic() < deadline, "the proxy did not start"
            time.sleep(0.1)
