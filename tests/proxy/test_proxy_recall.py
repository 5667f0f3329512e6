"""The proxy offers the recall tool when the request the model sees shows a ``cw:`` reference and
answers the model's calls itself: the real ``openai`` and ``anthropic`` SDKs, streaming and not,
through a real proxy to a scripted upstream (:mod:`recall_upstream`) only ever see the last
round's answer, which quotes what only the original tool output held."""

from __future__ import annotations

import json
from typing import Any

import pytest
from proxy_doubles import StartProxy
from recall_upstream import (
    RECALL,
    REF,
    USAGE_IN,
    USAGE_OUT,
    RecallUpstream,
    proxy_stats,
    tool_names,
    tool_output,
)

from contextwarden.proxy.recall import add_usage, parse_events
from contextwarden.proxy.stats import RequestRecord
from contextwarden.proxy.wire import WIRES
from contextwarden.proxy.wire.chat import OpenAISplice
from contextwarden.proxy.wire.messages import AnthropicSplice
from contextwarden.recall import RECALL_TOOL_NAME

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

WINDOW = 32_000
OPENAI_MODEL = "gpt-4o"
ANTHROPIC_MODEL = "claude-opus-4-7"
RUN = {"name": "run", "description": "Run a shell command.", "parameters": {"type": "object"}}
OPENAI_TOOLS = [{"type": "function", "function": RUN}]
ANTHROPIC_TOOLS = [
    {"name": "run", "description": RUN["description"], "input_schema": {"type": "object"}}
]


def _openai_history(turns: int = 12) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the bug in the parser."},
    ]
    for i in range(turns):
        args = json.dumps({"cmd": f"cat file{i}.py"})
        call = {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "run", "arguments": args},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": tool_output(i)})
    return messages


def _anthropic_history(turns: int = 12) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the bug in the parser."}]
    for i in range(turns):
        use = {
            "type": "tool_use",
            "id": f"toolu_{i}",
            "name": "run",
            "input": {"cmd": f"cat file{i}.py"},
        }
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": tool_output(i)}
        messages.append({"role": "assistant", "content": [use]})
        messages.append({"role": "user", "content": [result]})
    return messages


def _openai(proxy: str) -> Any:
    return openai.OpenAI(base_url=proxy + "/v1", api_key="sk-test", max_retries=0)


def _anthropic(proxy: str) -> Any:
    return anthropic.Anthropic(base_url=proxy, api_key="sk-ant-test", max_retries=0)


def _asked(first: dict[str, Any]) -> str:
    """The SECRET of the tool output behind the first reference the upstream's request showed."""
    text = json.dumps(first["messages"])
    ref = REF.findall(text)[0]
    for m in first["messages"]:
        blocks = m["content"] if isinstance(m["content"], list) else [m]
        for b in blocks:
            if ref in str(b.get("content")):
                i = int(str(b.get("tool_call_id") or b.get("tool_use_id")).split("_")[-1])
                assert tool_output(i) not in text  # the model did not see the original
                return f"SECRET-{i:04d}"
    raise AssertionError(f"{ref} is on no tool result")


# -- OpenAI Chat Completions ---------------------------------------------------------------------


def test_openai_recall_is_answered_at_the_proxy(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy
) -> None:
    fake, url = scripted
    proxy = start_proxy(url, window=WINDOW)
    history = _openai_history()
    reply = _openai(proxy).chat.completions.create(
        model=OPENAI_MODEL, messages=history, tools=OPENAI_TOOLS
    )
    first, second = fake.bodies
    secret = _asked(first)
    assert reply.choices[0].message.content == f"quoted: {secret}"
    assert not reply.choices[0].message.tool_calls
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (
        2 * USAGE_IN,
        2 * USAGE_OUT,
    )
    assert tool_names(first) == ["run", RECALL] and tool_names(second) == ["run", RECALL]
    call, answer = second["messages"][-2:]
    assert second["messages"][:-2] == first["messages"]
    assert [c["function"]["name"] for c in call["tool_calls"]] == [RECALL]
    i = int(secret.split("-")[1])
    assert answer["role"] == "tool" and tool_output(i) in answer["content"]
    stats = proxy_stats(proxy)
    assert (stats["recall_offered"], stats["recall_calls"], stats["recall_rounds"]) == (1, 1, 1)
    assert stats["recall_unknown_refs"] == 0


