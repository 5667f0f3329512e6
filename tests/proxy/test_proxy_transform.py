"""The request-body step on its own: only ``messages`` (and Anthropic's ``system``) change, the
input is never mutated, an unchanged request keeps its exact bytes, and the window cap applies.
Anthropic cache breakpoints: added when the client set none, through the real SDK and the real
proxy on loopback, and what they save an agent loop (a simulation of Anthropic's cache rules)."""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fake_upstream import FakeUpstream
from formats.providers import anthropic_requests
from formats.test_cache_control import HOUR, _places, api_problems
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proxy_doubles import StartProxy, StubResult, StubWarden, agent_history

from contextwarden._compaction import Compactor
from contextwarden._config import WardenConfig
from contextwarden._models import context_window
from contextwarden._warden import Warden
from contextwarden.formats import (
    add_cache_breakpoints,
    count_cache_breakpoints,
    validate_anthropic,
    validate_openai,
)
from contextwarden.formats._common import reply_limit
from contextwarden.proxy.transform import (
    effective_window,
    reply_room,
    transform_body,
)

EPHEMERAL = {"type": "ephemeral"}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant"]), "content": st.text(max_size=30)}
    ),
    min_size=0,
    max_size=8,
)
extras = st.dictionaries(
    st.text(min_size=1, max_size=8).filter(
        lambda k: k not in ("messages", "system", "model", "stream")
    ),
    json_values,
    max_size=5,
)


@given(
    msgs=messages,
    extra=extras,
    keep=st.integers(1, 4),
    api=st.sampled_from(["openai", "anthropic"]),
)
def test_only_messages_change_and_input_is_not_mutated(
    msgs: list[dict[str, Any]], extra: dict[str, Any], keep: int, api: str
) -> None:
    body = {"model": "m", **extra, "messages": msgs}
    if api == "anthropic":
        body["system"] = "sys"
    frozen = copy.deepcopy(body)
    raw = json.dumps(body, indent=1).encode()
    out = transform_body(StubWarden(keep=keep), api, raw)  # type: ignore[arg-type]
    assert body == frozen
    sent = json.loads(out.body)
    assert {k: v for k, v in sent.items() if k != "messages"} == {
        k: v for k, v in body.items() if k != "messages"
    }
    assert list(sent) == list(body)  # key order kept
    expected = (
        (msgs if len(msgs) <= keep + 1 else [msgs[0], *msgs[-keep:]])
        if api == "openai"
        else msgs[-keep:]
    )
    assert sent["messages"] == expected
    assert out.changed == (expected != msgs)
    if not out.changed:
        assert out.body == raw  # byte for byte
    assert out.tokens_before == len(json.dumps(msgs)) // 4
    assert out.tokens_after == len(json.dumps(expected)) // 4


def test_anthropic_system_added_replaced_or_left_out() -> None:
    class SystemWarden(StubWarden):
        def __init__(self, system_out: Any) -> None:
            super().__init__(keep=10)
            self.system_out = system_out

        def transform_anthropic(self, messages: Any, **kw: Any) -> Any:  # type: ignore[override]
            _, out, result = super().transform_anthropic(messages, **kw)
            return self.system_out, out, result

    raw = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]}).encode()
    assert transform_body(SystemWarden(None), "anthropic", raw).body == raw  # type: ignore[arg-type]
    out = transform_body(SystemWarden("new"), "anthropic", raw)  # type: ignore[arg-type]
    assert out.changed and json.loads(out.body)["system"] == "new"
    raw = json.dumps({"model": "m", "system": "old", "messages": []}).encode()
    assert "system" not in json.loads(transform_body(SystemWarden(None), "anthropic", raw).body)  # type: ignore[arg-type]


def test_effective_window_caps_whatever_the_model() -> None:
    known = context_window("gpt-4o")
    assert effective_window("gpt-4o", None) is None  # no cap: the warden asks the registry
    assert effective_window("gpt-4o", 10_000) == 10_000
    assert effective_window("gpt-4o", known * 2) == known  # a cap never widens the window
    assert effective_window("no-such-model-xyz", 5_000) == 5_000
    assert effective_window(None, 5_000) == 5_000
    assert effective_window("gpt-4o", 5_000, override=3_000) == 3_000
    assert effective_window("no-such-model-xyz", 5_000, override=7_000) == 5_000


