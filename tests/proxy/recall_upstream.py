"""A scripted upstream for the recall tests, speaking Chat Completions, Messages, Responses and
the Gemini API,
streamed or not: it records what it gets and, when the request offers ``contextwarden_recall``,
calls it for the first ``cw:`` reference the request shows; once the request carries the tool's
answer, it answers with text quoting the ``SECRET-nnnn`` the answer holds. ``mode`` varies the
script:

* ``recall``: as above; ``mixed``: the recall call comes with a call of the client's ``run`` tool
  (on the Responses API, before it);
* ``always``: calls the tool whenever it is offered (the round limit ends it);
* ``unknown``: asks for a reference nobody keeps; ``fail_second``: answers every later round
  (a request carrying a recall answer) ``fail_status`` (429).

``reasoning``: each Responses reply begins with a reasoning item carrying encrypted content.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

RECALL = "contextwarden_recall"
REF = re.compile(r"cw:[0-9a-f]{16}")
SECRET = re.compile(r"SECRET-\d{4}")
USAGE_IN, USAGE_OUT = 100, 7


def tool_output(i: int) -> str:
    """Call ``i``'s tool output in the recall tests: 75 lines, then its ``SECRET-nnnn``."""
    lines = "\n".join(f"line {j} of file{i}: value_{i}_{j} = compute({j})" for j in range(75))
    return f"{lines}\nSECRET-{i:04d}"


def proxy_stats(proxy: str) -> dict[str, Any]:
    """The proxy's ``/stats``."""
    return httpx.get(proxy + "/stats").json()


def tool_names(body: dict[str, Any]) -> list[str]:
    """The names of a request's tools, whatever the API's shape of a tool."""
    names = []
    for t in body.get("tools") or []:
        if "functionDeclarations" in t:
            names += [d["name"] for d in t["functionDeclarations"]]
        else:
            names.append(t.get("name") or t["function"]["name"])
    return names


