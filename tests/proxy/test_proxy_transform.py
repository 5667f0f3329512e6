"""The request-body step on its own: only ``messages`` (and Anthropic's ``system``) change, the
input is never mutated, an unchanged request keeps its exact bytes, and the window cap applies."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proxy_doubles import StubWarden

from contextwarden._compaction import Compactor
from contextwarden._models import context_window
from contextwarden._warden import Warden
from contextwarden.formats import validate_anthropic, validate_openai
from contextwarden.proxy.transform import effective_window, transform_body

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
messages = st.lists(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]), "content": st.text(max_size=30)}),
    min_size=0,
    max_size=8,
)
extras = st.dictionaries(
    st.text(min_size=1, max_size=8).filter(lambda k: k not in ("messages", "system", "model", "stream")),
    json_values,
    max_size=5,
)


@settings(max_examples=60, deadline=None)
@given(msgs=messages, extra=extras, keep=st.integers(1, 4), api=st.sampled_from(["openai", "anthropic"]))
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
        k: v for k, v in body.items() if k != "messages"}
    assert list(sent) == list(body)  # key order kept
    expected = (msgs if len(msgs) <= keep + 1 else [msgs[0], *msgs[-keep:]]) if api == "openai" else msgs[-keep:]
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
    openai_recording: tuple[str, list[dict[str, Any]]], anthropic_recording: tuple[Any, list[dict[str, Any]]],
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
    raw = json.dumps({"model": "claude-opus-4-5", "system": system or "s", "messages": turns}).encode()
    out = transform_body(warden, "anthropic", raw, window_cap=window)
    sent = json.loads(out.body)
    assert validate_anthropic(sent.get("system"), sent["messages"]) == []
    budget = warden.budget_for("claude-opus-4-5", window)
    assert budget is not None
    assert out.tokens_after is not None and out.tokens_after <= budget.trigger
