"""load_transcript / save_transcript: every real recording loads into a valid request sequence,
provider files round-trip exactly, agent logs convert as documented, and each malformed file
raises one error that names the file, the line or message, and the field."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shared_data import SHARED_DATA, trajectory_files

from contextwarden import (
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    TranscriptError,
    assistant,
    system,
    tool_result,
    user,
)
from contextwarden._transcripts import (
    Transcript,
    load_transcript,
    load_transcripts,
    save_transcript,
)
from contextwarden.formats import (
    check_messages,
    to_anthropic,
    to_openai,
    validate_anthropic,
    validate_openai,
)
from contextwarden.formats._media import anthropic_image_cost
from contextwarden.transcripts._common import pair_calls

DATA = Path(__file__).parent / "data" / "transcripts"
DEMO = Path(__file__).resolve().parents[1] / "examples" / "data" / "demo-session.traj.json"
FOLDER_FORMAT = {
    "mini-swe-agent": "mini-swe-agent",
    "pi": "pi",
    "pi-based": "pi",
    "claude-code": "claude-code",
    "openhands": "openhands",
    "codex": "codex",
    "aider": "aider",
    "swe-agent": "swe-agent",
}
#: Agents that call no tools: their commands sit in the reply text.
TEXT_COMMANDS = frozenset({"aider", "swe-agent"})


def file_id(p: Path) -> str:
    return f"{p.parent.name}/{p.name}"


# -- every real recording ------------------------------------------------------------------------
@pytest.mark.parametrize("path", trajectory_files(), ids=file_id)
def test_every_real_recording_loads_into_a_valid_request(path: Path) -> None:
    runs = [t for t in load_transcripts(path) if any(m.role == "assistant" for m in t.messages)]
    assert runs  # at least one run the model answered
    for t in runs:
        assert_valid_recording(t, path)


def assert_valid_recording(t: Transcript, path: Path) -> None:
    assert t.format == FOLDER_FORMAT[path.parent.name]
    assert t.path == str(path)
    assert t.messages and all(isinstance(m, Message) for m in t.messages)
    assert any(m.role == "user" for m in t.messages)
    assert t.format in TEXT_COMMANDS or any(m.tool_calls for m in t.messages)
    messages = t.messages
    if t.format == "mini-swe-agent" and check_messages(messages):
        # A run that submitted stops right after its last call (the exit record holds the
        # outcome), so that call is pending; everything before it is a complete request.
        assert check_messages(messages, allow_pending=True) == []
        assert messages[-1].role == "assistant" and messages[-1].tool_calls
        messages = messages[:-1]
    assert check_messages(messages) == []
    system, body = to_anthropic(messages)
    assert validate_anthropic(system, body) == []
    assert validate_openai(to_openai(messages)) == []


def test_the_shared_data_is_there(shared_data: Path) -> None:
    # Guards the parametrised test above against silently running on nothing.
    assert len(trajectory_files()) >= 7


MINI = sorted(SHARED_DATA.glob("mini-swe-agent/*.traj.json")) if SHARED_DATA.is_dir() else []


@pytest.mark.parametrize("path", MINI, ids=file_id)
def test_mini_swe_agent_round_trips_exactly(path: Path, tmp_path: Path) -> None:
    t = load_transcript(path)
    original = json.loads(path.read_text(encoding="utf-8"))
    assert original["messages"][-1]["role"] == "exit"
    assert len(t.messages) == len(original["messages"]) - 1  # the exit record is no message
    assert t.model == original["info"]["config"]["model"]["model_name"]
    assert t.messages[0].role == "system" and t.system == original["messages"][0]["content"]
    out = save_transcript(t, tmp_path / "out.traj.json")
    assert json.loads(out.read_text(encoding="utf-8")) == original  # info, exit and all
    again = load_transcript(out)
    assert again.messages == t.messages and again.format == "mini-swe-agent"


def test_reasoner_trajectories_carry_thinking(shared_data: Path) -> None:
    path = (
        shared_data
        / "mini-swe-agent/deepseek_reasoner_dev__marshmallow-code__marshmallow-1359.traj.json"
    )
    t = load_transcript(path)
    raw = json.loads(path.read_text(encoding="utf-8"))["messages"]
    with_reasoning = [i for i, m in enumerate(raw) if m.get("reasoning_content")]
    assert with_reasoning
    for i in with_reasoning:
        assert t.messages[i].thinking[0].thinking == raw[i]["reasoning_content"]


@pytest.mark.parametrize("fmt", ["openai", "openai-jsonl", "anthropic"])
def test_real_recordings_survive_every_provider_format(
    shared_data: Path, tmp_path: Path, fmt: str
) -> None:
    # Across providers some things cannot travel (OpenAI has no is_error; Anthropic refuses
    # unsigned thinking and merges same-role neighbours); all the conversation itself does.
    # Recordings of chat-API agents; Codex's Responses items (encrypted reasoning) and images
    # inside tool results (pi-based) have no exact form in the other provider's files.
    for path in trajectory_files():
        if path.parent.name not in ("mini-swe-agent", "pi", "claude-code", "openhands"):
            continue
        t = load_transcript(path)
        out = save_transcript(t, tmp_path / f"{path.stem}.{fmt}", format=fmt)  # type: ignore[arg-type]
        again = load_transcript(out)
        # Plain text reads the same in both providers' forms, and is taken as OpenAI.
        text_only = not any(m.tool_calls or m.thinking for m in t.messages)
        assert again.format == fmt or (text_only and again.format == "openai")
        assert gist(again.messages, fmt) == gist(t.messages, fmt), path.name
        assert check_messages(again.messages, allow_pending=True) == []
        if fmt == "openai-jsonl":  # and written once more, it is stable
            twice = load_transcript(save_transcript(again, tmp_path / "twice.jsonl"))
            assert twice.messages == again.messages


def gist(messages: Sequence[Message], fmt: str) -> list[tuple[str, tuple[Any, ...]]]:
    """What a provider keeps of a conversation: neighbours of one role merged, blocks in
    order, minus what ``fmt`` (a format written in OpenAI's or Anthropic's terms) cannot
    carry."""
    out: list[tuple[str, tuple[Any, ...]]] = []
    for m in messages:
        role, blocks = content_of(m)
        if fmt != "anthropic":  # OpenAI: no is_error, no thinking signatures, no empty thinking
            blocks = tuple(
                b[:-1] if b[0] == "result" else b[:2] if b[0] == "thinking" else b
                for b in blocks
                if not (b[0] == "thinking" and not b[1])
            )
        else:  # no unsigned thinking; tool results are user turns
            blocks = tuple(b for b in blocks if not (b[0] == "thinking" and not b[2]))
            role = "user" if role == "tool" else role
        if not blocks:
            continue
        if out and out[-1][0] == role:
            out[-1] = (role, out[-1][1] + blocks)
        else:
            out.append((role, blocks))
    return out


def content_of(m: Message) -> tuple[Any, ...]:
    """What a provider file keeps of a message: role, blocks (without provider extras)."""
    return (m.role, tuple(_block_content(b) for b in m.content))


def _block_content(b: Any) -> Any:
    if isinstance(b, TextBlock):
        return ("text", b.text)
    if isinstance(b, ThinkingBlock):
        return ("thinking", b.thinking, b.signature, b.redacted, b.data)
    if isinstance(b, ToolCallBlock):
        return ("call", b.id, b.name, b.input)
    if isinstance(b, ToolResultBlock):
        return ("result", b.tool_call_id, b.text, b.is_error)
    return ("image", dict(b.source))


# -- pi ------------------------------------------------------------------------------------------
def test_pi_session_keeps_usage_signatures_and_leaves_out_failed_turns(shared_data: Path) -> None:
    path = shared_data / "pi/large-session.jsonl"
    raw = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    entries = [e["message"] for e in raw if e["type"] == "message"]
    failed = [
        m for m in entries if m["role"] == "assistant" and m["stopReason"] in ("error", "aborted")
    ]
    t = load_transcript(path)
    assert t.format == "pi" and t.model == "claude-sonnet-4-5"
    assert len(t.messages) == len(entries) - len(failed)
    assert sum(t.meta["skipped"].values()) == len(failed)
    kept = [m for m in entries if m not in failed]
    for src, msg in zip(kept, t.messages, strict=True):
        assert (
            msg.role
            == {"user": "user", "assistant": "assistant", "toolResult": "tool"}[src["role"]]
        )
        if src["role"] == "assistant":
            assert msg.usage == src["usage"]  # the real provider usage, untouched
            assert msg.extra["model"] == src["model"] and msg.extra["provider"] == src["provider"]
            calls = [b for b in src["content"] if b["type"] == "toolCall"]
            assert [(c.id, c.name, c.input) for c in msg.tool_calls] == [
                (c["id"], c["name"], c["arguments"]) for c in calls
            ]
        if src["role"] == "toolResult":
            (result,) = msg.tool_results
            assert result.tool_call_id == src["toolCallId"] and result.is_error == src["isError"]
            assert result.text == "\n".join(b["text"] for b in src["content"])
    thinking = [b for m in t.messages for b in m.thinking]
    assert thinking and all(b.signature for b in thinking)


def write_lines(path: Path, records: Sequence[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def pi_message(role: str, content: Any, **more: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "timestamp": "t",
        "message": {"role": role, "content": content, **more},
    }


def test_pi_blocks_images_and_errors(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "s.jsonl",
        [
            {"type": "session", "id": "s", "modelId": "m0", "provider": "p"},
            pi_message("user", "plain string"),
            pi_message(
                "user",
                [
                    {"type": "text", "text": "see"},
                    {"type": "image", "data": "QUJD", "mimeType": "image/png"},
                ],
            ),
            pi_message(
                "assistant",
                [
                    {"type": "thinking", "thinking": "hmm", "thinkingSignature": "sig"},
                    {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "é"}},
                ],
                model="m1",
                provider="p",
                stopReason="toolUse",
                usage={"input": 5},
            ),
            pi_message(
                "toolResult",
                [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                toolCallId="c1",
                toolName="read",
                isError=True,
            ),
            {"type": "thinking_level_change", "thinkingLevel": "high"},
            {"type": "compaction", "summary": "..."},
        ],
    )
    t = load_transcript(path)
    assert t.format == "pi" and t.model == "m1" and t.meta["thinking_level"] == "high"
    assert "skipped" not in t.meta  # the compaction entry is the agent's own compaction
    assert [c.at for c in t.compactions] == [len(t.messages)]
    assert t.compactions[0].replacement[0].text.endswith("...")
    u1, u2, a, r = t.messages
    assert u1.content == (TextBlock("plain string"),)
    image = u2.content[1]
    assert isinstance(image, ImageBlock) and image.source["media_type"] == "image/png"
    assert image.token_cost == anthropic_image_cost(image.source)
    assert a.content[0] == ThinkingBlock("hmm", signature="sig")
    assert a.content[1] == ToolCallBlock("c1", "read", '{"path":"é"}')
    assert a.usage == {"input": 5}
    assert r.tool_results[0].is_error and r.tool_results[0].text == "a\nb"
    assert r.extra["toolName"] == "read"


def test_pi_tree_sessions_follow_the_active_branch(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "tree.jsonl",
        [
            {"type": "session", "version": 3, "id": "s"},
            {**pi_message("user", "first"), "id": "a", "parentId": None},
            {
                **pi_message(
                    "assistant", [{"type": "text", "text": "abandoned"}], stopReason="stop"
                ),
                "id": "b",
                "parentId": "a",
            },
            {**pi_message("user", "edited question"), "id": "c", "parentId": "a"},
            {
                **pi_message("assistant", [{"type": "text", "text": "kept"}], stopReason="stop"),
                "id": "d",
                "parentId": "c",
            },
        ],
    )
    assert [m.text for m in load_transcript(path).messages] == ["first", "edited question", "kept"]


# -- Claude Code ---------------------------------------------------------------------------------
def test_claude_code_merges_the_parts_of_one_api_message(shared_data: Path) -> None:
    path = shared_data / "claude-code/python-to-rust-port.jsonl"
    lines = [json.loads(s) for s in path.read_text(encoding="utf-8").splitlines()]
    turns = [x for x in lines if x.get("type") in ("user", "assistant")]
    t = load_transcript(path)
    assert t.format == "claude-code" and t.model == "claude-opus-4-5-20251101"
    assert t.meta["skipped"] == {"line type 'queue-operation'": 1}
    # One assistant message per API message id, its blocks in line order.
    ids = list(dict.fromkeys(x["message"]["id"] for x in turns if x["type"] == "assistant"))
    assistants = [m for m in t.messages if m.role == "assistant"]
    assert [m.id for m in assistants] == ids
    for m in assistants:
        parts = [x["message"] for x in turns if x.get("message", {}).get("id") == m.id]
        blocks = [b for p in parts for b in p["content"]]
        assert [b.type for b in m.content] == [
            {"text": "text", "tool_use": "tool_call", "thinking": "thinking"}[b["type"]]
            for b in blocks
        ]
        assert m.usage == parts[-1]["usage"] and m.extra["model"] == parts[-1]["model"]
    # Every tool_use answered, in order; parallel results share one tool message.
    calls = [c.id for m in assistants for c in m.tool_calls]
    results = [r.tool_call_id for m in t.messages for r in m.tool_results]
    assert calls == results and len(calls) == 39
    assert any(len(m.tool_results) == 2 for m in t.messages)
    first = t.messages[0]
    assert (
        first.role == "user" and first.id == turns[0]["uuid"] and first.text.startswith("Port this")
    )


def test_claude_code_round_trips_through_its_provider_format(
    shared_data: Path, tmp_path: Path
) -> None:
    t = load_transcript(shared_data / "claude-code/python-to-rust-port.jsonl")
    out = save_transcript(t, tmp_path / "cc.json")  # Anthropic, the format the lines hold
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert set(doc) == {"model", "messages"} and doc["model"] == t.model
    assert validate_anthropic(None, doc["messages"]) == []
    again = load_transcript(out)
    assert again.format == "anthropic" and again.model == t.model
    # Exactly the same messages, less what only the session log knows (ids, times, usage).
    assert again.messages == tuple(
        m.replace(id=None, timestamp=None, usage=None, extra={}) for m in t.messages
    )


def claude_line(kind: str, message: dict[str, Any], uuid: str, **more: Any) -> dict[str, Any]:
    return {"type": kind, "uuid": uuid, "timestamp": f"ts-{uuid}", "message": message, **more}


def test_claude_code_skips_bookkeeping_and_sidechains(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "cc.jsonl",
        [
            {"type": "summary", "summary": "s", "leafUuid": "x"},
            claude_line("user", {"role": "user", "content": "go"}, "u1"),
            claude_line(
                "assistant",
                {
                    "role": "assistant",
                    "id": "m1",
                    "model": "claude-x",
                    "content": [{"type": "thinking", "thinking": "t", "signature": "S"}],
                },
                "a1",
            ),
            claude_line(
                "assistant",
                {
                    "role": "assistant",
                    "id": "m1",
                    "model": "claude-x",
                    "content": [{"type": "text", "text": "done"}],
                },
                "a2",
            ),
            claude_line("user", {"role": "user", "content": "side"}, "s1", isSidechain=True),
            claude_line(
                "assistant",
                {
                    "role": "assistant",
                    "id": "e1",
                    "model": "<synthetic>",
                    "content": [{"type": "text", "text": "API Error: overloaded"}],
                },
                "e1",
            ),
            {"type": "file-history-snapshot", "snapshot": {}},
            claude_line(
                "user", {"role": "user", "content": [{"type": "text", "text": "thanks"}]}, "u2"
            ),
        ],
    )
    t = load_transcript(path)
    assert [m.role for m in t.messages] == ["user", "assistant", "user"]
    assert t.messages[1].content == (ThinkingBlock("t", signature="S"), TextBlock("done"))
    assert t.messages[1].id == "m1" and t.messages[1].timestamp == "ts-a1"
    assert t.meta["skipped"] == {
        "line type 'summary'": 1,
        "sub-agent (sidechain) line": 1,
        "synthetic assistant line (an API error shown to the user)": 1,
        "line type 'file-history-snapshot'": 1,
    }


# -- OpenHands -----------------------------------------------------------------------------------
def test_openhands_run_becomes_calls_and_results(shared_data: Path) -> None:
    path = shared_data / "openhands/fastjson2-2775.output.jsonl"
    run = json.loads(path.read_text(encoding="utf-8"))
    t = load_transcript(path)
    assert t.format == "openhands" and t.meta["instance_id"] == run["instance_id"]
    assert t.model == "gpt-5-2025-08-07"  # what the provider reported, not the config alias
    assert (
        t.messages[0].role == "user" and t.messages[0].text == run["history"][0]["args"]["content"]
    )
    actions = [e for e in run["history"] if "action" in e and "tool_call_metadata" in e]
    calls = [c for m in t.messages for c in m.tool_calls]
    by_id = {e["tool_call_metadata"]["tool_call_id"]: e for e in actions}
    for c in calls:  # ids and argument text exactly as the model wrote them
        meta = by_id[c.id]["tool_call_metadata"]
        (recorded,) = [
            x
            for x in meta["model_response"]["choices"][0]["message"]["tool_calls"]
            if x["id"] == c.id
        ]
        assert c.name == meta["function_name"] and c.arguments == recorded["function"]["arguments"]
    observations = [e for e in run["history"] if "observation" in e]
    results = [r for m in t.messages for r in m.tool_results]
    # as OpenHands sent them: longer than max_message_chars (30,000), the two ends around a line
    marker = "\n[... Observation truncated due to length ...]\n"
    sent = [
        c if len(c) <= 30_000 else c[:15_000] + marker + c[-15_000:]
        for c in (e["content"] for e in observations)
    ]
    assert [r.text for r in results] == sent
    assert max(len(e["content"]) for e in observations) > 900_000  # cut, not dropped
    assert t.messages[-1].role == "assistant" and not t.messages[-1].tool_calls  # finish
    assert all(m.usage for m in t.messages if m.tool_calls)


def oh_event(i: int, **fields: Any) -> dict[str, Any]:
    return {"id": i, "timestamp": f"t{i}", "source": "agent", "message": "", **fields}


def test_openhands_without_native_tool_calls_gets_stable_ids(tmp_path: Path) -> None:
    run = {
        "instance_id": "x-1",
        "metadata": {"llm_config": {"model": "openai/gpt-4o"}},
        "history": [
            oh_event(
                0,
                action="system",
                args={
                    "content": "You are OpenHands.",
                    "tools": [{"type": "function", "function": {"name": "bash"}}],
                },
            ),
            oh_event(
                1,
                source="user",
                action="message",
                args={"content": "fix", "image_urls": ["http://i"]},
            ),
            oh_event(
                2, action="run", args={"command": "ls", "thought": "look first", "blocking": False}
            ),
            oh_event(3, observation="run", cause=2, content="a.py"),
            oh_event(4, observation="agent_state_changed", content=""),
            oh_event(5, observation="error", content="bad format"),
            oh_event(6, action="run", args={"command": "sleep 99"}),  # never answered
            oh_event(7, action="finish", args={"final_thought": "done", "outputs": {}}),
        ],
    }
    path = tmp_path / "output.jsonl"
    path.write_text(json.dumps(run) + "\n" + json.dumps({**run, "instance_id": "x-2"}) + "\n")
    t = load_transcript(path)
    assert (
        t.model == "openai/gpt-4o" and (t.run, t.runs) == (1, 2) and t.meta["instance_id"] == "x-1"
    )
    assert t.tools == ({"type": "function", "function": {"name": "bash"}},)
    assert t.system == "You are OpenHands."
    roles = [m.role for m in t.messages]
    assert roles == ["system", "user", "assistant", "tool", "user", "assistant"]
    image = t.messages[1].content[1]
    assert isinstance(image, ImageBlock) and image.source == {"type": "url", "url": "http://i"}
    call = t.messages[2].tool_calls[0]
    assert (call.id, call.name, call.input) == ("oh-2", "run", {"command": "ls"})
    assert t.messages[2].text == "look first"
    assert t.messages[3].tool_results[0] == ToolResultBlock("oh-2", "a.py")
    assert t.messages[4].text == "bad format" and t.messages[5].text == "done"
    assert t.meta["skipped"] == {
        "observation 'agent_state_changed' answering no call": 1,
        "tool call never answered": 1,
    }
    assert load_transcript(path).messages == t.messages  # synthesised ids are stable
    assert check_messages(t.messages) == []


# -- malformed files: one error, located -------------------------------------------------------
def load_error(name: str) -> TranscriptError:
    with pytest.raises(TranscriptError) as info:
        load_transcript(DATA / name)
    err = info.value
    assert err.path == str(DATA / name) and str(err).startswith(str(DATA / name))
    return err


def test_unknown_block_type_names_line_and_field() -> None:
    err = load_error("bad-block.pi.jsonl")  # line 3 is blank: line numbers are the file's
    assert (err.line, err.index, err.field) == (4, None, "message.content[1].type")
    assert str(err) == (
        f"{DATA / 'bad-block.pi.jsonl'}, line 4, field 'message.content[1].type': "
        "unknown block type 'foo' (expected 'text', 'thinking' or 'toolCall')"
    )


def test_invalid_json_line_of_an_agent_log_is_skipped_with_a_warning_naming_it() -> None:
    t = load_transcript(DATA / "bad-json-line.jsonl")  # a pi session; line 3 is broken
    assert t.format == "pi" and [m.text for m in t.messages] == ["hello"]
    assert len(t.warnings) == 1 and t.warnings[0].startswith("line 3: not valid JSON")
    assert "column 49" in t.warnings[0] and "Expecting ',' delimiter" in t.warnings[0]


def test_invalid_json_line_of_a_provider_file_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant" "content": ""}\n')
    with pytest.raises(TranscriptError) as info:
        load_transcript(path)
    assert info.value.line == 2 and "Expecting ',' delimiter" in str(info.value)


def test_a_cline_markdown_export_is_named_and_the_file_to_read_given(tmp_path: Path) -> None:
    path = tmp_path / "cline_task_nov-8-2025.md"
    path.write_text("**User:**\n\n<task>\nFix it\n</task>\n\n---\n\n**Assistant:**\n\nOk.\n")
    with pytest.raises(
        TranscriptError, match="Cline or Roo Code task exported as Markdown"
    ) as info:
        load_transcript(path)
    assert "api_conversation_history.json" in str(info.value)


def test_invalid_json_document_names_line_and_column() -> None:
    err = load_error("bad-json.json")
    assert err.line == 4 and "invalid JSON at column 3" in str(err)


def test_unrecognised_format_lists_the_formats_tried() -> None:
    err = load_error("unknown.json")
    assert "unrecognised transcript format" in str(err) and "['conversation']" in str(err)
    for name in (
        "openai",
        "openai-jsonl",
        "anthropic",
        "mini-swe-agent",
        "pi",
        "claude-code",
        "openhands",
    ):
        assert f"{name} (" in str(err)


def test_claude_code_error_points_at_the_part_line() -> None:
    # The bad block is the second block of the second line of a merged message: the error
    # names that line and the block's index within it, not within the merged message.
    err = load_error("bad-claude-part.jsonl")
    assert (err.line, err.index, err.field) == (4, None, "message.content[1].text")
    assert "expected a string, got int" in str(err)


def test_openai_jsonl_error_names_the_line() -> None:
    err = load_error("bad-openai-line.jsonl")
    assert (err.line, err.index, err.field) == (3, None, "tool_calls[0].function.arguments")


def test_openhands_error_names_the_event_field() -> None:
    err = load_error("bad-openhands.jsonl")
    assert (err.line, err.field) == (1, "history[1].tool_call_metadata.tool_call_id")
    assert "expected a string" in str(err)


def test_mini_swe_agent_error_names_the_message() -> None:
    err = load_error("bad-mini.traj.json")
    assert (err.line, err.index, err.field) == (None, 3, "content[0]")
    assert str(err).startswith(f"{DATA / 'bad-mini.traj.json'}, message 3, field 'content[0]': ")


def test_empty_and_undecodable_files() -> None:
    assert "empty" in str(load_error("empty.jsonl"))
    err = load_error("not-utf8.jsonl")
    assert err.line == 2 and "not UTF-8" in str(err)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="cannot read the file"):
        load_transcript(tmp_path / "nope.json")


def test_forced_format_is_used_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "msgs.json"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    assert load_transcript(path, format="anthropic").format == "anthropic"
    assert load_transcript(path).format == "openai"
    with pytest.raises(TranscriptError, match="unknown format 'yaml'"):
        load_transcript(path, format="yaml")  # type: ignore[arg-type]
    with pytest.raises(TranscriptError, match="line 1"):
        load_transcript(path, format="pi")  # not a pi entry: located, not a crash


# -- detection and writing of provider files ------------------------------------------------------
CONVERSATION = (
    system("You are terse."),
    user("List the files."),
    assistant("Listing.", tool_calls=[ToolCallBlock("call_1", "bash", '{"command": "ls"}')]),
    tool_result("call_1", "a.py\nb.py"),
    assistant("Two files."),
)
TOOLS = (
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a command",
            "parameters": {"type": "object", "properties": {}},
        },
    },
)


@pytest.mark.parametrize("fmt", ["openai", "openai-jsonl", "anthropic", "mini-swe-agent"])
def test_saved_messages_load_back_equal(tmp_path: Path, fmt: str) -> None:
    out = save_transcript(CONVERSATION, tmp_path / "out", format=fmt)  # type: ignore[arg-type]
    t = load_transcript(out)
    assert t.format == fmt
    assert gist(t.messages, fmt) == gist(CONVERSATION, fmt)
    assert t.system == "You are terse."
    # Once read from a file, messages round-trip exactly (extras, spelling and all).
    again = load_transcript(save_transcript(t, tmp_path / "again"))
    assert again.messages == t.messages and again.format == fmt


def test_tools_and_model_ride_along(tmp_path: Path) -> None:
    t = Transcript(CONVERSATION, "openai", model="gpt-4o", tools=TOOLS)
    as_openai = load_transcript(save_transcript(t, tmp_path / "o.json"))
    assert as_openai.tools == TOOLS
    assert gist(as_openai.messages, "openai") == gist(CONVERSATION, "openai")
    as_anthropic = load_transcript(save_transcript(t, tmp_path / "a.json", format="anthropic"))
    assert as_anthropic.format == "anthropic" and as_anthropic.model == "gpt-4o"
    assert as_anthropic.tools == (
        {
            "name": "bash",
            "description": "Run a command",
            "input_schema": {"type": "object", "properties": {}},
        },
    )
    back = load_transcript(save_transcript(as_anthropic, tmp_path / "b.json", format="openai"))
    assert back.tools == TOOLS


def test_openai_object_keeps_its_other_keys(tmp_path: Path) -> None:
    doc = {"model": "gpt-4o", "temperature": 0, "messages": [{"role": "user", "content": "hi"}]}
    src = tmp_path / "req.json"
    src.write_text(json.dumps(doc, indent=2))
    t = load_transcript(src)
    assert t.model == "gpt-4o"
    assert json.loads(save_transcript(t, tmp_path / "out.json").read_text()) == doc


def test_agent_logs_are_written_as_valid_requests(tmp_path: Path) -> None:
    # The readers' annotations (model, toolName...) describe the recording, not the request.
    t = Transcript(
        (
            user("hi"),
            Message("assistant", (TextBlock("yo"),), extra={"model": "m", "provider": "p"}),
        ),
        "pi",
    )
    doc = json.loads(save_transcript(t, tmp_path / "a.json").read_text())
    assert doc["messages"][1] == {"role": "assistant", "content": [{"type": "text", "text": "yo"}]}


def test_save_does_not_touch_the_transcript(tmp_path: Path) -> None:
    t = Transcript(CONVERSATION, "openai", tools=TOOLS)
    before = (t.messages, t.tools, dict(t.meta))
    save_transcript(t, tmp_path / "x.json", format="anthropic")
    assert (t.messages, t.tools, dict(t.meta)) == before


def test_single_line_json_object_is_a_document(tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"system": "s", "messages": [{"role": "user", "content": "hi"}]}))
    t = load_transcript(path)
    assert t.format == "anthropic" and t.system == "s"


# -- round trips of generated conversations -------------------------------------------------------
_text = st.text(min_size=1, max_size=40)  # no lone surrogates: JSON files cannot hold them


@st.composite
def conversations(draw: st.DrawFn) -> tuple[Message, ...]:
    out: list[Message] = []
    if draw(st.booleans()):
        out.append(system(draw(_text)))
    n_turns = draw(st.integers(1, 4))
    counter = 0
    for _ in range(n_turns):
        out.append(user(draw(_text)))
        for _ in range(draw(st.integers(0, 2))):
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                counter += 1
                args = json.dumps({"q": draw(_text)})
                calls.append(
                    ToolCallBlock(f"call_{counter}", draw(st.sampled_from(["bash", "read"])), args)
                )
            out.append(assistant(draw(st.one_of(st.just(""), _text)), tool_calls=calls))
            for c in calls:
                out.append(tool_result(c.id, draw(_text), is_error=draw(st.booleans())))
        out.append(assistant(draw(_text)))
    return tuple(out)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(conversations(), st.sampled_from(["openai", "openai-jsonl", "anthropic", "mini-swe-agent"]))
def test_any_conversation_survives_save_and_load(
    tmp_path: Path, messages: tuple[Message, ...], fmt: str
) -> None:
    out = save_transcript(messages, tmp_path / "conv", format=fmt)  # type: ignore[arg-type]
    t = load_transcript(out)
    # Plain text with no system prompt and no tools reads the same in OpenAI's and
    # Anthropic's form: such a file is taken as OpenAI.
    plain = not any(m.role in ("system", "tool") or m.tool_calls for m in messages)
    assert t.format == fmt or (fmt == "anthropic" and plain and t.format == "openai")
    assert gist(t.messages, fmt) == gist(messages, fmt)
    assert check_messages(t.messages) == []


# -- the demo recording ----------------------------------------------------------------------------
def test_demo_recording_loads() -> None:
    t = load_transcript(DEMO)
    assert t.format == "mini-swe-agent" and t.model == "deepseek/deepseek-chat"
    assert len(t.messages) == 177 and check_messages(t.messages, allow_pending=True) == []
    assert t.meta["exit"]["role"] == "exit"
    # Over 40k tokens by any reasonable count: ~4 characters a token on English and code.
    assert sum(m.char_count for m in t.messages) > 4 * 40_000
    assert DEMO.stat().st_size < 460_000


def test_demo_recording_is_faithful_to_its_source(shared_data: Path) -> None:
    source = shared_data / "mini-swe-agent/deepseek_chat_test_1-100__django__django-15695.traj.json"
    original = json.loads(source.read_text(encoding="utf-8"))
    demo = json.loads(DEMO.read_text(encoding="utf-8"))
    for m in original["messages"]:
        m.get("extra", {}).pop("response", None)
    assert demo == original and list(demo) == list(original)


# -- pairing calls and results in agent logs -----------------------------------------------------
@st.composite
def broken_logs(draw: st.DrawFn) -> tuple[Message, ...]:
    """Histories as a crash leaves them: calls without results, results without calls (or
    answering an older turn), results given twice, text riding along with results."""
    made: list[str] = ["ghost"]  # every call id so far, and one never called
    out: list[Message] = [user("go")]
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["user", "assistant", "tool"]))
        if kind == "user":
            out.append(user(draw(_text)))
        elif kind == "assistant":
            calls = [
                ToolCallBlock(f"c{len(made) + k}", "bash") for k in range(draw(st.integers(0, 3)))
            ]
            made.extend(c.id for c in calls)
            text = draw(st.one_of(st.just(""), _text))
            if text or calls:
                out.append(assistant(text, tool_calls=calls))
        else:
            picks = draw(st.lists(st.sampled_from(made[-4:]), min_size=1, max_size=3))
            results: list[Any] = [ToolResultBlock(c, "out") for c in picks]
            if draw(st.booleans()):
                results.append(TextBlock(draw(_text)))
            out.append(Message("tool", tuple(results)))
    return tuple(out)


@given(broken_logs())
def test_pair_calls_always_yields_a_valid_request(messages: tuple[Message, ...]) -> None:
    meta: dict[str, Any] = {}
    fixed = pair_calls(messages, meta)
    assert check_messages(fixed) == []
    removed = sum(len(m.content) for m in messages) - sum(len(m.content) for m in fixed)
    assert sum(meta.get("skipped", {}).values()) == removed
    if not check_messages(messages):
        assert fixed == messages and meta == {}
    # Nothing is invented: every text kept was in the input.
    assert {m.text for m in fixed if m.text} <= {m.text for m in messages if m.text}


def test_a_line_that_is_not_an_object(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"type": "session", "id": "s"}\n[1, 2]\n')
    with pytest.raises(TranscriptError) as info:
        load_transcript(path)
    assert str(info.value) == f"{path}, line 2: expected an object, got list"
