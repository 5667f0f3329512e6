"""A fake LLM provider: a real HTTP server on 127.0.0.1 speaking the OpenAI Chat Completions
(``POST /v1/chat/completions``), Anthropic Messages (``POST /v1/messages``), OpenAI Responses
(``POST /v1/responses``) and Gemini (``POST /v1beta/models/{model}:generateContent``) wire
formats (a success without streaming for the last two).

Reusable by any test that needs an upstream model (the summarizer tests here, the proxy's
tests)::

    from tests.summarizers.fake_provider import FakeProvider, Reply

    with FakeProvider() as fake:                       # starts on a free port, in a thread
        fake.queue(Reply(status=429, headers={"retry-after": "0"}))   # first call: rate limited
        ...  # point a client at fake.openai_base_url ("http://127.0.0.1:PORT/v1")
             # or fake.anthropic_base_url ("http://127.0.0.1:PORT")
        assert len(fake.requests) == 2                 # every request is recorded
        fake.requests[-1].json["messages"]             # ... with its headers and JSON body

Behaviour:
- Scripted replies (:meth:`FakeProvider.queue`) are used first, in order; then ``responder``
  (a callable ``RecordedRequest -> Reply``) if given, else a success.
- A success is a well-formed completion in the request's format (chosen by path) whose text is
  ``Reply.summary`` or, by default, a valid four-part summary echoing the first line of the
  request's ``<task>`` and a call number (see :func:`default_summary`).
- ``Reply.json`` / ``Reply.text`` / ``Reply.raw`` (bytes) send that body instead (errors, malformed bodies);
  ``Reply.delay`` waits before answering (client timeouts); ``Reply.headers`` adds headers
  (``retry-after``); ``Reply.trickle`` sends the body 8 bytes at a time, that many seconds
  apart (a server that never stalls long enough for a read timeout, yet never finishes).
- A request with ``"stream": true`` gets a server-sent-event stream in that provider's format
  (OpenAI ``chat.completion.chunk`` lines ending ``data: [DONE]``; Anthropic
  ``message_start`` ... ``message_stop`` events).
- Other paths answer 404 with a JSON error.

Run from the repository root (``python -m pytest``), where ``tests`` is importable.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import upstream_wire as wire

__all__ = [
    "FakeProvider",
    "RecordedRequest",
    "Reply",
    "anthropic_completion",
    "default_summary",
    "gemini_completion",
    "openai_completion",
    "responses_completion",
]

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"


@dataclass(frozen=True)
class Reply:
    """One scripted answer. With neither ``json`` nor ``text``, a success in the request's
    wire format carrying ``summary`` (or the default summary)."""

    status: int = 200
    json: Any = None
    text: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    summary: str | None = None
    trickle: float = 0.0
    raw: bytes | None = None


@dataclass(frozen=True)
class RecordedRequest:
    """A request the fake received: headers (names lower-cased), raw body and parsed JSON."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes
    json: Any

    @property
    def provider(self) -> str:
        """``"openai"``, ``"anthropic"``, ``"responses"``, ``"gemini"`` or ``""`` (another
        path), from the path."""
        path = self.path.split("?", 1)[0]
        if path.endswith("/chat/completions"):
            return "openai"
        if path.endswith("/messages"):
            return "anthropic"
        if path.endswith("/responses"):
            return "responses"
        if path.startswith("/v1beta/models/") and path.endswith(":generateContent"):
            return "gemini"
        return ""

    @property
    def model(self) -> str:
        """The model asked for: in the body, or (Gemini) in the path."""
        if self.provider == "gemini":
            return self.path.split("?", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]
        return str((self.json or {}).get("model", "fake-model"))

    @property
    def user_text(self) -> str:
        """The text of the last user message in the body (any format)."""
        body = self.json or {}
        if self.provider == "gemini":
            parts = (body.get("contents") or [{}])[-1].get("parts") or []
            return "".join(p.get("text", "") for p in parts)
        if self.provider == "responses" and isinstance(body.get("input"), str):
            return str(body["input"])
        messages = body.get("input") if self.provider == "responses" else body.get("messages")
        messages = messages or []
        for m in reversed(messages):
            if m.get("role") == "user":
                c = m.get("content")
                if isinstance(c, str):
                    return c
                return "".join(p.get("text", "") for p in c or [] if isinstance(p, dict))
        return ""


def default_summary(request: RecordedRequest, call_number: int) -> str:
    """A valid four-part summary mentioning the first line of the request's ``<task>``."""
    m = re.search(r"<task>\s*(.*?)\s*</task>", request.user_text, re.DOTALL)
    task = m.group(1).splitlines()[0] if m and m.group(1).strip() else "(no task given)"
    return (
        f"<completed>\nFake summary #{call_number} of {len(request.user_text)} characters.\n"
        f"</completed>\n<remaining>\n{task}\n</remaining>\n"
        f"<current_state>\nNothing notable.\n</current_state>\n<notes>\n</notes>"
    )