def test_openai_stream_carries_one_message_without_the_call(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy
) -> None:
    fake, url = scripted
    proxy = start_proxy(url, window=WINDOW)
    chunks = list(
        _openai(proxy).chat.completions.create(
            model=OPENAI_MODEL,
            messages=_openai_history(),
            tools=OPENAI_TOOLS,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    secret = _asked(fake.bodies[0])
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == f"Let me look. quoted: {secret}"
    assert not any(c.choices and c.choices[0].delta.tool_calls for c in chunks)
    assert len({c.id for c in chunks}) == 1
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.role) == 1
    assert [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ] == ["stop"]
    usage = [c.usage for c in chunks if c.usage]
    assert [(u.prompt_tokens, u.completion_tokens) for u in usage] == [
        (2 * USAGE_IN, 2 * USAGE_OUT)
    ]
    # the SDK's own accumulator reads it as one finished message
    with _openai(proxy).chat.completions.stream(
        model=OPENAI_MODEL, messages=_openai_history(), tools=OPENAI_TOOLS
    ) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.content.endswith(f"quoted: {secret}")
    assert not final.choices[0].message.tool_calls


def test_openai_mixed_call_in_a_stream_drops_the_clients_call(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy
) -> None:
    fake, url = scripted
    fake.mode = "mixed"
    proxy = start_proxy(url, window=WINDOW)
    with _openai(proxy).chat.completions.stream(
        model=OPENAI_MODEL, messages=_openai_history(), tools=OPENAI_TOOLS
    ) as stream:
        events = list(stream)
        final = stream.get_final_completion()
    assert not final.choices[0].message.tool_calls
    assert final.choices[0].finish_reason == "stop"
    assert not [e for e in events if "tool_calls" in e.type]
    sent_back = fake.bodies[1]["messages"][-2]
    assert [c["function"]["name"] for c in sent_back["tool_calls"]] == [RECALL]


# -- Anthropic Messages --------------------------------------------------------------------------


def test_anthropic_recall_is_answered_at_the_proxy(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy
) -> None:
    fake, url = scripted
    proxy = start_proxy(url, window=WINDOW)
    reply = _anthropic(proxy).messages.create(
        model=ANTHROPIC_MODEL, max_tokens=100, messages=_anthropic_history(), tools=ANTHROPIC_TOOLS
    )
    first, second = fake.bodies
    secret = _asked(first)
    assert [b.type for b in reply.content] == ["text"] and reply.content[
        0
    ].text == f"quoted: {secret}"
    assert reply.stop_reason == "end_turn"
    usage = reply.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_input_tokens) == (
        2 * USAGE_IN,
        2 * USAGE_OUT,
        20,
    )
    assert tool_names(first) == ["run", RECALL]
    call, answer = second["messages"][-2:]
    assert [b["name"] for b in call["content"] if b["type"] == "tool_use"] == [RECALL]
    (result,) = answer["content"]
    assert result["type"] == "tool_result" and "is_error" not in result
    assert tool_output(int(secret.split("-")[1])) in result["content"]


def test_anthropic_stream_is_one_message_with_contiguous_blocks(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy
) -> None:
    fake, url = scripted
    proxy = start_proxy(url, window=WINDOW)
    with _anthropic(proxy).messages.stream(
        model=ANTHROPIC_MODEL, max_tokens=100, messages=_anthropic_history(), tools=ANTHROPIC_TOOLS
    ) as stream:
        events = list(stream)
        message = stream.get_final_message()
    secret = _asked(fake.bodies[0])
    assert [b.type for b in message.content] == ["text", "text"]
    assert "".join(b.text for b in message.content) == f"Let me look. quoted: {secret}"
    assert message.stop_reason == "end_turn"
    assert [e.type for e in events].count("message_start") == 1
    assert [e.index for e in events if e.type == "content_block_start"] == [0, 1]
    assert (message.usage.input_tokens, message.usage.output_tokens) == (
        2 * USAGE_IN,
        2 * USAGE_OUT,
    )
    assert RECALL not in json.dumps([e.model_dump(mode="json") for e in events])


