"""The recall tool on the Responses API (``POST /v1/responses``, Codex CLI's): the proxy offers it
and answers the model's calls itself, as on chat. The real ``openai`` SDK (``responses.create``,
streamed or not, and its ``responses.stream`` helper, which checks a stream's ids and indices)
through a real proxy to a scripted upstream (:mod:`recall_upstream`) only ever sees the answer,
which quotes what only the original tool output held."""

from __future__ import annotations

import json
import typing
from typing import Any

import httpx
import pytest
import upstream_wire as wire
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
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

from contextwarden.proxy.recall import MAX_ROUNDS, parse_events
from contextwarden.proxy.wire.responses import RESPONSES, ResponsesSplice

openai = pytest.importorskip("openai")
from openai.types.responses import ResponseStreamEvent  # noqa: E402

WINDOW = 32_000
MODEL = "gpt-4o"
TOOLS = [
    {
        "type": "function",
        "name": "run",
        "description": "Run a shell command.",
        "parameters": {"type": "object"},
    }
]
#: The event classes the SDK knows (a stream event of another type would not parse as one).
EVENT_TYPES = tuple(typing.get_args(typing.get_args(ResponseStreamEvent)[0]))


def _history(turns: int = 12) -> list[dict[str, Any]]:
    """An agent's input items: a task, then ``turns`` calls of ``run`` and their outputs (the
    warden masks the older ones, each then showing a ``cw:`` reference)."""
    items: list[dict[str, Any]] = [{"role": "user", "content": "Fix the bug in the parser."}]
    for i in range(turns):
        args = json.dumps({"cmd": f"cat file{i}.py"})
        items.append(
            {"type": "function_call", "call_id": f"call_{i}", "name": "run", "arguments": args}
        )
        items.append(
            {"type": "function_call_output", "call_id": f"call_{i}", "output": tool_output(i)}
        )
    return items


def _client(proxy: str) -> Any:
    return openai.OpenAI(base_url=proxy + "/v1", api_key="sk-test", max_retries=0)


def _asked(first: dict[str, Any]) -> str:
    """The SECRET of the tool output behind the first reference the upstream's request showed."""
    text = json.dumps(first["input"])
    ref = REF.findall(text)[0]
    for item in first["input"]:
        if item.get("type") == "function_call_output" and ref in str(item["output"]):
            i = int(item["call_id"].split("_")[-1])
            assert tool_output(i) not in text  # the model did not see the original
            return f"SECRET-{i:04d}"
    raise AssertionError(f"{ref} is on no function_call_output")


def _added(body: dict[str, Any], first: dict[str, Any]) -> list[dict[str, Any]]:
    """The items a later round's request carries after the client's own."""
    assert body["input"][: len(first["input"])] == first["input"]
    return list(body["input"][len(first["input"]) :])


# -- answered at the proxy -----------------------------------------------------------------------


def test_a_recall_is_answered_at_the_proxy(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy
) -> None:
    fake, url = scripted
    proxy = start_proxy(url, window=WINDOW)
    raw = _client(proxy).responses.with_raw_response.create(
        model=MODEL, input=_history(), tools=TOOLS
    )
    reply = raw.parse()
    assert int(raw.headers["x-contextwarden-tokens-before"]) > int(
        raw.headers["x-contextwarden-tokens-after"]
    )
    first, second = fake.bodies
    secret = _asked(first)
    assert reply.output_text == f"quoted: {secret}"
    assert [i.type for i in reply.output] == ["message"]
    usage = reply.usage
    assert (usage.input_tokens, usage.output_tokens) == (2 * USAGE_IN, 2 * USAGE_OUT)
    assert usage.input_tokens_details.cached_tokens == 20
    assert usage.output_tokens_details.reasoning_tokens == 6
    assert tool_names(first) == ["run", RECALL] and tool_names(second) == ["run", RECALL]
    message, call, answer = _added(second, first)
    assert (message["type"], message["id"]) == ("message", "msg_1")  # stored: sent as returned
    assert (call["id"], call["call_id"], call["name"]) == (
        "fc_call_recall_1",
        "call_recall_1",
        RECALL,
    )
    assert answer["type"] == "function_call_output" and answer["call_id"] == "call_recall_1"
    assert tool_output(int(secret.split("-")[1])) in answer["output"]
    stats = proxy_stats(proxy)
    assert (stats["recall_offered"], stats["recall_calls"], stats["recall_rounds"]) == (1, 1, 1)
    assert stats["recall_unknown_refs"] == 0


