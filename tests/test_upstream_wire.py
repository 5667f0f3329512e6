"""The scripted upstreams' wire encoders (:mod:`upstream_wire`): every stream, read back event by
event, says what the plain reply says: the same text, the same calls with the same arguments,
the same usage, in one well-formed event sequence."""

from __future__ import annotations

import json
from typing import Any

import upstream_wire as wire
from hypothesis import given
from hypothesis import strategies as st

texts = st.text(max_size=300)
calls = st.lists(
    st.tuples(
        st.from_regex(r"call_[a-z0-9]{1,8}", fullmatch=True),
        st.sampled_from(["run", "read_file"]),
        st.dictionaries(st.sampled_from(["cmd", "path"]), st.text(max_size=60)),
    ),
    max_size=3,
)
splits = st.sampled_from([wire.pieces, wire.halves, lambda t: wire.pieces(t, 7)])


def _data(frames: list[bytes]) -> list[Any]:
    out = []
    for frame in frames:
        assert frame.endswith((b"\n\n", b"\r\n\r\n")), frame
        (line,) = [x for x in frame.decode().splitlines() if x.startswith("data: ")]
        payload = line.removeprefix("data: ")
        out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


@given(texts, calls, splits, st.booleans())
def test_a_chat_stream_rebuilds_its_reply(
    text: str, planned: list[wire.Call], split: wire.Split, with_usage: bool
) -> None:
    usage = wire.chat_usage(100, 7, cached=10)
    reply = wire.chat_reply(text, model="m", usage=usage, calls=planned)
    *chunks, done = _data(wire.chat_chunks(reply, split=split, include_usage=with_usage))
    assert done == "[DONE]"
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert "".join(d.get("content") or "" for d in deltas) == text
    args: dict[int, str] = {}
    for d in deltas:
        for call in d.get("tool_calls") or []:
            args[call["index"]] = args.get(call["index"], "") + call["function"]["arguments"]
    assert [json.loads(a) for a in args.values()] == [a for _, _, a in planned]
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finish[-1] == ("tool_calls" if planned else "stop") and not any(finish[:-1])
    assert [c["usage"] for c in chunks if "usage" in c] == ([usage] if with_usage else [])


@given(texts, calls, splits)
def test_a_messages_stream_rebuilds_its_message(
    text: str, planned: list[wire.Call], split: wire.Split
) -> None:
    blocks: list[dict[str, Any]] = [{"type": "thinking", "thinking": text, "signature": "s"}]
    blocks += [{"type": "text", "text": text}]
    blocks += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in planned]
    usage = wire.messages_usage(100, 7, cache_read=10, cache_write=5)
    message = wire.messages_reply(blocks, model="m", usage=usage)
    events = _data(wire.messages_events(message, split=split))
    assert events[0]["type"] == "message_start" and events[-1]["type"] == "message_stop"
    rebuilt: list[dict[str, Any]] = []
    for e in events:
        if e["type"] == "content_block_start":
            rebuilt.append(dict(e["content_block"]))
            raw = ""
        elif e["type"] == "content_block_delta":
            d, block = e["delta"], rebuilt[e["index"]]
            if d["type"] == "input_json_delta":
                raw += d["partial_json"]
            else:
                field = d["type"].removesuffix("_delta")
                block[field] = block.get(field, "") + d[field]
        elif e["type"] == "content_block_stop" and rebuilt[-1]["type"] == "tool_use":
            rebuilt[-1]["input"] = json.loads(raw)
    assert rebuilt == blocks
    (end,) = [e for e in events if e["type"] == "message_delta"]
    assert end["delta"]["stop_reason"] == message["stop_reason"]


@given(texts, calls, splits)
def test_a_responses_stream_numbers_its_events_and_ends_with_the_response(
    text: str, planned: list[wire.Call], split: wire.Split
) -> None:
    output = [wire.reasoning_item("why", "enc", "rs_1"), wire.message_item(text, "msg_1")]
    output += [wire.function_call_item(i, n, a, f"fc_{i}") for i, n, a in planned]
    response = wire.responses_reply(output, model="m", usage=wire.responses_usage(100, 7))
    events = _data(wire.responses_events(response, split=split))
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[-1] == {
        "type": "response.completed",
        "response": response,
        "sequence_number": len(events) - 1,
    }
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert "".join(deltas) == text
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert done == output


@given(texts, splits)
def test_a_gemini_stream_carries_its_parts_and_ends_with_the_usage(
    text: str, split: wire.Split
) -> None:
    usage = wire.gemini_usage(100, 7, cached=10)
    parts = [{"text": text}, {"functionCall": {"name": "run", "args": {}}, "thoughtSignature": "s"}]
    reply = wire.gemini_reply(parts, usage)
    chunks = _data(wire.gemini_chunks(reply, split=split))
    got = [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
    assert "".join(p.get("text", "") for p in got) == text and got[-1] == parts[-1]
    assert [c.get("usageMetadata") for c in chunks][-1] == usage
    assert all("finishReason" not in c["candidates"][0] for c in chunks[:-1])
