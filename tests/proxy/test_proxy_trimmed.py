"""A client that drops the oldest messages of its own history (after a 413 for a body too large,
as Claude Code does, or to fit its own idea of the window) goes on with the same conversation
through the proxy: its log and summaries are kept, no compaction is made again, and the request
sent upstream goes on from the one sent before (the provider's cached prefix is read)."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest
from fake_upstream import FakeUpstream
from proxy_doubles import StartProxy

from contextwarden.formats import validate_anthropic

Upstream = tuple[FakeUpstream, str]

HEADERS = {"x-api-key": "sk-ant-trims", "anthropic-version": "2023-06-01"}


def _send(proxy: str, system: Any, messages: list[dict[str, Any]]) -> httpx.Response:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": system}
    r = httpx.post(
        f"{proxy}/v1/messages", json={**body, "messages": messages}, headers=HEADERS, timeout=120
    )
    assert r.status_code == 200, r.text
    return r


def _plain(value: Any) -> Any:
    """``value`` without ``cache_control`` (where a breakpoint sits is not content)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _step(n: int) -> list[dict[str, Any]]:
    """One more tool step of the agent: a call and its result."""
    call = f"toolu_trim_{n}"
    return [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": call, "name": "Bash", "input": {"cmd": "ls"}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call, "content": f"file{n}.rs"}],
        },
    ]


def _trim(history: list[dict[str, Any]], keep_task: bool) -> list[dict[str, Any]]:
    """``history`` with its oldest messages dropped, as a client does: from the first user
    message that answers calls after the middle on (``keep_task``: the first message kept)."""
    at = next(
        i
        for i in range(len(history) // 2, len(history))
        if history[i]["role"] == "user" and isinstance(history[i]["content"], list)
    )
    return [*history[:1], *history[at:]] if keep_task else history[at:]


def _goes_on(fake: FakeUpstream, before: list[dict[str, Any]], added: int) -> None:
    """The request sent upstream is the one sent before with the new messages after it."""
    sent = fake.last.json["messages"]
    assert _plain(sent[: len(before)]) == _plain(before)
    assert len(sent) == len(before) + added
    assert validate_anthropic(fake.last.json.get("system"), sent) == []


def _check_trims(
    upstream: Upstream,
    start_proxy: StartProxy,
    recording: tuple[Any, list[dict[str, Any]]],
    keep_task: bool,
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, window=24_000, summarizer="extractive")
    system, history = copy.deepcopy(recording)
    r = _send(proxy, system, history)
    assert int(r.headers["x-contextwarden-compacted"]) > 0, "the history did not compact"
    first = fake.last.json["messages"]
    history += _step(1)
    r = _send(proxy, system, history)
    _goes_on(fake, first, 2)
    second = fake.last.json["messages"]

    # the body grew too large for the client: it drops its oldest messages and goes on
    trimmed = _trim(history, keep_task) + _step(2)
    assert len(trimmed) < len(history) // 2 + 4
    r = _send(proxy, system, trimmed)
    assert int(r.headers["x-contextwarden-restored"]) == len(history) + 2 - len(trimmed)
    assert r.headers["x-contextwarden-compacted"] == "0"  # no summary made again
    _goes_on(fake, second, 2)

    # and on: each later request of the trimmed history goes on the same way
    third = fake.last.json["messages"]
    r = _send(proxy, system, trimmed + _step(3))
    assert r.headers["x-contextwarden-compacted"] == "0"
    assert int(r.headers["x-contextwarden-restored"]) == len(history) + 2 - len(trimmed)
    _goes_on(fake, third, 2)
    stats = httpx.get(f"{proxy}/stats").json()
    assert stats["compactions"] == 1


@pytest.mark.parametrize("keep_task", [False, True], ids=["from-the-front", "after-its-task"])
def test_a_trimmed_history_goes_on(
    upstream: Upstream,
    start_proxy: StartProxy,
    anthropic_recording: tuple[Any, list[dict[str, Any]]],
    keep_task: bool,
) -> None:
    _check_trims(upstream, start_proxy, anthropic_recording, keep_task=keep_task)


def test_another_history_is_not_taken_for_a_trim(
    upstream: Upstream, start_proxy: StartProxy
) -> None:
    """A new history that shares only its system prompt and task with one the proxy knows is
    a conversation of its own: nothing is put back."""
    fake, url = upstream
    proxy = start_proxy(url, window=24_000, summarizer="extractive")
    task = {"role": "user", "content": "Port the parser to Rust."}
    one = [task, *_step(1), *_step(2), *_step(3)]
    _send(proxy, "be brief", one)
    other = [task, *_step(7), *_step(8)]
    r = _send(proxy, "be brief", other)
    assert "x-contextwarden-restored" not in r.headers
    assert _plain(fake.last.json["messages"]) == other