def test_anthropic_mixed_call_in_a_stream_drops_the_clients_call(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy
) -> None:
    fake, url = scripted
    fake.mode = "mixed"
    proxy = start_proxy(url, window=WINDOW)
    with _anthropic(proxy).messages.stream(
        model=ANTHROPIC_MODEL, max_tokens=100, messages=_anthropic_history(), tools=ANTHROPIC_TOOLS
    ) as stream:
        events = list(stream)
        message = stream.get_final_message()
    assert [b.type for b in message.content] == ["text", "text"]
    assert not [
        e for e in events if e.type == "content_block_start" and e.content_block.type == "tool_use"
    ]
    sent_back = fake.bodies[1]["messages"][-2]
    assert [b["name"] for b in sent_back["content"] if b["type"] == "tool_use"] == [RECALL]


def test_an_unknown_reference_is_answered_as_an_error_and_counted(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy
) -> None:
    fake, url = scripted
    fake.mode = "unknown"
    proxy = start_proxy(url, window=WINDOW)
    _anthropic(proxy).messages.create(
        model=ANTHROPIC_MODEL, max_tokens=100, messages=_anthropic_history(), tools=ANTHROPIC_TOOLS
    )
    (result,) = fake.bodies[1]["messages"][-1]["content"]
    assert result["is_error"] is True and "cw:0000000000000000" in result["content"]
    stats = proxy_stats(proxy)
    assert (stats["recall_calls"], stats["recall_unknown_refs"]) == (1, 1)


# -- when the tool is not offered, and the limit -------------------------------------------------


def test_a_client_with_tools_is_offered_it_from_the_first_request(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy
) -> None:
    """The tool list a prompt cache's prefix begins with stays the same from the first call,
    whether or not anything was hidden yet; a client without tools gets none until then."""
    fake, url = scripted
    proxy = start_proxy(url, window=WINDOW)
    reply = _openai(proxy).chat.completions.create(
        model=OPENAI_MODEL, messages=_openai_history(1), tools=OPENAI_TOOLS
    )
    assert reply.choices[0].message.content == "plain answer"
    (only,) = fake.bodies
    assert not REF.search(json.dumps(only))
    assert tool_names(only) == ["run", RECALL_TOOL_NAME]
    _anthropic(proxy).messages.create(
        model=ANTHROPIC_MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}]
    )
    assert "tools" not in fake.bodies[-1]
    assert proxy_stats(proxy)["recall_offered"] == 1


@pytest.mark.parametrize("choice", ["none", {"type": "function", "function": {"name": "run"}}])
def test_a_forced_openai_tool_choice_is_respected(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy, choice: Any
) -> None:
    fake, url = scripted
    proxy = start_proxy(url, window=WINDOW)
    _openai(proxy).chat.completions.create(
        model=OPENAI_MODEL, messages=_openai_history(), tools=OPENAI_TOOLS, tool_choice=choice
    )
    (only,) = fake.bodies
    assert REF.search(json.dumps(only)) and tool_names(only) == ["run"]


def test_a_forced_anthropic_tool_choice_is_respected(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy
) -> None:
    fake, url = scripted
    proxy = start_proxy(url, window=WINDOW)
    _anthropic(proxy).messages.create(
        model=ANTHROPIC_MODEL,
        max_tokens=10,
        messages=_anthropic_history(),
        tools=ANTHROPIC_TOOLS,
        tool_choice={"type": "tool", "name": "run"},
    )
    (only,) = fake.bodies
    assert REF.search(json.dumps(only)) and tool_names(only) == ["run"]


