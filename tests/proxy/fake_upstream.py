"""A fake API for the proxy tests and the load bench, on loopback: Chat Completions, Messages,
Responses and Gemini, in the shapes of :mod:`upstream_wire`.

It records every request it receives (method, path, headers, body) and answers in the request's
wire format, streamed (server-sent events, one chunk per write) or not. Scripted behaviours let a
test make the next reply fail (429, 500), stall (to provoke the proxy's timeout) or break
mid-stream. A subclass scripts other answers by overriding ``_reply`` (see ``recall_upstream``).

``serve(app)`` runs any ASGI app on uvicorn in a background thread on a free loopback port.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import upstream_wire as wire
import uvicorn
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = ["Behaviour", "FakeUpstream", "Recorded", "serve"]


@dataclass(frozen=True)
class Recorded:
    """One request as the upstream received it."""

    method: str
    path: str
    query: str
    headers: dict[str, str]  # lower-cased names; repeated headers joined with ", "
    body: bytes
    raw_path: str = ""  # as sent, percent-escapes kept

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Behaviour:
    """How to answer one request (the next one that arrives).

    ``status``/``body``/``headers`` give a canned reply (e.g. a 429 with a provider error body);
    ``delay`` waits before the status line (longer than the proxy's timeout gives a 504), or until
    ``gate`` is set;
    ``break_after`` closes a stream after that many chunks without finishing it; ``hold_after``
    stops a stream after that many chunks until ``gate`` is set (or 30 s pass), so a test can
    see the first chunks arrive through the proxy while the upstream is still mid-stream.
    """

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    chunk_delay: float = 0.0
    break_after: int | None = None
    hold_after: int | None = None
    gate: threading.Event = field(default_factory=threading.Event)


class FakeUpstream:
    """The fake API. ``app`` is its ASGI app; ``requests`` what it received, oldest first;
    ``sent`` the exact body bytes of each reply, in order (streamed replies as their chunks);
    ``record=False`` keeps neither (for load runs)."""

    def __init__(
        self,
        *,
        chunks: int = 5,
        chunk_delay: float = 0.0,
        record: bool = True,
        sign_summaries: bool = False,
        summary_delay: float = 0.0,
        summary_status: int = 200,
    ) -> None:
        # ``sign_summaries``: a summary call (recognised by the summarizer's system prompt) is
        # answered, ahead of the script, with a valid summary naming the credential it was asked
        # with ("signed:<Authorization>"), after ``summary_delay`` seconds (cut short by
        # ``summary_gate``), or with ``summary_status`` when that is not 200.
        self.sign_summaries = sign_summaries
        self.summary_delay = summary_delay
        self.summary_status = summary_status
        self.summary_gate = threading.Event()
        self.summary_calls = 0
        self.requests: list[Recorded] = []
        self.sent: list[list[bytes]] = []
        self.script: deque[Behaviour] = deque()
        self.chunks = chunks
        self.chunk_delay = chunk_delay
        self.record = record  # off for load runs: keeps memory flat
        self._lock = threading.Lock()
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._api("openai"), methods=["POST"]),
                Route("/v1/messages", self._api("anthropic"), methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
                Route("/v1/responses", self._api("responses"), methods=["POST"]),
                Route("/v1beta/models/{call}", self._api("gemini"), methods=["POST"]),
                Route("/v1/models/{call}", self._api("gemini"), methods=["POST"]),
                Route(
                    "/{path:path}", self._echo, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]
                ),
            ],
            # an upload the proxy abandons (its own client left) is no news: no traceback
            exception_handlers={ClientDisconnect: _client_left},
        )

    def then(self, behaviour: Behaviour) -> FakeUpstream:
        """Queue a behaviour for the next request."""
        self.script.append(behaviour)
        return self

    def _sent(self, chunks: list[bytes]) -> None:
        if self.record:
            self.sent.append(chunks)

    @property
    def last(self) -> Recorded:
        return self.requests[-1]

    async def _record(self, request: Request) -> tuple[Recorded, Behaviour]:
        body = await request.body()
        headers: dict[str, str] = {}
        for k, v in request.headers.items():
            headers[k] = f"{headers[k]}, {v}" if k in headers else v
        raw_path = request.scope.get("raw_path") or b""
        rec = Recorded(
            request.method,
            request.url.path,
            request.url.query,
            headers,
            body,
            raw_path.decode("latin-1"),
        )
        with self._lock:
            if self.record:
                self.requests.append(rec)
            behaviour = self.script.popleft() if self.script else Behaviour()
        if behaviour.delay:  # cut short when the test opens the gate (quick teardown)
            await asyncio.to_thread(behaviour.gate.wait, behaviour.delay)
        return rec, behaviour

    def _canned(self, b: Behaviour) -> Response | None:
        if b.status == 200 and b.body is None:
            return None
        raw = b.body if isinstance(b.body, bytes) else json.dumps(b.body).encode()
        self._sent([raw])
        return Response(raw, status_code=b.status, headers=b.headers, media_type="application/json")

    def _stream(self, events: list[bytes], b: Behaviour, headers: dict[str, str]) -> Response:
        record: list[bytes] = []
        self._sent(record)
        delay = b.chunk_delay or self.chunk_delay

        async def gen() -> AsyncIterator[bytes]:
            for i, event in enumerate(events):
                if b.break_after is not None and i >= b.break_after:
                    raise RuntimeError("fake upstream: stream broken on purpose")
                if b.hold_after is not None and i == b.hold_after:
                    await asyncio.to_thread(b.gate.wait, 30)
                record.append(event)
                yield event
                if delay:
                    await asyncio.sleep(delay)

        return StreamingResponse(gen(), media_type="text/event-stream", headers=headers)

    async def _signed_summary(self, request: Request) -> Response | None:
        """The answer to a summary call when ``sign_summaries`` (else None)."""
        if not self.sign_summaries:
            return None
        body = await request.body()
        if b"You condense the working history" not in body[:4000]:
            return None
        with self._lock:
            self.summary_calls += 1
        if self.summary_delay:
            await asyncio.to_thread(self.summary_gate.wait, self.summary_delay)
        if self.summary_status != 200:
            return JSONResponse({"error": {"message": "summary refused"}}, self.summary_status)
        who = request.headers.get("authorization") or request.headers.get("x-api-key") or "-"
        text = (
            f"<completed>\nWork done so far, signed:{who}\n</completed>\n"
            "<remaining>\nCarry on with the task.\n</remaining>\n"
            "<current_state>\nMid-task.\n</current_state>\n<notes>\n</notes>"
        )
        path = request.url.path
        api = "gemini" if path.endswith("generateContent") else "openai"
        api = "anthropic" if path.endswith("/messages") else api
        api = "responses" if path.endswith("/responses") else api
        return JSONResponse(wire.text_reply(api, text, model="m", prompt=len(body) // 4, output=40))

    def _api(self, api: str) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await self._answer(request, api)

        return endpoint

    async def _answer(self, request: Request, api: str) -> Response:
        """Record the request and answer it: the script's canned reply, else :meth:`_reply`."""
        signed = await self._signed_summary(request)
        if signed is not None:
            return signed
        rec, b = await self._record(request)
        canned = self._canned(b)
        if canned is not None:
            return canned
        return self._send(api, rec, b, self._reply(api, rec.json, rec), _words)

    def _reply(self, api: str, body: dict[str, Any], rec: Recorded) -> dict[str, Any]:
        """A text naming how many messages the request held, then ``chunks`` words (a stream
        carries the words alone, a word a chunk)."""
        words = "".join(f"w{i} " for i in range(self.chunks))
        kind, history = _HISTORY[api]
        text = f"received {len(body.get(history) or [])} {kind}: " + words
        if body.get("stream") and api != "gemini":
            text = words
        return wire.text_reply(
            api, text, model=body.get("model", "?"), prompt=len(rec.body) // 4, output=self.chunks
        )

    def _send(
        self, api: str, rec: Recorded, b: Behaviour, reply: dict[str, Any], split: wire.Split
    ) -> Response:
        """``reply`` as JSON, or streamed when the request asked for a stream."""
        name = "request-id" if api == "anthropic" else "x-request-id"
        headers = b.headers if api == "gemini" else {name: f"req_{len(self.requests)}", **b.headers}
        body = rec.json
        if body.get("stream") or rec.path.endswith(":streamGenerateContent"):
            return self._stream(wire.stream(api, reply, body, split=split), b, headers)
        raw = json.dumps(reply).encode()
        self._sent([raw])
        return Response(raw, media_type="application/json", headers=headers)

    async def _count_tokens(self, request: Request) -> Response:
        rec, b = await self._record(request)
        canned = self._canned(b)
        if canned is not None:
            return canned
        return JSONResponse({"input_tokens": len(rec.body) // 4})

    async def _echo(self, request: Request) -> Response:
        rec, b = await self._record(request)
        canned = self._canned(b)
        if canned is not None:
            return canned
        return JSONResponse(
            {"method": rec.method, "path": rec.path, "query": rec.query, "body_len": len(rec.body)},
            headers={"x-echo": "1", **b.headers},
        )


#: what each API calls the items of its history, and the field that holds them
_HISTORY = {
    "openai": ("messages", "messages"),
    "anthropic": ("messages", "messages"),
    "responses": ("items", "input"),
    "gemini": ("contents", "contents"),
}


def _words(text: str) -> list[str]:
    """``text`` a word (with its trailing space) a chunk."""
    return [w + " " for w in text.split()]


async def _client_left(request: Request, exc: Exception) -> Response:
    return Response(status_code=499)


class _Server(uvicorn.Server):
    """uvicorn's server, told to stop by :meth:`stop` at once (its own main loop looks for
    ``should_exit`` every 0.1 s)."""

    async def main_loop(self) -> None:
        self.stopping = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        if not self.should_exit:  # told before its loop ran
            await self.stopping.wait()

    def stop(self) -> None:
        self.should_exit = True
        loop = getattr(self, "loop", None)
        if loop is not None:
            loop.call_soon_threadsafe(self.stopping.set)


#: servers told to stop whose threads still wind down (joined when the process ends)
_STOPPING: list[threading.Thread] = []


@atexit.register
def _join_stopping() -> None:
    for thread in _STOPPING:
        thread.join(timeout=10)


@contextmanager
def serve(app: Any, *, log_level: str = "warning", http: Any = "auto") -> Iterator[str]:
    """Run ``app`` on uvicorn in a daemon thread on a free 127.0.0.1 port; yields its base URL and
    on exit tells the server to stop, without waiting for it: it stops taking connections at
    once and winds down (lifespan shutdown included) in its thread while the next test runs
    (each test serves on ports of its own). ``http``: uvicorn's protocol (the proxy's own, with
    its header deadline, for the proxy)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_level=log_level,
        access_log=False,
        server_header=False,
        date_header=False,
        lifespan="on" if isinstance(app, Starlette) else "auto",
        timeout_graceful_shutdown=2,
        http=http,
    )
    server = _Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()  # uvicorn closes the socket as it shuts down
        _STOPPING[:] = [t for t in _STOPPING if t.is_alive()]
        _STOPPING.append(thread)
