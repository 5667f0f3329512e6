"""The providers' own context management through ``contextwarden proxy``, with the real SDKs
against the scripted upstream (which compacts as the providers do: :mod:`.upstream`).

A client that asks the provider to compact keeps that: the proxy forwards those requests as
sent and makes no compaction of its own on them; every compaction block or item the provider
hands out reaches the client and comes back byte for byte; Codex's ``compaction_trigger`` goes
with the edits and tools of the requests before it and is answered by exactly one
``compaction`` item; a later request that carries a compaction item is
reduced from that item on, the items before it kept as they were.
"""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest

from . import harness
from .checks import problems
from .upstream import Upstream

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")
pytest.importorskip("starlette")

TASK = harness.TASK
SHELL = harness._SHELL_SCHEMA


def _anthropic_loop(base_url: str, steps: int, edits: list[dict[str, Any]]) -> list[Any]:
    """A streaming Messages agent loop asking for ``context_management`` ``edits``; the
    messages it got back."""
    client = anthropic.Anthropic(base_url=base_url, api_key="sk-ant-cw-fake", max_retries=0)
    history: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": TASK}]}]
    replies = []
    work = harness.make_workdir(big_files=4)
    try:
        for _ in range(steps + 3):
            with client.beta.messages.stream(
                model="claude-opus-4-7",
                max_tokens=4096,
                system="You are a careful shell agent.",
                tools=[{"name": "bash", "description": "Run a command", "input_schema": SHELL}],
                messages=history,  # type: ignore[arg-type]
                betas=["compact-2026-01-12"],
                context_management={"edits": edits},  # type: ignore[typeddict-item]
            ) as stream:
                final = stream.get_final_message()
            replies.append(final)
            content = [b.model_dump(exclude_none=True) for b in final.content]
            history.append({"role": "assistant", "content": content})
            uses = [b for b in content if b["type"] == "tool_use"]
            if not uses:
                break
            history.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": b["id"],
                            "content": harness._shell(b["input"]["command"], work),
                        }
                        for b in uses
                    ],
                }
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return replies


def _sent_back(up: Upstream, kind: str) -> list[bool]:
    """For each compaction the upstream handed out, whether a later request carried it back
    exactly as sent."""
    bodies = [json.dumps(r.body, sort_keys=True) for r in up.requests]
    out = []
    for c in up.compactions:
        if c.get("type") != kind:
            continue
        text = json.dumps(c, sort_keys=True)
        out.append(any(text in b for b in bodies))
    return out


@pytest.mark.parametrize("mode", ["direct", "proxy"])
def test_anthropic_server_compaction_passes_through(mode: str) -> None:
    edits = [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 30_000}}]
    with Upstream(steps=16, text_format="tools", big_files=4) as up:
        if mode == "direct":
            replies = _anthropic_loop(up.base_url, 16, edits)
            log: list[dict[str, Any]] = []
        else:
            with harness.proxy(up.base_url, 64_000) as p:
                replies = _anthropic_loop(p.base_url, 16, edits)
                log = [x for x in p.log() if x.get("path") == "/v1/messages"]
    main = [r for r in up.requests if r.kind == "main"]
    assert any(r.compacted for r in main), "the upstream never compacted: raise the steps"
    # the client saw the provider's compaction: a compaction block first in the reply
    seen = [r for r in replies if r.content and r.content[0].type == "compaction"]
    assert len(seen) == sum(r.compacted for r in main) >= 1
    back = _sent_back(up, "compaction")  # the last may have come with the final answer
    assert back and all(back[:-1]), back
    assert [problems("anthropic", r.body) for r in up.requests if r.api == "anthropic"] == [
        [] for r in up.requests if r.api == "anthropic"
    ]
    assert "CW-FINAL-ANSWER" in "".join(b.text for b in replies[-1].content if b.type == "text")
    if mode == "proxy":
        # the proxy stood aside: every request forwarded as sent, none compacted by it
        assert log and all(x.get("skipped") == "provider_compaction" for x in log), log[:3]
        assert not any(int(x.get("compacted") or 0) for x in log)