def test_a_stream_is_one_response_without_the_call(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy
) -> None:
    fake, url = scripted
    proxy = start_proxy(url, window=WINDOW)
    with _client(proxy).responses.stream(model=MODEL, input=_history(), tools=TOOLS) as stream:
        events = list(stream)
        final = stream.get_final_response()
    secret = _asked(fake.bodies[0])
    assert len(fake.bodies) == 2
    assert final.output_text == f"Let me look. quoted: {secret}"
    assert [i.type for i in final.output] == ["message", "message"]
    assert final.id == "resp_1" and final.status == "completed"  # the first round's id
    assert (final.usage.input_tokens, final.usage.output_tokens) == (2 * USAGE_IN, 2 * USAGE_OUT)
    kinds = [e.type for e in events]
    assert kinds.count("response.created") == 1 and kinds[-1] == "response.completed"
    numbers = [e.sequence_number for e in events]
    assert numbers == sorted(set(numbers))
    assert [e.output_index for e in events if e.type == "response.output_item.added"] == [0, 1]
    assert RECALL not in json.dumps([e.to_dict(warnings=False) for e in events])


def test_the_sdk_parses_every_streamed_event(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy
) -> None:
    fake, url = scripted
    fake.reasoning = True
    proxy = start_proxy(url, window=WINDOW)
    events = list(
        _client(proxy).responses.create(model=MODEL, input=_history(), tools=TOOLS, stream=True)
    )
    assert events and all(isinstance(e, EVENT_TYPES) for e in events)
    assert [e.sequence_number for e in events] == list(range(len(events)))  # the upstream's from 0
    (done,) = [e for e in events if e.type == "response.completed"]
    assert [i.type for i in done.response.output] == [
        "reasoning",
        "message",
        "reasoning",
        "message",
    ]
    added = [e for e in events if e.type == "response.output_item.added"]
    assert [e.output_index for e in added] == [0, 1, 2, 3]
    assert [i.id for i in done.response.output] == [e.item.id for e in added]


@pytest.mark.parametrize("stream", [False, True])
def test_an_unstored_request_sends_its_items_back_without_ids(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy, stream: bool
) -> None:
    """With ``store`` false the API keeps no item, so an id would name nothing (404); the
    reasoning goes back as its encrypted content, as Codex sends it."""
    fake, url = scripted
    fake.reasoning = True
    proxy = start_proxy(url, window=WINDOW)
    args: dict[str, Any] = {
        "model": MODEL,
        "input": _history(),
        "tools": TOOLS,
        "store": False,
        "include": ["reasoning.encrypted_content"],
    }
    if stream:
        with _client(proxy).responses.stream(**args) as s:
            final = s.get_final_response()
    else:
        final = _client(proxy).responses.create(**args)
    assert final.output_text.endswith("quoted: " + _asked(fake.bodies[0]))
    first, second = fake.bodies
    reasoning, message, call, _ = _added(second, first)
    assert reasoning == {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Thinking 1."}],
        "encrypted_content": "enc-1",
    }
    assert "id" not in message and "id" not in call and call["call_id"] == "call_recall_1"


@pytest.mark.parametrize("stream", [False, True])
def test_a_mixed_round_drops_the_clients_call(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy, stream: bool
) -> None:
    """As on chat: the client's call of a round that also recalls is neither shown nor sent
    back (it would need an output); the model asks again once it has read the recall."""
    fake, url = scripted
    fake.mode = "mixed"
    proxy = start_proxy(url, window=WINDOW)
    if stream:
        with _client(proxy).responses.stream(model=MODEL, input=_history(), tools=TOOLS) as s:
            events = list(s)
            final = s.get_final_response()
        assert not [e for e in events if "function_call" in e.type]
    else:
        final = _client(proxy).responses.create(model=MODEL, input=_history(), tools=TOOLS)
    assert [i.type for i in final.output] == ["message"] * (2 if stream else 1)
    first, second = fake.bodies
    sent_back = [i for i in _added(second, first) if i["type"] == "function_call"]
    assert [c["name"] for c in sent_back] == [RECALL]


