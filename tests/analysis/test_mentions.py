"""Paths found run by run are the paths found in the whole text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from contextwarden.analysis.mentions import _PATH, path_like, words_of

_PIECES = st.sampled_from(
    ["src", "a", "/", ".", "..", "./", "py", ".py", ".md", "-", "_x", "@", "+", ":", " ", "\n", ","]
)


@given(st.lists(_PIECES, max_size=16).map("".join))
def test_paths_are_the_whole_texts(text: str) -> None:
    whole = dict.fromkeys(p.rstrip(".,:;") for p in _PATH.findall(text))
    assert words_of(text)[0] == tuple(p for p in whole if path_like(p))


def test_paths_in_prose() -> None:
    text = "Edit src/app/models.py and README.md, not http://x.org/a.py; see ./tests/test_app.py."
    assert words_of(text)[0] == ("src/app/models.py", "README.md", "./tests/test_app.py")
