"""Paths found run by run are the paths found in the whole text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from contextwarden.analysis.mentions import (
    _PATH,
    code_mentions,
    dir_like,
    joined_words,
    names_of,
    path_like,
    urls_of,
    words_of,
)
from contextwarden.testing import ConversationBuilder

_PIECES = st.sampled_from(
    ["src", "a", "/", ".", "..", "./", "py", ".py", ".md", "-", "_x", "@", "+", ":", " ", "\n", ","]
)


@given(st.lists(_PIECES, max_size=16).map("".join))
def test_paths_are_the_whole_texts(text: str) -> None:
    whole = dict.fromkeys(p.rstrip(".,:;") for p in _PATH.findall(text))
    assert words_of(text)[0] == tuple(p for p in whole if path_like(p))


_LINE_PIECES = st.sampled_from(
    ["src/a.py", "mod_x", "getValue", "/", ".", ".py", "_x", "Ab", "\\", "n", "t", "-", " "]
    + ["\n", "ok:", "$"]
)


@given(st.lists(st.lists(_LINE_PIECES, max_size=10).map("".join), max_size=5))
def test_the_words_of_texts_joined_by_line_breaks_are_their_words_joined(
    parts: list[str],
) -> None:
    # a mask reads the omitted lines; the summary reads the whole result: one read does both
    assert joined_words([words_of(p) for p in parts]) == words_of("\n".join(parts))


def test_paths_in_prose() -> None:
    text = "Edit src/app/models.py and README.md, not http://x.org/a.py; see ./tests/test_app.py."
    assert words_of(text)[0] == ("src/app/models.py", "README.md", "./tests/test_app.py")


_IDENT = st.from_regex(
    r"[a-z]{2,6}_[a-z]{2,6}|[a-z]{2,6}[A-Z][a-z]{2,6}|[A-Z][a-z]{2,5}[A-Z][a-z]{2,5}",
    fullmatch=True,
)


@given(_IDENT, st.sampled_from(["\\n", "\\t", "\\r", "\\n\\t\\t"]))
def test_an_escape_written_in_text_separates_words(name: str, escape: str) -> None:
    # a tool's JSON output writes "\n\tFilePath": the name is FilePath, not tFilePath
    text = '{"body": "x' + escape + name + ' y"}'
    assert name in names_of(text)
    assert not any(n.endswith(name) and n != name for n in names_of(text))
    path = f"pkg/{name}.go"
    assert path in words_of('"' + escape + path + '"')[0]


def test_folders_the_agent_types_are_paths_in_play() -> None:
    b = ConversationBuilder().user("fix the store")
    b.bash("cd internal/store && go test ./... ", "ok")
    b.bash("ls", "internal/store/cache")
    b.assistant("Either the cache and/or the index is stale.")
    paths = {m.name: m for m in code_mentions(b.messages).paths}
    assert "internal/store" in paths
    assert "internal/store/cache" not in paths  # a listing shows it, the agent never typed it
    assert "and/or" not in paths  # prose
    assert dir_like("github.com/smacker/go-tree-sitter") and dir_like("./internal/store/")
    assert not any(map(dir_like, ["s/old/new", "https://x.org/a", "2024/01", "a/b", "x.py"]))


def test_a_users_later_words_and_what_a_client_showed_are_names_in_play() -> None:
    b = ConversationBuilder().user("fix the exporter")
    b.bash("ls src", "src/exporter.py\nsrc/quoting.py\n")
    b.user("Also rename parse_header in src/reader.py, and keep load_rows working.")
    b.user(
        "<system-reminder>src/writer.py was modified by a linter:\n"
        "def flush_buffer(out):\n    pending_rows.clear()\n</system-reminder>"
    )
    found = code_mentions(b.messages)
    names = {m.name: m for m in found.names}
    paths = {m.name: m for m in found.paths}
    # the user's own words weigh as the agent's prose does, above what a result only shows
    assert {"parse_header", "load_rows"} <= names.keys() and "src/reader.py" in paths
    assert names["parse_header"].score > names["flush_buffer"].score
    # an injected block is read like a result: its definitions, tied to no typed file
    assert "flush_buffer" in names and "pending_rows" in names
    # a file a listing showed is a candidate, ranked below one the user named
    assert "src/quoting.py" in paths
    assert paths["src/quoting.py"].score < paths["src/reader.py"].score


_HOST = st.from_regex(r"[a-z]{2,10}(?:\.[a-z]{2,6}){1,2}", fullmatch=True)
_URL_PATH = st.from_regex(
    r"(?:/[A-Za-z0-9_.~-]{1,12}){0,4}(?:\?[a-z]{1,5}=[a-zA-Z0-9_-]{1,11})?", fullmatch=True
)


@given(
    st.sampled_from(["http", "https"]),
    _HOST,
    _URL_PATH,
    st.sampled_from(["", ".", ",", ";", ":"]),
    st.sampled_from(["see ", "(", '"', "<", "fetch ", "`", "\n"]),
    st.sampled_from(["", " next", ")", '"', ">", "`", "\n"]),
)
def test_an_address_is_found_whole_whatever_writes_it(
    scheme: str, host: str, tail: str, stop: str, before: str, after: str
) -> None:
    # an address is found as its resource: the punctuation that ends the sentence, the bracket,
    # quote or markup around it and the query of one request are not part of it
    url = f"{scheme}://{host}{tail}"
    resource = url.split("?")[0].rstrip(".")
    assert urls_of(before + url + stop + after) == (resource,)
    assert urls_of(url + " and " + resource + "#top") == (resource,)


def test_the_folders_and_addresses_the_user_names_are_paths_in_play() -> None:
    b = ConversationBuilder().user("fix the parser")
    b.bash("go build ./...", "ok")
    b.user(
        "Use github.com/smacker/go-tree-sitter for it, keep internal/sem as is, and follow "
        "https://tree-sitter.github.io/tree-sitter/using-parsers."
    )
    b.tool_loop("WebFetch", {"url": "https://pkg.go.dev/github.com/smacker/go-tree-sitter"}, "docs")
    b.bash("curl -s https://x.org/a.json | head", '{"see": "https://y.org/b"}')
    paths = {m.name: m for m in code_mentions(b.messages).paths}
    assert {"github.com/smacker/go-tree-sitter", "internal/sem"} <= paths.keys()
    assert "https://tree-sitter.github.io/tree-sitter/using-parsers" in paths
    # what the agent fetched it typed: it counts above what the user only wrote
    fetched = paths["https://pkg.go.dev/github.com/smacker/go-tree-sitter"]
    assert fetched.score > paths["https://tree-sitter.github.io/tree-sitter/using-parsers"].score
    assert "https://x.org/a.json" in paths
    assert "https://y.org/b" not in paths  # a result only showed it
