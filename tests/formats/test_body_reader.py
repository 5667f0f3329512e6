"""The body reader (``contextwarden.formats._body``): a chat request body is read exactly as
``json.loads`` reads it (types and key order included) or not at all, and the messages the
previous body of the conversation had, byte for byte, are not parsed again: the same dicts come
back, with the digests of their images."""

from __future__ import annotations

import copy
import json
import marshal
import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from contextwarden.formats._body import BodyReader
from contextwarden.formats._prefix import image_digest

from .providers import json_values, openai_conversations

_KEYS = st.sampled_from(["model", "stream", "tools", "system", "temperature", "x", "é"])


def _image(value: Any) -> bytes:
    return marshal.dumps(value, 2)


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


def _check(reader: BodyReader, raw: bytes) -> Any:
    """Read ``raw``; when read, it is exactly what json.loads reads, images and finiteness
    included. Returns the read (or None)."""
    read = reader.read(raw)
    try:
        want = json.loads(raw)
    except (ValueError, RecursionError):
        assert read is None
        return None
    if read is None:
        assert not _followed(raw, want), raw
        return None
    messages = read.body["messages"]
    # the messages come as a list that also carries the digests of their images
    assert _image({**read.body, "messages": list(messages)}) == _image(want)
    assert list(read.body) == list(want)  # key order
    assert messages.images == [image_digest(m) for m in messages]
    assert read.finite == _finite(want)
    return read


def _followed(raw: bytes, want: Any) -> bool:
    """Whether the reader must read ``raw`` (see the module docstring of ``_body``): an object
    from the first byte, no top-level key twice, ``messages`` a list."""
    if raw[:1] != b"{" or not isinstance(want, dict) or type(want.get("messages")) is not list:
        return False
    pairs = json.JSONDecoder(object_pairs_hook=lambda p: p).decode(raw.decode())
    return len({k for k, _ in pairs}) == len(pairs)


_STYLES = [
    {},
    {"separators": (",", ":")},
    {"indent": 2},
    {"ensure_ascii": False},
    {"indent": 1, "ensure_ascii": False},
]


@st.composite
def _bodies(draw: Any) -> list[bytes]:
    """Successive bodies of one or two conversations: growing, shrinking, edited, re-spelled
    (whitespace, escapes), other members before and after the messages, and some broken."""
    conversation = draw(openai_conversations(exotic=True))
    other = draw(openai_conversations())
    before = draw(st.dictionaries(_KEYS, json_values, max_size=2))
    after = draw(st.dictionaries(_KEYS, json_values, max_size=2))
    out = []
    for _ in range(draw(st.integers(1, 6))):
        source = draw(st.sampled_from([conversation, conversation, other]))
        messages = source[: draw(st.integers(0, len(source)))]
        if messages and draw(st.integers(0, 4)) == 0:  # an edit in the middle
            j = draw(st.integers(0, len(messages) - 1))
            messages = [*messages[:j], {**messages[j], "zz": draw(json_values)}, *messages[j + 1 :]]
        body = {
            **before,
            "messages": messages,
            **{k: v for k, v in after.items() if k not in before},
        }
        style = draw(st.sampled_from(_STYLES))
        raw = json.dumps(body, **style).encode()
        damage = draw(st.integers(0, 12))
        if damage == 0:
            raw = raw[:-1]  # cut
        elif damage == 1:
            raw = raw[:-1] + b', "messages": []}'  # a repeated key: json.loads keeps the last
        elif damage == 2:
            raw = raw.replace(b'"zz": 1', b'"zz": NaN', 1).replace(b'"zz":1', b'"zz":1e999', 1)
        elif damage == 3:
            raw = raw + b" x"
        elif damage == 4:
            raw = raw[:-1] + b",}"
        out.append(raw)
    return out


@given(_bodies())
def test_bodies_are_read_exactly_as_json_loads_reads_them(bodies: list[bytes]) -> None:
    reader = BodyReader()
    for raw in bodies:
        _check(reader, raw)