def test_the_option_turns_it_off(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy
) -> None:
    fake, url = scripted
    proxy = start_proxy(url, window=WINDOW, recall_tool=False)
    _openai(proxy).chat.completions.create(
        model=OPENAI_MODEL, messages=_openai_history(), tools=OPENAI_TOOLS
    )
    (only,) = fake.bodies
    assert tool_names(only) == ["run"]


@pytest.mark.parametrize("stream", [False, True])
def test_three_rounds_at_most_the_last_without_the_tool(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy, stream: bool
) -> None:
    fake, url = scripted
    fake.mode = "always"
    proxy = start_proxy(url, window=WINDOW)
    args: dict[str, Any] = {
        "model": ANTHROPIC_MODEL,
        "max_tokens": 100,
        "messages": _anthropic_history(),
        "tools": ANTHROPIC_TOOLS,
    }
    if stream:
        with _anthropic(proxy).messages.stream(**args) as s:
            message = s.get_final_message()
    else:
        message = _anthropic(proxy).messages.create(**args)
    assert [tool_names(r) for r in fake.bodies] == [["run", RECALL], ["run", RECALL], ["run"]]
    assert message.content[-1].text.startswith("quoted: SECRET-")
    assert all(b.type == "text" for b in message.content)
    stats = proxy_stats(proxy)
    assert (stats["recall_calls"], stats["recall_rounds"]) == (2, 2)


def test_the_last_round_of_a_client_without_tools_describes_the_tool_uncallable(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy
) -> None:
    fake, url = scripted
    fake.mode = "always"
    proxy = start_proxy(url, window=WINDOW)
    reply = _openai(proxy).chat.completions.create(model=OPENAI_MODEL, messages=_openai_history())
    assert reply.choices[0].message.content.startswith("quoted: SECRET-")
    first, _, last = fake.bodies
    assert "tool_choice" not in first and tool_names(first) == [RECALL]
    assert tool_names(last) == [RECALL] and last["tool_choice"] == "none"
    body = WIRES["anthropic"].round_body({"messages": []}, [{"role": "user"}], last=True)
    assert tool_names(body) == [RECALL] and body["tool_choice"] == {"type": "none"}


# -- upstream errors on a later round ------------------------------------------------------------


def test_a_later_round_error_reaches_the_client(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy
) -> None:
    fake, url = scripted
    fake.mode = "fail_second"
    proxy = start_proxy(url, window=WINDOW)
    with pytest.raises(openai.RateLimitError):
        _openai(proxy).chat.completions.create(
            model=OPENAI_MODEL, messages=_openai_history(), tools=OPENAI_TOOLS
        )
    with pytest.raises(anthropic.APIStatusError, match="slow down"):
        with _anthropic(proxy).messages.stream(
            model=ANTHROPIC_MODEL,
            max_tokens=10,
            messages=_anthropic_history(),
            tools=ANTHROPIC_TOOLS,
        ) as stream:
            list(stream)
    with pytest.raises(openai.APIError, match="slow down"):
        list(
            _openai(proxy).chat.completions.create(
                model=OPENAI_MODEL, messages=_openai_history(), tools=OPENAI_TOOLS, stream=True
            )
        )
    stats = proxy_stats(proxy)
    assert stats["by_status"].get("500") is None and stats["stream_failures"] == 2


# -- the splice, directly ------------------------------------------------------------------------


def _events(*items: dict[str, Any]) -> list[bytes]:
    return [f"event: {d['type']}\ndata: {json.dumps(d)}\n\n".encode() for d in items]


