"""The request-body step on its own: only ``messages`` (and Anthropic's ``system``) change, the
input is never mutated, an unchanged request keeps its exact bytes, and the window cap applies."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proxy_doubles import StubResult, StubWarden

from contextwarden._compaction import Compactor
from contextwarden._models import context_window
from contextwarden._warden import Warden
from contextwarden.formats import count_cache_breakpoints, validate_anthropic, validate_openai
from contextwarden.proxy.transform import effective_window, transform_body

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


@settings(max_examples=60, deadline=None)
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
