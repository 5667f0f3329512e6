"""Shell commands read by regex, as the standard library's lexer reads them."""

from __future__ import annotations

import shlex

from hypothesis import given
from hypothesis import strategies as st

from contextwarden.analysis.shell import _tokens, _unquoted_newlines_to_semicolons, analyze_command

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


def _bare_newlines_by_hand(text: str) -> str:
    """Unquoted newlines to " ; ", a character at a time (what the regex must agree with)."""
    out: list[str] = []
    quote: str | None = None
    escaped = False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "\n":
            out.append(" ; ")
            continue
        out.append(ch)
    return "".join(out)


@given(st.text("a ;'\"\\\n\t", max_size=24))
def test_only_unquoted_newlines_end_a_command(text: str) -> None:
    assert _unquoted_newlines_to_semicolons(text) == _bare_newlines_by_hand(text)


def test_quoted_operators_stay_in_their_word() -> None:
    effects = analyze_command("echo 'a > b' \"x;y\" && sed -i 's/a/b/' src/app.py > out.log")
    assert effects.writes == {"src/app.py": "sed -i", "out.log": "redirect"}
    assert effects.reads == ()
