"""Session: originals kept in SQLite, triggers, confirmation, overflow recovery, recall."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextwarden import CompactionRefused, ContextOverflowError, Message, WardenConfig
from contextwarden._codec import message_to_dict
from contextwarden._messages import ToolCallBlock, assistant, tool_result, user
from contextwarden._session import Session, is_context_overflow
from contextwarden.formats import to_anthropic, to_openai, validate_anthropic, validate_openai
from contextwarden.testing import ConversationBuilder

TASK = "Fix the crash in parser.py when the input is empty"
PIN = "<Pin>never touch setup.cfg</Pin>"


def agent_history(steps: int = 40) -> list[Message]:
    b = ConversationBuilder().system("You are a coding agent.").user(TASK).user(PIN)
    for i in range(steps):
        lines = (
            f"line {j} of module {i}: " + " ".join(f"w{i}_{j}_{k}" for k in range(20))
            for j in range(60)
        )
        b.bash(f"grep -rn parse src/module_{i}.py", "\n".join(lines))
        if i % 7 == 3:
            b.edit(f"src/module_{i}.py", "old", "new")
    return b.build()


def new_session(tmp_path: Path, **kw: object) -> Session:
    return Session(model="gpt-4o", window=12_000, path=tmp_path / "s.sqlite3", **kw)  # type: ignore[arg-type]


def assert_valid(messages: tuple[Message, ...] | list[Message]) -> None:
    assert validate_openai(to_openai(list(messages))) == []
    assert validate_anthropic(*to_anthropic(list(messages))) == []


def test_originals_are_kept_append_only_and_survive_reopen(tmp_path: Path) -> None:
    history = agent_history()
    s = new_session(tmp_path, session_id="run-1")
    s.append(*history)
    result = s.context()
    assert result.compaction is not None  # even masked, 40 long outputs do not fit 12k
    assert s.messages == tuple(history)  # the lossy view never replaces the originals
    again = new_session(tmp_path, session_id="run-1")
    assert again.messages == tuple(history)


def test_compaction_keeps_task_and_pins_and_every_elided_piece_is_recallable(
    tmp_path: Path,
) -> None:
    history = agent_history()
    s = new_session(tmp_path)
    s.append(*history)
    result = s.context()
    assert_valid(result.messages)
    assert result.tokens_after <= result.budget.limit
    sent = "\n".join(m.text for m in result.messages)
    assert TASK in sent and "never touch setup.cfg" in sent
    refs = result.compaction.refs
    assert refs
    originals = {m.fingerprint: m for m in history}
    recovered = [m for ref in refs for m in s.recall(ref)]
    from_history = [m for m in recovered if m.fingerprint in originals]
    assert from_history, "the elided spans map back to the original messages"
    for m in from_history:  # byte for byte, not the masked copies the compactor saw
        assert message_to_dict(m) == message_to_dict(originals[m.fingerprint])
    assert any(len(m.tool_results[0].text) > 500 for m in from_history if m.tool_results)


def test_recall_tool_answers_with_the_originals(tmp_path: Path) -> None:
    s = new_session(tmp_path)
    s.append(*agent_history())
    ref = s.context().compaction.refs[0]
    assert s.recall_tool["function"]["name"] == "contextwarden_recall"
    answer = s.answer_recall(ToolCallBlock("r1", "contextwarden_recall", f'{{"ref": "{ref}"}}'))
    assert answer.role == "tool" and not answer.tool_results[0].is_error
    assert "line 59 of module" in answer.tool_results[0].text
    missing = s.answer_recall(ToolCallBlock("r2", "contextwarden_recall", '{"ref": "cw:nope"}'))
    assert missing.tool_results[0].is_error


def test_next_call_does_not_compact_again(tmp_path: Path) -> None:
    # a window with room under its hard limit for the summary and the newest output (~3.6k
    # tokens): at 12k the two already reach the trigger, and over the limit a compaction is due
    s = Session(model="gpt-4o", window=16_000, path=tmp_path / "s.sqlite3")
    s.append(*agent_history())
    first = s.context()
    assert first.compaction is not None
    s.append(assistant("", tool_calls=[ToolCallBlock("n1", "bash", '{"command": "ls"}')]))
    s.append(tool_result("n1", "a.py"))
    second = s.context()
    assert second.compaction is None
    assert len(s.compactions) == 1


def test_compact_command_forces_a_compaction_with_its_focus(tmp_path: Path) -> None:
    s = Session(model="gpt-4o", window=200_000, path=tmp_path / "s.sqlite3")
    s.append(*agent_history(steps=4))
    assert s.context().compaction is None  # small: nothing to do
    s.append(assistant("Done with step 4."), user("/compact the parser fix"))
    result = s.context()
    assert result.compaction is not None
    assert_valid(result.messages)


def test_summary_marker_triggers_compaction(tmp_path: Path) -> None:
    s = new_session(tmp_path)
    s.append(*agent_history(steps=6), assistant("Context is getting long. !!!SUMMARY!!!"))
    assert s.context().compaction is not None


def test_turn_threshold_triggers_and_resets_the_counter(tmp_path: Path) -> None:
    cfg = WardenConfig.model_validate({"compaction": {"turn_threshold": 5}})
    s = Session(model="gpt-4o", window=200_000, config=cfg, path=tmp_path / "s.sqlite3")
    s.append(*agent_history(steps=6))
    assert s.turns >= 5
    assert s.context().compaction is not None
    assert s.turns == 0


def test_confirmation_refused_drops_oldest_instead(tmp_path: Path) -> None:
    asked = []
    s = new_session(tmp_path, confirm=lambda req: asked.append(req) or False)
    s.append(*agent_history())
    result = s.context()
    assert len(asked) == 1 and asked[0].tokens > asked[0].trigger
    assert result.compaction is None  # no summary: the window dropped whole units
    assert any(e.kind == "dropped" for e in result.events)
    assert any(e.kind == "compaction_refused" for e in s.events)
    assert_valid(result.messages)
    assert TASK in "\n".join(m.text for m in result.messages)


def test_confirmation_refused_can_raise(tmp_path: Path) -> None:
    cfg = WardenConfig.model_validate({"compaction": {"on_refusal": "raise"}})
    s = Session(
        model="gpt-4o",
        window=12_000,
        config=cfg,
        path=tmp_path / "s.sqlite3",
        confirm=lambda req: False,
    )
    s.append(*agent_history())
    with pytest.raises(CompactionRefused):
        s.context()


def test_confirmation_refused_can_start_fresh(tmp_path: Path) -> None:
    cfg = WardenConfig.model_validate({"compaction": {"on_refusal": "new_session"}})
    s = Session(
        model="gpt-4o",
        window=12_000,
        config=cfg,
        path=tmp_path / "s.sqlite3",
        confirm=lambda req: False,
    )
    s.append(*agent_history())
    old_id = s.id
    result = s.context()
    assert s.id != old_id
    assert [m.role for m in s.messages] == ["system", "user"]
    assert s.store.count(old_id) == len(agent_history())  # the old originals stay
    assert TASK in "\n".join(m.text for m in result.messages)


def test_confirmation_accepted_compacts(tmp_path: Path) -> None:
    s = new_session(tmp_path, confirm=lambda req: True)
    s.append(*agent_history())
    assert s.context().compaction is not None


class FakeBadRequest(Exception):
    """Shaped like the OpenAI SDK's BadRequestError for an over-long prompt."""

    code = "context_length_exceeded"


