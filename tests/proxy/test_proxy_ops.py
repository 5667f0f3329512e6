"""Running the proxy for a team: log lines with time and level, ``/metrics`` read by
Prometheus' own text parser, ``/stats`` summed over the worker processes sharing a store, the
bill at cache prices, and a failed summary's reason logged and counted."""

from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_upstream import Behaviour, FakeUpstream, serve
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from proxy_doubles import StartProxy, proxy_process

from contextwarden._billing import CachePricing
from contextwarden.proxy import ProxyConfig, create_app
from contextwarden.proxy.logs import JsonLines, TextLines
from contextwarden.proxy.metrics import COUNTERS, metrics_text
from contextwarden.proxy.stats import ProxyStats, RequestRecord, combine

Upstream = tuple[FakeUpstream, str]

#: a line of ``--log-format text``: time (UTC, milliseconds), level, method, path, fields
TEXT_LINE = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (INFO|WARNING) POST /v1/chat/completions "
    r"route=\"openai\" status=200 "
)


def _metrics(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a ``/metrics`` page, by name and labels (Prometheus' own parser)."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def _chat_call(base: str, n: int, key: str = "sk-team") -> httpx.Response:
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": f"hello {n}"}]}
    # a new connection each call, so that the kernel spreads them over the workers
    with httpx.Client() as client:
        r = client.post(
            f"{base}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}
        )
    assert r.status_code == 200, r.text
    return r


def _store(request: pytest.FixtureRequest, cache: str) -> list[str]:
    if cache == "sqlite":
        return []  # the default: the SQLite file in the data directory
    url: str = request.getfixturevalue("redis_url")
    return ["--cache", "redis", "--redis-url", url]


@pytest.mark.parametrize("cache", ["sqlite", "redis"])
def test_workers_sum_their_counters_and_metrics_parse(
    upstream: Upstream, tmp_path: Path, request: pytest.FixtureRequest, cache: str
) -> None:
    fake, url = upstream
    calls = 12
    args = ["--workers", "2", "--window", "8000", "--log-format", "text", *_store(request, cache)]
    with proxy_process(url, *args, data_dir=tmp_path) as running:
        for n in range(calls):
            _chat_call(running.base, n)
        deadline = time.monotonic() + 15
        while True:  # each worker publishes its counters about once a second
            stats = httpx.get(f"{running.base}/stats").json()
            if (stats["requests"], stats["workers"]) == (calls, 2) or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        page = httpx.get(f"{running.base}/metrics")
    assert (stats["requests"], stats["workers"]) == (calls, 2), stats
    assert stats["transformed"] == calls and stats["by_route"] == {"openai": calls}
    assert page.headers["content-type"].startswith("text/plain")
    samples = _metrics(page.text)
    assert samples[("contextwarden_requests_total", ())] >= calls
    assert samples[("contextwarden_route_requests_total", (("route", "openai"),))] >= calls
    assert samples[("contextwarden_workers", ())] == 2
    assert samples[("contextwarden_tokens_before_total", ())] >= stats["tokens_before"]
    lines = [x for x in running.stderr.splitlines() if "/v1/chat/completions" in x]
    assert len(lines) == calls and all(TEXT_LINE.match(x) for x in lines), lines[:2]


def test_json_lines_carry_time_and_level(upstream: Upstream, tmp_path: Path) -> None:
    fake, url = upstream
    with proxy_process(url, "--window", "8000", data_dir=tmp_path) as running:
        _chat_call(running.base, 0)
    (line,) = [json.loads(x) for x in running.stderr.splitlines() if x.startswith("{")]
    assert line["level"] == "info" and line["path"] == "/v1/chat/completions"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["time"])


def test_formatters_render_a_plain_message_and_a_request() -> None:
    plain = logging.LogRecord("contextwarden.proxy", logging.WARNING, "", 0, "store down", (), None)
    req = logging.LogRecord("contextwarden.proxy", logging.INFO, "", 0, "{}", (), None)
    req.fields = {"method": "POST", "path": "/v1/messages", "status": 200, "model": "m"}
    assert json.loads(JsonLines().format(plain))["message"] == "store down"
    as_json = json.loads(JsonLines().format(req))
    assert as_json["level"] == "info" and as_json["status"] == 200
    text = TextLines().format(req)
    assert re.fullmatch(r"\S+Z INFO POST /v1/messages status=200 model=\"m\"", text), text
    assert TextLines().format(plain).endswith(" WARNING store down")


def test_every_counter_is_a_metric_and_parses() -> None:
    stats = ProxyStats()
    stats.record(RequestRecord("POST", "/v1/messages", "anthropic", model="claude-x", status=200))
    figures = stats.snapshot() | {"clients": 1, "state_bytes": 10, "workers": 1}
    samples = _metrics(metrics_text(figures).decode())
    for key in COUNTERS:
        if key in figures:
            assert samples[(f"contextwarden_{key}_total", ())] == figures[key]
    assert samples[("contextwarden_model_requests_total", (("model", "claude-x"),))] == 1
    assert samples[("contextwarden_responses_total", (("status", "200"),))] == 1


def _turn(conversation: str, before: int, after: int, *, edited: bool = False) -> RequestRecord:
    return RequestRecord(
        "POST",
        "/v1/messages",
        "anthropic",
        model="claude-sonnet-4-5",
        status=200,
        tokens_before=before,
        tokens_after=after,
        conversation=conversation,
        edited=edited,
    )


def test_the_bill_counts_cache_reads_and_an_edit_rewrites() -> None:
    prices = CachePricing.for_model("claude-sonnet-4-5")
    assert prices is not None
    read = prices.read_per_mtok / prices.input_per_mtok
    write = prices.write_per_mtok / prices.input_per_mtok
    stats = ProxyStats()
    stats.record(_turn("c1", 10_000, 10_000))
    stats.record(_turn("c1", 12_000, 12_000))  # extends the first: 10k read, 2k written
    after_two = stats.snapshot()
    expected = 10_000 * write + 10_000 * read + 2_000 * write
    assert after_two["billed_before"] == pytest.approx(expected, abs=0.1)
    assert after_two["billed_after"] == after_two["billed_before"]
    assert after_two["tokens_saved_net"] == 0
    # the warden edits: fewer tokens, but all of them written again; the client's own request
    # would have read 12k from the cache
    stats.record(_turn("c1", 14_000, 6_000, edited=True))
    three = stats.snapshot()
    assert three["billed_after"] - after_two["billed_after"] == pytest.approx(6_000 * write, 0.01)
    assert three["billed_before"] - after_two["billed_before"] == pytest.approx(
        12_000 * read + 2_000 * write, 0.01
    )
    # another conversation reads nothing of c1's cache
    stats.record(_turn("c2", 12_000, 12_000))
    four = stats.snapshot()
    assert four["billed_after"] - three["billed_after"] == pytest.approx(12_000 * write, 0.01)
    # 8k tokens fewer, and yet a higher bill: the edit turned cheap cache reads into writes
    assert four["tokens_saved"] == 8_000 and four["billed_saved_pct"] < 0
    usd = prices.input_per_mtok / 1_000_000
    assert four["cost_usd_before"] == pytest.approx(four["billed_before"] * usd, rel=1e-3)
    assert four["cost_usd_after"] == pytest.approx(four["billed_after"] * usd, rel=1e-3)


def test_combined_figures_are_the_sums() -> None:
    a, b = ProxyStats(), ProxyStats()
    for n in range(3):
        a.record(_turn(f"a{n}", 1_000, 800))
    b.record(_turn("b", 5_000, 5_000))
    total = combine([a.snapshot(), b.snapshot()])
    assert total["requests"] == 4 and total["workers"] == 2
    assert total["tokens_saved"] == 600
    assert total["billed_before"] == pytest.approx(
        a.snapshot()["billed_before"] + b.snapshot()["billed_before"], abs=0.2
    )
    assert total["by_route"] == {"anthropic": 4}


@pytest.mark.parametrize(
    "behaviour",
    [
        Behaviour(status=404, body={"error": {"message": "no such model", "type": "not_found"}}),
        Behaviour(  # a 200 whose reply holds no summary
            body={
                "id": "x",
                "object": "chat.completion",
                "created": 1,
                "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": ""}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 0, "total_tokens": 10},
            }
        ),
    ],
    ids=["404", "empty-reply"],
)
def test_a_failed_summary_is_counted_and_its_reason_logged(
    upstream: Upstream,
    openai_recording: tuple[str, list[dict[str, Any]]],
    caplog: pytest.LogCaptureFixture,
    request: pytest.FixtureRequest,
    behaviour: Behaviour,
) -> None:
    fake, url = upstream
    settings = ProxyConfig.model_validate(
        {
            "upstream": url,
            "window": 16_000,
            "cache": "memory",
            "warden": {"summarizer": {"max_retries": 0}},
        }
    )
    model, history = openai_recording
    fake.then(behaviour)
    log = logging.getLogger("contextwarden.proxy")
    log.addHandler(caplog.handler)  # a CLI run earlier may have stopped propagation
    request.addfinalizer(lambda: log.removeHandler(caplog.handler))
    caplog.set_level(logging.INFO, logger="contextwarden.proxy")
    with serve(create_app(settings)) as proxy:
        r = httpx.post(
            f"{proxy}/v1/chat/completions",
            json={"model": model, "messages": history},
            headers={"Authorization": "Bearer sk-ops"},
            timeout=60,
        )
        stats = httpx.get(f"{proxy}/stats").json()
    assert r.status_code == 200 and r.headers["x-contextwarden-summarizer"] == "extractive"
    assert stats["summary_failures"] == 1 and stats["summary_failed_calls"] >= 1
    records = list({id(rec): rec for rec in caplog.records}.values())
    lines = [getattr(rec, "fields", {}) for rec in records]
    (request_line,) = [x for x in lines if x.get("path") == "/v1/chat/completions"]
    assert request_line["summary_failure"]
    if behaviour.status == 404:
        assert "404" in request_line["summary_failure"]
    failed = [rec for rec in records if rec.levelno == logging.WARNING]
    assert any(getattr(rec, "fields", {}).get("message") == "summary_failed" for rec in failed)