@pytest.mark.parametrize("window", [6_000, 30_000])
def test_real_warden_on_a_real_recording(
    openai_recording: tuple[str, list[dict[str, Any]]],
    anthropic_recording: tuple[Any, list[dict[str, Any]]],
    window: int,
) -> None:
    """Through transform_body with the real warden (and compactor, as the proxy builds it):
    valid, under the budget's trigger, reported."""
    model, history = openai_recording
    warden = Warden(compactor=Compactor())
    raw = json.dumps({"model": model, "messages": history, "stream": True}).encode()
    out = transform_body(warden, "openai", raw, window_cap=window)
    sent = json.loads(out.body)
    assert out.stream and out.model == model and out.changed
    assert validate_openai(sent["messages"]) == []
    assert out.tokens_after is not None and out.tokens_before is not None
    budget = warden.budget_for(model, window)
    assert budget is not None
    assert out.tokens_after <= budget.trigger < window < out.tokens_before
    system, turns = anthropic_recording
    raw = json.dumps(
        {"model": "claude-opus-4-5", "system": system or "s", "messages": turns}
    ).encode()
    out = transform_body(warden, "anthropic", raw, window_cap=window)
    sent = json.loads(out.body)
    assert validate_anthropic(sent.get("system"), sent["messages"]) == []
    budget = warden.budget_for("claude-opus-4-5", window)
    assert budget is not None
    assert out.tokens_after is not None and out.tokens_after <= budget.trigger


# -- Anthropic cache breakpoints ---------------------------------------------------------------------
def _anthropic_body(**extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "system": "You are a coding agent.",
        "tools": [
            {"name": "read", "description": "read a file", "input_schema": {"type": "object"}}
        ],
        "messages": [
            {"role": "user", "content": "fix the bug"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "look first", "signature": "sig"},
                    {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a.py"}},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x = 1"}],
            },
        ],
        **extra,
    }


def _breakpoints(body: dict[str, Any]) -> int:
    return count_cache_breakpoints(body.get("system"), body["messages"], body.get("tools"))


class StableWarden(StubWarden):
    """The stub, with the ``stable_prefix`` the real warden's result carries."""

    def __init__(self, stable: Any) -> None:
        super().__init__(keep=10)
        self.stable = stable

    def transform_anthropic(self, messages: Any, **kw: Any) -> Any:  # type: ignore[override]
        system, out, result = super().transform_anthropic(messages, **kw)
        return (
            system,
            out,
            StableResult(result.tokens_before, result.tokens_after, None, self.stable),
        )


@dataclass(frozen=True)
class StableResult(StubResult):
    stable_prefix: Any = None


def test_breakpoints_added_only_when_asked_and_the_client_set_none() -> None:
    body = _anthropic_body()
    raw = json.dumps(body).encode()
    out = transform_body(StubWarden(keep=10), "anthropic", raw, cache_breakpoints=True)  # type: ignore[arg-type]
    sent = json.loads(out.body)
    assert out.changed and out.cache_breakpoints == 2 == _breakpoints(sent)
    assert sent["system"] == [{"type": "text", "text": body["system"], "cache_control": EPHEMERAL}]
    assert sent["messages"][-1]["content"][0]["cache_control"] == EPHEMERAL
    assert sent["tools"] == body["tools"]  # the system breakpoint covers the tools before it
    assert validate_anthropic(sent["system"], sent["messages"]) == []
    assert {k: v for k, v in sent.items() if k not in ("system", "messages")} == {
        k: v for k, v in body.items() if k not in ("system", "messages")
    }

    # off, or the OpenAI route: the body stays byte for byte
    assert transform_body(StubWarden(keep=10), "anthropic", raw).body == raw  # type: ignore[arg-type]
    openai = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]}).encode()
    assert transform_body(StubWarden(), "openai", openai, cache_breakpoints=True).body == openai  # type: ignore[arg-type]

    # no system: the last tool definition carries the prefix breakpoint
    raw = json.dumps({k: v for k, v in body.items() if k != "system"}).encode()
    sent = json.loads(
        transform_body(StubWarden(keep=10), "anthropic", raw, cache_breakpoints=True).body
    )  # type: ignore[arg-type]
    assert "system" not in sent and sent["tools"][-1]["cache_control"] == EPHEMERAL