def test_overflow_rebuilds_as_system_summary_and_question_then_retries_once(tmp_path: Path) -> None:
    s = Session(model="gpt-4o", window=200_000, path=tmp_path / "s.sqlite3")
    s.append(*agent_history(steps=10))
    seen: list[list[Message]] = []

    def provider(messages: list[Message]) -> str:
        seen.append(messages)
        if len(seen) == 1:
            raise FakeBadRequest("This model's maximum context length is 128000 tokens")
        return "ok"

    assert s.call(provider) == "ok"
    assert len(seen) == 2
    rebuilt = seen[1]
    assert rebuilt[0].role == "system"
    assert TASK in "\n".join(m.text for m in rebuilt)
    # seed 002: [system + summary hint] + [original question]; pins and the newest unit stay
    assert "[contextwarden:" in rebuilt[0].text
    assert rebuilt[1].role == "user" and rebuilt[1].text == TASK
    assert len(rebuilt) <= 6 < len(seen[0])
    assert_valid(rebuilt)


def test_overflow_twice_is_raised(tmp_path: Path) -> None:
    s = Session(model="gpt-4o", window=200_000, path=tmp_path / "s.sqlite3")
    s.append(*agent_history(steps=3))

    def provider(messages: list[Message]) -> str:
        raise ContextOverflowError("too long")

    with pytest.raises(ContextOverflowError):
        s.call(provider)


