"""Real session files of current agent versions (``tests/data/transcripts/real``, sources and
licence in its README): each is read whole (the replies counted from the raw file, by the
agent's own record of its calls, within 5%), and replayed with no invalid request at the
model's window and at 32k."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from contextwarden._replay import replay
from contextwarden._transcripts import Transcript, load_transcript, provider_for
from contextwarden.formats import check_messages
from contextwarden.transcripts.inventory import find_session_files, summarize_file

REAL = Path(__file__).resolve().parents[1] / "data" / "transcripts" / "real"
FILES = sorted(p for p in REAL.rglob("*") if p.is_file() and p.parent != REAL)
assert FILES, f"no real session files in {REAL}"
CLINE = REAL.parent / "cline" / "1763000000000" / "api_conversation_history.json"


def lines(path: Path) -> list[Any]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def claude_replies(path: Path) -> int:
    """Distinct API replies: the assistant lines of one ``message.id`` are one reply."""
    return len(
        {
            v["message"].get("id") or v["uuid"]
            for v in lines(path)
            if v.get("type") == "assistant"
            and not v.get("isSidechain")
            and v["message"].get("model") != "<synthetic>"
        }
    )


def codex_replies(path: Path) -> int:
    """Runs of the model's own items (messages, calls, reasoning with something in it)
    between the items it was sent."""
    runs, open_run = 0, False
    for v in lines(path):
        if v.get("type") != "response_item":
            continue
        item = v["payload"]
        mine = item.get("type") in ("function_call", "custom_tool_call", "web_search_call") or (
            item.get("type") == "message" and item.get("role") == "assistant"
        )
        if item.get("type") == "reasoning":
            continue  # rides with the reply it belongs to
        if mine and not open_run:
            runs += 1
        open_run = mine
    return runs


def gemini_replies(path: Path) -> int:
    return sum(
        1 for m in json.loads(path.read_text(encoding="utf-8"))["messages"] if m["type"] == "gemini"
    )


def cline_replies(path: Path) -> int:
    """Runs of assistant messages (the API joins turns of one role in a row)."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    roles = [m["role"] for m in (doc["messages"] if isinstance(doc, dict) else doc)]
    return sum(1 for i, r in enumerate(roles) if r == "assistant" and (i == 0 or roles[i - 1] != r))


def swe_agent_replies(path: Path) -> int:
    """The calls the run's own bill counts."""
    return int(json.loads(path.read_text(encoding="utf-8"))["info"]["model_stats"]["api_calls"])


