"""Two conversations through one proxy never share an edit: histories with different tasks and
the same tail (the leak the old compaction memory had) each get requests built from their own
history only."""

from __future__ import annotations

from typing import Any

import httpx
from fake_upstream import Behaviour, FakeUpstream
from proxy_doubles import StartProxy, agent_history


def test_conversations_sharing_a_tail_never_share_an_edit(
    upstream: tuple[FakeUpstream, str], start_proxy: StartProxy
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, window=8_000)
    a = agent_history("TASK-A: fix the parser in alpha.py", 60)
    b = agent_history("TASK-B: rename the beta module", 60)
    sent: dict[str, list[list[dict[str, Any]]]] = {"A": [], "B": []}
    for k in range(20, 121, 10):  # interleaved, both growing, both over the window
        for name, history in (("A", a), ("B", b)):
            r = httpx.post(
                f"{proxy}/v1/chat/completions",
                json={"model": "gpt-4o", "messages": history[:k]},
                headers={"Authorization": "Bearer sk-test"},
                timeout=60,
            )
            assert r.status_code == 200
            sent[name].append(fake.last.json["messages"])
    compacted = 0
    for name, other in (("A", "TASK-B"), ("B", "TASK-A")):
        for messages in sent[name]:
            text = str(messages)
            assert f"TASK-{name}" in text  # its own task kept
            assert other not in text  # never the other conversation's
            compacted += any("[Context summary:" in str(m.get("content")) for m in messages)
    assert compacted > 0  # the proxy did compact both histories


def test_a_cookie_the_upstream_sets_reaches_its_caller_only(
    upstream: tuple[FakeUpstream, str], start_proxy: StartProxy
) -> None:
    fake, url = upstream
    proxy = start_proxy(url)
    fake.then(Behaviour(headers={"set-cookie": "__cf_bm=for-a; Path=/"}))
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    first = httpx.post(
        f"{proxy}/v1/chat/completions",
        json=body,
        headers={"Authorization": "Bearer sk-a"},
        timeout=60,
    )
    assert first.headers.get("set-cookie") == "__cf_bm=for-a; Path=/"  # relayed to its caller
    for key in ("sk-a", "sk-b"):  # and never sent again by the proxy, to anyone
        r = httpx.post(
            f"{proxy}/v1/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {key}"},
            timeout=60,
        )
        assert r.status_code == 200
        assert "cookie" not in fake.last.headers