def test_other_errors_are_not_swallowed(tmp_path: Path) -> None:
    s = new_session(tmp_path)
    s.append(user(TASK))
    with pytest.raises(RuntimeError, match="boom"):
        s.call(lambda messages: (_ for _ in ()).throw(RuntimeError("boom")))


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (ContextOverflowError("x"), True),
        (FakeBadRequest("anything"), True),
        (ValueError("prompt is too long: 210000 tokens > 200000 maximum"), True),
        (ValueError("rate limited"), False),
    ],
)
def test_is_context_overflow(exc: Exception, expected: bool) -> None:
    assert is_context_overflow(exc) is expected


def test_append_rejects_provider_dicts_with_a_clear_error(tmp_path: Path) -> None:
    s = new_session(tmp_path)
    with pytest.raises(TypeError, match=r"argument 0: expected a Message.*extend_openai"):
        s.append({"role": "user", "content": "hi"})  # type: ignore[arg-type]
    s.extend_openai([{"role": "user", "content": "hi"}])
    assert s.messages[-1].text == "hi"


def test_recall_returns_the_originals_byte_for_byte_even_when_only_reasoning_differs(
    tmp_path: Path,
) -> None:
    """The edit log knows which history messages an edit hid: messages equal but for their
    reasoning come back each as it was (nothing is matched by content)."""
    session = Session(model="gpt-4o", window=6_000, path=tmp_path / "s.db", system="sys")
    session.append(user("Fix the parser"))
    for i in range(40):
        call = ToolCallBlock(f"c{i}", "bash", '{"cmd": "cat parser.py"}')
        # the same visible turn every time; only the reasoning differs (outputs too short to
        # mask: what hides them is stripping the thinking and compacting)
        session.append(assistant("Reading it again.", tool_calls=[call], thinking=f"reason {i}"))
        session.append(tool_result(f"c{i}", "\n".join(f"row {j}" for j in range(60))))
        session.context()
    refs = [ref for e in session.events for ref in (e.data or {}).get("refs", ())]
    refs += [ref for c in session.compactions for ref in c.refs]
    assert refs
    recalled = [m for ref in dict.fromkeys(refs) for m in session.recall(ref)]
    assert recalled
    for m in recalled:
        assert any(m is o or m == o for o in session.messages)
        assert message_to_dict(m) == message_to_dict(next(o for o in session.messages if o == m))
    # a message two references cover (stripped, then summarised) comes back under each
    distinct = {json.dumps(message_to_dict(m), sort_keys=True): m for m in recalled}.values()
    thinking = [b.thinking for m in distinct for b in m.thinking]
    assert len(thinking) == len(set(thinking)) > 1  # each its own reasoning, none swapped


