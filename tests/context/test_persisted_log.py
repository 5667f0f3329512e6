"""The log persists: a conversation continues on any process that shares the log store, after a
restart or with several workers, with no compaction repeated and the cached prefix intact."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis_server import redis_server
from shared_data import SHARED_DATA

sys.path.insert(0, str(Path(__file__).parent))
from test_continuity import openai_steps, starts_with  # noqa: E402

from contextwarden import Warden, WardenConfig, load_transcript, to_openai  # noqa: E402
from contextwarden.store.logs import MemoryLogStore, RedisLogStore, SQLiteLogStore  # noqa: E402


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        if url is None:
            pytest.skip("redis-server is not installed (.ci/run installs it)")
        yield url


def alternate(
    stores: list[Any],
    config: WardenConfig | None = None,
    steps: int = 40,
    window: int = 32_000,
    command: str = "cat",
) -> tuple[list[list[dict[str, Any]]], list[Any]]:
    """A conversation's calls served in turn by one warden per store (as workers would); each
    step runs ``command`` on a file."""
    wardens = [Warden(config, log_store=s) for s in stores]
    requests, results = [], []
    histories = [
        json.loads(json.dumps(h).replace("cat f", f"{command} f"))
        for h in openai_steps("Fix the failing test", steps)
    ]
    for k, history in enumerate(histories):
        request, result = wardens[k % len(wardens)].transform_openai(
            history, model="gpt-4o", window=window
        )
        requests.append(request)
        results.append(result)
    return requests, results


def check_continues(requests: list[Any], results: list[Any]) -> None:
    alone_requests, alone = alternate([MemoryLogStore()])  # one process, for comparison
    assert [r.compaction is not None for r in results] == [r.compaction is not None for r in alone]
    assert requests == alone_requests  # byte for byte what one process sends
    for k in range(1, len(requests)):
        if not results[k].edits:  # between edits each request begins with the previous one
            assert starts_with(requests[k], requests[k - 1])


def test_two_workers_on_one_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    requests, results = alternate([SQLiteLogStore(path), SQLiteLogStore(path)])
    assert sum(r.compaction is not None for r in results) >= 2
    check_continues(requests, results)


def test_two_workers_size_their_bets_on_the_same_bill_as_one_process(tmp_path: Path) -> None:
    """The masks made because they pay are bets sized on the bill so far (and the reads
    waited since the last): a worker that continues the conversation continues its bill too,
    so two workers send byte for byte what one process sends."""
    config = WardenConfig.model_validate({"policy": {"pricing": "model"}})
    path = tmp_path / "logs.db"
    stores = [SQLiteLogStore(path), SQLiteLogStore(path)]
    # outputs of a linter, not reads of files (which masks that pay keep whole)
    requests, results = alternate(stores, config, 60, 128_000, "ruff check")
    alone_requests, _ = alternate([MemoryLogStore()], config, 60, 128_000, "ruff check")
    assert sum(e.reason == "pays" for r in results for e in r.edits) >= 2
    assert requests == alone_requests


def test_two_workers_continue_a_real_session_whose_masks_pay_as_one_process(
    tmp_path: Path,
) -> None:
    """A real mini-swe-agent session at its model's window, where masks are made because they
    pay, some starting past older results they hold whole: the worker that continues it reads
    from the record where the last call's edits made the request stop being cached (its bill)
    and which results were held whole, and sends byte for byte what one process sends."""
    files = sorted((SHARED_DATA / "mini-swe-agent").glob("*.traj.json"))
    if not files:
        pytest.skip(f"no mini-swe-agent recordings under {SHARED_DATA}")
    msgs = to_openai(list(load_transcript(files[0]).messages))
    calls = [msgs[:k] for k, m in enumerate(msgs) if m["role"] == "assistant" and k > 1]

    def run(stores: list[Any]) -> tuple[list[Any], int]:
        wardens = [Warden(log_store=s) for s in stores]
        sent, masks = [], 0
        for n, history in enumerate(calls):
            request, result = wardens[n % len(wardens)].transform_openai(
                history, model="claude-sonnet-4-5"
            )
            sent.append(request)
            masks += sum(e.reason == "pays" for e in result.edits)
        return sent, masks

    path = tmp_path / "logs.db"
    alone, masks = run([MemoryLogStore()])
    assert masks >= 2
    assert run([SQLiteLogStore(path), SQLiteLogStore(path)])[0] == alone


def test_two_workers_on_one_redis(redis_url: str) -> None:
    requests, results = alternate([RedisLogStore(redis_url), RedisLogStore(redis_url)])
    check_continues(requests, results)


def test_a_restarted_process_continues_without_compacting_again(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    steps = openai_steps("Fix the failing test", 30)
    first = Warden(log_store=SQLiteLogStore(path))
    for history in steps[:-1]:
        before, _ = first.transform_openai(history, model="gpt-4o", window=32_000)
    assert first.edit_log(_.conversation)
    # a new process: same store, nothing in memory
    again, result = Warden(log_store=SQLiteLogStore(path)).transform_openai(
        steps[-1], model="gpt-4o", window=32_000
    )
    # it sends what one process that never stopped sends, compacting only if that one does
    alone = Warden()
    for history in steps[:-1]:
        alone.transform_openai(history, model="gpt-4o", window=32_000)
    expected, unbroken = alone.transform_openai(steps[-1], model="gpt-4o", window=32_000)
    assert again == expected
    assert (result.compaction is None) == (unbroken.compaction is None)
    assert starts_with(again, before) or result.edits


def test_a_stored_log_another_history_does_not_continue_is_not_used(tmp_path: Path) -> None:
    store = SQLiteLogStore(tmp_path / "logs.db")
    steps = openai_steps("Fix the failing test", 30)
    for history in steps:
        Warden(log_store=store).transform_openai(history, model="gpt-4o", window=32_000)
    # same system prompt, tools and task, another run: its own log, no summary of the first
    other = json.loads(json.dumps(steps[20]))
    other[2]["content"] = "a different first step"
    request, result = Warden(log_store=store).transform_openai(other, model="gpt-4o", window=32_000)
    assert "a different first step" in json.dumps(request) or result.compaction is not None
    assert "w25x" not in json.dumps(request)  # nothing of the first run's later steps


def test_a_record_this_version_cannot_read_starts_the_conversation_anew(tmp_path: Path) -> None:
    store = SQLiteLogStore(tmp_path / "logs.db")
    steps = openai_steps("Fix the failing test", 3)
    _, result = Warden(log_store=store).transform_openai(steps[0], model="gpt-4o", window=32_000)
    store.save(result.conversation, {"not": "a record"})
    request, _ = Warden(log_store=store).transform_openai(steps[1], model="gpt-4o", window=32_000)
    assert request == steps[1]


def test_a_session_reopened_after_a_restart_sends_the_same_request(tmp_path: Path) -> None:
    from contextwarden import Session
    from contextwarden.formats import from_openai

    path = tmp_path / "session.db"
    steps = openai_steps("Fix the failing test", 30)
    session = Session(model="gpt-4o", window=32_000, path=path, session_id="s1")
    sent = 0
    compactions = 0
    for history in steps:
        session.append(*from_openai(history[sent:]))
        sent = len(history)
        last = session.context()
        compactions += last.compaction is not None
    assert compactions >= 1
    reopened = Session(model="gpt-4o", window=32_000, path=path, session_id="s1")
    again = reopened.context()
    assert again.messages == last.messages
    assert again.compaction is None and not again.edits
