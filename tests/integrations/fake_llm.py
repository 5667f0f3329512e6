"""A scripted model on loopback that speaks OpenAI Chat Completions and Gemini
``generateContent``, and checks every request it receives as the provider would.

The model plays an agent that calls ``read_file`` ``calls`` times (one call a turn, on the
paths ``src/mod_K.py``) and then answers ``FINAL``; it also answers at the steps in ``answers``
(the end of one user turn of several). Each request is recorded with the problems
found in it (tool results without their call, calls left unanswered, roles out of order, an
empty message); a request with problems gets the 400 the provider would give, so a framework
that sends one fails loudly.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import upstream_wire as wire

FINAL = "Fixed: src/io.py now closes the file."


def file_body(k: int) -> str:
    """The content of ``src/mod_K.py``: about 2,300 tokens."""
    return "\n".join(
        f"src/mod_{k}.py:{j}: total = compute({j}, {k * j}) # step {j}" for j in range(90)
    )


@dataclass
class Received:
    api: str  # "openai" | "gemini"
    body: dict[str, Any]
    problems: list[str] = field(default_factory=list)


def openai_problems(body: dict[str, Any]) -> list[str]:
    """What OpenAI refuses in a chat request: a tool message not right after the assistant
    message that made its call, a call without its result, an empty user message."""
    problems: list[str] = []
    messages = body.get("messages") or []
    if not messages:
        return ["messages: the list is empty"]
    open_calls: set[str] = set()
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "tool":
            if m.get("tool_call_id") not in open_calls:
                problems.append(
                    f"messages[{i}]: tool result {m.get('tool_call_id')!r} without its call"
                )
            open_calls.discard(m.get("tool_call_id"))
            continue
        if open_calls:
            problems.append(f"messages[{i}]: calls {sorted(open_calls)} left without results")
            open_calls = set()
        if role == "assistant":
            open_calls = {c["id"] for c in m.get("tool_calls") or []}
            if not open_calls and not m.get("content"):
                problems.append(f"messages[{i}]: empty assistant message")
        elif role in ("user", "system", "developer"):
            if not m.get("content"):
                problems.append(f"messages[{i}]: empty {role} message")
        else:
            problems.append(f"messages[{i}]: unknown role {role!r}")
    if open_calls:
        problems.append(f"the request ends with calls {sorted(open_calls)} unanswered")
    return problems


def gemini_problems(body: dict[str, Any]) -> list[str]:
    """What Gemini refuses: a function response turn whose responses do not match the calls of
    the model turn just before it, calls not answered in the next turn, a turn without parts, a
    role other than user and model. (A model turn may come first: ADK's own events compaction
    sends its summary as one.)"""
    problems: list[str] = []
    contents = body.get("contents") or []
    if not contents:
        return ["contents: the list is empty"]
    calls: list[str] = []
    for i, c in enumerate(contents):
        parts = c.get("parts") or []
        if c.get("role") not in ("user", "model"):
            problems.append(f"contents[{i}]: unknown role {c.get('role')!r}")
        if not parts:
            problems.append(f"contents[{i}]: a turn without parts")
        responses = [p["functionResponse"]["name"] for p in parts if "functionResponse" in p]
        if calls and sorted(responses) != sorted(calls):
            problems.append(f"contents[{i}]: responses {responses} for the calls {calls}")
        elif responses and not calls:
            problems.append(f"contents[{i}]: function responses {responses} without calls")
        calls = [p["functionCall"]["name"] for p in parts if "functionCall" in p]
        if calls and c.get("role") != "model":
            problems.append(f"contents[{i}]: function calls in a {c.get('role')!r} turn")
    if calls:
        problems.append(f"the request ends with calls {calls} unanswered")
    return problems


class FakeLLM:
    """The server; ``base_url`` for OpenAI clients (``/v1``), ``root`` for Gemini clients."""

    def __init__(self, calls: int, answers: frozenset[int] = frozenset()) -> None:
        self.calls = calls
        self.answers = answers
        self.received: list[Received] = []
        self._step = 0
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:  # noqa: N802
                size = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(size) or b"{}")
                status, reply, stream = owner._answer(self.path, body)
                if stream:
                    self._send_stream(reply)
                    return
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _send_stream(self, chunks: list[bytes]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                for chunk in chunks:
                    self.wfile.write(chunk)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def __enter__(self) -> FakeLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def invalid(self) -> list[Received]:
        return [r for r in self.received if r.problems]

    def _next_step(self) -> int:
        with self._lock:
            step = self._step
            self._step += 1
            return step

    def _answer(self, path: str, body: dict[str, Any]) -> tuple[int, Any, bool]:
        if path.endswith("/chat/completions"):
            rec = Received("openai", body, openai_problems(body))
        elif ":generateContent" in path or ":streamGenerateContent" in path:
            rec = Received("gemini", body, gemini_problems(body))
        else:
            return 404, {"error": {"message": f"no route {path}"}}, False
        self.received.append(rec)
        if rec.problems:
            return 400, {"error": {"message": "; ".join(rec.problems), "code": 400}}, False
        step = self._next_step()
        calls = step if step in self.answers else self.calls
        if rec.api == "openai":
            reply = _openai_reply(step, calls)
            if body.get("stream"):
                return 200, wire.chat_chunks(reply), True
            return 200, reply, False
        return 200, _gemini_reply(step, calls), False


def _calls(step: int, calls: int) -> list[wire.Call]:
    """The step's ``read_file`` call (none once the agent answers)."""
    return [(f"call_{step}", "read_file", {"path": f"src/mod_{step}.py"})] if step < calls else []


def _openai_reply(step: int, calls: int) -> dict[str, Any]:
    planned = _calls(step, calls)
    return wire.chat_reply(
        None if planned else FINAL,
        model="gpt-4o",
        usage=wire.chat_usage(10, 10),
        calls=planned,
        id=f"chatcmpl-{step}",
        created=0,
    )


def _gemini_reply(step: int, calls: int) -> dict[str, Any]:
    planned = _calls(step, calls)
    parts: list[dict[str, Any]] = [{"functionCall": {"name": n, "args": a}} for _, n, a in planned]
    parts = parts or [{"text": FINAL}]
    return wire.gemini_reply(parts, wire.gemini_usage(10, 10), model="gemini-2.5-flash")
