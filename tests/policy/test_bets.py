"""Optional edits are small bets that pay: on generated agent sessions that fit the window
(so sending everything was always possible), the warden's requests, billed the way a provider
bills them (the leading messages identical to the previous request's at the cached-read
price, the rest at the write price), cost at no point more than 1% over sending everything,
at Anthropic's cache prices (the dearest writes, the cheapest reads: the hardest case for a
bet) and at each of the four price structures' own; and on a session long enough for masks
to pay, they save."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwarden import Warden, WardenConfig, from_openai, get_counter

READ, WRITE = 0.1, 1.25
MODEL = "claude-sonnet-4-5"
#: The four price structures, each as its model: (cache read, cache write) x the input price.
PRICES = {
    "claude-sonnet-4-5": (0.1, 1.25),
    "gpt-4o": (0.5, 1.0),
    "deepseek-chat": (0.1, 1.0),
    "gemini-2.5-pro": (0.1, 1.0),
}


def history(sizes: list[int], seed: int) -> list[dict[str, Any]]:
    """An agent's history: a task, then one command and its output (``sizes`` characters)
    per step."""
    out: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. " * 40},
        {"role": "user", "content": "Fix the failing test in src/app.py"},
    ]
    for k, size in enumerate(sizes):
        out.append(
            {
                "role": "assistant",
                "content": f"Step {k}: looking further.",
                "tool_calls": [
                    {
                        "id": f"c{k}",
                        "type": "function",
                        "function": {
                            "name": "bash",
                            "arguments": json.dumps({"command": f"grep -rn item_{k} src"}),
                        },
                    }
                ],
            }
        )
        line = f"src/mod_{(k * 7 + seed) % 13}.py:{k}: value_{k} = compute({k}, {seed})\n"
        out.append(
            {
                "role": "tool",
                "tool_call_id": f"c{k}",
                "content": (line * (size // len(line) + 1))[:size],
            }
        )
    return out


#: the requests the last :func:`run` sent
SENT: list[list[dict[str, Any]]] = []


def bills(
    requests: list[list[dict[str, Any]]], read: float = READ, write: float = WRITE
) -> list[float]:
    """The running bill of ``requests`` sent one after another, in tokens at the input price,
    cache reads at ``read`` and writes at ``write`` times it."""
    counter = get_counter(kind="heuristic")
    prev: list[str] = []
    total = 0.0
    out = []
    size_of: dict[str, int] = {}  # each message converted and counted once
    key_of: dict[int, tuple[dict[str, Any], str]] = {}  # each message object serialised once

    def key(m: dict[str, Any]) -> str:
        seen = key_of.get(id(m))
        if seen is None or seen[0] is not m:
            seen = key_of[id(m)] = (m, json.dumps(m, sort_keys=True))
        return seen[1]

    for req in requests:
        keys = [key(m) for m in req]
        same = 0
        while same < min(len(keys), len(prev)) and keys[same] == prev[same]:
            same += 1
        sizes = [
            size_of.get(k) or size_of.setdefault(k, counter.count_message(from_openai([m])[0]))
            for k, m in zip(keys, req, strict=True)
        ]
        hit = sum(sizes[:same])
        total += hit * read + (sum(sizes) - hit) * write
        out.append(total)
        prev = keys
    return out


def run(
    sizes: list[int],
    seed: int,
    model: str = MODEL,
    msgs: list[dict[str, Any]] | None = None,
    config: dict[str, Any] | None = None,
) -> tuple[list[float], list[float]]:
    """The running bills of sending everything and of the warden (told ``model``), call by
    call, at ``model``'s own cache prices; ``msgs``: the history (else :func:`history`'s),
    ``config``: the warden's beside the heuristic counter. The requests sent go to ``SENT``."""
    msgs = history(sizes, seed) if msgs is None else msgs
    warden = Warden(WardenConfig.model_validate({"counter": "heuristic", **(config or {})}))
    raw, ours = [], []
    for k, m in enumerate(msgs):
        if m["role"] != "assistant":
            continue
        raw.append(list(msgs[:k]))
        ours.append(warden.transform_openai(msgs[:k], model=model, window=1_000_000)[0])
    SENT[:] = ours
    return bills(raw, *PRICES[model]), bills(ours, *PRICES[model])


def within_the_cap(raw: list[float], ours: list[float], label: str = "") -> None:
    """At every call, the bill so far is at most the loss cap (1%) over sending everything."""
    for k, (a, b) in enumerate(zip(raw, ours, strict=True)):
        assert b <= a * 1.01 + 1, f"{label}call {k}: {b:.0f} against {a:.0f} sending everything"


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(200, 30_000), min_size=5, max_size=60),
    seed=st.integers(0, 1000),
)
def test_no_prefix_of_a_session_costs_more_than_one_percent_over_sending_everything(
    sizes: list[int], seed: int
) -> None:
    raw, ours = run(sizes, seed)
    within_the_cap(raw, ours)


def test_a_long_session_saves_with_masks_that_start_near_the_tail() -> None:
    """160 calls with large outputs: once the bill has grown enough that masking the old
    results is a small bet, the masks are made and pay."""
    raw, ours = run([6_000, 400, 9_000, 1_500] * 40, seed=3)
    assert ours[-1] < 0.85 * raw[-1]


