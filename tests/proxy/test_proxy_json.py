"""The proxy reads and writes request bodies with orjson when it can, and then exactly as the
standard library would read them: an integer beyond 64 bits (which orjson reads as a float),
``NaN``, a lone surrogate or a byte-order mark send the body to :func:`json.loads`, and a body
read that way is written by :func:`json.dumps`. Values are kept exactly, types included."""

from __future__ import annotations

import json
import marshal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from proxy_doubles import StubWarden

from contextwarden.proxy.transform import dump_body, load_body, transform_body

pytest.importorskip("orjson")

_KEYS = st.text("abcxyz_é中", min_size=1, max_size=6)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()  # beyond 64 bits too
    | st.integers(-(2**63), 2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=12,
)


def _image(value: Any) -> bytes:
    return marshal.dumps(value, 2)


@given(st.dictionaries(_KEYS, _VALUES, max_size=5), st.booleans())
def test_bodies_are_read_and_written_as_the_standard_library_reads_them(
    body: dict[str, Any], ascii_only: bool
) -> None:
    raw = json.dumps(body, ensure_ascii=ascii_only).encode()
    value, fast = load_body(raw)
    assert _image(value) == _image(json.loads(raw))
    written = dump_body(value, fast)
    assert _image(json.loads(written)) == _image(value)
    written.decode("utf-8")  # strict UTF-8


def test_an_integer_beyond_64_bits_is_read_by_the_standard_library() -> None:
    for n in (2**64, -(2**63) - 1, 10**30):
        raw = json.dumps({"seed": n, "x": [1.5]}).encode()
        value, fast = load_body(raw)
        assert value["seed"] == n and type(value["seed"]) is int and not fast
        assert json.loads(dump_body(value, fast))["seed"] == n
    # a long run of digits after a decimal point is a float's: orjson reads it
    assert load_body(b'{"cost": 0.00028232400000000000003}')[1]
    assert load_body(json.dumps({"n": 2**63 - 1}).encode()) == ({"n": 2**63 - 1}, False)


@pytest.mark.parametrize(
    "raw",
    [b'{"t": NaN}', b'{"t": -Infinity}', b'{"t": 1e400}', b'{"s": "\\ud800"}', b"\xef\xbb\xbf{}"],
)
def test_what_orjson_refuses_is_read_and_written_as_before(raw: bytes) -> None:
    value, fast = load_body(raw)
    assert not fast
    assert _image(value) == _image(json.loads(raw))
    assert _outcome(lambda: dump_body(value, fast)) == _outcome(
        lambda: json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    )


def _outcome(write: Any) -> Any:
    """What ``write()`` returns, or the type of what it raises (a lone surrogate cannot be
    written as UTF-8: the proxy then forwards the client's body as it came, as before)."""
    try:
        return write()
    except Exception as exc:
        return type(exc)


def test_a_changed_body_keeps_every_other_value_exactly() -> None:
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "a", "meta": {"id": 2**70, "t": 1e-07, "ok": True}},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    for extra in ({}, {"seed": 2**70}, {"temperature": 0.00005}):
        body = {"model": "gpt-4o", "messages": messages, **extra}
        raw = json.dumps(body).encode()
        out = transform_body(StubWarden(keep=1), "openai", raw)
        assert out.changed
        sent = json.loads(out.body)
        assert _image({k: v for k, v in sent.items() if k != "messages"}) == _image(
            {k: v for k, v in body.items() if k != "messages"}
        )
        assert _image(sent["messages"]) == _image([messages[0], messages[-1]])


def test_successive_real_requests_send_what_a_fresh_read_sends(
    openai_recording: tuple[str, list[dict[str, Any]]],
) -> None:
    """A real agent's calls through the body step (known messages not parsed again, nor read
    into the warden's values again, nor written back again) send exactly the messages a warden
    given every request parsed afresh sends."""
    from contextwarden import Warden
    from contextwarden.formats import from_openai, to_openai

    _, history = openai_recording
    history = history[:160]
    fast, plain = Warden(), Warden()
    ends = [i + 1 for i, m in enumerate(history) if m["role"] == "tool"]
    for end in ends:
        raw = json.dumps({"model": "gpt-4o", "messages": history[:end], "stream": True}).encode()
        out = transform_body(fast, "openai", raw, window_cap=16_000)
        sent = json.loads(out.body)
        result = plain.transform(
            from_openai(json.loads(raw)["messages"]), model="gpt-4o", window=16_000
        )
        want = to_openai(list(result.messages))
        assert _image(sent["messages"]) == _image(want)
        assert (out.tokens_before, out.tokens_after) == (result.tokens_before, result.tokens_after)
    assert fast._codec.reused > 10 * fast._codec.read


class _PlainWarden:
    """A warden reading and writing every request afresh (the plain converters): what the
    proxy's body step sent before prefix reuse."""

    def __init__(self) -> None:
        from contextwarden import Warden

        self.warden = Warden()

    def transform_anthropic(
        self, messages: Any, *, system: Any = None, **kw: Any
    ) -> tuple[Any, list[dict[str, Any]], Any]:
        from contextwarden.formats import from_anthropic, to_anthropic

        result = self.warden.transform(from_anthropic(list(messages), system=system), **kw)
        return (*to_anthropic(list(result.messages)), result)


@pytest.mark.parametrize("reader", [False, True])
def test_successive_real_anthropic_requests_send_what_a_fresh_read_sends(
    anthropic_recording: tuple[Any, list[dict[str, Any]]], reader: bool
) -> None:
    """The real Claude Code session through the body step, with the cache breakpoints the proxy
    adds on /v1/messages and the client's own moving breakpoint on its newest message: byte for
    byte the body a warden reading every request afresh gives. With the proxy's body reader,
    the warden's writes go on from the last request's, and so do the breakpoint scan and the
    writing of the JSON."""
    from contextwarden import Warden
    from contextwarden.formats._body import BodyReader

    system, history = anthropic_recording
    fast, plain = Warden(), _PlainWarden()
    bodies = BodyReader() if reader else None
    ends = [i + 1 for i, m in enumerate(history) if m["role"] == "user"]
    for n, end in enumerate(ends):
        messages = json.loads(json.dumps(history[:end]))
        if n % 2 and isinstance(messages[-1]["content"], list):  # a breakpoint of its own
            messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
        body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "system": system}
        raw = json.dumps({**body, "messages": messages}).encode()
        kw: dict[str, Any] = {"window_cap": 12_000, "cache_breakpoints": True}
        got = transform_body(fast, "anthropic", raw, bodies=bodies, **kw)
        want = transform_body(plain, "anthropic", raw, **kw)  # type: ignore[arg-type]
        assert got.body == want.body
        assert (got.tokens_before, got.tokens_after) == (want.tokens_before, want.tokens_after)
    assert fast._codec.reused > 5 * fast._codec.read
