"""The providers' wire formats, for the tests' scripted upstreams.

One place that knows how each API shapes a reply and streams it: OpenAI Chat Completions,
Anthropic Messages, OpenAI Responses and Gemini ``generateContent``. The scripted upstreams
(``tests/proxy/fake_upstream.py``, ``tests/proxy/recall_upstream.py``,
``tests/clients/upstream.py``) decide *what* to answer; these functions say it in each API's
words. A reply is a plain dict as the API returns it; a stream is the list of server-sent-event
frames the API sends for that reply, built from the reply itself, so a streamed and a plain
answer always say the same thing. ``split`` cuts a text (or a call's arguments) into the pieces
the stream delivers it in.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

Split = Callable[[str], list[str]]
#: a tool call as the upstreams plan one: (call id, tool name, arguments)
Call = tuple[str, str, Any]


def pieces(text: str, size: int = 200) -> list[str]:
    """``text`` in pieces of ``size`` characters (none for an empty text)."""
    return [text[k : k + size] for k in range(0, len(text), size)]


def halves(text: str) -> list[str]:
    """``text`` in two pieces: the smallest split that still crosses a chunk boundary."""
    return [text[: len(text) // 2], text[len(text) // 2 :]]


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event (with its ``event:`` line when the API names its events)."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def _arguments(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args)


# -- OpenAI Chat Completions ---------------------------------------------------------------------
def chat_usage(prompt: int, completion: int, cached: int | None = None) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return usage


def chat_reply(
    text: str | None,
    *,
    model: str,
    usage: dict[str, Any],
    calls: Sequence[Call] = (),
    id: str = "chatcmpl-1",
    created: int = 1,
) -> dict[str, Any]:
    """A ``chat.completion`` of one choice: ``text`` and the tool ``calls``."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": _arguments(a)}}
            for i, n, a in calls
        ]
    return {
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": usage,
    }