@pytest.mark.parametrize(
    "client_set",
    ["top_level", "system", "tool", "message", "nested"],
)
def test_a_client_with_its_own_breakpoints_is_left_alone(client_set: str) -> None:
    body = _anthropic_body()
    if client_set == "top_level":
        body["cache_control"] = EPHEMERAL  # Anthropic's automatic caching
    elif client_set == "system":
        body["system"] = [
            {"type": "text", "text": "s", "cache_control": {"type": "ephemeral", "ttl": "1h"}}
        ]
    elif client_set == "tool":
        body["tools"][0]["cache_control"] = EPHEMERAL
    elif client_set == "message":
        body["messages"][0]["content"] = [
            {"type": "text", "text": "fix", "cache_control": EPHEMERAL}
        ]
    else:
        body["messages"][2]["content"][0]["content"] = [
            {"type": "text", "text": "x = 1", "cache_control": EPHEMERAL}
        ]
    raw = json.dumps(body).encode()
    out = transform_body(StubWarden(keep=10), "anthropic", raw, cache_breakpoints=True)  # type: ignore[arg-type]
    assert out.body == raw and out.cache_breakpoints == 0


@pytest.mark.parametrize(
    ("stable", "marked"), [(2, 1), (3, None), (0, None), (None, None), (9, None), ("2", None)]
)
def test_the_stable_prefix_of_the_result_gets_a_breakpoint(stable: Any, marked: int | None) -> None:
    raw = json.dumps(_anthropic_body()).encode()
    out = transform_body(StableWarden(stable), "anthropic", raw, cache_breakpoints=True)  # type: ignore[arg-type]
    sent = json.loads(out.body)
    where = [
        i
        for i, m in enumerate(sent["messages"])
        if isinstance(m["content"], list) and any("cache_control" in b for b in m["content"])
    ]
    assert where == ([marked, 2] if marked is not None else [2])
    if marked is not None:  # on the tool_use, not on the thinking block before it
        assert "cache_control" not in sent["messages"][1]["content"][0]
        assert sent["messages"][1]["content"][1]["cache_control"] == EPHEMERAL
    assert out.cache_breakpoints == len(where) + 1 <= 4


# -- through the real SDK and the real proxy on loopback ---------------------------------------------
Upstream = tuple[FakeUpstream, str]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(request=anthropic_requests(), stable=st.integers(0, 12))
def test_the_anthropic_sdk_sends_what_we_produce(
    upstream: Upstream, request: tuple[Any, list[dict[str, Any]]], stable: int
) -> None:
    """The SDK takes our output as it is (string or block system, converted string content, tool
    definitions with cache_control) and puts it on the wire unchanged."""
    anthropic = pytest.importorskip("anthropic")
    fake, url = upstream
    system, messages = request
    tools = [{"name": "read", "description": "read a file", "input_schema": {"type": "object"}}]
    out_system, out_messages, out_tools = add_cache_breakpoints(
        system, messages, tools=tools, stable_end=min(stable, len(messages))
    )
    client = anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0)
    extra = {"system": out_system} if out_system is not None else {}
    client.messages.create(
        model="claude-opus-4-5", max_tokens=16, messages=out_messages, tools=out_tools, **extra
    )
    got = fake.last.json
    assert got["messages"] == out_messages and got["tools"] == out_tools
    assert got.get("system") == out_system
    assert 1 <= count_cache_breakpoints(got.get("system"), got["messages"], got["tools"]) <= 4
    assert api_problems(got.get("system"), got["messages"], got["tools"]) == []


def _post(proxy: str, body: dict[str, Any]) -> httpx.Response:
    headers = {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}
    r = httpx.post(f"{proxy}/v1/messages", json=body, headers=headers, timeout=60)
    assert r.status_code == 200, r.text
    return r


def _marks(body: dict[str, Any]) -> list[tuple[str, Any]]:
    """Every (place, cache_control) of a request body."""
    places = _places(body.get("system"), body["messages"], body.get("tools"))
    return [(p, b["cache_control"]) for p, b in places if b.get("cache_control")]