def test_metrics_needs_the_token(upstream: Upstream, start_proxy: StartProxy) -> None:
    fake, url = upstream
    proxy = start_proxy(url, token="t0k")
    assert httpx.get(f"{proxy}/metrics").status_code == 401
    page = httpx.get(f"{proxy}/metrics", headers={"X-Contextwarden-Token": "t0k"})
    assert page.status_code == 200
    assert _metrics(page.text)[("contextwarden_requests_total", ())] == 0


_records = st.builds(
    RequestRecord,
    method=st.just("POST"),
    path=st.sampled_from(["/v1/messages", "/v1/chat/completions", "/v1/models"]),
    route=st.sampled_from(["anthropic", "openai", "passthrough"]),
    model=st.sampled_from([None, "claude-sonnet-4-5", "gpt-4o", "made-up-model"]),
    status=st.sampled_from([200, 400, 429, 500, 499]),
    tokens_before=st.one_of(st.none(), st.integers(0, 200_000)),
    tokens_after=st.integers(0, 200_000),
    compacted=st.integers(0, 3),
    summary_calls=st.integers(0, 2),
    summary_input_tokens=st.integers(0, 5_000),
    summary_failure=st.sampled_from([None, "SummarizerError: 404"]),
    skipped=st.sampled_from([None, "provider_compaction", "warden_error"]),
)


@given(st.lists(st.tuples(_records, st.booleans()), max_size=40))
def test_workers_summed_equal_one_process(requests: list[tuple[RequestRecord, bool]]) -> None:
    """Requests spread over two workers add up to what one process seeing them all counts
    (no conversation: the bill of each request stands alone)."""
    one, a, b = ProxyStats(), ProxyStats(), ProxyStats()
    for rec, first in requests:
        one.record(rec)
        (a if first else b).record(rec)
    whole, summed = one.snapshot(), combine([a.snapshot(), b.snapshot()])
    for key, value in whole.items():
        if key in ("started_at", "uptime_s"):
            continue
        if isinstance(value, float):
            assert summed[key] == pytest.approx(value, abs=0.01), key
        else:
            assert summed[key] == value, key
