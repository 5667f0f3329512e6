"""The readers of agents' own session files: Codex CLI, Claude Code, Gemini CLI, Cline, aider,
SWE-agent, OpenHands exports and runs, pi excerpts. Real files where there are any (the shared
data), hand-built fixtures after the agents' source where there are none (see their READMEs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextwarden import Message, TextBlock, ThinkingBlock, ToolResultBlock, TranscriptError
from contextwarden._replay import replay
from contextwarden._tokens import get_counter
from contextwarden._transcripts import Transcript, load_transcript, load_transcripts
from contextwarden.formats import check_messages, to_anthropic, validate_anthropic
from contextwarden.transcripts import FORMATS
from contextwarden.transcripts.inventory import find_session_files

DATA = Path(__file__).resolve().parents[1] / "data" / "transcripts"
GEMINI_JSON = DATA / "gemini-cli" / "session-2025-09-18T10-12-7f3c2a10.json"
GEMINI_JSONL = DATA / "gemini-cli" / "session-2026-08-02T09-00-0b9d7e42.jsonl"
CLINE = DATA / "cline" / "1737000000000" / "api_conversation_history.json"


def write_lines(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def assert_valid(t: Transcript) -> None:
    assert check_messages(t.messages) == []
    system, body = to_anthropic(t.messages)
    assert validate_anthropic(system, body) == []


# -- Codex CLI -----------------------------------------------------------------------------------
def test_codex_rollout_reads_items_usage_model_and_window(shared_data: Path) -> None:
    path = shared_data / "codex" / "raze-codex-session.jsonl"
    records = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    items = [r["payload"] for r in records if r["type"] == "response_item"]
    t = load_transcript(path)
    assert t.format == "codex" and t.model == "gpt-5.4" and t.window == 258_400
    assert t.messages[0].role == "system" and t.messages[0].text.startswith("You are Codex")
    calls = [b for m in t.messages for b in m.tool_calls]
    results = [b for m in t.messages for b in m.tool_results]
    expected = [i["call_id"] for i in items if i["type"] == "function_call"]
    assert [c.id for c in calls] == expected and [r.tool_call_id for r in results] == expected
    thinking = [b for m in t.messages for b in m.thinking]
    encrypted = [i["encrypted_content"] for i in items if i["type"] == "reasoning"]
    assert [b.signature for b in thinking if b.signature] == encrypted
    # every call of the model has its recorded usage (event_msg token_count, written again
    # unchanged after the tool outputs: the running total tells the calls apart)
    replies = [m for m in t.messages if m.role == "assistant"]
    totals = {
        r["payload"]["info"]["total_token_usage"]["total_tokens"]
        for r in records
        if r["payload"].get("type") == "token_count" and r["payload"]["info"]
    }
    assert len(totals) == len(replies)
    assert all(m.usage and "cached_input_tokens" in m.usage for m in replies)
    assert_valid(t)


def codex_line(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2026-03-12T15:10:41.041Z", "type": kind, "payload": payload}


def codex_message(role: str, text: str) -> dict[str, Any]:
    part = "output_text" if role == "assistant" else "input_text"
    return codex_line(
        "response_item",
        {"type": "message", "role": role, "content": [{"type": part, "text": text}]},
    )


def codex_usage(total: int) -> dict[str, Any]:
    usage = {"input_tokens": total, "cached_input_tokens": 0, "output_tokens": 5}
    info = {"last_token_usage": usage, "model_context_window": 100_000}
    return codex_line("event_msg", {"type": "token_count", "info": info})


@pytest.mark.parametrize("recorded", [True, False])
def test_codex_compacted_record_is_the_agents_own_compaction(
    tmp_path: Path, recorded: bool
) -> None:
    compacted: dict[str, Any] = {"message": "SUMMARY of the work"}
    if recorded:
        kept = codex_message("user", "first task")["payload"]
        summary = codex_message("user", "SUMMARY of the work")["payload"]
        compacted["replacement_history"] = [kept, summary]
    path = write_lines(
        tmp_path / "rollout-x.jsonl",
        [
            codex_line("session_meta", {"id": "s", "base_instructions": {"text": "SYS"}}),
            codex_line("turn_context", {"model": "gpt-5.5"}),
            codex_message("user", "first task"),
            codex_message("assistant", "did it"),
            codex_usage(1000),
            codex_line("compacted", compacted),
            codex_message("user", "second task"),
            codex_message("assistant", "did that too"),
            codex_usage(400),
        ],
    )
    t = load_transcript(path)
    assert t.model == "gpt-5.5" and t.window == 100_000
    assert [m.text for m in t.messages] == [
        "SYS",
        "first task",
        "did it",
        "second task",
        "did that too",
    ]
    (c,) = t.compactions
    assert c.at == 3 and c.line == 6
    assert [m.text for m in c.replacement][-1].endswith("SUMMARY of the work")
    assert [m.text for m in c.replacement][0] == "first task"


# -- Claude Code ---------------------------------------------------------------------------------
def claude_lines(shared_data: Path) -> list[dict[str, Any]]:
    path = shared_data / "claude-code" / "python-to-rust-port.jsonl"
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def test_claude_code_follows_the_parent_chain_not_the_file_order(
    shared_data: Path, tmp_path: Path
) -> None:
    lines = claude_lines(shared_data)
    original = load_transcript(write_lines(tmp_path / "a.jsonl", lines))
    # Claude Code sometimes writes a tool result before the line of its call: move every
    # result line in front of its call; the conversation must read the same.
    moved = list(lines)
    for i in range(len(moved)):
        line = moved[i]
        content = line.get("message", {}).get("content")
        if (
            line.get("type") == "user"
            and isinstance(content, list)
            and content[0].get("type") == "tool_result"
        ):
            moved.insert(i - 1, moved.pop(i))
    shuffled = load_transcript(write_lines(tmp_path / "b.jsonl", moved))
    assert shuffled.messages == original.messages
    assert_valid(shuffled)


def test_claude_code_leaves_side_branches_and_synthetic_errors_out(
    shared_data: Path, tmp_path: Path
) -> None:
    lines = claude_lines(shared_data)
    base = load_transcript(write_lines(tmp_path / "a.jsonl", lines))
    first_user = next(x for x in lines if x.get("type") == "user")
    branch = {
        **first_user,
        "uuid": "side-branch-1",
        "message": {"role": "user", "content": "an edited prompt, abandoned"},
    }
    error = {
        **next(x for x in lines if x.get("type") == "assistant"),
        "uuid": "synthetic-1",
        "parentUuid": lines[-1]["uuid"],
        "message": {
            "id": "synthetic-msg",
            "model": "<synthetic>",
            "role": "assistant",
            "content": [{"type": "text", "text": "API Error: 529 overloaded"}],
        },
    }
    t = load_transcript(write_lines(tmp_path / "b.jsonl", [*lines[:3], branch, *lines[3:], error]))
    assert t.messages == base.messages
    assert t.meta["skipped"]["side branch (a line off the conversation's parentUuid chain)"] == 1
    assert t.meta["skipped"]["synthetic assistant line (an API error shown to the user)"] == 1


def test_claude_code_compact_boundary_is_the_agents_own_compaction(
    shared_data: Path, tmp_path: Path
) -> None:
    lines = claude_lines(shared_data)
    cut = 30  # after a tool result: a turn boundary
    assert lines[cut]["type"] == "user"
    boundary = {
        "type": "system",
        "subtype": "compact_boundary",
        "uuid": "boundary-1",
        "parentUuid": None,
        "logicalParentUuid": lines[cut]["uuid"],
        "sessionId": lines[1]["sessionId"],
        "compactMetadata": {"trigger": "auto", "preTokens": 150_000},
    }
    summary = {
        **lines[1],
        "uuid": "summary-1",
        "parentUuid": "boundary-1",
        "isCompactSummary": True,
        "message": {"role": "user", "content": "This session is being continued... SUMMARY"},
    }
    after = [dict(lines[cut + 1], parentUuid="summary-1"), *lines[cut + 2 :]]
    t = load_transcript(
        write_lines(tmp_path / "c.jsonl", [*lines[: cut + 1], boundary, summary, *after])
    )
    plain = load_transcript(write_lines(tmp_path / "p.jsonl", lines))
    assert t.messages == plain.messages  # the full history, through the boundary
    (c,) = t.compactions
    assert c.replacement[0].text.endswith("SUMMARY") and c.line == cut + 3
    assert t.messages[c.at - 1].role == "tool" and t.messages[c.at].role == "assistant"


def test_claude_code_tool_result_then_continue_is_one_user_turn(
    shared_data: Path, tmp_path: Path
) -> None:
    lines = claude_lines(shared_data)
    cut = next(i for i, x in enumerate(lines) if i > 5 and x.get("type") == "user")
    nudge = {
        **lines[cut],
        "uuid": "continue-1",
        "parentUuid": lines[cut]["uuid"],
        "message": {"role": "user", "content": "Continue"},
    }
    rest = [dict(lines[cut + 1], parentUuid="continue-1"), *lines[cut + 2 :]]
    t = load_transcript(write_lines(tmp_path / "d.jsonl", [*lines[: cut + 1], nudge, *rest]))
    roles = [m.role for m in t.messages]
    assert not any(
        a in ("user", "tool") and b == "user" for a, b in zip(roles, roles[1:], strict=False)
    )
    merged = next(
        m for m in t.messages if any(getattr(b, "text", "") == "Continue" for b in m.content)
    )
    assert merged.tool_results  # the result and the nudge travel together
    assert_valid(t)


# -- Gemini CLI ----------------------------------------------------------------------------------
def test_gemini_cli_legacy_json_recording() -> None:
    t = load_transcript(GEMINI_JSON)
    assert t.format == "gemini-cli" and t.model == "gemini-2.5-pro"
    assert [m.role for m in t.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    result = t.messages[2].tool_results[0]
    assert result.tool_call_id == t.messages[1].tool_calls[0].id
    assert result.text.startswith("FAIL src/utils/paths.test.ts")
    assert t.messages[3].usage == {
        "input": 8702,
        "output": 41,
        "cached": 8192,
        "thoughts": 0,
        "tool": 0,
        "total": 8743,
    }
    assert t.meta["skipped"]["message type 'info' (shown to the user, not sent)"] == 1
    assert_valid(t)


def test_gemini_cli_jsonl_recording_replaces_records_and_rewinds() -> None:
    t = load_transcript(GEMINI_JSONL)
    assert t.format == "gemini-cli" and t.model == "gemini-3-flash-preview"
    texts = [m.text for m in t.messages if m.role in ("user", "assistant")]
    assert "(abandoned reply)" not in texts and "Now fix the first one." not in texts
    assert texts[-2:] == ["Fix the retry one instead.", "Done: b.ts now retries 3 times."]
    assert t.messages[1].usage is not None  # the rewritten record (with its result) won
    assert t.messages[2].tool_results[0].text.startswith("src/a.ts:3")
    assert_valid(t)


# -- Cline ---------------------------------------------------------------------------------------
def test_cline_text_results_become_the_results_of_their_calls() -> None:
    raw = json.loads(CLINE.read_text(encoding="utf-8"))
    t = load_transcript(CLINE)
    assert t.format == "cline" and t.model == "claude-3-7-sonnet-20250219"
    calls = [b for m in t.messages for b in m.tool_calls]
    results = [b for m in t.messages for b in m.tool_results]
    assert [c.name for c in calls] == ["read_file", "search_files", "list_files", "replace_in_file"]
    assert [r.tool_call_id for r in results] == [c.id for c in calls]
    assert results[1].text.startswith("[search_files for") and "users.py" in results[1].text
    assert results[2].text == "[list_files for 'src'] Result:\napp.py\ndb.py\nusers.py"
    # no call became text, nothing was read as OpenAI
    tool_uses = sum(1 for m in raw for b in m["content"] if b["type"] == "tool_use")
    assert tool_uses == len(calls) + 1  # the unanswered attempt_completion was removed
    assert t.meta["skipped"] == {"tool call never answered": 1}
    assert all(m.usage for m in t.messages if m.role == "assistant")  # from ui_messages.json
    assert_valid(t)


# -- aider, SWE-agent ----------------------------------------------------------------------------
def test_aider_history_holds_one_run_per_chat(shared_data: Path) -> None:
    path = shared_data / "aider" / "mozgoslav.aider.chat.history.md"
    runs = load_transcripts(path)
    assert [t.run for t in runs] == [1, 2, 3] and {t.runs for t in runs} == {3}
    assert [sum(m.role == "assistant" for m in t.messages) for t in runs] == [0, 6, 4]
    assert {t.model for t in runs} == {"lm_studio/qwen3.6-35b-a3b-uncensored-hauhaucs-aggressive"}
    text = "\n".join(m.text for t in runs for m in t.messages)
    assert "(Y)es/(N)o" not in text  # answers to aider's questions are not sent
    assert runs[1].messages[0].text == "hi"
    assert load_transcript(path, run=3).messages == runs[2].messages
    with pytest.raises(TranscriptError, match="no run 4: the file holds 3 run"):
        load_transcript(path, run=4)


def test_swe_agent_traj(shared_data: Path) -> None:
    path = shared_data / "swe-agent" / "pydicom-1458.traj"
    raw = json.loads(path.read_text(encoding="utf-8"))
    t = load_transcript(path)
    assert t.format == "swe-agent" and len(t.messages) == len(raw["history"]) - 1
    assert sum(m.role == "assistant" for m in t.messages) == raw["info"]["model_stats"]["api_calls"]
    assert t.meta["model_stats"]["instance_cost"] == pytest.approx(1.26719)
    assert "DEMONSTRATION" in t.messages[1].text  # the demonstration was sent: kept


# -- OpenHands -----------------------------------------------------------------------------------
def test_openhands_ui_export(shared_data: Path) -> None:
    t = load_transcript(shared_data / "openhands" / "ui-export-demo1.json")
    assert t.format == "openhands" and t.model == "claude-3-5-sonnet-20241022"
    assert sum(1 for m in t.messages for _ in m.tool_calls) == 4
    assert_valid(t)


def test_openhands_output_jsonl_gives_every_run(shared_data: Path, tmp_path: Path) -> None:
    line = (shared_data / "openhands" / "fastjson2-2775.output.jsonl").read_text("utf-8")
    run = json.loads(line)
    other = {**run, "instance_id": "other-1", "history": run["history"][:9]}
    path = write_lines(tmp_path / "output.jsonl", [run, other, run])
    runs = load_transcripts(path)
    assert [(t.run, t.runs) for t in runs] == [(1, 3), (2, 3), (3, 3)]
    assert [t.meta["instance_id"] for t in runs] == [
        run["instance_id"],
        "other-1",
        run["instance_id"],
    ]
    assert runs[0].messages == runs[2].messages != runs[1].messages
    assert load_transcript(path, run=2).meta["instance_id"] == "other-1"


# -- pi excerpts ---------------------------------------------------------------------------------
def test_pi_excerpt_with_a_broken_line_and_a_missing_parent(shared_data: Path) -> None:
    t = load_transcript(shared_data / "pi-based" / "gjc-youtube-transcript.jsonl")
    assert t.format == "pi" and t.model == "glm-5.2"
    warnings = "\n".join(t.warnings)
    assert "line 60: not valid JSON" in warnings
    assert "line 61: its parentId '1a056841' is not in the file" in warnings  # line 60's entry
    assert "line 1: its parentId '70816928' is not in the file; the session starts" in warnings
    assert sum(m.role == "assistant" for m in t.messages) > 150  # lines 1-59 are kept too
    assert t.messages[0].role == "user"


def test_pi_compaction_entry_is_the_agents_own_compaction(tmp_path: Path) -> None:
    def msg(id_: str, parent: str | None, role: str, text: str) -> dict[str, Any]:
        content: Any = [{"type": "text", "text": text}]
        body: dict[str, Any] = {"role": role, "content": content}
        if role == "assistant":
            body["stopReason"] = "stop"
        return {"type": "message", "id": id_, "parentId": parent, "message": body}

    path = write_lines(
        tmp_path / "s.jsonl",
        [
            {"type": "session", "version": 3, "id": "s"},
            msg("a", None, "user", "one"),
            msg("b", "a", "assistant", "two"),
            msg("c", "b", "user", "three"),
            msg("d", "c", "assistant", "four"),
            {
                "type": "compaction",
                "id": "k",
                "parentId": "d",
                "summary": "S",
                "firstKeptEntryId": "c",
            },
            msg("e", "k", "user", "five"),
            msg("f", "e", "assistant", "six"),
        ],
    )
    t = load_transcript(path)
    assert [m.text for m in t.messages] == ["one", "two", "three", "four", "five", "six"]
    (c,) = t.compactions
    assert c.at == 4 and c.line == 6
    assert [m.text for m in c.replacement][1:] == ["three", "four"]  # kept from firstKeptEntryId
    assert c.replacement[0].text.endswith("S")


# -- detection -----------------------------------------------------------------------------------
def test_an_unknown_file_lists_every_format_tried(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"conversation": []}')
    with pytest.raises(TranscriptError) as info:
        load_transcript(path)
    for name in FORMATS:
        assert f"{name} (" in str(info.value)
    for name in ("codex", "gemini-cli", "cline", "aider", "swe-agent"):
        assert name in FORMATS


def test_format_forces_a_reader(tmp_path: Path) -> None:
    # Plain text turns read as OpenAI by default; forced, the same list reads as Cline's.
    path = tmp_path / "h.json"
    path.write_text(
        json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])
    )
    assert load_transcript(path).format == "openai"
    forced = load_transcript(path, format="cline")
    assert forced.format == "cline" and [m.text for m in forced.messages] == ["hi", "yo"]
    with pytest.raises(TranscriptError, match="unknown format 'nope'"):
        load_transcript(path, format="nope")  # type: ignore[arg-type]


def test_redacted_and_signed_thinking_blocks_are_kept(shared_data: Path, tmp_path: Path) -> None:
    lines = claude_lines(shared_data)
    reply = next(x for x in lines if x.get("type") == "assistant")
    signed = {"type": "thinking", "thinking": "", "signature": "EqQBCkYIBxgCKkB" * 20}
    redacted = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va" * 20}
    patched = dict(
        reply,
        message={**reply["message"], "content": [signed, redacted, *reply["message"]["content"]]},
    )
    t = load_transcript(
        write_lines(tmp_path / "t.jsonl", [lines[0], lines[1], patched, *lines[3:]])
    )
    blocks = t.messages[1].thinking
    assert blocks[0] == ThinkingBlock("", signature=signed["signature"])
    assert blocks[1].redacted and blocks[1].data == redacted["data"]
    assert isinstance(t.messages[0].content[0], TextBlock)
    assert not any(isinstance(b, ToolResultBlock) for b in t.messages[1].content)


def test_thinking_left_out_of_a_transcript_still_counts_its_tokens() -> None:
    counter = get_counter("gpt-4o")  # exact o200k, no calibration factor
    signature = "EqQBCkYIBxgCKkB" * 40  # 600 base64 characters: about 450 bytes of thinking
    bare = Message("assistant", (TextBlock("done"),))
    signed = Message("assistant", (ThinkingBlock("", signature=signature), TextBlock("done")))
    assert counter.count_message(signed) - counter.count_message(bare) == 600 * 3 // 16


def test_a_claude_code_sub_agent_file_is_read_as_its_own_conversation(
    shared_data: Path, tmp_path: Path
) -> None:
    lines = claude_lines(shared_data)
    main = load_transcript(write_lines(tmp_path / "main.jsonl", lines))
    side = [dict(x, isSidechain=True) if "isSidechain" in x else x for x in lines]
    sub = load_transcript(write_lines(tmp_path / "agent-a1.jsonl", side))
    assert sub.messages == main.messages and "skipped" in sub.meta
    assert "sub-agent (sidechain) line" not in sub.meta["skipped"]
    # inside a main session the same lines are another conversation: left out
    mixed = load_transcript(write_lines(tmp_path / "mixed.jsonl", [*lines, *side[1:5]]))
    assert mixed.messages == main.messages
    assert mixed.meta["skipped"]["sub-agent (sidechain) line"] == 4


def test_transcript_system_is_the_leading_system_text(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(
        json.dumps(
            [
                {"role": "system", "content": "be brief"},
                {"role": "system", "content": "use tools"},
                {"role": "user", "content": "hi"},
            ]
        )
    )
    assert load_transcript(path).system == "be brief\n\nuse tools"
    path.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    assert load_transcript(path).system is None


def test_codex_custom_tool_calls_and_their_outputs_pair_up(tmp_path: Path) -> None:
    patch = "*** Begin Patch\n*** Update File: a.py\n@@\n-x = 1\n+x = 2\n*** End Patch"
    path = write_lines(
        tmp_path / "rollout-c.jsonl",
        [
            codex_line("session_meta", {"id": "s", "base_instructions": {"text": "SYS"}}),
            codex_line("turn_context", {"model": "gpt-5.4-codex"}),
            codex_message("user", "bump x"),
            codex_line(
                "response_item",
                {"type": "reasoning", "summary": [], "encrypted_content": "gAAAA-enc"},
            ),
            codex_line(
                "response_item",
                {
                    "type": "custom_tool_call",
                    "status": "completed",
                    "call_id": "call_p1",
                    "name": "apply_patch",
                    "input": patch,
                },
            ),
            codex_usage(900),
            codex_line(
                "response_item",
                {"type": "custom_tool_call_output", "call_id": "call_p1", "output": "Success."},
            ),
            codex_line("response_item", {"type": "ghost_snapshot", "ghost_commit": {}}),
            codex_message("assistant", "x is 2 now"),
            codex_usage(1000),
        ],
    )
    t = load_transcript(path)
    call = t.messages[2].tool_calls[0]
    assert (call.id, call.name, call.arguments) == ("call_p1", "apply_patch", patch)
    assert t.messages[2].thinking[0].signature == "gAAAA-enc"
    assert t.messages[3].tool_results[0].text == "Success."
    assert t.meta["skipped"]["item type 'ghost_snapshot'"] == 1
    assert [m.usage["input_tokens"] for m in t.messages if m.role == "assistant"] == [900, 1000]
    assert_valid(t)


def test_a_damaged_first_line_of_an_agent_log_is_skipped_too(
    shared_data: Path, tmp_path: Path
) -> None:
    path = shared_data / "claude-code" / "python-to-rust-port.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    damaged = tmp_path / "s.jsonl"
    damaged.write_text("\n".join(['{"type": "queue-operation", "oper', *lines[1:]]) + "\n")
    t = load_transcript(damaged)
    assert t.format == "claude-code" and t.warnings[0].startswith("line 1: not valid JSON")
    assert t.messages == load_transcript(path).messages


def test_openhands_observations_are_cut_as_openhands_sends_them(
    shared_data: Path, tmp_path: Path
) -> None:
    """The run's ``max_message_chars`` (30,000) cuts a 915,640-character output to its first and
    last 15,000 characters, as OpenHands sent it: the prompt the provider recorded for the next
    call grew by as much as the history read here (tool definitions aside, which the file does
    not count the same way), where the output whole would be 270k tokens."""
    path = shared_data / "openhands" / "fastjson2-2775.output.jsonl"
    run = json.loads(path.read_text("utf-8"))
    t = load_transcript(path)
    marker = "\n[... Observation truncated due to length ...]\n"
    cut = [b.content for m in t.messages for b in m.tool_results if marker in str(b.content)]
    assert len(cut) == t.meta["truncated"] == 2
    assert all(len(str(c)) == 30_000 + len(marker) for c in cut)
    longest = max((e.get("content", "") for e in run["history"] if "observation" in e), key=len)
    assert len(longest) == 915_640 and str(cut[0]) == (
        longest[:15_000] + marker + longest[-15_000:]
    )
    counter = get_counter("gpt-5")
    replies = [i for i, m in enumerate(t.messages) if m.role == "assistant"]
    before, after = replies[11], replies[12]  # calls 12 and 13: the output came between them
    recorded = [t.messages[i].usage["prompt_tokens"] for i in (before, after)]
    counted = [counter.count_messages(t.messages[:i]) for i in (before, after)]
    assert abs((recorded[1] - recorded[0]) - (counted[1] - counted[0])) < 200
    # a run that sets no limit sends it whole
    whole = {**run, "metadata": {**run["metadata"], "llm_config": {"max_message_chars": None}}}
    again = load_transcript(write_lines(tmp_path / "o.jsonl", [whole]))
    assert "truncated" not in again.meta
    assert any(len(str(b.content)) == 915_640 for m in again.messages for b in m.tool_results)


def test_pi_sends_the_users_shell_commands_and_branch_summaries(tmp_path: Path) -> None:
    # shapes after pi-mono's packages/coding-agent/src/core/messages.ts (BashExecutionMessage,
    # CustomMessage) and session-manager.ts (BranchSummaryEntry)
    def msg(message: dict[str, Any]) -> dict[str, Any]:
        return {"type": "message", "timestamp": "2025-12-09T00:40:04.042Z", "message": message}

    bash = {"role": "bashExecution", "command": "ls", "output": "README.md\n", "exitCode": 0}
    kept_out = {**bash, "command": "cat .env", "excludeFromContext": True}
    failed = {**bash, "command": "make", "output": "", "exitCode": 2}
    reply = {"role": "assistant", "content": [{"type": "text", "text": "Seen."}]}
    path = write_lines(
        tmp_path / "s.jsonl",
        [
            {"type": "session", "id": "s", "timestamp": "2025-12-09T00:40:00.000Z", "cwd": "/w"},
            msg(bash),
            msg(kept_out),
            msg(failed),
            {"type": "branch_summary", "fromId": "x", "summary": "Tried a rewrite; dropped."},
            msg({"role": "custom", "customType": "note", "content": "from an extension"}),
            msg({"role": "user", "content": "go on"}),
            msg(reply),
        ],
    )
    t = load_transcript(path)
    texts = [m.text for m in t.messages if m.role == "user"]
    assert texts[0] == "Ran `ls`\n```\nREADME.md\n\n```"
    assert texts[1] == "Ran `make`\n(no output)\n\nCommand exited with code 2"
    assert "Tried a rewrite; dropped.\n</summary>" in texts[2]
    assert texts[3:] == ["from an extension", "go on"]
    assert all("cat .env" not in x for x in texts)


def test_openhands_sdk_events_and_a_condensation(tmp_path: Path) -> None:
    # shapes after OpenHands/software-agent-sdk openhands/sdk/event (llm_convertible, condenser)
    def ev(i: int, kind: str, source: str, **more: Any) -> dict[str, Any]:
        return {
            "id": f"e{i}",
            "timestamp": f"2026-06-16T05:39:{i:02d}",
            "source": source,
            "kind": kind,
            **more,
        }

    def text(t: str) -> list[dict[str, Any]]:
        return [{"type": "text", "text": t}]

    def act(i: int, call: str, rid: str) -> dict[str, Any]:
        tool_call = {"id": call, "name": "terminal", "arguments": '{"command": "ls"}'}
        return ev(
            i,
            "ActionEvent",
            "agent",
            thought=text(f"step {i}"),
            tool_call=tool_call,
            tool_name="terminal",
            tool_call_id=call,
            llm_response_id=rid,
            action={"command": "ls", "kind": "TerminalAction"},
        )

    def obs(i: int, call: str) -> dict[str, Any]:
        observation = {
            "content": text(f"out {i}"),
            "is_error": False,
            "kind": "TerminalObservation",
        }
        return ev(
            i,
            "ObservationEvent",
            "environment",
            tool_name="terminal",
            tool_call_id=call,
            observation=observation,
        )

    user = {"role": "user", "content": text("fix the bug")}
    events = [
        ev(
            0,
            "SystemPromptEvent",
            "agent",
            system_prompt={"type": "text", "text": "You are OH"},
            tools=[{"name": "terminal"}],
        ),
        ev(1, "MessageEvent", "user", llm_message=user, extended_content=text("<skill/>")),
        act(2, "c1", "r1"),
        act(3, "c2", "r1"),  # two calls of one response
        obs(4, "c1"),
        obs(5, "c2"),
        act(6, "c3", "r2"),
        obs(7, "c3"),
        ev(
            8,
            "Condensation",
            "environment",
            forgotten_event_ids=["e2", "e3", "e4", "e5"],
            summary="Listed the files twice.",
            summary_offset=2,
            llm_response_id="r3",
        ),
        act(9, "c4", "r4"),
        ev(
            10,
            "AgentErrorEvent",
            "agent",
            tool_call_id="c4",
            tool_name="terminal",
            error="timed out",
        ),
        ev(
            11,
            "ConversationStateUpdateEvent",
            "environment",
            key="execution_status",
            value="finished",
        ),
    ]
    path = write_lines(tmp_path / "events.jsonl", events)
    t = load_transcript(path)
    assert t.format == "openhands" and t.tools == ({"name": "terminal"},)
    assert [m.role for m in t.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert t.messages[1].text == "fix the bug\n<skill/>"
    assert [c.id for c in t.messages[2].tool_calls] == ["c1", "c2"]
    assert t.messages[-1].tool_results[0].is_error
    (c,) = t.compactions  # from the call after it: head, summary, then what followed
    assert c.at == 5 and [m.text for m in c.replacement] == [
        "fix the bug\n<skill/>",
        "Listed the files twice.",
    ]
    assert_valid(t)
    assert load_transcripts(tmp_path / "events.jsonl")[0].messages == t.messages


def test_an_openhands_sdk_event_log_excerpt() -> None:
    path = DATA / "openhands-sdk" / "goal-events.jsonl"
    events = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    t = load_transcript(path)
    stats = [e for e in events if e.get("key") == "stats"]
    assert t.model == stats[-1]["value"]["usage_to_metrics"]["default"]["model_name"]
    actions = [e for e in events if e["kind"] == "ActionEvent"]
    assert [c.id for m in t.messages for c in m.tool_calls] == [
        a["tool_call"]["id"] for a in actions
    ]
    # the observation answering a call made before the excerpt is left out, counted
    assert t.meta["skipped"]["tool result answering no open call"] == 1
    assert [r.tool_call_id for m in t.messages for r in m.tool_results] == [
        a["tool_call"]["id"] for a in actions
    ]
    # it starts with the agent's reply: a placeholder prompt stands for what came before
    assert t.messages[0].role == "user" and t.messages[0].text == "(continued)"
    assert t.warnings == (
        "the conversation starts mid-way at its first event: a placeholder prompt "
        "'(continued)' stands for what came before",
    )
    report = replay(t.messages, model="gpt-4o", window=32_000, provider="openai")
    assert report.totals.calls == len(actions) and report.totals.invalid_requests == 0


def test_claude_code_reads_on_past_a_parent_it_never_wrote(tmp_path: Path) -> None:
    # As Claude Code 2.0.76-2.1.29 wrote them (real files of entireio/cli's checkpoints): a
    # progress line whose parent was never written, a compaction whose logical parent is
    # missing, and a reply right after a reply with only a stop-hook summary between.
    def line(kind: str, uuid: str, parent: str | None, **more: Any) -> dict[str, Any]:
        return {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s", **more}

    def said(role: str, uuid: str, parent: str | None, text: str, mid: str = "") -> dict[str, Any]:
        message: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": text}]}
        if role == "assistant":
            message |= {"id": mid or f"msg_{uuid}", "model": "claude-opus-4-5"}
        return line(role, uuid, parent, message=message)

    lines = [
        said("user", "u1", None, "first task"),
        said("assistant", "a1", "u1", "done one"),
        line("progress", "p1", "never-written", data={"type": "hook_progress"}),
        line("system", "s1", "p1", subtype="stop_hook_summary"),
        said("user", "u2", "s1", "second task"),
        said("assistant", "a2", "u2", "done two"),
        line("system", "s2", "a2", subtype="stop_hook_summary"),
        said("assistant", "a3", "s2", "and stopped"),
        line("system", "b1", None, subtype="compact_boundary", logicalParentUuid="gone"),
        said("user", "c1", "b1", "This session is being continued from a previous one."),
        said("user", "u3", "c1", "third task"),
        said("assistant", "a4", "u3", "done three"),
    ]
    t = load_transcript(write_lines(tmp_path / "s.jsonl", lines))
    assert [m.text for m in t.messages if m.role == "assistant"] == [
        "done one",
        "done two",
        "and stopped",
        "done three",
    ]
    assert t.warnings == (
        "line 3 (type progress): its parent 'never-written' is not in the file; read on from "
        "line 2",
        "line 9 (type system): its parent 'gone' is not in the file; read on from line 8",
    )
    (c,) = t.compactions
    assert c.replacement[0].text.startswith("This session is being continued")
    # the two replies in a row are one turn of the request, as the API joins them
    system, body = to_anthropic(t.messages)
    assert [m["role"] for m in body] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert_valid(t)


def test_pi_names_the_replies_left_on_other_branches(tmp_path: Path) -> None:
    def entry(id_: str, parent: str | None, role: str, text: str) -> dict[str, Any]:
        content = [{"type": "text", "text": text}]
        return {
            "type": "message",
            "id": id_,
            "parentId": parent,
            "message": {"role": role, "content": content},
        }

    lines = [entry("u1", None, "user", "task")]
    for i in range(1, 6):  # five replies on the first branch
        lines += [
            entry(f"a{i}", lines[-1]["id"], "assistant", f"step {i}"),
            entry(f"u{i + 1}", f"a{i}", "user", "go on"),
        ]
    # /tree back to the first prompt: a new branch with one reply
    lines += [entry("b1", "u1", "assistant", "another way")]
    t = load_transcript(write_lines(tmp_path / "s.jsonl", lines))
    assert [m.text for m in t.messages] == ["task", "another way"]
    assert t.warnings == (
        "6 replies in the file but the active branch holds 1: the rest are on other branches "
        "of the session tree (/tree, /fork)",
    )


def test_swe_agent_0x_model_from_its_run_folder(shared_data: Path, tmp_path: Path) -> None:
    folder = (
        tmp_path / "gpt4__swe-bench-dev-easy_first_only__default__t-0.00__p-0.95__c-3.00__install-1"
    )
    folder.mkdir()
    path = folder / "pydicom__pydicom-1458.traj"
    path.write_bytes((shared_data / "swe-agent" / "pydicom-1458.traj").read_bytes())
    assert load_transcript(path).model == "gpt4"
    assert load_transcript(shared_data / "swe-agent" / "pydicom-1458.traj").model is None


def test_an_openhands_sdk_conversation_folder(tmp_path: Path) -> None:
    # as the SDK persists one (openhands/sdk/conversation/persistence_const.py): base_state.json
    # and events/event-<index>-<event id>.json
    events = [
        json.loads(x)
        for x in (DATA / "openhands-sdk" / "goal-events.jsonl")
        .read_text(encoding="utf-8")
        .splitlines()
    ]
    folder = tmp_path / ".openhands" / "conversations" / "e18b827d3440425a"
    (folder / "events").mkdir(parents=True)
    for i, ev in enumerate(reversed(events)):  # written in any order: the index orders them
        index = len(events) - 1 - i
        (folder / "events" / f"event-{index:05d}-{ev['id']}.json").write_text(json.dumps(ev))
    state = {"id": "e18b827d", "agent": {"llm": {"model": "litellm_proxy/minimax-m2.7"}}}
    (folder / "base_state.json").write_text(json.dumps(state))
    t = load_transcript(folder)
    assert t.format == "openhands" and t.model == "litellm_proxy/minimax-m2.7"
    assert t.messages == load_transcript(DATA / "openhands-sdk" / "goal-events.jsonl").messages
    assert load_transcript(folder / "events").messages == t.messages
    # the sessions command finds it where OpenHands keeps it, as one session
    assert find_session_files(home=tmp_path) == [folder]
    assert find_session_files([tmp_path]) == [folder]


def test_claude_code_attachments_are_sent_as_claude_code_sends_them(tmp_path: Path) -> None:
    # attachment types and fields as Claude Code 2.1.1xx-2.1.2xx writes them (real files of
    # entireio/entire-graph's checkpoints; `rendered` as 2.1.270 records it)
    def attach(
        uuid: str, parent: str | None, attachment: dict[str, Any], **more: Any
    ) -> dict[str, Any]:
        return {
            "type": "attachment",
            "uuid": uuid,
            "parentUuid": parent,
            "sessionId": "s",
            "attachment": attachment,
            **more,
        }

    hook = {"type": "hook_success", "hookName": "SessionStart:startup", "hookEvent": "SessionStart"}
    lines = [
        attach("h1", None, {**hook, "content": "project rules"}),
        {
            "type": "user",
            "uuid": "u1",
            "parentUuid": "h1",
            "sessionId": "s",
            "message": {"role": "user", "content": "fix it"},
        },
        attach("h2", "u1", {**hook, "hookEvent": "PostToolUse", "content": "formatted"}),
        attach("h3", "h2", {"type": "command_permissions", "allowedTools": ["Bash"]}),
        attach("h4", "h3", {"type": "date_change", "newDate": "2026-05-02"}),
        attach("h5", "h4", {"type": "queued_command", "prompt": "and the docs"}),
        attach("h6", "h5", {"type": "some_new_kind", "text": "a new reminder"}),
        attach(
            "h7",
            "h6",
            {"type": "model", "text": "short"},
            rendered=[{"content": "<system-reminder>\nYou are model X.\n</system-reminder>"}],
        ),
        {
            "type": "assistant",
            "uuid": "a1",
            "parentUuid": "h7",
            "sessionId": "s",
            "message": {
                "role": "assistant",
                "id": "m1",
                "model": "claude-x",
                "content": [{"type": "text", "text": "done"}],
            },
        },
    ]
    t = load_transcript(write_lines(tmp_path / "s.jsonl", lines))
    sent = [m.text for m in t.messages if m.role == "user"]
    assert sent == [
        "<system-reminder>\nSessionStart:startup hook success: project rules\n</system-reminder>",
        "fix it",
        "<system-reminder>\nThe date has changed. Today's date is now 2026-05-02.\n"
        "</system-reminder>",
        "and the docs",
        "<system-reminder>\na new reminder\n</system-reminder>",
        "<system-reminder>\nYou are model X.\n</system-reminder>",
    ]
    assert t.meta["skipped"]["attachment sending nothing to the model"] == 2
    # one user turn in the request, the task being what the user typed
    system, body = to_anthropic(t.messages)
    assert [m["role"] for m in body] == ["user", "assistant"]
    assert_valid(t)


def gemini_checkpoint_history() -> list[dict[str, Any]]:
    call = {"name": "run_shell_command", "args": {"command": "pytest -q"}, "id": "c1"}
    output = {"output": "2 failed, 9 passed"}
    return [
        {"role": "user", "parts": [{"text": "Make the tests pass."}]},
        {"role": "model", "parts": [{"text": "Reading the failures.", "thought": True}]},
        {"role": "model", "parts": [{"functionCall": call}]},
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"id": "c1", "name": "run_shell_command", "response": output}}
            ],
        },
        {"role": "model", "parts": [{"text": "Two fail; fixing parse_date."}]},
    ]


@pytest.mark.parametrize("wrapped", [True, False], ids=["history", "bare-list"])
def test_gemini_cli_checkpoint_is_the_history_as_sent(tmp_path: Path, wrapped: bool) -> None:
    history = gemini_checkpoint_history()
    doc: Any = {"history": history, "authType": "oauth-personal"} if wrapped else history
    # where Gemini CLI saves it, so the sessions command finds it
    path = tmp_path / ".gemini" / "tmp" / "0f3a9c" / "checkpoint-fix-tests.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    assert find_session_files(home=tmp_path) == [path]
    t = load_transcript(path)
    assert t.format == "gemini-cli" and t.meta["container"] == "checkpoint"
    roles = [m.role for m in t.messages]
    assert roles == ["user", "assistant", "assistant", "tool", "assistant"]
    result = t.messages[3].tool_results[0]
    assert result.tool_call_id == t.messages[2].tool_calls[0].id
    assert "2 failed, 9 passed" in result.text
    assert t.messages[-1].text == "Two fail; fixing parse_date."
    assert_valid(t)


def test_an_openai_message_list_is_not_taken_for_a_gemini_checkpoint(tmp_path: Path) -> None:
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    path = write_lines(tmp_path / "chat.json", [chat])
    assert load_transcript(path).format == "openai"