def test_paused_compaction_reaches_the_client_with_its_stop_reason() -> None:
    edits = [
        {
            "type": "compact_20260112",
            "trigger": {"type": "input_tokens", "value": 1_000},
            "pause_after_compaction": True,
        }
    ]
    history = [
        {"role": "user", "content": TASK + " " + "context " * 2_000},
    ]
    with (
        Upstream(steps=4, text_format="tools", big_files=4) as up,
        harness.proxy(up.base_url, 64_000) as p,
    ):
        client = anthropic.Anthropic(base_url=p.base_url, api_key="sk-ant-cw-fake", max_retries=0)
        with client.beta.messages.stream(
            model="claude-opus-4-7",
            max_tokens=1024,
            tools=[{"name": "bash", "description": "Run a command", "input_schema": SHELL}],
            messages=history,  # type: ignore[arg-type]
            betas=["compact-2026-01-12"],
            context_management={"edits": edits},  # type: ignore[typeddict-item]
        ) as stream:
            final = stream.get_final_message()
    assert final.stop_reason == "compaction"
    ((block),) = final.content
    assert block.model_dump(exclude_none=True) == up.compactions[0]
    iterations = final.usage.iterations or []
    assert [i.type for i in iterations] == ["compaction", "message"]


def _responses_loop(
    base_url: str, steps: int, *, trigger_at: int, extra: dict[str, Any] | None = None
) -> tuple[list[Any], list[Any]]:
    """A streaming Responses agent loop that asks the server to compact its history at step
    ``trigger_at`` the way Codex does (``compaction_trigger`` last), then goes on from the
    compaction item; the replies, and the compaction replies."""
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="sk-cw-fake", max_retries=0)
    tools = [{"type": "function", "name": "run", "parameters": SHELL}]
    task = {"type": "message", "role": "user", "content": TASK}
    items: list[dict[str, Any]] = [task]
    replies, compactions = [], []
    work = harness.make_workdir(big_files=4)

    def ask(input_items: list[dict[str, Any]]) -> Any:
        with client.responses.stream(
            model="gpt-5-codex",
            input=input_items,  # type: ignore[arg-type]
            tools=tools,  # type: ignore[arg-type]
            store=False,
            **(extra or {}),
        ) as stream:
            return stream.get_final_response()

    try:
        for n in range(steps + 3):
            if n == trigger_at:
                done = ask([*items, {"type": "compaction_trigger"}])
                compactions.append(done)
                kept = [o.model_dump(exclude_none=True) for o in done.output]
                items = [task, *kept]  # Codex keeps the user's messages and the item
            reply = ask(items)
            replies.append(reply)
            out = [o.model_dump(exclude_none=True) for o in reply.output]
            items += out
            calls = [o for o in out if o["type"] == "function_call"]
            if not calls:
                break
            for c in calls:
                cmd = json.loads(c["arguments"])["command"]
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": c["call_id"],
                        "output": harness._shell(cmd, work),
                    }
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return replies, compactions