class RecallUpstream:
    def __init__(self, mode: str = "recall") -> None:
        self.mode = mode
        self.fail_status = 429
        self.reasoning = False
        self.requests: list[dict[str, Any]] = []
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._openai, methods=["POST"]),
                Route("/v1/messages", self._anthropic, methods=["POST"]),
                Route("/v1/responses", self._responses, methods=["POST"]),
                Route("/v1beta/models/{call}", self._gemini, methods=["POST"]),
            ]
        )

    def _plan(self, body: dict[str, Any], api: str) -> tuple[str, list[tuple[str, str, Any]]]:
        """The reply's text and tool calls (id, name, input) for ``body``."""
        offered = any(_name(t) == RECALL for t in body.get("tools") or []) and body.get(
            "tool_choice"
        ) not in ("none", {"type": "none"})
        if api == "gemini":
            mode = ((body.get("toolConfig") or {}).get("functionCallingConfig") or {}).get("mode")
            offered = RECALL in tool_names(body) and mode != "NONE"
        history = _history(body, api)
        answered = _recall_answers(history, api)
        rounds = len(self.requests)
        if answered and not (self.mode == "always" and offered):
            found = SECRET.findall(answered[-1])
            return f"quoted: {found[-1] if found else 'nothing'}", []
        refs = REF.findall(json.dumps(history))
        if not offered or not (refs or self.mode == "unknown"):
            return "plain answer", []
        ref = "cw:0000000000000000" if self.mode == "unknown" else refs[0]
        calls: list[tuple[str, str, Any]] = [(f"call_recall_{rounds}", RECALL, {"ref": ref})]
        if self.mode == "mixed":
            run = (f"call_run_{rounds}", "run", {"cmd": "ls"})
            calls = [run, *calls] if api == "responses" else [*calls, run]
        return "Let me look. ", calls

    async def _read(self, request: Request, api: str) -> tuple[dict[str, Any], Response | None]:
        body = await request.json()
        self.requests.append(body)
        history = _history(body, api)
        if self.mode == "fail_second" and _recall_answers(history, api):
            kind = "rate_limit_error" if self.fail_status == 429 else "server_error"
            error = {"type": kind, "message": "slow down"}
            payload = {"type": "error", "error": error} if api == "anthropic" else {"error": error}
            return body, JSONResponse(payload, status_code=self.fail_status)
        return body, None

    async def _openai(self, request: Request) -> Response:
        body, refused = await self._read(request, "openai")
        if refused is not None:
            return refused
        text, calls = self._plan(body, "openai")
        tool_calls = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, n, a in calls
        ]
        usage = {
            "prompt_tokens": USAGE_IN,
            "completion_tokens": USAGE_OUT,
            "total_tokens": USAGE_IN + USAGE_OUT,
        }
        finish = "tool_calls" if calls else "stop"
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if tool_calls:
                message["tool_calls"] = tool_calls
            return JSONResponse(
                {
                    "id": f"chatcmpl-{len(self.requests)}",
                    "object": "chat.completion",
                    "created": 1,
                    "model": body["model"],
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                }
            )
        with_usage = (body.get("stream_options") or {}).get("include_usage")
        return _sse(_openai_chunks(body, text, tool_calls, finish, usage if with_usage else None))

    async def _anthropic(self, request: Request) -> Response:
        body, refused = await self._read(request, "anthropic")
        if refused is not None:
            return refused
        text, calls = self._plan(body, "anthropic")
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
        blocks += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
        stop = "tool_use" if calls else "end_turn"
        usage = {
            "input_tokens": USAGE_IN,
            "output_tokens": USAGE_OUT,
            "cache_read_input_tokens": 10,
        }
        message = {
            "id": f"msg_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            return JSONResponse(message)
        return _sse(_anthropic_events(message))

    async def _responses(self, request: Request) -> Response:
        body, refused = await self._read(request, "responses")
        if refused is not None:
            return refused
        text, calls = self._plan(body, "responses")
        n = len(self.requests)
        output: list[dict[str, Any]] = []
        if self.reasoning:
            output.append(
                {
                    "type": "reasoning",
                    "id": f"rs_{n}",
                    "summary": [{"type": "summary_text", "text": f"Thinking {n}."}],
                    "encrypted_content": f"enc-{n}",
                }
            )
        output.append(
            {
                "type": "message",
                "id": f"msg_{n}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
        output += [
            {
                "type": "function_call",
                "id": f"fc_{i}",
                "call_id": i,
                "name": name,
                "arguments": json.dumps(args),
                "status": "completed",
            }
            for i, name, args in calls
        ]
        usage = {
            "input_tokens": USAGE_IN,
            "input_tokens_details": {"cached_tokens": 10},
            "output_tokens": USAGE_OUT,
            "output_tokens_details": {"reasoning_tokens": 3},
            "total_tokens": USAGE_IN + USAGE_OUT,
        }
        response = {
            "id": f"resp_{n}",
            "object": "response",
            "created_at": 1,
            "model": body["model"],
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools", []),
            "usage": usage,
        }
        if not body.get("stream"):
            return JSONResponse(response)
        return _sse(_responses_events(response))

    async def _gemini(self, request: Request) -> Response:
        body, refused = await self._read(request, "gemini")
        if refused is not None:
            return refused
        text, calls = self._plan(body, "gemini")
        parts: list[dict[str, Any]] = [
            {"text": text, "thoughtSignature": signature(f"text-{len(self.requests)}")}
        ]
        # as Gemini 3 does: no call id, the signature on the first call of the turn
        parts += [
            {"functionCall": {"name": n, "args": a}}
            | ({} if k else {"thoughtSignature": signature(i)})
            for k, (i, n, a) in enumerate(calls)
        ]
        usage = {
            "promptTokenCount": USAGE_IN,
            "candidatesTokenCount": USAGE_OUT,
            "cachedContentTokenCount": 10,
            "totalTokenCount": USAGE_IN + USAGE_OUT,
        }
        reply = {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": usage,
            "modelVersion": "gemini-2.5-pro",
        }
        if not request.url.path.endswith(":streamGenerateContent"):
            return JSONResponse(reply)
        # text first, in its own chunks, then the calls and the end with the usage
        first = {"candidates": [{"content": {"role": "model", "parts": parts[:1]}, "index": 0}]}
        last = {
            **reply,
            "candidates": [
                {
                    **reply["candidates"][0],
                    "content": {"role": "model", "parts": parts[1:] or [{"text": ""}]},
                }
            ],
        }
        return _sse([f"data: {json.dumps(x)}\r\n\r\n".encode() for x in (first, last)])


def signature(what: str) -> str:
    """A thought signature as Gemini sends one (base64; opaque to everyone but the model)."""
    return base64.b64encode(f"sig-{what}".encode()).decode()


def _history(body: dict[str, Any], api: str) -> list[dict[str, Any]]:
    if api == "gemini":
        return list(body["contents"])
    return list(body["input"] if api == "responses" else body["messages"])


def _name(tool: dict[str, Any]) -> Any:
    return tool.get("name") or (tool.get("function") or {}).get("name")


def _recall_answers(messages: list[dict[str, Any]], api: str) -> list[str]:
    """The texts of the recall answers the request carries (calls named call_recall_*; on
    the Gemini API, which has no call ids, responses of the tool's name)."""
    if api == "gemini":
        return [
            p["functionResponse"]["response"].get("output", "")
            for c in messages
            for p in c["parts"]
            if p.get("functionResponse", {}).get("name") == RECALL
        ]
    if api == "responses":
        return [
            m["output"]
            for m in messages
            if m.get("type") == "function_call_output" and m["call_id"].startswith("call_recall_")
        ]
    if api == "openai":
        return [
            m["content"]
            for m in messages
            if m["role"] == "tool" and m["tool_call_id"].startswith("call_recall_")
        ]
    return [
        b["content"]
        for m in messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result" and b["tool_use_id"].startswith("call_recall_")
    ]


def _sse(events: list[bytes]) -> Response:
    async def gen() -> Any:
        for event in events:
            yield event

    return StreamingResponse(gen(), media_type="text/event-stream")


def _halves(text: str) -> list[str]:
    return [text[: len(text) // 2], text[len(text) // 2 :]]


def _openai_chunks(
    body: dict[str, Any],
    text: str,
    tool_calls: list[dict[str, Any]],
    finish: str,
    usage: dict[str, int] | None,
) -> list[bytes]:
    base = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1}
    base["model"] = body["model"]

    def chunk(delta: dict[str, Any], reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": reason}
        return b"data: " + json.dumps({**base, "choices": [choice]}).encode() + b"\n\n"

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": part}) for part in _halves(text)]
    for k, call in enumerate(tool_calls):
        fn = call["function"]
        head = {"index": k, "id": call["id"], "type": "function"}
        out.append(
            chunk({"tool_calls": [{**head, "function": {"name": fn["name"], "arguments": ""}}]})
        )
        for part in _halves(fn["arguments"]):
            out.append(chunk({"tool_calls": [{"index": k, "function": {"arguments": part}}]}))
    out.append(chunk({}, finish))
    if usage is not None:
        out.append(
            b"data: " + json.dumps({**base, "choices": [], "usage": usage}).encode() + b"\n\n"
        )
    return [*out, b"data: [DONE]\n\n"]


def _anthropic_events(message: dict[str, Any]) -> list[bytes]:
    def ev(data: dict[str, Any]) -> bytes:
        return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()

    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "usage": {**message["usage"], "output_tokens": 1},
    }
    out = [ev({"type": "message_start", "message": start}), ev({"type": "ping"})]
    for i, block in enumerate(message["content"]):
        if block["type"] == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _halves(block["text"])]
        else:
            opened = {**block, "input": {}}
            raw = json.dumps(block["input"])
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _halves(raw)]
        out.append(ev({"type": "content_block_start", "index": i, "content_block": opened}))
        out += [ev({"type": "content_block_delta", "index": i, "delta": d}) for d in deltas]
        out.append(ev({"type": "content_block_stop", "index": i}))
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    out.append(ev({"type": "message_delta", "delta": delta, "usage": {"output_tokens": USAGE_OUT}}))
    return [*out, ev({"type": "message_stop"})]


def _responses_events(response: dict[str, Any]) -> list[bytes]:
    """The events the Responses API streams ``response`` with, numbered from 0."""
    sequence: list[dict[str, Any]] = []
    pending = {**response, "status": "in_progress", "output": [], "usage": None}
    sequence += [
        {"type": "response.created", "response": pending},
        {"type": "response.in_progress", "response": pending},
    ]
    for i, item in enumerate(response["output"]):
        at = {"item_id": item["id"], "output_index": i}
        if item["type"] == "message":
            part = item["content"][0]
            sequence.append(
                {
                    "type": "response.output_item.added",
                    "output_index": i,
                    "item": {**item, "status": "in_progress", "content": []},
                }
            )
            sequence.append(
                {
                    "type": "response.content_part.added",
                    **at,
                    "content_index": 0,
                    "part": {**part, "text": ""},
                }
            )
            sequence += [
                {
                    "type": "response.output_text.delta",
                    **at,
                    "content_index": 0,
                    "delta": half,
                    "logprobs": [],
                }
                for half in _halves(part["text"])
            ]
            sequence += [
                {
                    "type": "response.output_text.done",
                    **at,
                    "content_index": 0,
                    "text": part["text"],
                    "logprobs": [],
                },
                {"type": "response.content_part.done", **at, "content_index": 0, "part": part},
            ]
        elif item["type"] == "function_call":
            sequence.append(
                {
                    "type": "response.output_item.added",
                    "output_index": i,
                    "item": {**item, "status": "in_progress", "arguments": ""},
                }
            )
            sequence += [
                {"type": "response.function_call_arguments.delta", **at, "delta": half}
                for half in _halves(item["arguments"])
            ]
            sequence.append(
                {
                    "type": "response.function_call_arguments.done",
                    **at,
                    "arguments": item["arguments"],
                }
            )
        else:
            summary = item["summary"][0]
            sequence += [
                {"type": "response.output_item.added", "output_index": i, "item": item},
                {
                    "type": "response.reasoning_summary_text.delta",
                    **at,
                    "summary_index": 0,
                    "delta": summary["text"],
                },
            ]
        sequence.append({"type": "response.output_item.done", "output_index": i, "item": item})
    sequence.append({"type": "response.completed", "response": response})
    return [
        f"event: {d['type']}\ndata: {json.dumps({**d, 'sequence_number': n})}\n\n".encode()
        for n, d in enumerate(sequence)
    ]