def opencode_replies(path: Path) -> int:
    """Model calls: the ``step-start`` parts of the replies, opencode's own summary apart."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    return sum(
        1
        for m in doc["messages"]
        if m["info"]["role"] == "assistant" and m["info"].get("summary") is not True
        for p in m["parts"]
        if p["type"] == "step-start"
    )


EXPECTED = {
    "swe-agent": swe_agent_replies,
    "claude-code": claude_replies,
    "codex": codex_replies,
    "gemini-cli": gemini_replies,
    "cline": cline_replies,
    "opencode": opencode_replies,
}


def file_id(p: Path) -> str:
    return f"{p.parent.name}/{p.name}"


def replies_of(t: Transcript) -> int:
    return sum(1 for m in t.messages if m.role == "assistant")


def replay_invalid(t: Transcript, window: int | None) -> int:
    report = replay(
        t.messages,
        model=t.model or "gpt-4o",
        window=window,
        provider=provider_for(t.format),
        tools=list(t.tools) or None,
        compactions=t.compactions,
    )
    assert report.totals.calls == sum(1 for m in t.messages if m.role == "assistant")
    return report.totals.invalid_requests


@pytest.mark.parametrize("path", FILES, ids=file_id)
def test_a_real_session_is_read_whole(path: Path) -> None:
    t = load_transcript(path)
    assert t.format == path.parent.name
    expected = EXPECTED[t.format](path)
    replies = sum(1 for m in t.messages if m.role == "assistant")
    assert abs(replies - expected) <= 0.05 * expected, (replies, expected)
    assert check_messages(t.messages) == []
    assert t.warnings == ()  # read whole: nothing to warn about


@pytest.mark.parametrize("path", [*FILES, CLINE], ids=file_id)
@pytest.mark.parametrize("window", [None, 32_000], ids=["model-window", "32k"])
def test_a_real_session_replays_with_no_invalid_request(path: Path, window: int | None) -> None:
    t = load_transcript(path)
    assert replay_invalid(t, window) == 0


# -- Claude Code ---------------------------------------------------------------------------------
CLAUDE = REAL / "claude-code" / "entire-graph-2.1.168-excerpt.jsonl"


def test_claude_code_attachments_are_read_as_sent() -> None:
    raw = lines(CLAUDE)
    hooks = [v["attachment"] for v in raw if v.get("type") == "attachment"]
    sent = [a for a in hooks if a["type"] == "hook_success" and a["content"]]
    shown = [a for a in hooks if a["type"] == "hook_system_message" and a["content"].strip()]
    assert sent and shown and all(a["hookEvent"] == "SessionStart" for a in sent)
    t = load_transcript(CLAUDE)
    text = "\n".join(m.text for m in t.messages if m.role == "user")
    for a in sent:  # a session-start hook's output reaches the model, in a reminder
        assert f"<system-reminder>\n{a['hookName']} hook success: {a['content']}" in text
    for a in shown:  # a hook's message to the user is only shown to the user
        assert a["content"].strip() not in text
    # the reminders are messages of their own: the task is what the user typed
    typed = next(v for v in raw if v.get("type") == "user")["message"]["content"]
    task = next(m for m in t.messages if m.role == "user" and "<system-reminder>" not in m.text)
    assert task.text == typed


def test_a_missing_link_of_a_claude_code_chain_is_named_and_read_past(tmp_path: Path) -> None:
    raw = CLAUDE.read_text(encoding="utf-8").splitlines()
    values = [json.loads(x) for x in raw]
    # take out a link in the middle of the chain: an attachment line
    gone = next(
        i
        for i, v in enumerate(values)
        if i > len(values) // 2
        and v.get("type") == "attachment"
        and any(w.get("parentUuid") == v["uuid"] for w in values)
    )
    child = next(i for i, w in enumerate(values) if w.get("parentUuid") == values[gone]["uuid"])
    path = tmp_path / "broken.jsonl"
    path.write_text("\n".join(x for i, x in enumerate(raw) if i != gone) + "\n", encoding="utf-8")
    t = load_transcript(path)
    # nothing is lost: the chain goes on from the line written before the missing one
    assert sum(1 for m in t.messages if m.role == "assistant") == claude_replies(path)
    # lines are 1-based, and one line before the child is gone
    assert t.warnings == (
        f"line {child} (type {values[child]['type']}): its parent {values[gone]['uuid']!r} is "
        f"not in the file; read on from line {child - 1}",
    )


def test_a_rewind_that_leaves_most_replies_behind_is_named_in_a_warning(tmp_path: Path) -> None:
    values = lines(CLAUDE)
    first = next(v for v in values if v.get("type") == "user")
    # the user rewinds to the first prompt and asks again: only the new branch is sent
    again = {**first, "uuid": "rewound-1", "message": {"role": "user", "content": "once more"}}
    reply = next(v for v in values if v.get("type") == "assistant")
    answer = {
        **reply,
        "uuid": "rewound-2",
        "parentUuid": "rewound-1",
        "message": {
            **reply["message"],
            "id": "msg_rewound",
            "content": [{"type": "text", "text": "ok"}],
        },
    }
    path = tmp_path / "rewound.jsonl"
    path.write_text(
        "".join(json.dumps(v) + "\n" for v in [*values, again, answer]), encoding="utf-8"
    )
    t = load_transcript(path)
    assert [m.text for m in t.messages if m.role != "system"][-2:] == ["once more", "ok"]
    replies = claude_replies(path)
    assistant_lines = sum(1 for v in [*values, answer] if v.get("type") == "assistant")
    got = sum(1 for m in t.messages if m.role == "assistant")
    assert t.warnings == (
        f"{assistant_lines} assistant lines ({replies} replies) but the chain from the last line "
        f"reaches {got}: the rest are on side branches (edited prompts, rewinds)",
    )


# -- Cline ---------------------------------------------------------------------------------------
def test_cline_turns_of_one_role_in_a_row_are_one_turn() -> None:
    raw = json.loads(CLINE.read_text(encoding="utf-8"))
    runs = 1 + sum(1 for a, b in zip(raw, raw[1:], strict=False) if a["role"] != b["role"])
    t = load_transcript(CLINE)
    assert len(t.messages) == runs
    roles = ["assistant" if m.role == "assistant" else "user" for m in t.messages]
    assert all(a != b for a, b in zip(roles, roles[1:], strict=False))
    resumed = next(m for m in t.messages if "[TASK RESUMPTION]" in m.text)
    assert resumed.role == "tool" and resumed.tool_results  # joined to the results before it
    assert raw == json.loads(CLINE.read_text(encoding="utf-8"))  # the file's values untouched


# -- Codex ---------------------------------------------------------------------------------------
def test_codex_reasoning_that_carries_nothing_is_left_out(tmp_path: Path) -> None:
    real = lines(REAL / "codex" / "entire-graph-gpt-5.6-excerpt.jsonl")
    empty = [
        v
        for v in real
        if v.get("type") == "response_item"
        and v["payload"]["type"] == "reasoning"
        and not v["payload"].get("encrypted_content")
        and not v["payload"]["summary"]
    ]
    assert empty  # the current models record such items
    t = load_transcript(REAL / "codex" / "entire-graph-gpt-5.6-excerpt.jsonl")
    assert t.meta["skipped"]["reasoning item with no summary and no encrypted content"] == len(
        empty
    )
    # a step cut short by an incoming message: a reply of reasoning only, then a user message
    head = [v for v in real if v.get("type") in ("session_meta", "turn_context")]
    step = {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "**Checking the rename**"}],
        "encrypted_content": "gAAAAB",
    }
    said = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "stop"}]}
    asked = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}
    answer = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Stopped."}],
    }
    body = [
        {"timestamp": "2026-07-24T04:29:03.539Z", "type": "response_item", "payload": x}
        for x in (asked, step, said, answer)
    ]
    path = tmp_path / "rollout.jsonl"
    path.write_text("".join(json.dumps(v) + "\n" for v in [*head, *body]), encoding="utf-8")
    t = load_transcript(path)
    assert [m.role for m in t.messages if m.role != "system"] == ["user", "user", "assistant"]
    assert t.meta["skipped"]["reply holding only reasoning (a step cut short)"] == 1
    assert replay_invalid(t, None) == 0


def test_a_cline_sdk_session_is_read_as_cline_sends_it() -> None:
    path = REAL / "cline" / "cline-sdk-session.messages.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    t = load_transcript(path)
    assert t.format == "cline" and t.system == doc["system_prompt"]
    assert t.model == [m for m in doc["messages"] if "modelInfo" in m][-1]["modelInfo"]["id"]
    files = [b for m in doc["messages"] for b in m["content"] if b["type"] == "file"]
    assert files
    for f in files:  # an attached file goes as text headed by its path
        assert any(
            f'<file_content path="{f["path"]}">\n{f["content"]}' in m.text for m in t.messages
        )
    calls = [b["id"] for m in doc["messages"] for b in m["content"] if b["type"] == "tool_use"]
    assert [b.tool_call_id for m in t.messages for b in m.tool_results] == calls
    metrics = [m["metrics"] for m in doc["messages"] if m.get("metrics")]
    usage = [m.usage for m in t.messages if m.role == "assistant" and m.usage]
    # the SDK counts the cached tokens in inputTokens; Anthropic's names count them apart
    assert [
        u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
        for u in usage
    ] == [x["inputTokens"] for x in metrics]
    assert [u["cache_read_input_tokens"] for u in usage] == [x["cacheReadTokens"] for x in metrics]


def test_cline_sdk_sessions_are_found_where_cline_keeps_them(tmp_path: Path) -> None:
    folder = tmp_path / ".cline" / "data" / "sessions" / "1784094124598_rruoq"
    folder.mkdir(parents=True)
    (folder / "1784094124598_rruoq.json").write_text('{"version": 1}')  # its metadata
    session = folder / "1784094124598_rruoq.messages.json"
    shutil.copy(REAL / "cline" / "cline-sdk-session.messages.json", session)
    assert find_session_files(home=tmp_path) == [session]


def test_swe_agent_call_ids_used_again_are_made_unique() -> None:
    path = REAL / "swe-agent" / "marshmallow-1867-function-calling.traj"
    history = json.loads(path.read_text(encoding="utf-8"))["history"]
    raw = [c["id"] for m in history for c in m.get("tool_calls") or ()]
    assert len(set(raw)) < len(raw)  # the replayed run used some ids twice
    t = load_transcript(path)
    calls = [c.id for m in t.messages for c in m.tool_calls]
    assert len(set(calls)) == len(calls) == len(raw)
    assert [r.tool_call_id for m in t.messages for r in m.tool_results] == calls
    assert t.meta["skipped"]["tool call id used again (renamed)"] == len(raw) - len(set(raw))


# -- opencode ------------------------------------------------------------------------------------
OPENCODE = REAL / "opencode"


def test_opencode_parts_are_read_as_opencode_sends_them() -> None:
    path = OPENCODE / "dark-factory-neon-river.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    t = load_transcript(path)
    assert (t.format, t.model) == ("opencode", "gpt-5.3-codex")
    user_parts = [p for m in doc["messages"] if m["info"]["role"] == "user" for p in m["parts"]]
    synthetic = [p["text"] for p in user_parts if p["type"] == "text" and p.get("synthetic")]
    files = [p for p in user_parts if p["type"] == "file"]
    assert synthetic and files  # a mentioned file is recorded twice: as text, and as a file part
    sent = "\n".join(m.text for m in t.messages if m.role == "user")
    assert all(text in sent for text in synthetic)
    assert not any(f["url"] in sent for f in files if f["url"] not in "".join(synthetic))
    tools = [
        p
        for m in doc["messages"]
        for p in m["parts"]
        if p["type"] == "tool" and p["state"]["status"] in ("completed", "error")
    ]
    results = {r.tool_call_id: r for m in t.messages for r in m.tool_results}
    assert len(results) == len(tools)
    for p in tools:
        state = p["state"]
        want = state["output"] if state["status"] == "completed" else state["error"]
        assert results[p["callID"]].content == want
        assert results[p["callID"]].is_error == (state["status"] == "error")


def test_opencode_own_compaction_is_the_agents_compaction() -> None:
    path = OPENCODE / "dark-factory-curious-sailor-excerpt.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    (summary,) = [m for m in doc["messages"] if m["info"].get("summary") is True]
    text = "".join(p["text"] for p in summary["parts"] if p["type"] == "text")
    t = load_transcript(path)
    assert all(m.text != text for m in t.messages)  # the summary is no reply of the session
    (compaction,) = t.compactions
    assert compaction.at == len(t.messages)
    assert [m.role for m in compaction.replacement] == ["user", "assistant"]
    assert compaction.replacement[1].text == text


@pytest.mark.parametrize("path", [*FILES, CLINE], ids=file_id)
def test_a_real_session_gets_a_bill(path: Path) -> None:
    (summary,) = summarize_file(path, estimate=False)
    assert summary.error is None and summary.calls == replies_of(load_transcript(path))
    assert summary.billed is not None and summary.billed > 0, summary