def test_through_the_proxy_none_get_breakpoints_own_are_kept(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, window=50_000)  # the real warden, default config
    body = _anthropic_body()

    _post(proxy, body)
    sent = fake.last.json
    assert 2 <= count_cache_breakpoints(sent["system"], sent["messages"], sent["tools"]) <= 4
    assert sent["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
    assert validate_anthropic(sent["system"], sent["messages"]) == []
    assert api_problems(sent["system"], sent["messages"], sent["tools"]) == []

    # the client's own, four of them with a 1h TTL first: kept exactly, nothing added
    own = copy.deepcopy(body)
    own["system"] = [{"type": "text", "text": "You are a coding agent.", "cache_control": HOUR}]
    own["tools"][0]["cache_control"] = HOUR
    own["messages"][0]["content"] = [
        {"type": "text", "text": "fix the bug", "cache_control": EPHEMERAL}
    ]
    own["messages"][2]["content"][0]["cache_control"] = EPHEMERAL
    _post(proxy, own)
    assert _marks(fake.last.json) == _marks(own) and len(_marks(own)) == 4

    # one of their own: still nothing added
    one = copy.deepcopy(body)
    one["messages"][0]["content"] = [
        {"type": "text", "text": "fix the bug", "cache_control": EPHEMERAL}
    ]
    _post(proxy, one)
    assert _marks(fake.last.json) == _marks(one) == [("m0[0]", EPHEMERAL)]

    # count_tokens is reduced, never given breakpoints
    count = {k: v for k, v in body.items() if k != "max_tokens"}
    httpx.post(f"{proxy}/v1/messages/count_tokens", json=count, timeout=60)
    assert fake.last.path == "/v1/messages/count_tokens" and _marks(fake.last.json) == []

    # --no-cache-breakpoints
    off = start_proxy(url, window=50_000, cache_breakpoints=False)
    _post(off, body)
    assert _marks(fake.last.json) == []


def _cache_bill(requests: list[dict[str, Any]], lookback: int = 20) -> tuple[int, int, int]:
    """(read, written, uncached) input tokens of a run of Anthropic requests sent back to back,
    simulated from the documented rules: a breakpoint writes the prefix up to it; a request reads
    the longest written prefix ending at a block boundary at most ``lookback`` blocks before one
    of its breakpoints; ``cache_control`` itself is not part of the prefix. Tokens are JSON
    characters / 4 (a ratio is what matters); the minimum cacheable length is ignored."""
    written: set[str] = set()
    read = wrote = plain = 0
    for body in requests:
        system = body.get("system")
        elements: list[tuple[Any, ...]] = [("tool", t) for t in body.get("tools") or []]
        elements += [
            ("system", b)
            for b in (
                [{"type": "text", "text": system}] if isinstance(system, str) else system or []
            )
        ]
        for m in body["messages"]:
            content = m["content"]
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            elements += [(m["role"], j == 0, b) for j, b in enumerate(blocks)]
        keys, sizes, marks = [], [], []
        running = hashlib.sha256()
        for index, (*where, block) in enumerate(elements):
            inner = block.get("content") if isinstance(block.get("content"), list) else []
            if "cache_control" in block or any("cache_control" in sub for sub in inner):
                marks.append(index)
            bare = {k: v for k, v in block.items() if k != "cache_control"}
            if inner:
                bare["content"] = [
                    {k: v for k, v in sub.items() if k != "cache_control"} for sub in inner
                ]
            text = json.dumps([*where, bare], sort_keys=True)
            running.update(text.encode())
            keys.append(running.copy().hexdigest())  # the prefix up to and with this block
            sizes.append(len(text) // 4 + 1)
        hit = 0
        for b in marks:
            for k in range(b, max(b - lookback, -1), -1):
                if keys[k] in written:
                    hit = max(hit, k + 1)
                    break
        end = max(marks) + 1 if marks else 0
        read += sum(sizes[:hit])
        wrote += sum(sizes[hit:end])
        plain += sum(sizes[max(hit, end) :])
        written.update(keys[b] for b in marks)
    return read, wrote, plain


def _billed(read: int, wrote: int, plain: int) -> float:
    """Billed input at Anthropic's 5-minute cache prices (read 0.1x, write 1.25x), as a share of
    sending the same tokens uncached."""
    return (0.1 * read + 1.25 * wrote + plain) / (read + wrote + plain)


@pytest.mark.parametrize("window", [None, 12_000])
def test_an_agent_loop_through_the_proxy_reads_its_history_from_the_cache(
    upstream: Upstream,
    start_proxy: StartProxy,
    anthropic_recording: tuple[Any, list[dict[str, Any]]],
    window: int | None,
) -> None:
    """The real Claude Code recording sent call by call (each call: the history up to a user
    turn) with the real SDK through the proxy: with the breakpoints it adds, most of each request
    is a cache read; without them, none is."""
    anthropic = pytest.importorskip("anthropic")
    fake, url = upstream
    recorded_system, history = anthropic_recording
    system = recorded_system or "You are Claude Code, a coding agent."
    ends = [i + 1 for i, m in enumerate(history) if m["role"] == "user"]
    runs = {}
    for breakpoints in (True, False):
        proxy = start_proxy(url, window=window, cache_breakpoints=breakpoints)
        client = anthropic.Anthropic(base_url=proxy, api_key="sk-ant-test", max_retries=0)
        first = len(fake.requests)
        for end in ends:
            client.messages.create(
                model="claude-opus-4-5", max_tokens=16, system=system, messages=history[:end]
            )
        sent = [r.json for r in fake.requests[first:]]
        assert all(count_cache_breakpoints(s["system"], s["messages"]) <= 4 for s in sent)
        assert all(validate_anthropic(s["system"], s["messages"]) == [] for s in sent)
        runs[breakpoints] = _cache_bill(sent)
    assert runs[False][0] == runs[False][1] == 0  # no breakpoint: nothing cached, full price
    read, wrote, plain = runs[True]
    share = _billed(read, wrote, plain)
    print(
        f"window={window}: {len(ends)} calls, read {read} written {wrote} uncached {plain}; "
        f"billed {share:.1%} of the uncached price"
    )
    if window is None:  # the history fits: the agent only appends, so nearly all is read
        assert share < 0.35
    else:  # compactions rewrite the middle now and then; still cheaper than no cache
        assert share < 1.0


def test_the_cache_simulation_reads_within_the_lookback_only() -> None:
    def turn(i: int) -> dict[str, Any]:
        return {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " * 20}

    def request(n: int) -> dict[str, Any]:
        system, messages, _ = add_cache_breakpoints(None, [turn(i) for i in range(n)])
        return {"system": system, "messages": messages}

    first, second = request(1), request(3)
    read, wrote, plain = _cache_bill([first, second])
    size = len(json.dumps(["user", True, {"type": "text", "text": turn(0)["content"]}])) // 4 + 1
    assert read == size  # the second call read the first call's prefix
    alone = _cache_bill([second])
    assert alone[0] == 0 and alone[2] == 0  # cold: all of it written
    assert _cache_bill([first]) == (0, size, 0)
    # the first call wrote turn 0, the second only what it appended: together, the second's
    # whole prefix once
    assert wrote == alone[1] and plain == 0
    read, _, _ = _cache_bill([request(1), request(23)])  # 22 blocks on: past the lookback
    assert read == 0
    read, _, _ = _cache_bill([{"messages": [turn(0)]}, {"messages": [turn(0), turn(1)]}])
    assert read == 0  # nothing marked, nothing cached


def test_the_cli_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from contextwarden.cli import app as main_app
    from contextwarden.proxy import cli

    seen: list[Any] = []
    monkeypatch.setattr(cli, "serve", lambda settings, **_: seen.append(settings))
    for args, expected in (([], True), (["--no-cache-breakpoints"], False)):
        result = CliRunner().invoke(main_app, ["proxy", "--upstream", "http://localhost:1", *args])
        assert result.exit_code == 0, result.output
        assert seen.pop().cache_breakpoints is expected


def test_the_client_check_reads_the_json_not_the_bytes() -> None:
    """A key spelled with a JSON escape is still the client's breakpoint; the word in a message's
    text is not one."""
    body = _anthropic_body()
    body["messages"][0]["content"] = [{"type": "text", "text": "fix", "cache_control": EPHEMERAL}]
    raw = json.dumps(body).encode().replace(b'"cache_control"', b'"cache\\u005fcontrol"')
    assert b"cache_control" not in raw and json.loads(raw) == body
    out = transform_body(StubWarden(keep=10), "anthropic", raw, cache_breakpoints=True)  # type: ignore[arg-type]
    assert out.body == raw and out.cache_breakpoints == 0

    body = _anthropic_body()
    body["messages"][0]["content"] = 'why is "cache_control": {"type": "ephemeral"} not set?'
    out = transform_body(
        StubWarden(keep=10),  # type: ignore[arg-type]
        "anthropic",
        json.dumps(body).encode(),
        cache_breakpoints=True,
    )
    assert out.cache_breakpoints == 2


def test_the_proxy_marks_what_the_warden_marks(
    anthropic_recording: tuple[Any, list[dict[str, Any]]],
) -> None:
    """With the real warden, the proxy's breakpoints (the client set none) are the ones
    ``Warden.transform_anthropic(..., cache_breakpoints=True)`` puts: the stable end is counted
    in the Anthropic messages, not the canonical ones (where the system prompt is a message)."""
    recorded_system, history = anthropic_recording
    system = recorded_system or "You are Claude Code, a coding agent."
    ends = [i + 1 for i, m in enumerate(history) if m["role"] == "user"]
    proxy_side, library_side = Warden(compactor=Compactor()), Warden(compactor=Compactor())
    stable_marks = 0
    for end in ends:
        body = {"model": "claude-opus-4-5", "system": system, "messages": history[:end]}
        out = transform_body(
            proxy_side,
            "anthropic",
            json.dumps(body).encode(),
            window_cap=12_000,
            cache_breakpoints=True,
        )
        sent = json.loads(out.body)
        want_system, want, result = library_side.transform_anthropic(
            history[:end],
            system=system,
            model="claude-opus-4-5",
            window=12_000,
            cache_breakpoints=True,
        )
        assert (sent["system"], sent["messages"]) == (want_system, want)
        stable_marks += out.cache_breakpoints == 3
    assert stable_marks > 0  # the stable end was marked apart from the newest at least once


# -- the reply's room ------------------------------------------------------------------------------
def _agent_loop(steps: int, cap: int | None = None, **extra: Any) -> Any:
    """An agent's calls through transform_body, one per tool result, on a model whose own
    window is 32k (the proxy's ``context_window``), or capped at ``cap`` (``--window``); the
    last outcome. DeepSeek's prices: a cut waits for the hard limit. No masks: what is weighed
    is the cut alone (optional masks of the outputs acted on would shrink the request first)."""
    own = None if cap else 32_000
    warden = Warden(
        WardenConfig.model_validate({"context_window": own, "mask": {"enabled": False}})
    )
    history = agent_history("Fix the failing test in tests/test_io.py", steps)
    out = None
    for k in range(3, len(history) + 1):
        if history[k - 1]["role"] != "tool":
            continue
        body = {"model": "deepseek-v4-flash", "messages": history[:k], **extra}
        out = transform_body(
            warden, "openai", json.dumps(body).encode(), window_cap=cap, window_override=own
        )
    assert out is not None and out.tokens_after is not None and out.tokens_before is not None
    return out


@pytest.mark.parametrize("key", ["max_tokens", "max_completion_tokens"])
def test_a_request_keeps_the_room_its_output_limit_asks_for(key: str) -> None:
    """28.7k tokens go whole in a 32k window when the agent's replies have needed little room
    (the reserve is fitted to them); a request that asks for 6,000 output tokens, which the
    provider would refuse over 26k, is cut to leave them."""
    whole = _agent_loop(28)
    assert whole.tokens_after == whole.tokens_before > 28_000
    asked = _agent_loop(28, **{key: 6_000})
    assert asked.tokens_before == whole.tokens_before
    assert asked.tokens_after + 6_000 <= 32_000


def test_under_a_cap_the_output_limit_counts_against_the_models_own_window() -> None:
    """``--window 32000`` on a model of a 1M window: the provider checks 6,000 output tokens
    against its 1M, which the capped request leaves anyway; so the request goes as it would
    without them. 990,000 leave 10,000 in 1M: the capped request keeps 22,000 of its 32k free
    for them, at most half of it (16,000)."""
    assert reply_room(6_000, "deepseek-v4-flash", 32_000) is None
    assert reply_room(990_000, "deepseek-v4-flash", 32_000) == 22_000
    assert reply_room(6_000, "deepseek-v4-flash", None) == 6_000  # the model's own window
    assert reply_room(6_000, "no-such-model", 32_000) == 6_000  # unknown: as it is
    whole = _agent_loop(28, cap=32_000)
    assert _agent_loop(28, cap=32_000, max_tokens=6_000).tokens_after == whole.tokens_after
    assert _agent_loop(28, cap=32_000, max_tokens=990_000).tokens_after + 16_000 <= 32_000


def test_the_output_limit_is_read_where_each_api_gives_it() -> None:
    assert reply_limit({"max_tokens": 64}, "anthropic") == 64
    assert reply_limit({"max_completion_tokens": 500, "max_tokens": 64}, "openai") == 500
    assert reply_limit({"max_output_tokens": 900, "max_tokens": 64}, "responses") == 900
    # none, or one the provider will refuse itself: no reserve from it
    for bad in ({}, {"max_tokens": 0}, {"max_tokens": True}, {"max_tokens": "64"}):
        assert reply_limit(bad, "anthropic") is None
    assert reply_limit({"max_completion_tokens": None, "max_tokens": 64}, "openai") == 64
