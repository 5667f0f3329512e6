"""Shell commands read by regex, as the standard library's lexer reads them."""

from __future__ import annotations

import shlex

from hypothesis import given
from hypothesis import strategies as st

from contextwarden.analysis.shell import _tokens, analyze_command

#: The characters the lexer treats specially, a few it does not, and str.split's other spaces.
_ALPHABET = "ab c;|&<>()'\"\\\n\t\r$=é\x0b\u00a0"


def _lexed(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote or a final backslash
        return text.split()


@given(st.text(_ALPHABET, max_size=24))
def test_tokens_are_the_lexers(text: str) -> None:
    assert _tokens(text) == _lexed(text)


def test_quoted_operators_stay_in_their_word() -> None:
    effects = analyze_command("echo 'a > b' \"x;y\" && sed -i 's/a/b/' src/app.py > out.log")
    assert effects.writes == {"src/app.py": "sed -i", "out.log": "redirect"}
    assert effects.reads == []