def _agent(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "fix the bug ⚙"},
    ]
    for k in range(n):
        call = {"id": f"c{k}", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
        out.append({"role": "assistant", "content": None, "tool_calls": [call], "cost": 0.5})
        out.append({"role": "tool", "tool_call_id": f"c{k}", "content": f"out {k} ✓"})
    return out


def test_a_growing_conversation_parses_only_its_new_messages() -> None:
    history = _agent(10)
    reader = BodyReader()
    previous: dict[bool, list[Any]] = {}
    for end in range(2, len(history) + 1):
        for ascii_only in (True, False):  # two spellings: two conversations as far as bytes go
            raw = json.dumps(
                {"model": "m", "messages": history[:end], "stream": True}, ensure_ascii=ascii_only
            ).encode()
            read = _check(reader, raw)
            assert read is not None
            messages = read.body["messages"]
            if ascii_only in previous:
                last = previous[ascii_only]
                assert read.reused == len(last)
                assert all(a is b for a, b in zip(messages, last, strict=False))
            previous[ascii_only] = messages


def test_an_edit_reuses_up_to_the_edit_and_branches_keep_their_own() -> None:
    history = _agent(6)
    reader = BodyReader()
    base = _check(reader, json.dumps({"messages": history}).encode())
    edited = [*history[:5], {**history[5], "content": "changed"}, *history[6:]]
    read = _check(reader, json.dumps({"messages": edited}).encode())
    assert read.reused == 5
    assert all(
        a is b for a, b in zip(read.body["messages"][:5], base.body["messages"][:5], strict=True)
    )
    again = _check(reader, json.dumps({"messages": history}).encode())
    assert again.reused == len(history)  # the first branch is still known
    header = _check(reader, json.dumps({"model": "other", "messages": history}).encode())
    assert header.reused == 0  # what comes before the messages changed: read whole


def test_what_it_does_not_follow_is_left_to_json_loads() -> None:
    reader = BodyReader()
    for raw in (
        b'{"messages": "x"}',
        b'{"model": "m"}',
        b"[1, 2]",
        b' {"messages": []}',
        b'\xef\xbb\xbf{"messages": []}',
        b'{"messages": [{"a": 1}], "messages": []}',
        b'{"messages": [{"a": 1},]}',
    ):
        assert reader.read(raw) is None, raw
    assert reader.read("not bytes") is None  # type: ignore[arg-type]


def test_a_message_that_is_not_an_object_is_read_but_not_followed() -> None:
    reader = BodyReader()
    _check(reader, b'{"messages": [12]}')
    read = _check(reader, b'{"messages": [123]}')  # "12" then "123": the bytes start alike
    assert read.body["messages"] == [123] and read.reused == 0


def test_nan_and_infinity_are_known_in_kept_messages_too() -> None:
    reader = BodyReader()
    first = _check(reader, b'{"messages": [{"a": NaN}, {"b": 1}]}')
    assert not first.finite
    later = _check(reader, b'{"messages": [{"a": NaN}, {"b": 1}, {"c": 2}]}')
    assert later.reused == 2 and not later.finite
    clean = _check(reader, b'{"messages": [{"c": 1e308}, {"d": 1}]}')
    assert clean.finite
    big = _check(reader, b'{"messages": [{"c": 1e308}, {"d": 1}, {"e": 1e999}]}')
    assert big.reused == 2 and not big.finite


def test_bodies_are_bounded() -> None:
    reader = BodyReader(max_conversations=2, max_bytes=10_000)
    for k in range(5):
        _check(reader, json.dumps({"messages": [{"role": "user", "content": f"{k}"}]}).encode())
    assert len(reader._entries) == 2
    _check(reader, json.dumps({"messages": [{"content": "x" * 20_000}]}).encode())
    assert reader._bytes <= 10_000


def _restored(reader: BodyReader, messages: list[dict[str, Any]]) -> tuple[list[Any], int]:
    read = _check(reader, json.dumps({"model": "m", "messages": messages}).encode())
    assert read is not None
    put_back = reader.restore(read)
    got = read.body["messages"]
    assert got.images == [image_digest(m) for m in got]
    return list(got), put_back


@given(
    st.integers(3, 12),
    st.integers(0, 2),
    st.data(),
)
def test_a_history_its_client_trimmed_goes_on_as_the_whole(
    steps: int, kept: int, data: st.DataObject
) -> None:
    """A client drops its oldest messages but ``kept`` leading ones and at least the newest two
    and goes on: the reader gives back the whole history with the new messages after it, and
    does so again for the next body of the trimmed history; a breakpoint the client moved is
    no change."""
    history = _agent(steps)
    reader = BodyReader()
    _restored(reader, history)
    cut = data.draw(st.integers(kept + 1, len(history) - 2))
    new = _agent(steps + 2)[len(history) :]
    trimmed = copy.deepcopy([*history[:kept], *history[cut:], *new[:2]])
    trimmed[-3]["cache_control"] = {"type": "ephemeral"}
    got, put_back = _restored(reader, trimmed)
    assert put_back == cut - kept
    assert got == [*history[:cut], *trimmed[kept:]]
    later, again = _restored(reader, [*trimmed, *new[2:]])
    assert again == put_back and later == [*got, *new[2:]]


def test_an_unrelated_history_is_not_restored() -> None:
    """Only the system prompt and the task in common, or only the newest message: nothing is
    put back, the body is the client's own."""
    history = _agent(6)
    reader = BodyReader()
    _restored(reader, history)
    other = [*history[:2], *_agent(9)[14:]]
    got, put_back = _restored(reader, other)
    assert put_back == 0 and got == other
    last_only = [history[0], history[-1], {"role": "user", "content": "go on"}]
    got, put_back = _restored(reader, last_only)
    assert put_back == 0 and got == last_only
