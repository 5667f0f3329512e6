"""The rounds of a request the proxy offered the recall tool with: while the model calls it (at
most :data:`~.recall.MAX_ROUNDS` upstream calls in all), the proxy answers from the warden and
calls the upstream again with the same headers; the client gets the last round's reply (a
stream: every round's text, one message). An upstream error on a later round reaches the client
as the upstream sent it (a stream: as the provider's error event; the Responses API's ``error``
and ``response.failed``). Chat Completions, Messages and Responses alike: the wire formats are
:mod:`.recall` and :mod:`.recall_responses`."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import anyio.to_thread
import httpx
from starlette.responses import Response

from ..recall import recall_answer
from .errors import ErrorKind, Provider, error_sse, responses_error_code
from .forward import Finish, UpstreamResponse, failed, relay, response_headers
from .recall import (
    MAX_ROUNDS,
    AnthropicSplice,
    Event,
    OpenAISplice,
    RecallApi,
    Turn,
    add_usage,
    answer_messages,
    client_reply,
    may_offer,
    parse_events,
    read_event,
    reply_turn,
    round_body,
    shows_ref,
)
from .recall_responses import ResponsesSplice
from .stats import RequestRecord
from .transform import dump_body, load_body

__all__ = [
    "Answer",
    "Rounds",
    "Splice",
    "answerer",
    "forward_recall",
    "new_splice",
    "recall_body",
]

#: The answer to one call for a reference: (text, is_error).
Answer = Callable[[str], Awaitable[tuple[str, bool]]]

#: The ``error`` of a stream whose later round the upstream refused or failed.
RECALL_ROUND_FAILED = "recall_round_failed"


class Splice(Protocol):
    """What makes a client's one stream of the rounds' streams, per API
    (:class:`~.recall.AnthropicSplice`, :class:`~.recall.OpenAISplice`,
    :class:`~.recall_responses.ResponsesSplice`)."""

    failed: bool

    def feed(self, event: Event) -> list[bytes]: ...
    def end_round(self) -> Turn: ...
    def next_round(self) -> None: ...
    def flush(self) -> list[bytes]: ...


def new_splice(api: RecallApi) -> Splice:
    """The splice state for a stream of ``api``."""
    if api == "responses":
        return ResponsesSplice()
    return AnthropicSplice() if api == "anthropic" else OpenAISplice()


def recall_body(api: RecallApi, forwarded: bytes) -> tuple[dict[str, Any], bool] | None:
    """The forwarded body, parsed (and whether the fast parser read it), when the recall tool
    is to be offered with it (:func:`~.recall.may_offer`): from the first request of a client
    that sends tools of its own, so the tool list, which a prompt cache's prefix begins with,
    never changes mid-conversation; to a client without tools, once the request shows a ``cw:``
    reference (something the warden hid)."""
    shown = shows_ref(forwarded)
    if not shown and b'"tools"' not in forwarded:
        return None
    try:
        body, fast = load_body(forwarded)
    except ValueError:
        return None
    items = "input" if api == "responses" else "messages"
    if not isinstance(body, dict) or not isinstance(body.get(items), list):
        return None
    if not shown and not body.get("tools"):
        return None
    return (body, fast) if may_offer(api, body) else None


def answerer(recall: Callable[[str, str], Any], conversation: str) -> Answer:
    """The answers from ``recall(conversation, ref)`` (a warden's), looked up in a worker
    thread: the lookup waits for the conversation's lock, which a compaction may hold a while."""

    def look(ref: str) -> tuple[str, bool]:
        try:
            found = recall(conversation, ref) if ref else None
        except KeyError:
            found = None
        return recall_answer(ref, found)

    async def answer(ref: str) -> tuple[str, bool]:
        return await anyio.to_thread.run_sync(look, ref)

    return answer


@dataclass
class Rounds:
    """What every round of one request needs: where and how to send it, its body as the warden
    made it, and how to answer a reference."""

    client: httpx.AsyncClient
    url: str
    headers: list[tuple[bytes, bytes]]
    api: RecallApi
    body: dict[str, Any]
    fast_json: bool
    answer: Answer
    record: RequestRecord

    async def send(self, index: int, extra: list[dict[str, Any]]) -> httpx.Response:
        """Open round ``index`` (0: the client's own) with the exchanges ``extra``."""
        body = round_body(self.api, self.body, extra, last=index == MAX_ROUNDS - 1)
        content = dump_body(body, self.fast_json)
        request = self.client.build_request("POST", self.url, headers=self.headers, content=content)
        self.record.recall_rounds += 1 if index else 0
        return await self.client.send(request, stream=True)

    async def answers(self, turn: Turn) -> list[dict[str, Any]]:
        """The messages answering ``turn``'s recall calls, counted in the record."""
        found = [await self.answer(ref) for _, ref in turn.calls]
        self.record.recall_calls += len(found)
        self.record.recall_unknown += sum(1 for _, error in found if error)
        return answer_messages(self.api, turn, found)


async def forward_recall(
    rounds: Rounds,
    *,
    provider: Provider,
    started: float,
    extra_headers: dict[str, str],
    finish: Finish,
) -> Response:
    """Send the request with the recall tool offered and answer its calls (see the module
    docstring); a first reply that is not a 200 JSON or event stream is relayed as it is."""
    record = rounds.record
    record.recall_offered = True
    try:
        first = await rounds.send(0, [])
    except httpx.TimeoutException as exc:
        return await failed(record, started, finish, provider, "timeout", exc, extra_headers)
    except httpx.TransportError as exc:
        return await failed(record, started, finish, provider, "unreachable", exc, extra_headers)
    kind = first.headers.get("content-type", "")
    if first.status_code == 200 and kind.startswith("text/event-stream"):
        return _stream(rounds, first, provider, started, extra_headers, finish)
    if first.status_code == 200 and "json" in kind:
        return await _whole(rounds, first, provider, started, extra_headers, finish)
    return relay(first, provider, record, started, extra_headers, finish)


def _headers(upstream: httpx.Response, extra: dict[str, str]) -> list[tuple[bytes, bytes]]:
    """The upstream's headers for a body the proxy wrote (decoded, its length its own)."""
    mine = {b"content-length", b"content-encoding"}
    out = [(k, v) for k, v in response_headers(upstream.headers.raw) if k.lower() not in mine]
    return out + [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in extra.items()]


async def _whole(
    rounds: Rounds,
    upstream: httpx.Response,
    provider: Provider,
    started: float,
    extra_headers: dict[str, str],
    finish: Finish,
) -> Response:
    """The rounds of a request answered in one JSON body each; the last one's goes back with
    its usage the sum over rounds."""
    record = rounds.record
    record.status, record.headers_ms = 200, (time.perf_counter() - started) * 1000
    extra: list[dict[str, Any]] = []
    usage: Any = None
    try:
        for index in range(MAX_ROUNDS):
            if index:
                upstream = await rounds.send(index, extra)
                if upstream.status_code != 200:
                    return relay(upstream, provider, record, started, extra_headers, finish)
            try:
                raw = await upstream.aread()
            finally:
                await upstream.aclose()
            reply = _json(raw)
            if reply is None:
                break
            usage = add_usage(usage, reply.get("usage"))
            turn = reply_turn(rounds.api, reply)
            if not turn.calls or index == MAX_ROUNDS - 1:
                break
            extra += await rounds.answers(turn)
    except httpx.TimeoutException as exc:
        return await failed(record, started, finish, provider, "timeout", exc, extra_headers)
    except httpx.TransportError as exc:
        return await failed(record, started, finish, provider, "unreachable", exc, extra_headers)
    if reply is not None and (index or turn.calls or rounds.api == "responses"):
        raw = dump_body(client_reply(rounds.api, reply, usage if index else None), False)
    response = Response(raw, status_code=upstream.status_code)
    response.raw_headers = _headers(upstream, extra_headers)
    response.raw_headers.append((b"content-length", str(len(raw)).encode()))
    record.latency_ms = (time.perf_counter() - started) * 1000
    await finish(record)
    return response


def _json(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _stream(
    rounds: Rounds,
    first: httpx.Response,
    provider: Provider,
    started: float,
    extra_headers: dict[str, str],
    finish: Finish,
) -> Response:
    """The rounds of a streamed request, spliced into one client stream."""
    record = rounds.record
    record.status, record.headers_ms = 200, (time.perf_counter() - started) * 1000

    async def body() -> AsyncGenerator[bytes, None]:
        splice = new_splice(rounds.api)
        upstream: httpx.Response | None = first
        extra: list[dict[str, Any]] = []
        for index in range(MAX_ROUNDS):
            if index:
                splice.next_round()
                upstream, refused = await _next(rounds, index, extra, provider, splice)
                if upstream is None:
                    yield refused
                    return
            assert upstream is not None
            try:
                async for out in _round(upstream, splice):
                    yield out
            except httpx.TimeoutException:
                record.error = "upstream_timeout"
                yield _broke(
                    splice, provider, "timeout", "the upstream stopped sending (timed out)"
                )
                return
            except httpx.TransportError as exc:
                record.error = "upstream_broken"
                yield _broke(
                    splice,
                    provider,
                    "unreachable",
                    f"the upstream stream broke: {type(exc).__name__}",
                )
                return
            finally:
                await upstream.aclose()
            turn = splice.end_round()
            if splice.failed or not turn.calls or index == MAX_ROUNDS - 1:
                yield b"".join(splice.flush())
                return
            extra += await rounds.answers(turn)

    async def done() -> None:
        record.latency_ms = (time.perf_counter() - started) * 1000
        await finish(record)

    return UpstreamResponse(first, body(), _headers(first, extra_headers), done, sized=False)


async def _round(upstream: httpx.Response, splice: Splice) -> AsyncIterator[bytes]:
    """What the client gets of one round's stream as it arrives."""
    buffer = b""
    async for chunk in upstream.aiter_bytes():
        events, buffer = parse_events(buffer + chunk)
        out = b"".join(b for event in events for b in splice.feed(event))
        if out:
            yield out
    if buffer.strip():
        out = b"".join(splice.feed(read_event(buffer)))
        if out:
            yield out


async def _next(
    rounds: Rounds, index: int, extra: list[dict[str, Any]], provider: Provider, splice: Splice
) -> tuple[httpx.Response | None, bytes]:
    """Round ``index``'s open stream, or None and the error event the client gets instead."""
    record = rounds.record
    try:
        upstream = await rounds.send(index, extra)
    except httpx.TimeoutException:
        record.error = "upstream_timeout"
        return None, _broke(splice, provider, "timeout", "the upstream did not answer in time")
    except httpx.TransportError as exc:
        record.error = "upstream_unreachable"
        return None, _broke(
            splice,
            provider,
            "unreachable",
            f"the upstream could not be reached: {type(exc).__name__}",
        )
    if upstream.status_code == 200 and upstream.headers.get("content-type", "").startswith(
        "text/event-stream"
    ):
        return upstream, b""
    try:
        raw = await upstream.aread()
    except httpx.HTTPError:
        raw = b""
    finally:
        await upstream.aclose()
    record.error = RECALL_ROUND_FAILED
    if isinstance(splice, ResponsesSplice):
        return None, _responses_refused(splice, upstream.status_code, raw)
    return None, _error_event(provider, upstream.status_code, raw)


def _broke(splice: Splice, provider: Provider, kind: ErrorKind, message: str) -> bytes:
    """The error event that ends the client's stream when the upstream failed the proxy."""
    if isinstance(splice, ResponsesSplice):
        return splice.fail(responses_error_code(kind), f"contextwarden proxy: {message}")
    return error_sse(provider, kind, message)


def _refused_message(status: int) -> str:
    return f"contextwarden proxy: the upstream answered {status} to a recall round"


def _responses_refused(splice: ResponsesSplice, status: int, raw: bytes) -> bytes:
    """The upstream's refusal of a later round as the Responses API's error events, its code
    and words when its body has them (``rate_limit_exceeded`` for a 429 that says none)."""
    body = _json(raw)
    error = body.get("error") if body is not None else None
    error = error if isinstance(error, dict) else {}
    code = error.get("code") or error.get("type")
    if not isinstance(code, str) or not code:
        code = "rate_limit_exceeded" if status == 429 else "server_error"
    message = error.get("message")
    return splice.fail(code, message if isinstance(message, str) else _refused_message(status))


def _error_event(provider: Provider, status: int, raw: bytes) -> bytes:
    """The upstream's error body as the provider's error event (its own words when it has any)."""
    body = _json(raw)
    if body is None or not isinstance(body.get("error"), dict):
        return error_sse(provider, "unreachable", _refused_message(status))
    if provider == "anthropic":
        data = json.dumps({"type": "error", **body}, separators=(",", ":"))
        return f"event: error\ndata: {data}\n\n".encode()
    return f"data: {json.dumps(body, separators=(',', ':'))}\n\n".encode()
