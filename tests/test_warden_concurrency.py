"""The warden under many conversations at once: calls of different conversations run in
parallel (no lock is held around a call but its own conversation's), and its lookup tables are
small LRUs that a flood of distinct models, windows, system prompts or tool sets cannot empty of
the entries every call uses."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from contextwarden import Message, Warden, WardenConfig, assistant, tool_result, user
from contextwarden._messages import ToolCallBlock
from contextwarden._resolve import Resolver


class GatedCompactor:
    """A compaction hook that blocks until ``release`` is set, then declines (a window cut
    follows): while it waits, its conversation's call is in the middle of its work."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def compact(
        self,
        messages: Sequence[Message],
        *,
        budget: Any,
        counter: Any,
        tools: Sequence[Mapping[str, Any]] | None,
        focus: str | None,
    ) -> None:
        self.entered.set()
        assert self.release.wait(30), "never released"
        return None


def _long_history(task: str, steps: int = 40) -> list[Message]:
    out: list[Message] = [user(task)]
    for k in range(steps):
        call = ToolCallBlock(f"c{k}", "sh", '{"cmd": "cat f"}')
        out.append(assistant(f"step {k}", tool_calls=[call]))
        out.append(tool_result(f"c{k}", f"line {k}\n" * 60))
    return out


def test_a_conversation_blocked_in_its_compaction_does_not_block_another() -> None:
    gate = GatedCompactor()
    warden = Warden(compactor=gate)
    results: dict[str, Any] = {}

    def run(name: str, history: list[Message]) -> None:
        results[name] = warden.transform(history, model="gpt-4o", window=8_000)

    a = threading.Thread(target=run, args=("a", _long_history("task a")))
    a.start()
    assert gate.entered.wait(30)  # a holds its conversation, inside the compaction hook
    b = threading.Thread(target=run, args=("b", [user("task b"), assistant("ok"), user("go")]))
    b.start()
    b.join(30)
    assert not b.is_alive() and "b" in results  # b ran while a was still inside its call
    assert "a" not in results
    gate.release.set()
    a.join(30)
    assert not a.is_alive()
    assert results["a"].tokens_after <= results["a"].budget.trigger  # cut once released
    assert results["b"].conversation != results["a"].conversation


def test_a_flood_of_model_names_does_not_evict_the_hot_entries() -> None:
    warden = Warden()
    budget = warden.budget_for("gpt-4o")
    rates = warden.rates_for("gpt-4o")
    counter = warden.counter_for("gpt-4o")
    for k in range(300):
        warden.budget_for(f"local-model-{k}", 10_000 + k)
        warden.rates_for(f"local-model-{k}")
        warden.counter_for(f"local-model-{k}")
        # the hot entries, used between the strangers as every call uses them
        assert warden.budget_for("gpt-4o") is budget
        assert warden.rates_for("gpt-4o") is rates
        assert warden.counter_for("gpt-4o") is counter
    tables = warden._resolve  # the warden's resolver: its tables stay bounded
    for table in (tables._budgets, tables._rates, tables._counters):
        assert 1 < len(table) <= 64


def test_a_flood_of_system_prompts_and_tool_sets_does_not_evict_the_hot_ones() -> None:
    resolve = Resolver(WardenConfig(), None, {})
    history = [user("task")]
    hot = resolve.with_system(history, "be brief")[0]
    counter = resolve.counter_for("gpt-4o")
    tools = [{"type": "function", "function": {"name": "sh", "parameters": {}}}]
    overhead = resolve.overhead(counter, tools)
    for k in range(200):
        resolve.with_system(history, f"prompt {k}")
        resolve.overhead(counter, [{"type": "function", "function": {"name": f"t{k}"}}])
        assert resolve.with_system(history, "be brief")[0] is hot
        assert resolve.overhead(counter, tools) == overhead
        assert (counter.name, _key(tools)) in resolve._overheads
    assert len(resolve._systems) <= 32 and len(resolve._overheads) <= 64


def _key(tools: list[dict[str, Any]]) -> str:
    import json

    return json.dumps(tools, sort_keys=True, default=str)


def test_a_tool_set_sent_again_is_not_checked_again_and_stays_exact() -> None:
    import copy

    import pytest

    from contextwarden import FormatError

    warden = Warden()
    history = [user("task")]
    tools = [{"type": "function", "function": {"name": "sh", "parameters": {"strict": True}}}]

    def begun(t: Any) -> Any:
        return warden._begin(history, "gpt-4o", None, None, t, None)  # (conversation, call)

    (conv, first) = begun(copy.deepcopy(tools))
    (conv_again, again) = begun(copy.deepcopy(tools))  # new objects, same content: a proxy's
    assert again.ctx.tools is first.ctx.tools and again.overhead == first.overhead
    assert conv_again is conv
    twin = copy.deepcopy(tools)
    twin[0]["function"]["parameters"]["strict"] = 1  # == True, but another request
    other = begun(twin)[1]
    assert other.ctx.tools is not first.ctx.tools
    assert repr(other.ctx.tools) == repr(twin) and repr(first.ctx.tools) == repr(tools)
    mine = copy.deepcopy(tools)
    begun(mine)
    mine[0]["function"]["name"] = "changed later"  # the caller's list is not what is kept
    assert begun(copy.deepcopy(tools))[1].ctx.tools[0]["function"]["name"] == "sh"
    for bad in (["x"], "tools", [None]):
        with pytest.raises(FormatError):
            begun(bad)
        with pytest.raises(FormatError):
            begun(bad)  # every time
    assert begun([])[1].ctx.tools is None and begun(None)[1].ctx.tools is None
