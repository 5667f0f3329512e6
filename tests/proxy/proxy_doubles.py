"""Test doubles for the proxy tests (kept out of conftest.py so test modules can import them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from redis_server import free_port

from contextwarden import FormatError, UnknownModelError

__all__ = [
    "ProxyProcess",
    "StartProxy",
    "StubResult",
    "StubWarden",
    "GEMINI_CLI_CONTEXT",
    "agent_history",
    "anthropic_text",
    "gemini_history",
    "proxy_process",
    "send_anthropic",
    "wait_listening",
]

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
        max_tokens: int | None = None,
    ) -> tuple[list[dict[str, Any]], StubResult]:
        self.calls.append(
            {
                "api": "openai",
                "model": model,
                "window": window,
                "tools": tools,
                "max_tokens": max_tokens,
            }
        )
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
        max_tokens: int | None = None,
    ) -> tuple[Any, list[dict[str, Any]], StubResult]:
        self.calls.append(
            {
                "api": "anthropic",
                "model": model,
                "window": window,
                "tools": tools,
                "system": system,
                "max_tokens": max_tokens,
            }
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


def send_anthropic(proxy: str, system: Any, messages: list[dict[str, Any]]) -> httpx.Response:
    """POST one Anthropic Messages request (claude-sonnet-4-5) through ``proxy``; it must be
    answered 200."""
    body = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": system}
    headers = {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}
    r = httpx.post(
        f"{proxy}/v1/messages", json={**body, "messages": messages}, headers=headers, timeout=60
    )
    assert r.status_code == 200, r.text
    return r


def anthropic_text(message: dict[str, Any]) -> str:
    """The text of an Anthropic message: its string content, or its blocks' text (a tool
    result's content where it is a string), one block a line."""
    content = message["content"]
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text") or b.get("content") or "") for b in content)


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


@dataclass
class ProxyProcess:
    """A running ``contextwarden proxy``: its URL, and what it wrote to stderr once stopped."""

    base: str
    stderr: str = ""
    proc: subprocess.Popen[Any] | None = field(default=None, repr=False)

    def ready(self) -> str:
        """Its URL, once it answers (bounded wait)."""
        assert self.proc is not None
        wait_listening(self.proc, self.base)
        return self.base


@contextmanager
def proxy_process(
    upstream_url: str,
    *args: str,
    data_dir: Path,
    env: dict[str, str] | None = None,
    wait: bool = True,
) -> Iterator[ProxyProcess]:
    """The real ``contextwarden proxy --upstream URL ARGS...`` in a process of its own, on a free
    loopback port, its data (and its stderr, read back when it stops) in ``data_dir``; given
    once it answers, or at once without ``wait`` (:meth:`ProxyProcess.ready` waits: several
    processes start side by side)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = data_dir / "stderr.log"
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "contextwarden", "proxy", "--upstream", upstream_url]
            + ["--port", str(port), *args],
            stderr=err,
            text=True,
            env={**os.environ, "CONTEXTWARDEN_DATA_DIR": str(data_dir), **(env or {})},
        )
    running = ProxyProcess(f"http://127.0.0.1:{port}", proc=proc)
    try:
        if wait:
            running.ready()
        yield running
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        running.stderr = log.read_text()


#: Gemini CLI's first user turn (its shape: ``getEnvironmentContext`` in gemini-cli's
#: packages/core/src/utils/environmentContext.ts), then the user's words in the next one.
GEMINI_CLI_CONTEXT = (
    "<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n"
    "Today's date is Saturday, November 28, 2026 (formatted according to the user's locale).\n"
    "My operating system is: linux\nThe project's temporary directory is: /tmp/gemini/abc\n"
    "Showing up to 200 items (files + folders).\n/work/app/\n├───pyproject.toml\n└───src/\n"
    "</session_context>"
)


def gemini_history(task: str, steps: int, *, signed: bool = True) -> list[dict[str, Any]]:
    """Gemini CLI ``contents``: its context turn, the task, then ``steps`` model turns each
    calling ``read_file`` (its ``thoughtSignature`` on the call, as Gemini 3 returns it; every
    third turn opening with a signed empty text part) and the user turn with the response."""
    out: list[dict[str, Any]] = [
        {"role": "user", "parts": [{"text": GEMINI_CLI_CONTEXT}]},
        {"role": "user", "parts": [{"text": task}]},
    ]
    for i in range(steps):
        call: dict[str, Any] = {"functionCall": {"name": "read_file", "args": {"path": f"m{i}.py"}}}
        parts: list[dict[str, Any]] = [call]
        if signed:
            call["thoughtSignature"] = f"c2lnLWNhbGwt{i:04d}"
            if i % 3 == 0:
                parts.insert(0, {"text": "", "thoughtSignature": f"c2lnLXRleHQt{i:04d}"})
        out.append({"role": "model", "parts": parts})
        body = "\n".join(f"line {j} of src/m{i}.py: value = {i * j}" for j in range(60))
        response = {"name": "read_file", "response": {"output": body}}
        out.append({"role": "user", "parts": [{"functionResponse": response}]})
    return out