def openai_completion(text: str, model: str = "fake-model", n: int = 1) -> dict[str, Any]:
    """A Chat Completions response body whose reply is ``text``."""
    usage = wire.chat_usage(10, len(text) // 4)
    return wire.chat_reply(text, model=model, usage=usage, id=f"chatcmpl-fake-{n}", created=_AT)


def anthropic_completion(text: str, model: str = "fake-model", n: int = 1) -> dict[str, Any]:
    """A Messages API response body whose reply is ``text``."""
    usage = wire.messages_usage(10, len(text) // 4)
    return wire.text_message(text, model=model, usage=usage, id=f"msg_fake_{n}")


def responses_completion(text: str, model: str = "fake-model", n: int = 1) -> dict[str, Any]:
    """A Responses API response body whose reply is ``text`` (after a reasoning item)."""
    output = [
        {"id": f"rs_{n}", "type": "reasoning", "summary": []},
        wire.message_item(text, f"msg_{n}"),
    ]
    usage = wire.responses_usage(10, len(text) // 4)
    return wire.responses_reply(
        output, model=model, usage=usage, id=f"resp_fake_{n}", created_at=_AT
    )


def gemini_completion(text: str, model: str = "fake-model", n: int = 1) -> dict[str, Any]:
    """A Gemini ``generateContent`` response body whose reply is ``text`` (after a thought)."""
    parts = [{"text": "Thinking about it.", "thought": True}, {"text": text}]
    usage = wire.gemini_usage(10, len(text) // 4) | {"thoughtsTokenCount": 3}
    return wire.gemini_reply(parts, usage, model=model, responseId=f"gemini-fake-{n}")


_AT = 1700000000
_COMPLETIONS: dict[str, Callable[[str, str, int], dict[str, Any]]] = {
    "openai": openai_completion,
    "anthropic": anthropic_completion,
    "responses": responses_completion,
    "gemini": gemini_completion,
}


class FakeProvider:
    """The fake server. Use as a context manager, or call :meth:`start` / :meth:`stop`."""

    def __init__(self, responder: Callable[[RecordedRequest], Reply] | None = None) -> None:
        self.responder = responder
        self.requests: list[RecordedRequest] = []
        self._queue: list[Reply] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle ------------------------------------------------------------------------------
    def start(self) -> FakeProvider:
        handler = _make_handler(self)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers that are sleeping on a delay
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # addresses ------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        if self._server is None:
            raise RuntimeError("FakeProvider is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_base_url(self) -> str:
        """The base URL an OpenAI client wants (``.../v1``)."""
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """The base URL an Anthropic client wants (the root)."""
        return self.url

    # scripting ------------------------------------------------------------------------------
    def queue(self, *replies: Reply) -> FakeProvider:
        """Answer the next requests with ``replies``, in order."""
        with self._lock:
            self._queue.extend(replies)
        return self

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]

    def _next_reply(self, request: RecordedRequest) -> tuple[Reply, int]:
        with self._lock:
            self.requests.append(request)
            number = len(self.requests)
            if self._queue:
                return self._queue.pop(0), number
        if self.responder is not None:
            return self.responder(request), number
        return Reply(), number


def _make_handler(fake: FakeProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            return

        trickle = 0.0  # set per request from its Reply

        def _send(
            self,
            status: int,
            body: bytes,
            headers: Mapping[str, str],
            content_type: str = "application/json",
        ) -> None:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            if not self.trickle:
                self.wfile.write(body)
                return
            for i in range(0, len(body), 8):
                self.wfile.write(body[i : i + 8])
                self.wfile.flush()
                if fake._stopping.wait(self.trickle):
                    return

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            self._send(
                404, json.dumps({"error": {"message": f"no route {self.path}"}}).encode(), {}
            )

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            try:
                parsed = json.loads(body) if body else None
            except ValueError:
                parsed = None
            request = RecordedRequest(
                "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body, parsed
            )
            reply, number = fake._next_reply(request)
            if reply.delay and fake._stopping.wait(reply.delay):
                return
            self.trickle = reply.trickle
            try:
                self._answer(request, reply, number)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                pass

        def _answer(self, request: RecordedRequest, reply: Reply, number: int) -> None:
            headers = dict(reply.headers)
            if reply.raw is not None:
                self._send(reply.status, reply.raw, headers)
                return
            if reply.text is not None:
                self._send(reply.status, reply.text.encode(), headers, "text/plain")
                return
            if reply.json is not None:
                self._send(reply.status, json.dumps(reply.json).encode(), headers)
                return
            if request.provider == "":
                self._send(
                    404,
                    json.dumps({"error": {"message": f"no route {request.path}"}}).encode(),
                    headers,
                )
                return
            text = reply.summary if reply.summary is not None else default_summary(request, number)
            model = request.model
            if (request.json or {}).get("stream"):
                payload = _COMPLETIONS[request.provider](text, model, number)
                events = wire.stream(
                    request.provider,
                    payload,
                    request.json or {},
                    split=lambda t: wire.pieces(t, 40),
                )
                self._send(reply.status, b"".join(events), headers, "text/event-stream")
                return
            payload = _COMPLETIONS[request.provider](text, model, number)
            self._send(reply.status, json.dumps(payload).encode(), headers)

    return Handler
