"""``taken_by`` reports the fold ``apply`` makes: for any edit log, a position some edit took
out is missing from the view, a position reported masked or stripped went through that edit,
and a position reported untouched is sent exactly as the history holds it."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from contextwarden._log import (
    Compaction,
    Edit,
    Mask,
    Repair,
    StripThinking,
    WindowCut,
    apply,
    taken_by,
)
from contextwarden._messages import Message, user

N = 12
_pos = st.integers(0, N - 1)
_span = st.lists(st.tuples(_pos, st.integers(1, 4)), max_size=2).map(
    lambda xs: tuple((lo, min(lo + w, N)) for lo, w in xs)
)
_edit: st.SearchStrategy[Edit] = st.one_of(
    st.builds(
        lambda upto, sup: Mask(upto=upto, superseded=tuple((p, "r", "s") for p in sup)),
        st.integers(-1, N - 1),
        st.lists(_pos, max_size=2),
    ),
    st.builds(lambda upto: StripThinking(upto=upto), st.integers(-1, N - 1)),
    st.builds(lambda r: Compaction(removed=r), _span),
    st.builds(lambda r: WindowCut(removed=r), _span),
    st.builds(lambda r: Repair(removed=r), _span),
)


def _tag(tag: str) -> Callable[[int, Message], Message]:
    return lambda i, m: user(f"{m.text}|{tag}")


@given(st.lists(_edit, max_size=8))
def test_taken_by_is_the_fold_apply_makes(edits: list[Edit]) -> None:
    history: list[Message] = [user(f"m{i}") for i in range(N)]
    view, sources = apply(history, edits, mask=_tag("mask"), strip=_tag("strip"))
    shown = {s: m for s, m in zip(sources, view, strict=True) if isinstance(s, int)}
    by = taken_by(edits, N)
    assert len(by) == N
    for i, number in enumerate(by):
        if number is None:
            assert shown[i] is history[i]
            continue
        kind = edits[number].kind
        if kind in ("compaction", "window_cut", "repair"):
            assert i not in shown
            assert any(lo <= i < hi for lo, hi in edits[number].removed)  # type: ignore[union-attr]
            # the first edit that removed it
            assert not any(
                any(lo <= i < hi for lo, hi in getattr(e, "removed", ())) for e in edits[:number]
            )
        elif kind == "mask":
            assert shown[i].text.split("|")[1:2] == ["mask"]
        else:
            assert shown[i].text.endswith("|strip") and "|mask" not in shown[i].text
    assert history == [user(f"m{i}") for i in range(N)]