def test_a_masked_tool_result_names_the_reference_that_recalls_it(tmp_path: Path) -> None:
    """Masking hides most of an old tool output; its marker names a cw: reference, and the
    session's recall (and the recall tool) gives the whole original back."""
    import re

    history = agent_history(12)
    s = Session(model="gpt-4o", window=200_000, path=tmp_path / "s.sqlite3")
    s.append(*history)
    result = s.context()
    assert result.compaction is None  # far under the window: only masking ran
    markers = [
        (
            m,
            re.search(
                r"characters omitted; recall (cw:[0-9a-f]+) \.\.\.\]", m.tool_results[0].text
            ),
        )
        for m in result.messages
        if m.tool_results
    ]
    named = [(m, found.group(1)) for m, found in markers if found]
    assert named, "no masked tool result names its reference"
    by_fingerprint = {m.fingerprint: m for m in history}
    for masked, ref in named:
        (original,) = s.recall(ref)
        assert original.fingerprint in by_fingerprint
        assert original.tool_results[0].tool_call_id == masked.tool_results[0].tool_call_id
        assert len(original.tool_results[0].text) > len(masked.tool_results[0].text)
        assert "line 59 of module" in original.tool_results[0].text
    call = ToolCallBlock("r9", "contextwarden_recall", f'{{"ref": "{named[0][1]}"}}')
    assert "line 30 of module" in s.answer_recall(call).tool_results[0].text


def _twin(store_path: Path, sid: str, secret: str) -> Session:
    """A session whose history is the same as its twin's but for each turn's reasoning."""
    s = Session(model="gpt-4o", window=6_000, path=store_path, session_id=sid, system="sys")
    s.append(user("Fix the parser"))
    for i in range(30):
        call = ToolCallBlock(f"c{i}", "bash", '{"cmd": "cat parser.py"}')
        s.append(assistant("Reading it.", tool_calls=[call], thinking=f"{secret} {i}"))
        s.append(tool_result(f"c{i}", "\n".join(f"row {j}" for j in range(120))))
        s.context()
    return s


def _refs(s: Session) -> list[str]:
    refs = [ref for e in s.events for ref in (e.data or {}).get("refs", ())]
    return list(dict.fromkeys(refs + [ref for c in s.compactions for ref in c.refs]))


def test_recall_never_returns_another_sessions_originals(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    a = _twin(path, "tenant-a", "A-secret")
    b = _twin(path, "tenant-b", "B-secret")
    shared = set(_refs(a)) & set(_refs(b))
    assert shared  # equal content: the same references in both sessions
    own = [message_to_dict(m) for m in b.messages]
    for ref in shared:
        for m in b.recall(ref):  # B's own originals, byte for byte
            assert "A-secret" not in str(message_to_dict(m))
            assert message_to_dict(m) in own
    only_a = Session(model="gpt-4o", window=6_000, path=path, session_id="tenant-c")
    for ref in shared:  # a session that stored nothing recalls nothing
        with pytest.raises(KeyError):
            only_a.recall(ref)


def test_no_view_is_given_out_before_its_originals_are_stored(tmp_path: Path) -> None:
    """A full disk while the originals are written: context() fails (nothing to send that names
    them); once there is room again, every reference in the view is recallable."""
    import sqlite3

    path = tmp_path / "full.sqlite3"
    s = Session(model="gpt-4o", window=12_000, path=path)
    s.append(*agent_history())
    db = sqlite3.connect(path)
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    s.store._db.execute(f"PRAGMA max_page_count={pages}")  # the disk is full
    with pytest.raises(Exception, match="full"):
        s.context()
    s.store._db.execute("PRAGMA max_page_count=1073741823")
    result = s.context()
    sent = "\n".join(m.text for m in result.messages)
    import re

    named = set(re.findall(r"cw:[0-9a-f]+", sent))
    assert named
    for ref in named:
        assert s.recall(ref)
    reopened = Session(model="gpt-4o", window=12_000, path=path, session_id=s.id)
    for ref in named:  # stored, not only held in memory
        assert reopened.recall(ref)