def test_an_unknown_reference_is_answered_as_an_error_and_counted(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy
) -> None:
    fake, url = scripted
    fake.mode = "unknown"
    proxy = start_proxy(url, window=WINDOW)
    reply = _client(proxy).responses.create(model=MODEL, input=_history(), tools=TOOLS)
    assert reply.output_text == "quoted: nothing"
    answer = fake.bodies[1]["input"][-1]
    assert answer["type"] == "function_call_output"
    assert answer["output"] == "No content is kept under cw:0000000000000000 in this conversation."
    stats = proxy_stats(proxy)
    assert (stats["recall_calls"], stats["recall_unknown_refs"]) == (1, 1)


# -- when the tool is offered, and the limit -----------------------------------------------------


def test_a_client_with_tools_is_offered_it_from_the_first_request(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy
) -> None:
    fake, url = scripted
    proxy = start_proxy(url, window=WINDOW)
    reply = _client(proxy).responses.create(model=MODEL, input=_history(1), tools=TOOLS)
    assert reply.output_text == "plain answer"
    (only,) = fake.bodies
    assert not REF.search(json.dumps(only)) and tool_names(only) == ["run", RECALL]
    _client(proxy).responses.create(model=MODEL, input=[{"role": "user", "content": "hi"}])
    assert "tools" not in fake.bodies[-1]
    assert proxy_stats(proxy)["recall_offered"] == 1


@pytest.mark.parametrize(
    ("config", "args"),
    [
        ({"recall_tool": False}, {}),
        ({}, {"tool_choice": "none"}),
        ({}, {"tool_choice": {"type": "function", "name": "run"}}),
    ],
)
def test_it_is_not_offered_when_turned_off_or_a_choice_is_forced(
    scripted: tuple[RecallUpstream, str],
    start_proxy: StartProxy,
    config: dict[str, Any],
    args: dict[str, Any],
) -> None:
    fake, url = scripted
    proxy = start_proxy(url, window=WINDOW, **config)
    _client(proxy).responses.create(model=MODEL, input=_history(), tools=TOOLS, **args)
    (only,) = fake.bodies
    assert REF.search(json.dumps(only)) and tool_names(only) == ["run"]
    assert proxy_stats(proxy)["recall_offered"] == 0


def test_a_skipped_request_is_not_offered_it(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy
) -> None:
    """With ``previous_response_id`` the server holds the history: forwarded unchanged."""
    fake, url = scripted
    proxy = start_proxy(url, window=WINDOW)
    raw = _client(proxy).responses.with_raw_response.create(
        model=MODEL, input=_history(1), tools=TOOLS, previous_response_id="resp_0"
    )
    assert raw.headers["x-contextwarden-skipped"].startswith("previous_response_id")
    (only,) = fake.bodies
    assert tool_names(only) == ["run"]


@pytest.mark.parametrize("stream", [False, True])
def test_three_rounds_at_most_the_last_without_the_tool(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy, stream: bool
) -> None:
    fake, url = scripted
    fake.mode = "always"
    proxy = start_proxy(url, window=WINDOW)
    if stream:
        with _client(proxy).responses.stream(model=MODEL, input=_history(), tools=TOOLS) as s:
            final = s.get_final_response()
    else:
        final = _client(proxy).responses.create(model=MODEL, input=_history(), tools=TOOLS)
    assert [tool_names(r) for r in fake.bodies] == [["run", RECALL], ["run", RECALL], ["run"]]
    assert final.output[-1].content[0].text.startswith("quoted: SECRET-")
    assert all(i.type == "message" for i in final.output)
    assert final.usage.input_tokens == MAX_ROUNDS * USAGE_IN
    stats = proxy_stats(proxy)
    assert (stats["recall_calls"], stats["recall_rounds"]) == (2, 2)


