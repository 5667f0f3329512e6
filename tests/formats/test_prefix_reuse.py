"""Prefix reuse (``contextwarden.formats._prefix``): reading the successive requests of a
conversation reuses the Message objects of the prefix it shares with the last request, and gives
exactly what ``from_openai`` / ``from_anthropic`` give for the same input; writing reuses what a
Message object was written as, and gives exactly what ``to_openai`` / ``to_anthropic`` give, in
new dicts on every call. "Exactly": same types (``1``, ``1.0`` and ``true`` differ, so do ``0.0``
and ``-0.0``) and same key order at every level, which ``==`` does not check.
"""

from __future__ import annotations

import copy
import json
import marshal
from collections.abc import Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextwarden import FormatError, Message, ToolCallBlock, assistant, tool_result, user
from contextwarden.formats import (
    add_cache_breakpoints,
    count_cache_breakpoints,
    from_anthropic,
    from_openai,
    to_anthropic,
    to_openai,
)
from contextwarden.formats._prefix import PrefixCodec
from contextwarden.formats._prefix import _Written as Written

from .providers import anthropic_requests, mutate_everything, openai_conversations


def _image(value: Any) -> bytes:
    """An exact image of a JSON-shaped value: types and key order included."""
    return marshal.dumps(value, 2)


def _same(got: Sequence[Message], want: Sequence[Message]) -> None:
    """Same messages with the same types and key orders everywhere, and the same hints (which
    ``Message.__eq__`` leaves out)."""
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert repr(a) == repr(b)
        assert dict(a.hints) == dict(b.hints)


def _parsed(messages: Any) -> Any:
    """What a server reads from the wire: new dicts, nothing shared with ``messages``."""
    return json.loads(json.dumps(messages))


# Values a client may send that ``==`` confuses: the reader must not reuse across them.
_TWINS: list[tuple[str, Any] | None] = [
    None,
    ("end", 1),
    ("end", True),
    ("end", 1.0),
    ("start", 1),
    ("end", 0.0),
    ("end", -0.0),
    ("end", {"a": 1, "b": 2}),
    ("end", {"b": 2, "a": 1}),
    ("end", [1, {"x": False}]),
    ("end", [1, {"x": 0}]),
]


def _variant(m: dict[str, Any], twin: tuple[str, Any] | None) -> dict[str, Any]:
    """``m`` with a recorder key ``zz`` (kept in ``extra``) at its start or end."""
    if twin is None:
        return m
    where, value = twin
    return {"zz": value, **m} if where == "start" else {**m, "zz": copy.deepcopy(value)}


