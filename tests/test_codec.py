from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextwarden import FormatError, Message
from contextwarden._codec import message_from_dict, message_to_dict
from contextwarden._messages import (
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    freeze,
)

texts = st.text(max_size=40)
blocks = st.one_of(
    st.builds(TextBlock, texts),
    st.builds(ThinkingBlock, texts, st.none() | texts, st.booleans(), st.none() | texts),
    st.builds(ToolCallBlock, texts, texts, texts),
    st.builds(
        ToolResultBlock,
        texts,
        texts | st.tuples(st.builds(TextBlock, texts)),
        st.booleans(),
        extra=st.dictionaries(st.sampled_from(["cache_control", "x"]), texts).map(freeze),
    ),
    st.builds(
        ImageBlock, st.just(freeze({"type": "url", "url": "http://x/y.png"})), st.integers(0, 5000)
    ),
)
messages = st.builds(
    Message,
    st.sampled_from(["system", "user", "assistant", "tool"]),
    st.lists(blocks, max_size=4).map(tuple),
    name=st.none() | texts,
    pinned=st.booleans(),
    id=st.none() | texts,
    timestamp=st.none() | st.integers(0, 2**40),
    usage=st.none() | st.dictionaries(texts, st.integers(0, 10**6), min_size=1).map(freeze),
    extra=st.dictionaries(texts, texts).map(freeze),
)


@given(messages)
def test_round_trip_through_json(m: Message) -> None:
    d = json.loads(json.dumps(message_to_dict(m)))
    back = message_from_dict(d)
    assert back == m
    assert back.fingerprint == m.fingerprint


def test_bad_block_names_message_and_field() -> None:
    with pytest.raises(FormatError, match=r"message 4, field 'content\[1\]\.type'"):
        message_from_dict(
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "bogus"}]},
            index=4,
        )


def test_bad_role_is_a_format_error() -> None:
    with pytest.raises(FormatError, match="role"):
        message_from_dict({"role": "narrator", "content": []}, index=0)