def chat_chunks(
    reply: dict[str, Any], *, split: Split = pieces, include_usage: bool = False
) -> list[bytes]:
    """The ``chat.completion.chunk`` stream of ``reply``, ``[DONE]`` last; the usage in a chunk
    of its own when the request asked for it (``stream_options.include_usage``)."""
    base = {k: reply[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    choice = reply["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    texts = split(message.get("content") or "") or [""]
    out = [chunk({"role": "assistant", "content": texts[0]})]
    out += [chunk({"content": t}) for t in texts[1:]]
    for k, call in enumerate(message.get("tool_calls") or []):
        fn = call["function"]
        head = {"index": k, "id": call["id"], "type": "function"}
        out.append(
            chunk({"tool_calls": [{**head, "function": {"name": fn["name"], "arguments": ""}}]})
        )
        out += [
            chunk({"tool_calls": [{"index": k, "function": {"arguments": part}}]})
            for part in split(fn["arguments"])
        ]
    out.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        out.append(sse({**base, "choices": [], "usage": reply["usage"]}))
    return [*out, b"data: [DONE]\n\n"]


# -- Anthropic Messages --------------------------------------------------------------------------
def messages_usage(
    input: int, output: int, *, cache_read: int | None = None, cache_write: int | None = None
) -> dict[str, Any]:
    usage: dict[str, Any] = {"input_tokens": input, "output_tokens": output}
    if cache_write is not None:
        usage["cache_creation_input_tokens"] = cache_write
    if cache_read is not None:
        usage["cache_read_input_tokens"] = cache_read
    return usage


def messages_reply(
    content: list[dict[str, Any]],
    *,
    model: str,
    usage: dict[str, Any],
    id: str = "msg_1",
    stop_reason: str | None = None,
) -> dict[str, Any]:
    """A ``message`` of ``content`` blocks; it stops for ``tool_use`` when it holds a call."""
    if stop_reason is None:
        calls = any(b.get("type") == "tool_use" for b in content)
        stop_reason = "tool_use" if calls else "end_turn"
    return {
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }


def text_message(
    text: str, *, model: str, usage: dict[str, Any], id: str = "msg_1"
) -> dict[str, Any]:
    return messages_reply([{"type": "text", "text": text}], model=model, usage=usage, id=id)


def messages_events(message: dict[str, Any], *, split: Split = pieces) -> list[bytes]:
    """The event stream of ``message``: each block opened empty, filled by its deltas (text,
    thinking and signature, a call's JSON, a compaction's content) and closed; a ``ping`` after
    the start, as the API sends one."""

    def ev(data: dict[str, Any]) -> bytes:
        return sse(data, data["type"])

    start = {**message, "content": [], "stop_reason": None}
    start["usage"] = {**message["usage"], "output_tokens": 1}
    start["usage"].pop("iterations", None)
    out = [ev({"type": "message_start", "message": start}), ev({"type": "ping"})]
    for i, block in enumerate(message["content"]):
        kind = block["type"]
        deltas: list[dict[str, Any]]
        if kind == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in split(block["text"])]
        elif kind == "thinking":
            opened = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in split(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "compaction":
            opened = {"type": "compaction", "content": None, "signature": block["signature"]}
            deltas = [{"type": "compaction_delta", "content": block["content"]}]
        else:
            opened = {**block, "input": {}}
            raw = json.dumps(block["input"])
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in split(raw)]
        out.append(ev({"type": "content_block_start", "index": i, "content_block": opened}))
        out += [ev({"type": "content_block_delta", "index": i, "delta": d}) for d in deltas]
        out.append(ev({"type": "content_block_stop", "index": i}))
    usage = {k: v for k, v in message["usage"].items() if k in ("output_tokens", "iterations")}
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    out.append(ev({"type": "message_delta", "delta": delta, "usage": usage}))
    return [*out, ev({"type": "message_stop"})]


# -- OpenAI Responses ----------------------------------------------------------------------------
def responses_usage(
    input: int, output: int, *, cached: int = 0, reasoning: int = 0
) -> dict[str, Any]:
    return {
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input + output,
    }


def message_item(text: str, id: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": id,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def function_call_item(call_id: str, name: str, arguments: Any, id: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": id,
        "call_id": call_id,
        "name": name,
        "arguments": _arguments(arguments),
        "status": "completed",
    }


def reasoning_item(summary: str, encrypted: str, id: str) -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": id,
        "summary": [{"type": "summary_text", "text": summary}],
        "encrypted_content": encrypted,
    }


def responses_reply(
    output: list[dict[str, Any]],
    *,
    model: str,
    usage: dict[str, Any],
    id: str = "resp_1",
    created_at: int = 1,
    **extra: Any,
) -> dict[str, Any]:
    """A completed ``response`` of ``output`` items (``extra``: the echoed request fields)."""
    return {
        "id": id,
        "object": "response",
        "created_at": created_at,
        "model": model,
        "status": "completed",
        "output": output,
        **extra,
        "usage": usage,
    }


def responses_events(response: dict[str, Any], *, split: Split = pieces) -> list[bytes]:
    """The events the Responses API streams ``response`` with, numbered from 0: each item
    added, filled (a message's text, a call's arguments, a reasoning summary) and done."""
    sequence: list[dict[str, Any]] = []
    pending = {**response, "status": "in_progress", "output": [], "usage": None}
    sequence += [
        {"type": "response.created", "response": pending},
        {"type": "response.in_progress", "response": pending},
    ]
    for i, item in enumerate(response["output"]):
        at = {"item_id": item.get("id"), "output_index": i}
        added = {"type": "response.output_item.added", "output_index": i}
        if item["type"] == "message":
            part = item["content"][0]
            text_at = {**at, "content_index": 0}
            sequence += [
                {**added, "item": {**item, "status": "in_progress", "content": []}},
                {"type": "response.content_part.added", **text_at, "part": {**part, "text": ""}},
            ]
            sequence += [
                {"type": "response.output_text.delta", **text_at, "delta": p, "logprobs": []}
                for p in split(part["text"])
            ]
            sequence += [
                {
                    "type": "response.output_text.done",
                    **text_at,
                    "text": part["text"],
                    "logprobs": [],
                },
                {"type": "response.content_part.done", **text_at, "part": part},
            ]
        elif item["type"] == "function_call":
            sequence.append({**added, "item": {**item, "status": "in_progress", "arguments": ""}})
            sequence += [
                {"type": "response.function_call_arguments.delta", **at, "delta": p}
                for p in split(item["arguments"])
            ]
            sequence.append(
                {
                    "type": "response.function_call_arguments.done",
                    **at,
                    "arguments": item["arguments"],
                }
            )
        elif item["type"] == "reasoning" and item.get("summary"):
            sequence.append({**added, "item": item})
            sequence += [
                {
                    "type": "response.reasoning_summary_text.delta",
                    **at,
                    "summary_index": k,
                    "delta": s["text"],
                }
                for k, s in enumerate(item["summary"])
            ]
        else:  # compaction, custom tool calls...: whole at once
            sequence.append({**added, "item": item})
        sequence.append({"type": "response.output_item.done", "output_index": i, "item": item})
    sequence.append({"type": "response.completed", "response": response})
    return [sse({**d, "sequence_number": n}, d["type"]) for n, d in enumerate(sequence)]


# -- Gemini --------------------------------------------------------------------------------------
def gemini_usage(prompt: int, output: int, cached: int = 0) -> dict[str, Any]:
    usage = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": output,
        "totalTokenCount": prompt + output,
    }
    if cached:
        usage["cachedContentTokenCount"] = cached
    return usage