def test_anthropic_splice_renumbers_a_later_rounds_blocks() -> None:
    splice = AnthropicSplice()
    start = {"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1}}}
    think = {"type": "thinking", "thinking": "", "signature": ""}
    use = {"type": "tool_use", "id": "t", "name": RECALL, "input": {}}
    first = _events(
        start,
        {"type": "content_block_start", "index": 0, "content_block": think},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "hm"},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": "s"},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": use},
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"ref": "cw:1"}'},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 3},
        },
        {"type": "message_stop"},
    )
    events, rest = parse_events(b"".join(first))
    sent = [out for e in events for out in splice.feed(e)]
    assert rest == b"" and len(sent) == 5  # message_start and the thinking block
    turn = splice.end_round()
    assert turn.calls == (("t", "cw:1"),)
    assert turn.sent[0]["content"][0] == {**think, "thinking": "hm", "signature": "s"}
    splice.next_round()
    text = {"type": "text", "text": ""}
    second = _events(
        start,
        {"type": "content_block_start", "index": 0, "content_block": text},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 2},
        },
        {"type": "message_stop"},
    )
    events, _ = parse_events(b"".join(second).replace(b"\n", b"\r\n"))
    sent = [json.loads(out.split(b"data: ", 1)[1]) for e in events for out in splice.feed(e)]
    sent += [json.loads(out.split(b"data: ", 1)[1]) for out in splice.flush()]
    assert [d["type"] for d in sent] == [
        "content_block_start",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert [d.get("index") for d in sent[:2]] == [1, 1]
    assert sent[2]["usage"] == {"input_tokens": 10, "output_tokens": 5}


def test_openai_splice_drops_a_later_rounds_role_chunk() -> None:
    splice = OpenAISplice()
    role = {"id": "a", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    events, _ = parse_events(b"data: " + json.dumps(role).encode() + b"\n\n")
    assert splice.feed(events[0]) == [events[0].raw]
    splice.next_round()
    later = {**role, "id": "b"}
    events, _ = parse_events(b"data: " + json.dumps(later).encode() + b"\n\n")
    assert splice.feed(events[0]) == []
    text = {"id": "b", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "x"}}]}
    events, _ = parse_events(b"data: " + json.dumps(text).encode() + b"\n\n")
    (out,) = splice.feed(events[0])
    assert json.loads(out[6:]) == {"id": "a", "choices": [{"index": 0, "delta": {"content": "x"}}]}


def test_usage_adds_field_by_field() -> None:
    a = {"input_tokens": 3, "details": {"cached": 1}, "tier": "x"}
    b = {"input_tokens": 4, "details": {"cached": 2}, "output_tokens": 5}
    assert add_usage(a, b) == {
        "input_tokens": 7,
        "details": {"cached": 3},
        "tier": "x",
        "output_tokens": 5,
    }
    assert add_usage(None, b) == b


def test_when_the_tool_may_be_offered() -> None:
    run = OPENAI_TOOLS[0]
    assert WIRES["openai"].may_offer({"tools": [run], "tool_choice": "auto"})
    assert WIRES["openai"].may_offer({"tool_choice": "required"})
    assert not WIRES["openai"].may_offer({"tools": [run], "tool_choice": "none"})
    assert not WIRES["openai"].may_offer({"n": 2})
    assert not WIRES["openai"].may_offer({"functions": [RUN]})
    assert not WIRES["openai"].may_offer({"tools": {"run": run}})
    assert not WIRES["openai"].may_offer(
        {"tools": [WIRES["openai"].round_body({}, [], last=False)["tools"][0]]}
    )
    assert WIRES["anthropic"].may_offer({"tool_choice": {"type": "any"}})
    assert not WIRES["anthropic"].may_offer({"tool_choice": {"type": "none"}})
    assert not WIRES["anthropic"].may_offer({"tool_choice": {"type": "tool", "name": "run"}})


def test_the_log_line_carries_the_recall_counts() -> None:
    record = RequestRecord("POST", "/v1/messages", "anthropic")
    assert "recall_calls" not in record.as_log()
    record.recall_offered, record.recall_calls, record.recall_unknown = True, 2, 1
    record.recall_rounds = 2
    line = record.as_log()
    assert (line["recall_calls"], line["recall_unknown"], line["recall_rounds"]) == (2, 1, 2)
