"""The rounds of a request the proxy offered the recall tool with: while the model calls it (at
most :data:`~.recall.MAX_ROUNDS` upstream calls in all), the proxy answers from the warden and
calls the upstream again with the same headers; the client gets the last round's reply (a
stream: every round's text, one message). An upstream error on a later round reaches the client
as the upstream sent it (a stream: as the provider's error event; the Responses API's ``error``
and ``response.failed``). Every wire format alike: what differs is its :class:`~.wire.Wire`."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
import httpx
from starlette.responses import Response

from ..recall import recall_answer
from .forward import (
    Exchange,
    UpstreamResponse,
    broke,
    encoded,
    failed,
    relay,
    response_headers,
    unreached,
)
from .recall import MAX_ROUNDS, add_usage, parse_events, read_event, shows_ref
from .stats import RequestRecord
from .transform import BodyOutcome, dump_body
from .wire import Splice, Turn, Wire
from .wire._base import json_object

__all__ = ["Answer", "Rounds", "answerer", "forward_recall", "recall_body"]

#: The answer to one call for a reference: (text, is_error).
Answer = Callable[[str], Awaitable[tuple[str, bool]]]

#: The ``error`` of a stream whose later round the upstream refused or failed.
RECALL_ROUND_FAILED = "recall_round_failed"


def recall_body(wire: Wire, outcome: BodyOutcome) -> dict[str, Any] | None:
    """The body the warden wrote, as parsed (never parsed again), when the recall tool is to be
    offered with it (:meth:`Wire.may_offer`): from the first request of a client that sends
    tools of its own, so the tool list, which a prompt cache's prefix begins with, never
    changes mid-conversation; to a client without tools, once the request shows a ``cw:``
    reference (something the warden hid)."""
    body = outcome.sent
    if body is None or not isinstance(body.get(wire.items), list):
        return None
    if not body.get("tools") and not shows_ref(outcome.body):
        return None
    return body if wire.may_offer(body) else None


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
    wire: Wire
    body: dict[str, Any]
    fast_json: bool
    answer: Answer
    record: RequestRecord

    async def send(self, index: int, extra: list[dict[str, Any]]) -> httpx.Response:
        """Open round ``index`` (0: the client's own) with the exchanges ``extra``."""
        body = self.wire.round_body(self.body, extra, last=index == MAX_ROUNDS - 1)
        content = dump_body(body, self.fast_json)
        request = self.client.build_request("POST", self.url, headers=self.headers, content=content)
        self.record.recall_rounds += 1 if index else 0
        return await self.client.send(request, stream=True)

    async def answers(self, turn: Turn) -> list[dict[str, Any]]:
        """The messages answering ``turn``'s recall calls, counted in the record."""
        found = [await self.answer(ref) for _, ref in turn.calls]
        self.record.recall_calls += len(found)
        self.record.recall_unknown += sum(1 for _, error in found if error)
        return self.wire.answers(turn, found)


async def forward_recall(rounds: Rounds, exchange: Exchange) -> Response:
    """Send the request with the recall tool offered and answer its calls (see the module
    docstring); a first reply that is not a 200 JSON or event stream is relayed as it is."""
    record = rounds.record
    record.recall_offered = True
    try:
        first = await rounds.send(0, [])
    except httpx.TransportError as exc:
        return await failed(exchange, exc)
    kind = first.headers.get("content-type", "")
    if first.status_code == 200 and kind.startswith("text/event-stream"):
        return _stream(rounds, first, exchange)
    if first.status_code == 200 and "json" in kind:
        return await _whole(rounds, first, exchange)
    return relay(first, exchange)


def _headers(upstream: httpx.Response, extra: dict[str, str]) -> list[tuple[bytes, bytes]]:
    """The upstream's headers for a body the proxy wrote (decoded, its length its own)."""
    mine = {b"content-length", b"content-encoding"}
    out = [(k, v) for k, v in response_headers(upstream.headers.raw) if k.lower() not in mine]
    return out + encoded(extra)


async def _whole(rounds: Rounds, upstream: httpx.Response, exchange: Exchange) -> Response:
    """The rounds of a request answered in one JSON body each; the last one's goes back with
    its usage the sum over rounds."""
    exchange.answered(200)
    extra: list[dict[str, Any]] = []
    usage: Any = None
    try:
        for index in range(MAX_ROUNDS):
            if index:
                upstream = await rounds.send(index, extra)
                if upstream.status_code != 200:
                    return relay(upstream, exchange)
            try:
                raw = await upstream.aread()
            finally:
                await upstream.aclose()
            reply = json_object(raw)
            if reply is None:
                break
            usage = add_usage(usage, rounds.wire.usage(reply))
            turn = rounds.wire.reply_turn(reply)
            if not turn.calls or index == MAX_ROUNDS - 1:
                break
            extra += await rounds.answers(turn)
    except httpx.TransportError as exc:
        return await failed(exchange, exc)
    if reply is not None and (index or turn.calls or rounds.wire.always_rewrite()):
        raw = dump_body(rounds.wire.client_reply(reply, usage if index else None), False)
    response = Response(raw, status_code=upstream.status_code)
    response.raw_headers = _headers(upstream, exchange.extra_headers)
    response.raw_headers.append((b"content-length", str(len(raw)).encode()))
    await exchange.done()
    return response


def _stream(rounds: Rounds, first: httpx.Response, exchange: Exchange) -> Response:
    """The rounds of a streamed request, spliced into one client stream."""
    record = rounds.record
    exchange.answered(200)

    async def body() -> AsyncGenerator[bytes, None]:
        splice = rounds.wire.splice()
        upstream: httpx.Response | None = first
        extra: list[dict[str, Any]] = []
        for index in range(MAX_ROUNDS):
            if index:
                splice.next_round()
                upstream, refused = await _next(rounds, index, extra, splice)
                if upstream is None:
                    yield refused
                    return
            assert upstream is not None
            try:
                async for out in _round(upstream, splice):
                    yield out
            except httpx.TransportError as exc:
                record.error, kind, message = broke(exc)
                yield rounds.wire.broke(splice, kind, message)
                return
            finally:
                await upstream.aclose()
            turn = splice.end_round()
            if splice.failed or not turn.calls or index == MAX_ROUNDS - 1:
                yield b"".join(splice.flush())
                return
            extra += await rounds.answers(turn)

    headers = _headers(first, exchange.extra_headers)
    return UpstreamResponse(first, body(), headers, exchange.done, sized=False)


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
    rounds: Rounds, index: int, extra: list[dict[str, Any]], splice: Splice
) -> tuple[httpx.Response | None, bytes]:
    """Round ``index``'s open stream, or None and the error event the client gets instead."""
    record = rounds.record
    try:
        upstream = await rounds.send(index, extra)
    except httpx.TransportError as exc:
        record.error, kind, what = unreached(exc)
        return None, rounds.wire.broke(splice, kind, f"the upstream {what}")
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
    return None, rounds.wire.refused(splice, upstream.status_code, raw)