@pytest.mark.parametrize("mode", ["direct", "proxy"])
def test_codex_remote_compaction_round_trip(mode: str) -> None:
    with Upstream(steps=14, text_format="tools", big_files=4) as up:
        if mode == "direct":
            replies, compactions = _responses_loop(up.base_url, 14, trigger_at=8)
            log: list[dict[str, Any]] = []
        else:
            with harness.proxy(up.base_url, 16_000) as p:
                replies, compactions = _responses_loop(p.base_url, 14, trigger_at=8)
                log = [x for x in p.log() if x.get("path") == "/v1/responses"]
    # exactly one compaction output item, as the upstream wrote it
    (done,) = compactions
    assert [o.type for o in done.output] == ["compaction"]
    assert done.output[0].model_dump(exclude_none=True) == up.compactions[0]
    assert all(_sent_back(up, "compaction"))
    responses = [r for r in up.requests if r.api == "responses"]
    assert all(problems("responses", r.body) == [] for r in responses)
    assert any("CW-FINAL-ANSWER" in (r.output_text or "") for r in replies[-1:])
    at = next(i for i, r in enumerate(up.requests) if r.kind == "compaction")
    asked = up.requests[at]
    assert asked.body["input"][-1] == {"type": "compaction_trigger"}
    if mode == "proxy":
        # the trigger goes as the requests before it went: their tools (the recall tool among
        # them) and edits, so the provider reads what it cached of them; the proxy made no
        # compaction of its own there
        before = [r for r in up.requests[:at] if r.kind == "main"][-1]
        assert asked.body["tools"] == before.body["tools"]
        assert asked.usage["cached_tokens"] >= 0.8 * asked.usage["input_tokens"], asked.usage
        assert not any(x.get("skipped") for x in log)
        # after it, the requests carry the item: reduced from it on, the item byte for byte
        after = [r for r in up.requests[at:] if r.kind == "main"]
        item = up.compactions[0]
        assert after and all(item in r.body["input"] for r in after)


def test_responses_server_compaction_and_compact_endpoint_pass_through() -> None:
    threshold = {"context_management": [{"type": "compaction", "compact_threshold": 20_000}]}
    with (
        Upstream(steps=10, text_format="tools", big_files=4) as up,
        harness.proxy(up.base_url, 64_000) as p,
    ):
        replies, _ = _responses_loop(p.base_url, 10, trigger_at=-1, extra={"extra_body": threshold})
        client = openai.OpenAI(base_url=f"{p.base_url}/v1", api_key="sk-cw-fake", max_retries=0)
        compacted = client.responses.compact(
            model="gpt-5-codex",
            input=[{"type": "message", "role": "user", "content": TASK}],
        )
        log = p.log()
    assert any(r.compacted for r in up.requests if r.kind == "main")
    assert any(o.type == "compaction" for r in replies for o in r.output)
    assert [o.type for o in compacted.output] == ["compaction"]
    chat = [x for x in log if x.get("path") == "/v1/responses"]
    assert chat and all(x.get("skipped") == "provider_compaction" for x in chat)
    assert [x["route"] for x in log if x.get("path") == "/v1/responses/compact"] == ["passthrough"]


def test_count_tokens_counts_what_the_provider_reads() -> None:
    """Claude Code asks ``count_tokens`` to decide its own compaction: with a compaction block
    in the history the proxy forwards the count as sent, so the provider counts the request it
    will read (from the block on), not one the proxy would have reduced again."""
    block = {"type": "compaction", "content": "Summary: cw-step-7 reached.", "signature": "s1"}
    messages = [
        {"role": "user", "content": TASK + " " + "old context " * 3_000},
        {"role": "assistant", "content": [block, {"type": "text", "text": "Going on."}]},
        {"role": "user", "content": "Carry on."},
    ]
    with Upstream(steps=4, text_format="tools", big_files=4) as up:
        with harness.proxy(up.base_url, 8_000) as p:
            client = anthropic.Anthropic(base_url=p.base_url, api_key="sk-ant-cw", max_retries=0)
            counted = client.beta.messages.count_tokens(
                model="claude-opus-4-7",
                messages=messages,  # type: ignore[arg-type]
                betas=["compact-2026-01-12"],
            )
            log = [x for x in p.log() if x.get("path") == "/v1/messages/count_tokens"]
    (sent,) = [r for r in up.requests if r.api == "count_tokens"]
    assert sent.body["messages"] == messages  # byte for byte: the 3,000 old words included
    assert counted.input_tokens > 0
    assert [x.get("skipped") for x in log] == ["provider_compaction"]
