"""``POST /v1/responses`` through the proxy: the real ``openai`` SDK's ``client.responses.create``
against a local fake upstream speaking the Responses wire format (JSON and server-sent events)."""

from __future__ import annotations

import copy
import json
import logging
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from fake_upstream import serve
from proxy_doubles import StartProxy
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from contextwarden import Warden, WardenConfig, count_tokens
from contextwarden.formats import from_responses
from contextwarden.proxy.transform import transform_body
from contextwarden.recall import recall_tool

openai = pytest.importorskip("openai")

WINDOW = 16_000
KEY = "sk-test-responses"
TASK = "TASK: make tests/test_io.py pass without editing the test."


class FakeResponses:
    """Records each request body; answers one assistant message, as JSON or as an SSE stream."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.app = Starlette(routes=[Route("/v1/responses", self.create, methods=["POST"])])

    def response(self, body: dict[str, Any]) -> dict[str, Any]:
        text = {"type": "output_text", "text": "Done.", "annotations": []}
        message = {
            "type": "message",
            "id": "msg_out",
            "role": "assistant",
            "status": "completed",
            "content": [text],
        }
        return {
            "id": f"resp_{len(self.bodies)}",
            "object": "response",
            "created_at": int(time.time()),
            "model": body.get("model", "gpt-4o"),
            "status": "completed",
            "output": [message],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": 10,
                "output_tokens": 2,
                "total_tokens": 12,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }

    async def create(self, request: Request) -> Response:
        body = json.loads(await request.body())
        self.bodies.append(body)
        self.headers.append(dict(request.headers))
        reply = self.response(body)
        if not body.get("stream"):
            return JSONResponse(reply)

        async def events() -> AsyncIterator[bytes]:
            # the event sequence of a one-message reply, as the API streams it
            pending = {**reply, "status": "in_progress", "output": []}
            message = reply["output"][0]
            empty = {**message, "status": "in_progress", "content": []}
            text = message["content"][0]
            at = {"item_id": "msg_out", "output_index": 0, "content_index": 0}
            sequence: list[tuple[str, dict[str, Any]]] = [
                ("response.created", {"response": pending}),
                ("response.output_item.added", {"output_index": 0, "item": empty}),
                ("response.content_part.added", {**at, "part": {**text, "text": ""}}),
                ("response.output_text.delta", {**at, "delta": "Done.", "logprobs": []}),
                ("response.output_text.done", {**at, "text": "Done.", "logprobs": []}),
                ("response.content_part.done", {**at, "part": text}),
                ("response.output_item.done", {"output_index": 0, "item": message}),
                ("response.completed", {"response": reply}),
            ]
            for seq, (name, data) in enumerate(sequence):
                payload = {"type": name, "sequence_number": seq, **data}
                yield f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode()

        return StreamingResponse(events(), media_type="text/event-stream")


@pytest.fixture
def fake() -> Iterator[tuple[FakeResponses, str]]:
    upstream = FakeResponses()
    with serve(upstream.app, log_level="critical") as url:
        yield upstream, url


def long_items(calls: int = 60) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for k in range(calls):
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{k}",
                "call_id": f"call_{k}",
                "name": "bash",
                "arguments": json.dumps({"cmd": f"cat src/mod_{k}.py"}),
                "status": "completed",
            }
        )
        body = "\n".join(f"src/mod_{k}.py:{j}: total = f({j}, {k * j})" for j in range(120))
        items.append({"type": "function_call_output", "call_id": f"call_{k}", "output": body})
    return items


def check_valid(items: list[dict[str, Any]]) -> None:
    calls: set[str] = set()
    answered: set[str] = set()
    for i, item in enumerate(items):
        t = item.get("type", "message")
        if t == "function_call":
            calls.add(item["call_id"])
        elif t == "function_call_output":
            assert item["call_id"] in calls, f"item {i}: output without its call"
            answered.add(item["call_id"])
    assert calls == answered


TOOLS = [
    {
        "type": "function",
        "name": "bash",
        "description": "Run a shell command.",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    }
]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_the_sdk_through_the_proxy_gets_a_valid_input_within_the_window(
    fake: tuple[FakeResponses, str], start_proxy: StartProxy, stream: bool
) -> None:
    upstream, url = fake
    proxy = start_proxy(url, window=WINDOW)
    client = openai.OpenAI(base_url=proxy + "/v1", api_key=KEY, max_retries=0)
    items = long_items()
    before = copy.deepcopy(items)
    assert count_tokens(from_responses(items), model="gpt-4o") > 4 * WINDOW
    if stream:
        with client.responses.stream(
            model="gpt-4o", input=items, instructions="You are a coder.", tools=TOOLS
        ) as events:
            final = events.get_final_response()
        assert final.output_text == "Done."
    else:
        raw = client.responses.with_raw_response.create(
            model="gpt-4o", input=items, instructions="You are a coder.", tools=TOOLS, temperature=0
        )
        assert raw.parse().output_text == "Done."
        assert int(raw.headers["x-contextwarden-tokens-after"]) <= WINDOW
        assert int(raw.headers["x-contextwarden-tokens-before"]) > 4 * WINDOW
    assert items == before
    sent = upstream.bodies[-1]
    check_valid(sent["input"])
    assert sent["input"][0] == items[0]  # the task
    assert sent["instructions"].startswith("You are a coder.")
    assert sent["model"] == "gpt-4o"
    assert sent["tools"] == [*TOOLS, recall_tool("responses")]  # a client with tools is offered it
    assert sent.get("stream", False) is stream
    assert (
        count_tokens(
            from_responses(sent["input"], instructions=sent["instructions"]), model="gpt-4o"
        )
        <= WINDOW
    )
    assert upstream.headers[-1]["authorization"] == f"Bearer {KEY}"


def test_previous_response_id_is_forwarded_untouched_and_logged(
    fake: tuple[FakeResponses, str], start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    upstream, url = fake
    proxy = start_proxy(url, window=WINDOW)
    client = openai.OpenAI(base_url=proxy + "/v1", api_key=KEY, max_retries=0)
    items = long_items(40)
    with caplog.at_level(logging.INFO, logger="contextwarden.proxy"):
        raw = client.responses.with_raw_response.create(
            model="gpt-4o", input=items, previous_response_id="resp_earlier"
        )
    assert raw.headers["x-contextwarden-skipped"].startswith("previous_response_id")
    assert upstream.bodies[-1]["input"] == items  # untouched
    logged = [json.loads(r.getMessage()) for r in caplog.records if r.name == "contextwarden.proxy"]
    assert any(line.get("skipped") == "previous_response_id" for line in logged)


def test_a_short_conversation_passes_byte_for_byte() -> None:
    from contextwarden import Warden

    raw = json.dumps({"model": "gpt-4o", "input": long_items(2), "store": False}).encode()
    outcome = transform_body(Warden(), "responses", raw, window_cap=WINDOW)
    assert outcome.body is raw and not outcome.changed
    assert outcome.tokens_before == outcome.tokens_after


@pytest.mark.parametrize(
    ("body", "skipped"),
    [
        (b"not json", "not_json"),
        (b"[1]", "not_json"),
        (json.dumps({"model": "gpt-4o", "input": "hello"}).encode(), "no_messages"),
        (json.dumps({"model": "gpt-4o", "input": [{"role": "robot"}]}).encode(), "invalid_request"),
        (json.dumps({"input": [], "conversation": "conv_1"}).encode(), "conversation"),
    ],
)
def test_what_cannot_be_read_is_forwarded_unchanged(body: bytes, skipped: str) -> None:
    from contextwarden import Warden

    outcome = transform_body(Warden(), "responses", body, window_cap=WINDOW)
    assert outcome.body is body and outcome.skipped == skipped


def test_a_request_keeps_the_room_its_max_output_tokens_asks_for() -> None:
    """A Codex-like loop on a model whose own window is 32k (DeepSeek's prices: a cut waits
    for the hard limit): without ``max_output_tokens`` the input goes past 26k, the reserve
    fitted to the short replies; asking for 6,000 output tokens, every input leaves them."""
    items = long_items(40)

    def loop(**extra: Any) -> list[int]:
        warden = Warden(WardenConfig(context_window=32_000))
        sent = []
        for k in range(3, len(items) + 1, 2):  # the task, then each call and its output
            body = {"model": "deepseek-v4-flash", "input": items[:k], **extra}
            raw = json.dumps(body).encode()
            out = transform_body(warden, "responses", raw, window_override=32_000)
            assert out.tokens_after is not None
            sent.append(out.tokens_after)
        return sent

    assert max(loop()) > 26_000
    assert all(tokens + 6_000 <= 32_000 for tokens in loop(max_output_tokens=6_000))