@st.composite
def _requests(draw: Any, base: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Successive requests on ``base``: prefixes of any length, in any order (an agent growing
    its history, one that went back or branched), with some messages edited in the middle."""
    out = []
    for _ in range(draw(st.integers(1, 7))):
        k = draw(st.integers(0, len(base)))
        request = _parsed(base[:k])
        for _ in range(draw(st.integers(0, 2))):
            if k:
                j = draw(st.integers(0, k - 1))
                request[j] = _variant(request[j], draw(st.sampled_from(_TWINS)))
        out.append(request)
    return out


# -- reading: OpenAI -------------------------------------------------------------------------------
@given(st.data(), openai_conversations(exotic=True, lenient=True))
def test_openai_reads_exactly_what_from_openai_reads(
    data: st.DataObject, base: list[dict[str, Any]]
) -> None:
    codec = PrefixCodec()
    for request in data.draw(_requests(base)):
        _same(codec.from_openai(request), from_openai(request))


def test_growing_history_reuses_the_previous_objects() -> None:
    history = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "fix it"}]
    for k in range(6):
        call = {"id": f"c{k}", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
        history.append({"role": "assistant", "content": None, "tool_calls": [call]})
        history.append({"role": "tool", "tool_call_id": f"c{k}", "content": f"out {k}"})
    codec = PrefixCodec()
    previous: list[Message] = []
    for end in range(2, len(history) + 1):
        got = codec.from_openai(_parsed(history[:end]))
        assert all(a is b for a, b in zip(got, previous, strict=False))
        assert len(got) == end
        _same(got, from_openai(history[:end]))
        previous = got
    assert codec.read == len(history)  # each message read once
    assert codec.reused == sum(range(2, len(history)))


def test_an_edit_is_read_again_and_what_follows_too() -> None:
    history = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "a", "meta": {"n": 1}},
        {"role": "user", "content": "b"},
        {"role": "assistant", "content": "c"},
    ]
    codec = PrefixCodec()
    first = codec.from_openai(_parsed(history))
    for twin in ({"n": True}, {"n": 1.0}, {"m": 2, "n": 1}, {"n": 1, "m": 2}):
        edited = _parsed(history)
        edited[1]["meta"] = twin
        got = codec.from_openai(edited)
        assert got[0] is first[0]
        assert got[1] is not first[1] and got[1].extra["meta"] == twin
        assert repr(got[1].extra["meta"]) == repr(twin)
        _same(got, from_openai(edited))


def test_legacy_function_call_state_resumes_after_the_prefix() -> None:
    # The call's id comes from its position; its answer, read in a later request, must name it.
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "function_call": {"name": "w", "arguments": "{}"}},
    ]
    codec = PrefixCodec()
    codec.from_openai(_parsed(history))
    history.append({"role": "function", "name": "w", "content": "sunny"})
    got = codec.from_openai(_parsed(history))
    assert codec.reused == 2
    assert got[2].content[0].tool_call_id == "function_call_1"  # type: ignore[union-attr]
    _same(got, from_openai(history))
    assert to_openai(got) == history


def test_branches_sharing_a_task_each_keep_their_prefix() -> None:
    task = [{"role": "system", "content": "s"}, {"role": "user", "content": "same task"}]
    a = [*task, *({"role": "assistant", "content": f"a{k}"} for k in range(5))]
    b = [*task, *({"role": "assistant", "content": f"b{k}"} for k in range(5))]
    codec = PrefixCodec()
    last: dict[str, list[Message]] = {}
    for end in range(3, 8):
        for name, branch in (("a", a), ("b", b)):
            got = codec.from_openai(_parsed(branch[:end]))
            _same(got, from_openai(branch[:end]))
            if name in last:  # its own previous objects, not the other branch's
                assert all(x is y for x, y in zip(got, last[name], strict=False))
            last[name] = got
    assert last["a"][0] is last["b"][0]  # the shared system prompt: one object


def test_a_bad_message_raises_as_from_openai_and_reading_goes_on() -> None:
    good = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
    codec = PrefixCodec()
    first = codec.from_openai(_parsed(good))
    bad = [*_parsed(good), {"role": "tool", "content": "no id"}]
    with pytest.raises(FormatError) as got:
        codec.from_openai(bad)
    with pytest.raises(FormatError) as want:
        from_openai(bad)
    assert str(got.value) == str(want.value)
    assert codec.from_openai(_parsed(good))[1] is first[1]
    with pytest.raises(FormatError):
        codec.from_openai("not a list")  # type: ignore[arg-type]


def test_what_marshal_cannot_image_is_read_and_not_reused() -> None:
    class Tag:
        def __deepcopy__(self, memo: Any) -> Tag:
            return self

    tag = Tag()
    history = [
        {"role": "user", "content": "x"},
        MappingProxyType({"role": "assistant", "content": "y"}),
        {"role": "user", "content": "z", "tag": tag},
    ]
    codec = PrefixCodec()
    for _ in range(2):
        got = codec.from_openai(history)  # type: ignore[arg-type]
        _same(got, from_openai(history))  # type: ignore[arg-type]
    assert codec.reused == 1  # the first message only: the prefix ends at the mapping proxy


def test_the_least_recently_used_conversation_is_forgotten_first() -> None:
    codec = PrefixCodec(max_conversations=2)

    def read(name: str, n: int = 2) -> list[Message]:
        return codec.from_openai([{"role": "user", "content": name}] * n)

    read("a")
    read("b")
    read("a")  # a is the most recent now
    read("c")  # b goes
    before = codec.reused
    read("a", 3)
    assert codec.reused == before + 2
    read("b", 3)
    assert codec.reused == before + 2  # forgotten: read again, none reused


def test_images_are_bounded_in_bytes() -> None:
    codec = PrefixCodec(max_bytes=3000)
    big = [{"role": "user", "content": "x" * 5000}]
    codec.from_openai(big)
    codec.from_openai(big)
    assert codec.reused == 0  # larger than the bound: never kept
    for k in range(10):
        codec.from_openai([{"role": "user", "content": f"{k}" + "y" * 500}] * 2)
    assert codec._bytes <= 3000


# -- reading: Anthropic ----------------------------------------------------------------------------
@given(st.data(), anthropic_requests(exotic=True))
def test_anthropic_reads_exactly_what_from_anthropic_reads(
    data: st.DataObject, request: tuple[Any, list[dict[str, Any]]]
) -> None:
    system, base = request
    codec = PrefixCodec()
    systems = [system, "another prompt", None, [{"type": "text", "text": "blocks"}]]
    for messages in data.draw(_requests(base)):
        s = _parsed(data.draw(st.sampled_from(systems)))
        _same(codec.from_anthropic(messages, system=s), from_anthropic(messages, system=s))


def test_anthropic_system_prompt_is_reused_and_a_new_one_is_read() -> None:
    messages = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "ok"}]
    codec = PrefixCodec()
    first = codec.from_anthropic(_parsed(messages), system="be brief")
    again = codec.from_anthropic(_parsed(messages), system="be brief")
    assert [a is b for a, b in zip(first, again, strict=True)] == [True, True, True]
    other = codec.from_anthropic(_parsed(messages), system="be verbose")
    assert other[0].text == "be verbose"
    _same(other, from_anthropic(messages, system="be verbose"))
    bare = codec.from_anthropic(_parsed(messages))
    _same(bare, from_anthropic(messages))
    with pytest.raises(FormatError):
        codec.from_anthropic(messages, system=5)


# -- writing ---------------------------------------------------------------------------------------
@given(openai_conversations(exotic=True, lenient=True))
def test_openai_writes_exactly_what_to_openai_writes(d: list[dict[str, Any]]) -> None:
    codec = PrefixCodec()
    messages = from_openai(d)
    for _ in range(3):
        out = codec.to_openai(messages)
        assert _image(out) == _image(to_openai(messages))
        assert out == d
        mutate_everything(out)  # a caller may change what it was given: later calls unaffected
    assert codec.rewritten >= 2 * len(messages)


@given(anthropic_requests(exotic=True))
def test_anthropic_writes_exactly_what_to_anthropic_writes(
    request: tuple[Any, list[dict[str, Any]]],
) -> None:
    codec = PrefixCodec()
    messages = from_anthropic(*reversed(request))
    for _ in range(3):
        out = codec.to_anthropic(messages)
        assert _image(out) == _image(to_anthropic(messages))
        assert out == request
        mutate_everything(out[1])


@given(anthropic_requests(exotic=True), openai_conversations(exotic=True))
def test_converted_and_built_messages_merge_as_the_plain_writers_merge(
    a: tuple[Any, list[dict[str, Any]]], o: list[dict[str, Any]]
) -> None:
    # Across formats and with messages built in code the writers merge and drop messages:
    # what each message is written as alone is reused, the merging is done again every call.
    built = [
        user("q"),
        assistant("calling", tool_calls=[ToolCallBlock("c1", "sh", '{"cmd": "ls"}')]),
        assistant("and more"),  # merged into the one before (its calls' results follow both)
        tool_result("c1", "files"),
        assistant(""),
    ]
    codec = PrefixCodec()
    for messages in (from_anthropic(*reversed(a)), from_openai(o), built):
        mixed = [*messages, *built]
        for _ in range(2):
            assert _written(codec.to_openai, mixed) == _written(to_openai, mixed)
            assert _written(codec.to_anthropic, mixed) == _written(to_anthropic, mixed)
            # shared dicts (a caller that only reads): merging never changes them
            shared_openai = _written(lambda m: codec.to_openai(m, shared=True), mixed)
            assert shared_openai == _written(to_openai, mixed)
            shared_anthropic = _written(
                lambda m: _listed(codec.to_anthropic(m, shared=True)), mixed
            )
            assert shared_anthropic == _written(to_anthropic, mixed)


@given(st.data(), anthropic_requests(exotic=True), openai_conversations(exotic=True))
def test_shared_writes_of_successive_views_go_on_from_the_last_and_write_the_same(
    data: st.DataObject, a: tuple[Any, list[dict[str, Any]]], o: list[dict[str, Any]]
) -> None:
    # A warden's successive views of one conversation: the same Message objects up to some
    # point, then others (an edit, a message dropped or added, a branch). Each shared write
    # goes on from the write that shares the longest prefix, and must still be exactly what
    # the plain writer writes, breakpoints (the client's own, in the messages taken) included.
    pool = [*from_anthropic(*reversed(a)), *from_openai(o), user("q"), assistant("more")]
    codec = PrefixCodec()
    view: list[Message] = []
    given_out: list[tuple[Any, bytes]] = []
    for _ in range(data.draw(st.integers(1, 6))):
        keep = data.draw(st.integers(0, len(view)))
        add = data.draw(st.lists(st.sampled_from(pool), max_size=6))
        view = [*view[:keep], *add]
        want = _written(to_anthropic, view)
        try:
            system, out = codec.to_anthropic(view, shared=True)
        except FormatError as exc:
            assert str(exc) == want
            continue
        assert _image((system, list(out))) == want
        # the scan for breakpoints reads only the dicts not taken from the last write, and
        # finds what a scan of all of them finds
        want_system, want_out = to_anthropic(view)
        got_system, got_out, _ = add_cache_breakpoints(system, out, stable_end=len(out) // 2)
        assert _image((got_system, list(got_out))) == _image(
            add_cache_breakpoints(want_system, want_out, stable_end=len(want_out) // 2)[:2]
        )
        assert count_cache_breakpoints(system, out) == count_cache_breakpoints(
            want_system, want_out
        )
        given_out.append((out, _image(list(out))))
    for out, image in given_out:  # what a shared caller was given is never changed after
        assert _image(list(out)) == image


def test_a_shared_write_takes_the_dicts_of_the_unchanged_prefix() -> None:
    calls = [ToolCallBlock(f"c{i}", "sh", "{}") for i in range(3)]
    turns = [
        m
        for i, c in enumerate(calls)
        for m in (assistant(f"{i}", tool_calls=[c]), tool_result(c.id, "x" * 50))
    ]
    codec = PrefixCodec()
    task = user("q")
    _, first = codec.to_anthropic([task, *turns], shared=True)
    edited = tool_result("c1", "masked")
    _, second = codec.to_anthropic([task, *turns[:3], edited, *turns[4:]], shared=True)
    assert all(x is y for x, y in zip(first[:4], second[:4], strict=True))  # taken, not written
    assert second[4]["content"][0]["content"] == "masked"
    assert codec.rewritten == 2  # the two after it, looked up; those before it not even that


def _listed(written: tuple[Any, list[dict[str, Any]]]) -> tuple[Any, list[dict[str, Any]]]:
    """``(system, messages)`` with the messages a plain list (marshal images no subclass)."""
    return written[0], list(written[1])


def _written(write: Any, messages: list[Message]) -> bytes | str:
    """The image of what ``write`` writes, or the error it raises (the same for both)."""
    try:
        return _image(write(messages))
    except FormatError as exc:
        return str(exc)


def test_shared_writing_gives_the_same_dicts_and_never_changes_them() -> None:
    messages = [
        user("q"),
        assistant("calling", tool_calls=[ToolCallBlock("c1", "sh", "{}")]),
        assistant(
            "more", tool_calls=[ToolCallBlock("c2", "sh", "{}")]
        ),  # merged into the one before
        tool_result("c1", "a"),
        tool_result("c2", "b"),
    ]
    codec = PrefixCodec()
    want = _image(to_openai(messages))
    first = codec.to_openai(messages, shared=True)
    second = codec.to_openai(messages, shared=True)
    assert _image(first) == _image(second) == want
    assert first[0] is second[0] and first[2] is second[2]  # the same dicts, not copies
    assert first[1] is not second[1]  # the merged one is new each time
    assert _image(codec.to_openai(messages)) == want
    copy_ = codec.to_openai(messages)
    assert copy_[0] is not first[0]  # a caller that may change them gets its own


def test_what_marshal_cannot_image_is_written_every_time() -> None:
    class Tag:
        def __deepcopy__(self, memo: Any) -> Tag:
            return self

    msg = Message("user", user("x").content, extra=MappingProxyType({"tag": Tag()}))
    codec = PrefixCodec()
    assert codec.to_openai([msg]) == to_openai([msg])
    assert codec.to_openai([msg]) == to_openai([msg])
    assert codec.rewritten == 0


def test_written_images_are_bounded_and_the_used_ones_stay() -> None:
    written = Written(limit=2000)
    hot = user("hot " * 50)
    produce = written.producer(lambda i, m: to_openai([m]))
    produce(0, hot)
    for k in range(200):
        produce(0, user(f"cold {k} " * 20))
        produce(0, hot)  # used on every round: moved back each time its generation ages
    hits = written.hits
    produce(0, hot)
    assert written.hits == hits + 1
    assert written._current.bytes <= 2000
    assert len(written._current.messages) + len(written._previous.messages) < 200


# -- the warden, on real recordings ----------------------------------------------------------------
def _reference_openai(warden: Any, messages: Any, **kw: Any) -> tuple[Any, Any]:
    result = warden.transform(from_openai(messages), **kw)
    return to_openai(list(result.messages)), result


def _same_run(a: Any, b: Any) -> None:
    assert a.tokens_before == b.tokens_before and a.tokens_after == b.tokens_after
    assert a.stable_prefix == b.stable_prefix
    assert [e.kind for e in a.edits] == [e.kind for e in b.edits]
    _same(a.messages, b.messages)


def test_warden_on_real_agents_gives_what_it_gave_without_reuse(shared_data: Path) -> None:
    """Every call of a real mini-swe-agent run (300 messages, a 32k window: masks,
    compactions and cuts happen): the warden reading with reuse sends exactly what a warden
    reading every request afresh sends."""
    from contextwarden import Warden
    from contextwarden._transcripts import load_transcript

    files = sorted((shared_data / "mini-swe-agent").glob("*.traj.json"))[:1]
    if not files:
        pytest.skip("no mini-swe-agent recordings")
    for path in files:
        history = _parsed(to_openai(list(load_transcript(path).messages)))[:300]
        fast, plain = Warden(), Warden()
        ends = [i + 1 for i, m in enumerate(history) if m["role"] == "tool"]
        for end in ends:
            kw = {"model": "gpt-4o", "window": 32_000}
            out, result = fast.transform_openai(_parsed(history[:end]), **kw)
            want, reference = _reference_openai(plain, _parsed(history[:end]), **kw)
            assert _image(out) == _image(want)
            _same_run(result, reference)
        codec = fast._codec
        assert codec.reused > codec.read * 20  # each message read once, reused on later calls


def test_warden_on_the_real_claude_code_session_gives_what_it_gave_without_reuse(
    shared_data: Path,
) -> None:
    from contextwarden import Warden
    from contextwarden._transcripts import load_transcript

    path = shared_data / "claude-code" / "python-to-rust-port.jsonl"
    if not path.is_file():
        pytest.skip("no claude-code recording")
    system, history = _parsed(to_anthropic(list(load_transcript(path).messages)))
    fast, plain = Warden(), Warden()
    ends = [i + 1 for i, m in enumerate(history) if m["role"] == "user"]
    for end in ends:
        kw = {"model": "claude-sonnet-4-5", "window": 12_000}
        s, out, result = fast.transform_anthropic(
            _parsed(history[:end]), system=_parsed(system), cache_breakpoints=True, **kw
        )
        reference = plain.transform(from_anthropic(_parsed(history[:end]), system=system), **kw)
        from contextwarden.formats import add_cache_breakpoints

        want_system, want = to_anthropic(list(reference.messages))
        leading = sum(1 for m in reference.messages if m.role == "system")
        stable = reference.stable_prefix - leading
        want_system, want, _ = add_cache_breakpoints(
            want_system,
            want,
            tools=None,
            stable_end=(max(stable, 0) or None) if stable < len(want) else None,
        )
        assert _image((s, out)) == _image((want_system, want))
        _same_run(result, reference)