def test_the_last_round_of_a_client_without_tools_describes_the_tool_uncallable(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy
) -> None:
    fake, url = scripted
    fake.mode = "always"
    proxy = start_proxy(url, window=WINDOW)
    reply = _client(proxy).responses.create(model=MODEL, input=_history())
    assert reply.output_text.startswith("quoted: SECRET-")
    first, _, last = fake.bodies
    assert "tool_choice" not in first and tool_names(first) == [RECALL]
    assert tool_names(last) == [RECALL] and last["tool_choice"] == "none"


# -- upstream errors on a later round ------------------------------------------------------------


def test_a_later_round_error_reaches_the_client(
    scripted: tuple[RecallUpstream, str], start_proxy: StartProxy
) -> None:
    fake, url = scripted
    fake.mode, fake.fail_status = "fail_second", 500
    proxy = start_proxy(url, window=WINDOW)
    with pytest.raises(openai.InternalServerError, match="slow down"):
        _client(proxy).responses.create(model=MODEL, input=_history(), tools=TOOLS)
    events = list(
        _client(proxy).responses.create(model=MODEL, input=_history(), tools=TOOLS, stream=True)
    )
    assert all(isinstance(e, EVENT_TYPES) for e in events)
    error, failed = events[-2:]
    assert error.type == "error" and (error.code, error.message) == ("server_error", "slow down")
    assert failed.type == "response.failed" and failed.response.status == "failed"
    assert failed.response.error.message == "slow down"
    assert failed.response.id == events[0].response.id
    assert [i.type for i in failed.response.output] == ["message"]  # what the client had
    numbers = [e.sequence_number for e in events]
    assert numbers == sorted(set(numbers))
    stats = proxy_stats(proxy)
    assert stats["stream_failures"] == 1 and stats["by_status"]["500"] == 1  # the relayed one


# -- the pure parts ------------------------------------------------------------------------------


def test_when_the_tool_may_be_offered() -> None:
    assert RESPONSES.may_offer({"tools": TOOLS, "tool_choice": "auto"})
    assert RESPONSES.may_offer({"tool_choice": "required"})
    assert not RESPONSES.may_offer({"tools": TOOLS, "tool_choice": "none"})
    assert not RESPONSES.may_offer({"tool_choice": {"type": "allowed_tools", "tools": []}})
    assert not RESPONSES.may_offer({"background": True})
    offered = RESPONSES.round_body({"input": []}, [], last=False)
    assert not RESPONSES.may_offer(offered)


def test_a_turn_keeps_what_the_next_round_needs() -> None:
    output = [
        {"type": "reasoning", "id": "rs", "summary": [], "encrypted_content": "e"},
        {"type": "function_call", "id": "fc1", "call_id": "c1", "name": "run", "arguments": "{}"},
        {
            "type": "function_call",
            "id": "fc2",
            "call_id": "c2",
            "name": RECALL,
            "arguments": '{"ref": "cw:1"}',
        },
        {"type": "shell_call", "id": "sh", "call_id": "c3", "action": {}},
        {"type": "shell_call_output", "id": "so", "call_id": "c3", "output": []},
        {"type": "web_search_call", "id": "ws", "status": "completed"},
        {"type": "mcp_approval_request", "id": "ap", "name": "x", "arguments": "{}"},
    ]
    turn = RESPONSES.reply_turn({"output": output})
    assert turn.calls == (("c2", "cw:1"),)
    assert [i["id"] for i in turn.sent] == ["rs", "fc2", "sh", "so", "ws"]
    extra = RESPONSES.answers(turn, [("text", False)])
    assert extra[-1] == {"type": "function_call_output", "call_id": "c2", "output": "text"}
    body = RESPONSES.round_body({"input": [], "store": False}, extra, last=True)
    assert [i.get("id") for i in body["input"]] == [None, None, "sh", "so", "ws", None]
    reply = RESPONSES.client_reply({"output": output, "usage": {"input_tokens": 1}}, None)
    assert RECALL not in json.dumps(reply["output"]) and reply["usage"] == {"input_tokens": 1}


def test_a_first_round_alone_passes_byte_for_byte() -> None:
    response = _response(0, ["reasoning", "message", "run"])
    raw = b"".join(wire.responses_events(response, split=wire.halves))
    events, rest = parse_events(raw)
    splice = ResponsesSplice()
    sent = [out for e in events for out in splice.feed(e)]
    assert not splice.end_round().calls
    assert rest == b"" and b"".join([*sent, *splice.flush()]) == raw


