"""Seed 000 L1: old tool results shrink to their first 3 and last 2 lines."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import pytest
from histories import CharCounter, agent_run, call, config, ctx, lines
from hypothesis import given
from hypothesis import strategies as st

from contextwarden import Warden
from contextwarden._markers import MASK_MARKER_RE, SUPERSEDED_MARKER_RE
from contextwarden._messages import (
    Message,
    ToolCallBlock,
    ToolResultBlock,
    assistant,
    tool_result,
    user,
)
from contextwarden.layers import MaskConfig, mask_text, mask_tool_results
from contextwarden.layers.mask import never_masked, superseded_text

MARKER = re.compile(r"^\[\.\.\. (\d+) lines, (\d+) characters omitted \.\.\.\]$")


def test_mask_text_keeps_three_head_and_two_tail_lines() -> None:
    text = lines(50)
    out = mask_text(text)
    got = out.split("\n")
    src = text.split("\n")
    assert got[:3] == src[:3] and got[-2:] == src[-2:]
    m = MARKER.match(got[3])
    assert m is not None and len(got) == 6
    assert int(m.group(1)) == 45
    # characters omitted: everything but the five kept lines and the four newlines between them
    kept = sum(len(x) for x in src[:3] + src[-2:]) + 4
    assert int(m.group(2)) == len(text) - kept


def test_short_results_and_already_masked_ones_are_left_alone() -> None:
    short = lines(12, width=40)  # 491 characters: not over 500
    assert len(short) <= 500 and mask_text(short) is short
    masked = mask_text(lines(200))
    assert mask_text(masked) is masked
    few_short_lines = "\n".join(["y" * 120] * 5)  # nothing to gain
    assert mask_text(few_short_lines) is few_short_lines


def test_one_long_line_is_shortened_too() -> None:
    blob = '{"data": "' + "z" * 20_000 + '"}'
    out = mask_text(blob)
    assert len(out) < 400 and out.startswith(blob[:200]) and "[...]" in out
    assert MARKER.match(out.split("\n")[-1])


def test_the_keep_recent_newest_results_stay_whole_older_long_ones_are_masked() -> None:
    msgs = agent_run(10, result_chars=2000)  # system, task, 10 x (assistant, tool)
    context = ctx()
    keep = context.config.mask.keep_recent
    result = mask_tool_results(msgs, context)
    out = result.messages
    tool_idx = [i for i, m in enumerate(msgs) if m.role == "tool"]
    assert 0 < keep < len(tool_idx)
    for i in tool_idx[-keep:]:
        assert out[i] is msgs[i]
    for i in tool_idx[:-keep]:
        assert out[i].tool_results[0].tool_call_id == msgs[i].tool_results[0].tool_call_id
        assert len(out[i].tool_results[0].text) < 400
    for i, m in enumerate(msgs):  # calls, their arguments and other roles untouched
        if m.role != "tool":
            assert out[i] is m
    assert [e.index for e in result.events] == tool_idx[:-keep]
    assert all(e.kind == "masked" and e.tool_name == "bash" for e in result.events)


def test_counts_result_blocks_not_messages() -> None:
    """Anthropic puts parallel results in one message: 8 results there, the 2 oldest masked."""
    calls = [call(f"c{i}") for i in range(8)]
    results = tuple(ToolResultBlock(f"c{i}", lines(30, tag=f"r{i}")) for i in range(8))
    msgs = [user("task"), assistant("", tool_calls=calls), Message("tool", results)]
    out = mask_tool_results(msgs, ctx()).messages[2].tool_results
    assert [len(r.text) < 400 for r in out] == [True, True] + [False] * 6
    assert out[2:] == results[2:]


def test_exclude_tools_by_the_name_of_the_matching_call() -> None:
    msgs = [user("task")]
    for i in range(10):
        name = "read_file" if i % 2 else "bash"
        msgs += [assistant("", tool_calls=[call(f"c{i}", name)]), tool_result(f"c{i}", lines(40))]
    cfg = config(mask={"exclude_tools": ["read_file"]})
    result = mask_tool_results(msgs, ctx(cfg=cfg))
    masked = {e.index for e in result.events}
    assert masked == {2, 6}  # bash results 0 and 2; read_file results 1 and 3 stay whole
    assert all(e.tool_name == "bash" for e in result.events)


def test_pinned_results_are_never_masked() -> None:
    msgs = agent_run(10)
    msgs[3] = msgs[3].replace(pinned=True)
    msgs[5] = tool_result("c1", "<Pin>the API key lives in env X</Pin>\n" + lines(40))
    out = mask_tool_results(msgs, ctx()).messages
    assert out[3] is msgs[3] and out[5] is msgs[5]
    assert out[7] is not msgs[7]


def test_keep_recent_zero_and_custom_lines() -> None:
    msgs = agent_run(2)
    cfg = config(mask={"keep_recent": 0, "head_lines": 1, "tail_lines": 0})
    out = mask_tool_results(msgs, ctx(cfg=cfg)).messages
    for i in (3, 5):
        got = out[i].tool_results[0].text.split("\n")
        assert len(got) == 2 and got[0] == msgs[i].tool_results[0].text.split("\n")[0]
        assert MARKER.match(got[1])


def test_idempotent_and_pure() -> None:
    msgs = agent_run(12)
    snapshot = list(msgs)
    once = mask_tool_results(msgs, ctx()).messages
    assert msgs == snapshot
    again = mask_tool_results(once, ctx())
    assert again.messages == once and again.events == ()


def test_disabled() -> None:
    msgs = agent_run(12)
    out = mask_tool_results(msgs, ctx(cfg=config(mask={"enabled": False})))
    assert out.messages == tuple(msgs) and out.events == ()


def test_default_config_matches_the_seed() -> None:
    cfg = MaskConfig()
    assert (cfg.keep_recent, cfg.min_chars, cfg.head_lines, cfg.tail_lines) == (6, 500, 3, 2)


def _fates(messages: Sequence[Message]) -> list[str]:
    """What became of each tool result: whole, masked or superseded (the markers' own text
    differs between the layer and the warden: only the warden names a ``cw:`` reference)."""
    out = []
    for m in messages:
        for r in m.tool_results:
            text = r.text
            out.append(
                "superseded"
                if SUPERSEDED_MARKER_RE.search(text)
                else "masked"
                if MASK_MARKER_RE.search(text)
                else "whole"
            )
    return out


def _working_session() -> list[Message]:
    """A file read, then edited by quoting it; a listing run twice; other reads in between."""

    def step(cid: str, name: str, output: str, **args: object) -> list[Message]:
        return [
            assistant("", tool_calls=[ToolCallBlock(cid, name, json.dumps(args))]),
            tool_result(cid, output),
        ]

    msgs = [user("Fix the parser in src/p.py")]
    msgs += step("r1", "Read", lines(80, tag="src"), file_path="src/p.py")
    msgs += step("l1", "bash", lines(40, tag="ls1"), command="ls -la src")
    msgs += step("g1", "bash", lines(40, tag="grep"), command="grep -rn parse src")
    msgs += step("e1", "Edit", "ok", file_path="src/p.py", old_string="a", new_string="b")
    msgs += step("l2", "bash", lines(40, tag="ls2"), command="ls -la src")
    return msgs


@pytest.mark.parametrize("supersede", [False, True])
@pytest.mark.parametrize("window", [None, 200_000])
def test_the_layer_decides_as_the_warden_does(supersede: bool, window: int | None) -> None:
    msgs = _working_session()
    cfg = config(
        mask={"keep_recent": 0, "supersede": supersede, "min_chars": 100},
        policy={"mode": "immediate"},
        thinking={"enabled": False},
    )
    alone = _fates(mask_tool_results(msgs, ctx(cfg=cfg, window=window)).messages)
    warden = Warden(cfg, counter=CharCounter(), compactor=None)
    sent = _fates(warden.transform(msgs, window=window).messages)
    assert alone == sent
    # the read the edit quoted stays whole only where the window leaves room to keep it
    assert alone[0] == ("whole" if window else "masked")
    assert alone[1] == ("superseded" if supersede else "masked")  # the listing run again
    assert alone[2] == "masked" and alone[3] == "whole"  # "ok" is too short to mask


@given(
    text=st.text(st.sampled_from("ab \n.[]x0"), max_size=120),
    min_chars=st.integers(0, 600),
    ref=st.sampled_from([None, "cw:0123456789abcdef"]),
    by=st.sampled_from([None, "call_1"]),
)
def test_a_text_never_masked_is_left_by_every_mask(
    text: str, min_chars: int, ref: str | None, by: str | None
) -> None:
    cfg = MaskConfig(min_chars=min_chars, line_chars=20, head_lines=0, tail_lines=0)
    if never_masked(text, cfg):
        assert mask_text(text, cfg, ref) is text
        assert superseded_text(text, ref, by) is text
    elif len(text) <= min_chars:
        assert superseded_text(text) != text
