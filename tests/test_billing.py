"""bill_requests / CachePricing: what a provider bills once prompt caching is counted."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextwarden._billing import CachePricing, CallBill, PromptRequest, bill_requests
from contextwarden._exceptions import ConfigError
from contextwarden._models import model_info

ANTHROPIC_LIKE = CachePricing.ratios(3.0)  # read 0.30, write 3.75, TTL 300 s

# A message is (key, tokens); equal keys stand for byte-identical messages.
message = st.tuples(st.integers(0, 5), st.integers(0, 2_000))
history = st.lists(message, min_size=1, max_size=30)


def request(
    msgs: list[tuple[int, int]], prefix: int = 50, at: float | None = None
) -> PromptRequest:
    return PromptRequest(
        keys=[k for k, _ in msgs],
        tokens=[n for _, n in msgs],
        prefix_key="tools-v1",
        prefix_tokens=prefix,
        at=at,
    )


@given(history, st.lists(st.integers(1, 4), min_size=1, max_size=8))
def test_an_append_only_conversation_reads_all_but_the_new_messages(
    msgs: list[tuple[int, int]], steps: list[int]
) -> None:
    cuts = []
    end = 1
    for step in steps:
        cuts.append(min(end, len(msgs)))
        end += step
    requests = [request(msgs[:cut]) for cut in cuts]
    bills = bill_requests(requests, ANTHROPIC_LIKE)
    assert bills[0].cached_tokens == 0 and bills[0].written_tokens == requests[0].total
    for prev, cur, bill in zip(requests, requests[1:], bills[1:], strict=False):
        new = sum(cur.tokens[len(prev.tokens) :])
        assert bill.tokens == cur.total
        assert bill.cached_tokens == prev.total  # everything sent before is a cache read
        assert bill.written_tokens == new  # only the new messages are written


@given(history, st.integers(0, 2_000))
def test_a_changed_first_message_reads_nothing(msgs: list[tuple[int, int]], tokens: int) -> None:
    first = request(msgs, prefix=0)
    changed = request([(99, tokens), *msgs[1:]], prefix=0)
    bills = bill_requests([first, changed], ANTHROPIC_LIKE)
    assert bills[1].cached_tokens == 0
    assert bills[1].written_tokens == changed.total
    # The part before the messages (tools, framing) comes first: it is still read.
    with_tools = bill_requests([request(msgs), request([(99, tokens), *msgs[1:]])], ANTHROPIC_LIKE)
    assert with_tools[1].cached_tokens == 50


@given(history)
def test_a_changed_tool_list_reads_nothing(msgs: list[tuple[int, int]]) -> None:
    first = request(msgs)
    other_tools = PromptRequest(first.keys, first.tokens, prefix_key="tools-v2", prefix_tokens=50)
    assert bill_requests([first, other_tools], ANTHROPIC_LIKE)[1].cached_tokens == 0


def test_a_change_in_the_middle_reads_up_to_it() -> None:
    before = request([(1, 100), (2, 200), (3, 300), (4, 400)])
    after = request([(1, 100), (2, 200), (9, 10), (4, 400), (5, 500)])
    bill = bill_requests([before, after], ANTHROPIC_LIKE)[1]
    assert bill.cached_tokens == 50 + 100 + 200
    assert bill.written_tokens == 10 + 400 + 500


@given(history, st.floats(0, 10_000))
def test_ttl_expiry(msgs: list[tuple[int, int]], gap: float) -> None:
    t0 = 1_700_000_000.0
    first = request(msgs, at=t0)
    again = request(msgs, at=t0 + gap)
    bill = bill_requests([first, again], ANTHROPIC_LIKE)[1]
    assert bill.cached_tokens == (first.total if gap <= 300 else 0)
    # Without a time on either side the calls are back to back: the cache is warm.
    untimed = bill_requests([first, request(msgs)], ANTHROPIC_LIKE)[1]
    assert untimed.cached_tokens == first.total
    # A cache that outlives the session never expires.
    forever = CachePricing(1.0, 0.1, 1.0, ttl_s=None)
    assert bill_requests([first, again], forever)[1].cached_tokens == first.total


def test_the_ttl_runs_from_the_last_use() -> None:
    msgs = [(1, 1_000), (2, 1_000)]
    times = [0.0, 250.0, 500.0, 750.0, 1_100.0]
    bills = bill_requests([request(msgs, at=t) for t in times], ANTHROPIC_LIKE)
    assert [b.cached_tokens > 0 for b in bills] == [False, True, True, True, False]


@given(
    st.integers(0, 10**7),
    st.integers(0, 10**7),
    st.floats(0, 100),
    st.floats(0, 1),
    st.floats(1, 2),
)
def test_cost_arithmetic(
    cached: int, written: int, price: float, read: float, write: float
) -> None:
    pricing = CachePricing.ratios(price, read=read, write=write)
    assert pricing.read_per_mtok == pytest.approx(price * read)
    assert pricing.write_per_mtok == pytest.approx(price * write)
    assert pricing.cost(cached, written) == pytest.approx(
        (cached * price * read + written * price * write) / 1e6
    )


def test_a_bill_in_dollars() -> None:
    # 10,000 tokens sent, then the same 10,000 plus 2,000 new ones, at $3/M (Anthropic-like):
    # first call writes 10,000 at $3.75/M; second reads 10,000 at $0.30/M and writes 2,000.
    first = request([(1, 9_950)])
    second = request([(1, 9_950), (2, 2_000)])
    bills = bill_requests([first, second], ANTHROPIC_LIKE)
    assert bills[0] == CallBill(10_000, 0, 10_000, pytest.approx(0.0375))
    assert bills[1] == CallBill(12_000, 10_000, 2_000, pytest.approx(0.003 + 0.0075))


def test_below_the_minimum_cacheable_length() -> None:
    pricing = CachePricing.ratios(3.0, min_cacheable_tokens=1_024)
    short = request([(1, 500)], prefix=0)
    bills = bill_requests([short, short], pricing)
    # Too short to cache at all: plain input price, no write premium, no read.
    assert [(b.cached_tokens, b.written_tokens, b.uncached_tokens) for b in bills] == [
        (0, 0, 500),
        (0, 0, 500),
    ]
    assert bills[1].cost == pytest.approx(500 * 3.0 / 1e6)
    # A long request whose shared part is under the minimum reads nothing but is written.
    long_a = request([(1, 500), (2, 2_000)], prefix=0)
    long_b = request([(1, 500), (3, 2_000)], prefix=0)
    bill = bill_requests([long_a, long_b], pricing)[1]
    assert (bill.cached_tokens, bill.written_tokens) == (0, 2_500)


@given(st.lists(st.tuples(history, st.booleans()), min_size=1, max_size=6))
def test_invariants(runs: list[tuple[list[tuple[int, int]], bool]]) -> None:
    requests = [request(msgs, prefix=50 if same else 60) for msgs, same in runs]
    bills = bill_requests(requests, ANTHROPIC_LIKE)
    assert len(bills) == len(requests)
    for i, (req, bill) in enumerate(zip(requests, bills, strict=True)):
        assert bill.tokens == req.total
        assert 0 <= bill.cached_tokens <= bill.tokens
        assert bill.cached_tokens + bill.written_tokens == bill.tokens
        assert bill.cached_tokens <= (requests[i - 1].total if i else 0)
        # Cache-aware cost lies between "all read" and "all written".
        assert req.total * 0.3 / 1e6 - 1e-12 <= bill.cost <= req.total * 3.75 / 1e6 + 1e-12


def test_inputs_are_checked_and_named() -> None:
    ok = request([(1, 10)])
    with pytest.raises(ValueError, match=r"requests\[1\] has 2 keys but 1 token counts"):
        bill_requests([ok, PromptRequest(keys=[1, 2], tokens=[3])], ANTHROPIC_LIKE)
    with pytest.raises(ValueError, match=r"requests\[0\]\.tokens\[1\] must be an int >= 0"):
        bill_requests([PromptRequest(keys=[1, 2], tokens=[3, -1])], ANTHROPIC_LIKE)
    with pytest.raises(ValueError, match=r"requests\[0\]\.at must be epoch seconds"):
        bill_requests([PromptRequest(keys=[1], tokens=[3], at="noon")], ANTHROPIC_LIKE)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"requests\[0\] must be a PromptRequest, got list"):
        bill_requests([[1, 2]], ANTHROPIC_LIKE)  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="read_per_mtok must be a number >= 0"):
        CachePricing(1.0, -0.1, 1.0)
    with pytest.raises(ConfigError, match="ttl_s must be > 0 or None"):
        CachePricing(1.0, 0.1, 1.0, ttl_s=0)


def test_inputs_are_not_mutated() -> None:
    keys, tokens = [1, 2, 3], [10, 20, 30]
    reqs = [PromptRequest(keys, tokens), PromptRequest(keys[:2], tokens[:2])]
    bill_requests(reqs, ANTHROPIC_LIKE)
    assert keys == [1, 2, 3] and tokens == [10, 20, 30]


def test_for_model_reads_the_registry() -> None:
    pricing = CachePricing.for_model("claude-sonnet-4-5")
    assert pricing is not None
    price = model_info("claude-sonnet-4-5").input_price_per_mtok
    assert pricing.input_per_mtok == price
    # Anthropic bills reads at a tenth and 5-minute writes at 1.25x the input price.
    assert pricing.read_per_mtok == pytest.approx(0.1 * pricing.input_per_mtok)
    assert pricing.write_per_mtok == pytest.approx(1.25 * pricing.input_per_mtok)
    assert pricing.ttl_s == 300
    deepseek = CachePricing.for_model("deepseek-chat")
    assert deepseek is not None and deepseek.read_per_mtok < deepseek.input_per_mtok
    assert deepseek.write_per_mtok == deepseek.input_per_mtok  # writes are not billed extra
    assert CachePricing.for_model("no-such-model-xyz") is None
    assert CachePricing.for_model("qwen3-32b") is None  # open weights: no single list price