# -- the splice, over any rounds -----------------------------------------------------------------

KINDS = st.sampled_from(["message", "reasoning", "run", "recall"])


def _response(n: int, kinds: list[str]) -> dict[str, Any]:
    """Round ``n``'s response, its output items of ``kinds``."""
    output: list[dict[str, Any]] = []
    for k, kind in enumerate(kinds):
        name = f"{n}_{k}"
        if kind == "message":
            text = {"type": "output_text", "text": f"text {name}", "annotations": []}
            output.append(
                {
                    "type": "message",
                    "id": f"msg_{name}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [text],
                }
            )
        elif kind == "reasoning":
            summary = [{"type": "summary_text", "text": f"thought {name}"}]
            output.append(
                {
                    "type": "reasoning",
                    "id": f"rs_{name}",
                    "summary": summary,
                    "encrypted_content": "e",
                }
            )
        else:
            tool = RECALL if kind == "recall" else "run"
            args = json.dumps({"ref": "cw:0123456789abcdef"} if kind == "recall" else {"cmd": "ls"})
            output.append(
                {
                    "type": "function_call",
                    "id": f"fc_{name}",
                    "call_id": f"call_{name}",
                    "name": tool,
                    "arguments": args,
                    "status": "completed",
                }
            )
    usage = {
        "input_tokens": USAGE_IN,
        "output_tokens": USAGE_OUT,
        "total_tokens": USAGE_IN + USAGE_OUT,
    }
    return {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": 1,
        "model": MODEL,
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage,
    }


def _splice(rounds: list[list[str]]) -> tuple[bytes, int]:
    """What the client gets of ``rounds`` (each its output item kinds), spliced as the proxy
    does it, and how many rounds were asked."""
    splice = ResponsesSplice()
    sent: list[bytes] = []
    for n, kinds in enumerate(rounds):
        if n:
            splice.next_round()
        events, _ = parse_events(
            b"".join(wire.responses_events(_response(n, kinds), split=wire.halves))
        )
        sent += [out for e in events for out in splice.feed(e)]
        turn = splice.end_round()
        if not turn.calls or n == len(rounds) - 1:
            return b"".join([*sent, *splice.flush()]), n + 1
    raise AssertionError("unreachable")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(KINDS, max_size=5), min_size=1, max_size=MAX_ROUNDS))
def test_any_rounds_read_as_one_response(rounds: list[list[str]]) -> None:
    stream, asked = _splice(rounds)
    last = rounds[asked - 1]
    events = [e.json() for e in parse_events(stream)[0]]
    numbers = [e["sequence_number"] for e in events]
    assert numbers == sorted(set(numbers))
    assert [e["type"] for e in events].count("response.created") == 1
    added = [e for e in events if e["type"] == "response.output_item.added"]
    assert [e["output_index"] for e in added] == list(range(len(added)))
    assert all(e.get("output_index", -1) < len(added) for e in events)
    assert RECALL not in stream.decode()
    # the SDK's own stream reader, which checks ids, indices and the final output, agrees
    transport = httpx.MockTransport(
        lambda request: httpx.Response(
            200, content=stream, headers={"content-type": "text/event-stream"}
        )
    )
    client = openai.OpenAI(
        api_key="sk", base_url="http://upstream/v1", http_client=httpx.Client(transport=transport)
    )
    with client.responses.stream(model=MODEL, input="hi") as s:
        final = s.get_final_response()
    shown = [k for kinds in rounds[: asked - 1] for k in kinds[: _first_call(kinds)]]
    shown += [k for k in last if k != "recall"]
    assert [i.type for i in final.output] == ["function_call" if k == "run" else k for k in shown]
    assert final.id == "resp_0" and final.usage.input_tokens == asked * USAGE_IN


def _first_call(kinds: list[str]) -> int:
    """How many items of a round that called the tool the client sees: those before its first
    call."""
    return next((k for k, kind in enumerate(kinds) if kind in ("run", "recall")), len(kinds))
