"""A call whose mask batch cannot pay renders no mask, and the requests stay the same.

A warm call bounds what a mask batch could remove by the tokens of the messages it may change;
when even that bound cannot pay, the masks are not rendered and what the call read while
waiting is counted later, when the policy first needs it. Each test runs the same agent loop
twice, once that way and once rendering every batch on every call (the bound taken as always
passing), and the two must send the same requests with the same events.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shared_data import SHARED_DATA

from contextwarden import Warden
from contextwarden._messages import Message, ToolCallBlock, assistant, system, tool_result, user
from contextwarden.context import lossless


def _loop(histories: Sequence[Sequence[Message]], model: str, window: int) -> list[Any]:
    """What a warden sends for each history in turn (one agent loop), with its events, and
    the reads the conversation counts as paid while waiting (what later batches weigh)."""
    warden = Warden()
    out = []
    for msgs in histories:
        r = warden.transform(list(msgs), model=model, window=window)
        (conv,) = warden._table._conversations.values()
        out.append(
            (
                [m.fingerprint for m in r.messages],
                r.tokens_after,
                [(e.kind, e.tokens_before, e.tokens_after, e.detail) for e in r.events],
                [(e.kind, e.reason, e.tokens_before, e.tokens_after) for e in r.edits],
                conv.idle if not conv.waits else None,
            )
        )
    return out


def _both(
    monkeypatch: pytest.MonkeyPatch,
    histories: Sequence[Sequence[Message]],
    model: str,
    window: int,
) -> tuple[list[Any], list[Any]]:
    """The loop as it runs, and rendering every batch on every call; both made to count what
    waiting read on every call, so the running figure is compared too."""
    with monkeypatch.context() as m:
        m.setattr(lossless, "MAX_WAITS", 1)
        lazy = _loop(histories, model, window)
        m.setattr(lossless, "may_pay", lambda *_: True)
        eager = _loop(histories, model, window)
    return lazy, eager


def _requests(rows: list[Any]) -> list[Any]:
    return [row[:4] for row in rows]


def _recordings() -> list[Path]:
    folder = SHARED_DATA / "mini-swe-agent"
    return sorted(folder.glob("*.traj.json"))[:3] if folder.is_dir() else []


@pytest.mark.parametrize("path", _recordings(), ids=lambda p: p.name[:40])
@pytest.mark.parametrize("window", [12_000, 24_000])
def test_real_loop_sends_the_same_requests(
    monkeypatch: pytest.MonkeyPatch, path: Path, window: int
) -> None:
    from contextwarden._transcripts import load_transcript

    messages = load_transcript(path).messages
    histories = [messages[:n] for n in range(3, len(messages) + 1)]
    lazy, eager = _both(monkeypatch, histories, "deepseek-chat", window)
    assert lazy == eager
    assert _requests(_loop(histories, "deepseek-chat", window)) == _requests(eager)
    # the loop made lossless edits, so the two ways were put to the test
    assert any(kind in ("mask", "strip_thinking") for row in lazy for kind, *_ in row[3])


def _history(sizes: list[tuple[int, int]]) -> list[Message]:
    """An agent loop: each step a thought of ``a`` words calling a tool that prints ``b``
    lines (the same file read again every fourth step, so later reads supersede earlier)."""
    out = [system("You are a coding agent."), user("Fix the parser in p.py.")]
    for k, (a, b) in enumerate(sizes):
        cid = f"call_{k}"
        path = f"f{k % 4 if k % 4 == 0 else k}.py"
        out.append(
            assistant(
                " ".join(f"w{k}x{j}" for j in range(a)),
                tool_calls=[ToolCallBlock(cid, "bash", f'{{"command": "cat {path}"}}')],
            )
        )
        out.append(tool_result(cid, "\n".join(f"{path}:{j}: value = {j * k}" for j in range(b))))
    return out


@settings(max_examples=12)
@given(
    st.lists(st.tuples(st.integers(5, 300), st.integers(1, 400)), min_size=8, max_size=24),
    st.sampled_from(["deepseek-chat", "claude-sonnet-4-5"]),
)
def test_generated_loop_sends_the_same_requests(sizes: list[tuple[int, int]], model: str) -> None:
    messages = _history(sizes)
    histories = [messages[:n] for n in range(3, len(messages) + 1)]
    with pytest.MonkeyPatch.context() as monkeypatch:
        lazy, eager = _both(monkeypatch, histories, model, 8_000)
    assert lazy == eager
    assert _requests(_loop(histories, model, 8_000)) == _requests(eager)