def gemini_reply(
    parts: str | list[dict[str, Any]],
    usage: dict[str, Any],
    *,
    model: str = "gemini-2.5-pro",
    **extra: Any,
) -> dict[str, Any]:
    """A ``GenerateContentResponse`` of one candidate (``parts``: its parts, or one text)."""
    if isinstance(parts, str):
        parts = [{"text": parts}]
    candidate = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
    return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model, **extra}


def gemini_chunks(reply: dict[str, Any], *, split: Split | None = None) -> list[bytes]:
    """``reply`` as ``alt=sse`` chunks: one a part (a text part cut by ``split`` when given),
    the finish reason and the usage on the last; Gemini ends its lines with CRLF."""
    candidate = reply["candidates"][0]
    rest = {k: v for k, v in reply.items() if k not in ("candidates", "usageMetadata")}
    parts: list[dict[str, Any]] = []
    for part in candidate["content"]["parts"]:
        if split is not None and set(part) == {"text"}:
            parts += [{"text": p} for p in split(part["text"])] or [part]
        else:
            parts.append(part)
    out = []
    for i, part in enumerate(parts):
        chunk: dict[str, Any] = {
            "candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}],
            **rest,
        }
        if i == len(parts) - 1:
            chunk["candidates"][0]["finishReason"] = candidate["finishReason"]
            chunk["usageMetadata"] = reply["usageMetadata"]
        out.append(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
    return out


# -- one text, any API ---------------------------------------------------------------------------
def text_reply(api: str, text: str, *, model: str, prompt: int, output: int) -> dict[str, Any]:
    """A plain text answer (a summary, a side call's reply) in ``api``'s shape: ``"openai"``,
    ``"anthropic"``, ``"responses"`` or ``"gemini"``."""
    if api == "anthropic":
        return text_message(text, model=model, usage=messages_usage(prompt, output))
    if api == "gemini":
        return gemini_reply(text, gemini_usage(prompt, output))
    if api == "responses":
        return responses_reply(
            [message_item(text, "msg_1")], model=model, usage=responses_usage(prompt, output)
        )
    return chat_reply(text, model=model, usage=chat_usage(prompt, output))


def stream(
    api: str, reply: dict[str, Any], request: dict[str, Any], *, split: Split = pieces
) -> list[bytes]:
    """``reply`` streamed as ``api`` streams it to ``request`` (which may ask for the usage)."""
    if api == "anthropic":
        return messages_events(reply, split=split)
    if api == "responses":
        return responses_events(reply, split=split)
    if api == "gemini":
        return gemini_chunks(reply, split=split)
    opts = request.get("stream_options")
    with_usage = isinstance(opts, dict) and bool(opts.get("include_usage"))
    return chat_chunks(reply, split=split, include_usage=with_usage)
