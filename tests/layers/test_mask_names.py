"""A masked result names what its omitted lines held (``contextwarden.layers.mask``): the files
and code names the agent may need again, ranked and bounded, without what the request holds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from contextwarden._markers import MASK_MARKER_RE, NAMES_LINE_PREFIX, NAMES_LINE_RE
from contextwarden._memo import Memo
from contextwarden._tokens import get_counter
from contextwarden.analysis.mentions import (
    Words,
    code_mentions,
    defined_names,
    words_of,
    words_size,
)
from contextwarden.layers.config import MaskConfig
from contextwarden.layers.mask import NAMES_PER_CHARS, mask_text, omitted_names
from contextwarden.testing import ConversationBuilder

SOURCE = "\n".join(
    [
        "import os",
        "",
        "",
        "class ConfigLoader:",
        "    def load_config(self, path):",
        "        raw_text = open(path).read()",
        *(f"        parsed_value = raw_text.split()  # step {i}" for i in range(30)),
        "        return parsed_value",
        "",
        "def resolve_path(base_dir, name):",
        "    return os.path.join(base_dir, name)",
        "",
        "# end of file",
    ]
)


def _names_line(masked: str) -> str:
    found = NAMES_LINE_RE.search(masked)
    assert found is not None, masked
    return found.group(0)


def test_the_names_line_follows_the_marker_and_names_definitions_first() -> None:
    masked = mask_text(SOURCE, MaskConfig(), "cw:0123456789abcdef")
    lines = masked.split("\n")
    at = next(i for i, ln in enumerate(lines) if MASK_MARKER_RE.match(ln))
    assert lines[at + 1].startswith(NAMES_LINE_PREFIX)
    names = _names_line(masked)[len(NAMES_LINE_PREFIX) : -1].split(", ")
    # what the omitted lines define comes first, then the most frequent names
    assert set(names[:3]) == {"ConfigLoader", "load_config", "resolve_path"}
    assert set(names[3:5]) == {"parsed_value", "raw_text"}
    assert len(masked) < len(SOURCE)


def test_names_the_request_holds_are_left_out() -> None:
    held = frozenset({"load_config", "parsed_value"})
    names = omitted_names(SOURCE, held=held)
    assert "load_config" not in names and "parsed_value" not in names
    assert "resolve_path" in names


def test_the_line_is_bounded_and_can_be_switched_off() -> None:
    many = "header\n" + "\n".join(f"value_{i} = compute_{i}()" for i in range(200)) + "\nend"
    masked = mask_text(many, MaskConfig(names=5))
    assert len(_names_line(masked)[len(NAMES_LINE_PREFIX) : -1].split(", ")) == 5
    assert NAMES_LINE_RE.search(mask_text(many, MaskConfig(names=0))) is None
    # a short omission names few: one name per NAMES_PER_CHARS omitted characters
    short = "a\nb\nc\n" + "\n".join(f"x = item_{i}" for i in range(12)) + "\ny\nz"
    found = NAMES_LINE_RE.search(mask_text(short, MaskConfig(min_chars=10)))
    assert found is None or len(found.group(0).split(", ")) <= 1 + len(short) // NAMES_PER_CHARS


def test_a_file_read_names_more_than_other_output_of_its_size() -> None:
    # a file's lines hold the definitions and identifiers the agent comes back to
    def count(masked: str) -> int:
        return len(_names_line(masked)[len(NAMES_LINE_PREFIX) : -1].split(", "))

    text = "header\n" + "\n".join(f"value_{i} = compute_{i}()" for i in range(40)) + "\nend"
    assert count(mask_text(text, MaskConfig(), read=True)) > count(mask_text(text, MaskConfig()))


def test_masking_twice_changes_nothing() -> None:
    once = mask_text(SOURCE, MaskConfig(), "cw:0123456789abcdef")
    assert mask_text(once, MaskConfig(), "cw:0123456789abcdef") is once


def test_a_summary_reads_the_names_line_as_the_results_best_names() -> None:
    masked = mask_text(SOURCE, MaskConfig())
    b = ConversationBuilder().user("Fix the loader")
    b.tool_loop("read", {"path": "src/config.py"}, masked)
    code = code_mentions(b.messages)
    by_name = {m.name: m for m in code.names}
    # a name the line carries counts like a definition the result showed
    assert by_name["load_config"].score >= by_name["ConfigLoader"].score
    assert "src/config.py" in by_name["resolve_path"].files


_LINE = st.lists(
    st.sampled_from(
        [
            "def load_config(path):",
            "class ConfigLoader:",
            "src/app/models.py:12: raw_text = 1",
            "see docs/guide.md and load_config",
            "parsed_value parsed_value",
            "parseArgs(raw_text)",
            "load_config_file",
            "\\tFilePath",
            "plain words only",
        ]
    ),
    max_size=8,
).map("\n".join)


@given(
    _LINE,
    _LINE,
    st.sets(st.sampled_from(["load_config", "parseArgs", "ConfigLoader"])),
    st.integers(0, 8),
)
def test_the_names_are_the_best_ranked_not_kept_nor_held(
    omitted: str, kept: str, held: set[str], limit: int
) -> None:
    # the documented ranking, read eagerly: definitions, paths, then names most frequent first
    paths, names = words_of(omitted)
    ranked = [
        *defined_names(omitted),
        *paths,
        *sorted(names, key=lambda n: -omitted.count(n)),
    ]
    kept_words = set().union(*words_of(kept))
    want = [n for n in dict.fromkeys(ranked) if n not in kept_words and n not in held]
    assert omitted_names(omitted, kept, held, limit) == tuple(want[:limit])


def test_a_mask_given_a_memo_masks_alike_and_leaves_the_whole_texts_words_in_it() -> None:
    lines = [f"def handler_{i}(request): return parseConfig(src/app/mod_{i}.py)" for i in range(40)]
    text = "\n".join(["head line", *lines, "tail line"])
    memo = Memo()
    assert mask_text(text, MaskConfig(), memo=memo) == mask_text(text, MaskConfig())

    def read_again() -> Words:
        raise AssertionError("the whole text's words are not in the memo")

    assert memo.keep((words_of, text), read_again, words_size) == words_of(text)


@given(st.lists(_LINE, min_size=1, max_size=12).map("\n\n".join), st.booleans())
def test_without_the_names_line_a_mask_is_the_same_less_that_line(text: str, read: bool) -> None:
    # what a warm call bounds a mask by before rendering it (the names line only adds tokens)
    cfg, ref = MaskConfig(min_chars=40), "cw:0123456789abcdef"
    named = mask_text(text, cfg, ref, read=read)
    bare = mask_text(text, cfg, ref, read=read, names=False)
    assert NAMES_LINE_RE.search(bare) is None
    if named is not text:
        lines = named.split("\n")
        assert bare == "\n".join(ln for ln in lines if not ln.startswith(NAMES_LINE_PREFIX))
        counter = get_counter("gpt-4o")
        assert counter.count_text(bare) <= counter.count_text(named)