def test_masks_start_at_the_tail_when_the_whole_backlog_is_too_large_a_bet() -> None:
    """Small outputs, many calls: masking everything old at once rewrites nearly the whole
    request, a bet never small next to 1% of the bill; masking the results that just left
    the recent ones, the older kept whole in the cached prefix, rewrites only the short
    suffix after them, and pays."""
    raw, ours = run([6_000, 600, 600] * 50, seed=5)
    assert ours[-1] < 0.95 * raw[-1]


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(300, 4_000), min_size=60, max_size=140),
    seed=st.integers(0, 1000),
)
def test_tail_masks_keep_every_prefix_within_one_percent(sizes: list[int], seed: int) -> None:
    """Long sessions of small outputs, where the optional masks start near the tail (and
    are batched until waiting has cost as much as their rewrite): still never more than 1%
    over sending everything, at any call."""
    raw, ours = run(sizes, seed)
    within_the_cap(raw, ours)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(200, 12_000), min_size=5, max_size=90),
    seed=st.integers(0, 1000),
    model=st.sampled_from(sorted(PRICES)),
    pricing=st.sampled_from(["conservative", "model"]),
)
def test_at_each_models_own_prices_no_prefix_costs_more_than_one_percent_over(
    sizes: list[int], seed: int, model: str, pricing: str
) -> None:
    """Weighed at the least favourable provider's prices (the default) or at the model's
    own, the bound holds at each price structure, billed as that provider bills."""
    raw, ours = run(sizes, seed, model, config={"policy": {"pricing": pricing}})
    within_the_cap(raw, ours, f"{model}, ")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(4_000, 12_000), min_size=20, max_size=90),
    seed=st.integers(0, 1000),
)
def test_optional_masks_close_to_the_newest_output_pay_and_stay_small_bets(
    sizes: list[int], seed: int
) -> None:
    """Sessions of 20 to 90 calls with outputs of 1k to 3k tokens, at a window nothing must
    be cut in and Anthropic's prices: the optional masks reach the outputs the agent has acted on, newest
    first, each rewriting little more than its stub, so the session saves a fifth or more of
    its bill; and at no call is it more than the loss cap (1%) over sending everything."""
    raw, ours = run(sizes, seed)
    within_the_cap(raw, ours)
    assert ours[-1] < 0.8 * raw[-1]


def test_masks_of_outputs_the_agent_has_acted_on_pay_early_at_any_cache_prices() -> None:
    """A mask of the output the agent has just acted on rewrites little more than its stub
    (the newer messages are written anyway), so it pays from early in a session even weighed
    at Anthropic's prices (reads 0.1x, writes 1.25x: the default) and billed at them; at
    gpt-4o's own (``pricing: model``; reads 0.5x, writes 1x) a saved read is worth five times
    more, and the session saves more, sooner."""
    sizes = [3_000, 800, 5_000] * 20
    raw, own = run(sizes, seed=11, model="gpt-4o", config={"policy": {"pricing": "model"}})
    assert own[-1] < 0.8 * raw[-1]
    assert own[29] < 0.95 * raw[29]  # already by call 30
    _, bounded = run(sizes, seed=11, model="gpt-4o")
    assert bounded[-1] < 0.5 * raw[-1]
    assert own[-1] <= bounded[-1]
    raw, ours = run(sizes, seed=11)
    assert ours[-1] < 0.6 * raw[-1]
    assert all(b <= a * 1.01 + 1 for a, b in zip(raw, ours, strict=True))


def _tool_call(cid: str, name: str, **args: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": f"Calling {name}.",
        "tool_calls": [
            {
                "id": cid,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ],
    }


QUOTES = {"name": "Edit", "args": {"old_string": "setting_3 = load(3", "new_string": "x"}}
REWRITES = {"name": "bash", "args": {"command": "sed -i 's/load(3/load(4/' src/app.py"}}


@pytest.mark.parametrize(
    ("edit", "kept"),
    [(QUOTES, True), (None, True), (REWRITES, False)],
    ids=["quotes", "no-edit-yet", "sed"],
)
def test_a_mask_made_because_it_pays_keeps_what_the_agent_may_quote(
    edit: dict[str, Any] | None, kept: bool
) -> None:
    """The latest read of a file the agent edits by quoting it stays whole through the masks
    made only because they pay, however large (``mask.protect_ratio``, here room for none of
    it, bounds that only where a mask must make room); so does the latest read of every file
    before the agent's first edit (it may edit any of them by quoting). An agent whose edits
    rewrite without quoting (``sed -i``) needs no read verbatim: it is masked like any old
    output."""
    text = "".join(f"    setting_{i} = load({i}, cache=True)\n" for i in range(300))
    head = history([], seed=0)
    msgs = [
        *head,
        _tool_call("r0", "Read", file_path="src/app.py"),
        {"role": "tool", "tool_call_id": "r0", "content": text},
    ]
    if edit is not None:
        args = {"file_path": "src/app.py", **edit["args"]}
        msgs += [
            _tool_call("e0", edit["name"], **args),
            {"role": "tool", "tool_call_id": "e0", "content": "Done."},
        ]
    first = len(msgs)
    msgs += history([6_000, 400, 9_000, 1_500] * 40, seed=3)[len(head) :]
    msgs.append({"role": "assistant", "content": "Done."})
    config = {"mask": {"protect_ratio": 0.0001}, "policy": {"pricing": "model"}}
    raw, ours = run([], 0, "gpt-4o", msgs=msgs, config=config)
    assert ours[-1] < 0.95 * raw[-1]  # the masks were made
    last = {m.get("tool_call_id"): m["content"] for m in SENT[-1] if m["role"] == "tool"}
    given = {m.get("tool_call_id"): m["content"] for m in msgs[first:] if m["role"] == "tool"}
    assert any(last[c] != given[c] for c in given)  # old outputs were masked
    assert (last["r0"] == text) is kept
