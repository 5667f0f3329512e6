"""The code an agent has in play: which files, functions, classes and tests a span of history
names, how much the agent relied on each, and which file each name was seen in.

An agent's next commands reuse names it met long before: the file it read forty steps ago, the
helper a ``grep`` found, the test it ran first. A summary that lists only changed files and
commands loses them, and the agent searches again. :func:`code_mentions` scores every path and
code name in a span by who wrote it and when:

- names the agent itself wrote in a command or tool call count most (it will type them again),
  folder paths and web addresses among them,
- names in its own prose count less (it may only have been thinking aloud),
- names a tool result showed count least: definitions (``def``/``class``), traceback frames,
  ``grep`` hits and test ids, each attributed to the file the result came from,
- later mentions weigh more than earlier ones.

Pure and deterministic: the same messages give the same value; nothing is modified.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._markers import NAMES_LINE_PREFIX, NAMES_LINE_RE
from .._memo import Memo
from .._messages import Message, ToolCallBlock
from .._task import strip_injected
from .actions import CLINE_RESULT, XML_TAG, reads_as_output, split_commands, text_command
from .shell import analyze_command, call_effects

__all__ = [
    "CodeMentions",
    "Mention",
    "Words",
    "code_mentions",
    "defined_names",
    "dir_like",
    "is_code_name",
    "joined_words",
    "names_of",
    "path_like",
    "paths_of",
    "urls_of",
    "words_of",
    "words_size",
]

_EXTENSIONS = (
    r"(?:py|pyi|pyx|js|jsx|mjs|ts|tsx|json|ya?ml|toml|cfg|ini|txt|md|rst|html|css|c|h|cc|cpp|"
    r"hpp|go|rs|java|kt|rb|php|sh|sql|lock)"
)
#: ``dir/file`` paths, and bare file names with a known extension.
_PATH = re.compile(
    rf"(?<![\w/.:-])(?:\.{{1,2}}/|/)?(?:[\w.@+-]+/)+[\w.@+-]+|(?<![\w/.-])[\w-]+(?:\.[\w-]+)*"
    rf"\.{_EXTENSIONS}\b"
)
#: What every :data:`_PATH` match holds: a ``/`` or a known extension (most runs hold neither).
_PATH_HINT = re.compile(rf"/|\.{_EXTENSIONS}\b")
#: The runs of path characters holding a ``.`` or a ``/``: every path lies in one (its
#: lookbehinds and its ``\b`` see the same neighbours there), and most words are not one.
_PATH_RUN = re.compile(r"(?<![\w./@:+-])[\w@:+-]*+[./][\w./@:+-]*+")
#: Candidate code names: words with an underscore or a lower-upper hump inside
#: (:func:`is_code_name` has the last word); plain words are skipped by the regex itself.
_WORD = re.compile(r"(?<![\w$-])_*[A-Za-z][A-Za-z0-9]*(?:_|[a-z][A-Z])\w*(?![\w-])")
#: A definition line, possibly behind a ``grep -n`` prefix naming its file. This and
#: :data:`_GREP_HIT` read ``"\n" + text``: a line starts after a line break, and the regex
#: looks for the break at C speed (``^`` is tried at every character).
_DEF = re.compile(
    r"\n(?:([\w./@+-]+\.[A-Za-z]\w*)[:-]\d+[:-])?\s*(?:async\s+)?"
    r"(?:def|class|fn|func|function|struct|enum|trait|interface)\s+([A-Za-z_]\w*)"
)
_FRAME = re.compile(r'File "([^"]+)", line \d+, in ([A-Za-z_]\w*)')
_GREP_HIT = re.compile(r"\n([\w./@+-]+\.[A-Za-z]\w*)[:-](\d+)[:-]")
_TEST_ID = re.compile(r"([\w./-]+\.py)::([\w:\[\]-]+)")
_CODE_SPAN = re.compile(r"`([^`\n]{2,80})`")
#: A web address without its query or fragment (the resource; the names its parameters hold are
#: code names like any other), up to the first character no URL holds unescaped.
_URL = re.compile(r"https?://[\w.-]+(?:/[^\s\"'`<>()\[\]{}|\\?#]*)?")
#: A JSON or C string escape in front of a word (``\tFilePath`` in a tool's JSON output): a
#: separator, not the name's first letter.
_ESCAPE = re.compile(r"\\[nrt](?=\w)")
#: Names that look like code but that every shell session or Python file is full of.
_NOISE = frozenset(
    (
        "__init__ __main__ __name__ __file__ __future__ self None True False print_function "
        "unicode_literals annotations PYTHONPATH EOF dev_null returncode stdout stderr "
        # todo-tool statuses and tool-protocol fields, not code
        "in_progress tool_use_id"
    ).split()
)
#: Path-like strings that are not files the agent works on.
_NOT_PATHS = ("<", "/dev/", "/proc/", "http://", "https://", "a/", "b/", "/usr/", "/bin/")

#: How much one mention counts, by who wrote it.
WEIGHT_ACTION = 3.0
WEIGHT_PROSE = 1.5
WEIGHT_OUTPUT = 1.0
#: Any other code name a result shows (a local variable in a file the agent read).
WEIGHT_SEEN = 0.3
#: A folder or package path the agent typed: it finds files again, but is not what the agent
#: edits or calls, so it counts like a result's mention, not like a file it typed.
WEIGHT_FOLDER = WEIGHT_OUTPUT


def is_code_name(word: str) -> bool:
    """Whether ``word`` looks like a code identifier rather than prose: at least 4 characters,
    with an inner underscore or an inner capital (``load_config``, ``parseArgs``,
    ``SchemaABC``), not all capitals, not common noise."""
    if len(word) < 4 or word in _NOISE or word.isupper():
        return False
    core = word.strip("_")
    if "_" in core:
        return True
    return any(c.isupper() for c in core[1:]) and any(c.islower() for c in core)


def path_like(text: str) -> bool:
    """Whether ``text`` (one token) is a file path worth keeping."""
    if text.startswith(_NOT_PATHS) or text.endswith(("/", ">")) or len(text) < 4:
        return False
    first, _, last = text.lstrip("./").partition("/")
    if len(first) == 1 and "/" in text:
        return False  # "s/old/new/": a sed expression
    # a directory or a prose "this/that" is not worth a line; a file has an extension
    return not text.startswith("-") and "." in text.rsplit("/", 1)[-1]


def dir_like(text: str) -> bool:
    """Whether ``text`` (one token) is a folder or package path the agent typed
    (``internal/store``, ``github.com/x/y``): two parts at least, the last with a letter and no
    extension; prose writes "this/that" too, so only the agent's own calls and the user's own
    words (which name where the work is) are read for them."""
    text = text.rstrip("/")
    if text.startswith(_NOT_PATHS) or text.startswith("-") or len(text) < 5:
        return False
    parts = text.lstrip("./").split("/")
    if len(parts) < 2 or len(parts[0]) == 1 or not all(parts):
        return False
    return any(c.isalpha() for c in parts[-1]) and "." not in parts[-1]


def _unescaped(text: str) -> str:
    return _ESCAPE.sub(" ", text) if "\\" in text else text


#: What :func:`words_of` returns: the paths and the code names of a text.
Words = tuple[tuple[str, ...], tuple[str, ...]]


def words_of(text: str) -> Words:
    """(paths, code names) written in ``text``, in order, without repeats; an escape written in
    the text (``\\n``, ``\\t``) separates words (each half unescapes it once)."""
    words = _unescaped(text).split()  # split once for both halves
    return paths_of(text, words), names_of(text, words)


def joined_words(parts: Sequence[Words]) -> Words:
    """:func:`words_of` of texts joined by line breaks, from the words of each: no path or name
    spans a line break, and a break ends a word as a text's end does."""
    paths = dict.fromkeys(p for words in parts for p in words[0])
    names = dict.fromkeys(n for words in parts for n in words[1])
    return tuple(paths), tuple(names)


def paths_of(text: str, words: list[str] | None = None) -> tuple[str, ...]:
    """The file paths (:func:`path_like`) written in ``text``, in order, without repeats (the
    path half of :func:`words_of`; ``words``: its whitespace-separated words, unescaped)."""
    if "." not in text and "/" not in text:  # what every path run holds
        return ()
    found = dict.fromkeys(p.rstrip(".,:;") for p in _path_runs(text, words))
    return tuple(p for p in found if path_like(p))


def defined_names(text: str) -> tuple[str, ...]:
    """The names ``text`` defines (``def``/``class``/``function``... lines), in order, without
    repeats."""
    return tuple(dict.fromkeys(name for _, name in _DEF.findall("\n" + text) if name not in _NOISE))


def _dirs_of(text: str) -> tuple[str, ...]:
    """The folder paths (:func:`dir_like`) written in ``text``, without repeats."""
    if "/" not in text:  # what every folder path holds
        return ()
    return tuple(dict.fromkeys(d for p in _path_runs(text) if dir_like(d := p.rstrip(".,:;/"))))


def urls_of(text: str) -> tuple[str, ...]:
    """The web addresses (``https://github.com/x/y``) written in ``text``, in order, without
    repeats: each without its query and fragment (``?v=...``: the parameters of one request,
    whose names :func:`names_of` finds) and without the punctuation that ends a sentence."""
    if "://" not in text:  # what every address holds
        return ()
    return tuple(dict.fromkeys(u.rstrip(".,:;") for u in _URL.findall(text)))


def _path_runs(text: str, words: list[str] | None = None) -> Iterator[str]:
    """Every path-shaped string in ``text`` (unescaped), in order, repeats included. Each run
    lies in one whitespace-separated word holding its ``.`` or ``/``, and a space borders a
    run as whitespace does: the regex reads those words only."""
    words = _unescaped(text).split() if words is None else words
    runs = _PATH_RUN.findall(" ".join([w for w in words if "." in w or "/" in w]))
    return (p for run in runs if _PATH_HINT.search(run) for p in _PATH.findall(run))


def names_of(text: str, words: list[str] | None = None) -> tuple[str, ...]:
    """The code names written in ``text``, in order, without repeats (the cheap half of
    :func:`words_of`: tool results are scanned for names only, their paths come from the
    structures that name files: ``grep`` hits, frames, test ids; ``words``: as for
    :func:`paths_of`)."""
    if "_" not in text and text == text.lower():  # no underscore and no hump: no name
        return ()
    # a name lies in one whitespace-separated word holding its underscore or its capital
    words = _unescaped(text).split() if words is None else words
    held = " ".join([w for w in words if "_" in w or not w.islower()])
    return tuple(w for w in dict.fromkeys(_WORD.findall(held)) if is_code_name(w))


@dataclass(frozen=True)
class Mention:
    """A path or a code name: its ``score`` (weighted, recency included) and ``files``: the
    files a result showed it in (most recent last)."""

    name: str
    score: float
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class CodeMentions:
    """Every path and code name of a span, best first (see :func:`code_mentions`)."""

    paths: tuple[Mention, ...] = ()
    names: tuple[Mention, ...] = ()


def _names_size(value: tuple[str, ...]) -> int:
    return sum(len(n) for n in value)


def words_size(value: Words) -> int:
    """The characters of a :func:`words_of` value (a :class:`~contextwarden._memo.Memo` size)."""
    return _names_size(value[0]) + _names_size(value[1])


class _Tally:
    def __init__(self, size: int, memo: Memo) -> None:
        self.size = max(size, 1)
        self.memo = memo
        self.score: dict[tuple[str, bool], float] = {}
        self.last: dict[tuple[str, bool], int] = {}
        self.files: dict[str, dict[str, None]] = {}

    def add(self, name: str, is_path: bool, index: int, weight: float) -> None:
        key = (name, is_path)
        # a mention at the end of the span counts twice one at its start
        self.score[key] = self.score.get(key, 0.0) + weight * (1.0 + index / self.size)
        self.last[key] = index

    def text(self, text: str, index: int, weight: float, *, dirs: bool = False) -> tuple[str, ...]:
        """Count what ``text`` names; the paths it names."""
        if not text:
            return ()
        paths, names = self.memo(words_of, text, words_size)
        for p in paths:
            self.add(p, True, index, weight)
        for d in self.memo(_dirs_of, text, _names_size) if dirs else ():
            self.add(d, True, index, WEIGHT_FOLDER)
        for u in urls_of(text) if dirs else ():  # an address is typed again whole, like a path
            self.add(u, True, index, weight)
        for n in names:
            self.add(n, False, index, weight)
        return paths

    def seen_in(self, name: str, path: str) -> None:
        if name not in _NOISE and len(name) >= 3:
            files = self.files.setdefault(name, {})
            files.pop(path, None)
            files[path] = None

    def result(self, text: str, index: int, read: str | None) -> None:
        """What a tool result shows: definitions (in the file it read), frames, grep hits and
        test ids (in the file they name)."""
        for path, _ in _GREP_HIT.findall("\n" + text):
            if path_like(path):
                self.add(path, True, index, WEIGHT_OUTPUT)
        for in_file, name in _DEF.findall("\n" + text):
            self.add(name, False, index, WEIGHT_OUTPUT)
            where = in_file or read
            if where:
                self.seen_in(name, where)
        for path, func in _FRAME.findall(text):
            if path_like(path) and "site-packages" not in path and "/lib/python" not in path:
                self.add(path, True, index, WEIGHT_OUTPUT)
                self.add(func, False, index, WEIGHT_OUTPUT)
                self.seen_in(func, path)
        paths, names = self.memo(words_of, text, words_size)
        for path in paths:  # a file a listing showed is typed again like a name it showed
            self.add(path, True, index, WEIGHT_SEEN)
        for name in names:
            self.add(name, False, index, WEIGHT_SEEN)
        for line in NAMES_LINE_RE.findall(text) if NAMES_LINE_PREFIX in text else ():
            # a masked result's line naming what its omitted lines held: its best names
            paths, names = words_of(line)
            for path in paths:
                self.add(path, True, index, WEIGHT_OUTPUT)
            for name in names:
                self.add(name, False, index, WEIGHT_OUTPUT - WEIGHT_SEEN)
                if read:
                    self.seen_in(name, read)
        # the regex tries every word start; the literal it needs is found at C speed
        for path, test in _TEST_ID.findall(text) if ".py::" in text else ():
            self.add(path, True, index, WEIGHT_OUTPUT)
            name = test.split("::")[-1].split("[")[0]
            self.add(name, False, index, WEIGHT_OUTPUT)
            self.seen_in(name, path)

    def finish(self) -> CodeMentions:
        def mention(key: tuple[str, bool]) -> Mention:
            files = tuple(self.files.get(key[0], {})) if not key[1] else ()
            return Mention(key[0], round(self.score[key], 6), files)

        ranked = sorted(self.score, key=lambda k: (-self.score[k], -self.last[k], k[0]))
        return CodeMentions(
            paths=tuple(mention(k) for k in ranked if k[1]),
            names=tuple(mention(k) for k in ranked if not k[1]),
        )


def _strings(value: Any) -> Iterable[str]:
    """Every string inside a parsed tool-call input."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def _read_target(command: str, memo: Memo, call: ToolCallBlock | None = None) -> str | None:
    if call is not None:  # analysed once per call (see call_effects)
        reads = call_effects(call, command).reads
    else:
        reads = memo(analyze_command, command, costly=True).reads
    return reads[-1] if reads else None


def code_mentions(messages: Sequence[Message], *, memo: Memo | None = None) -> CodeMentions:
    """The paths and code names of ``messages``, scored (see the module docstring). ``memo``
    keeps what each text names (the compactor passes its own; else the call uses one)."""
    memo = memo if memo is not None else Memo()
    tally = _Tally(len(messages), memo)
    read_by_call: dict[str, str | None] = {}
    pending_read: str | None = None
    for index, message in enumerate(messages):
        if message.role == "assistant":
            blocks, prose = split_commands(message.text)
            command = text_command(message, blocks)
            if command is not None and not blocks:  # a tool use in XML: its tags name nothing
                prose = XML_TAG.sub(" ", prose)
            for span in _CODE_SPAN.findall(prose) if "`" in prose else ():
                # `name` in prose is deliberate
                tally.text(span, index, WEIGHT_ACTION - WEIGHT_PROSE)
            tally.text(prose, index, WEIGHT_PROSE)
            for block in blocks if not message.tool_calls else ():
                tally.text(block, index, WEIGHT_ACTION, dirs=True)
            pending_read = _read_target(command, memo) if command is not None else None
            for call in message.tool_calls:
                strings = list(_strings(call.input))
                named = [tally.text(s, index, WEIGHT_ACTION, dirs=True) for s in strings]
                target = None
                for s, paths in zip(strings, named, strict=True):
                    target = _read_target(s, memo, call) or (paths[0] if paths else None)
                    if target:
                        break
                read_by_call[call.id] = target
        elif message.role == "tool":
            for result in message.tool_results:
                tally.result(result.text, index, read_by_call.get(result.tool_call_id))
        elif message.role == "user" and index > 0:
            text = message.text
            if reads_as_output(text):  # a command's output sent back as a user message
                if CLINE_RESULT.match(text.lstrip()):  # not the tool's name, nor the client's
                    text = strip_injected(CLINE_RESULT.sub("", text, count=1))
                tally.result(text, index, pending_read)
            else:
                # the user's own words name what the agent does next; what a client put beside
                # them (a reminder showing a file, a sub-agent's report) is shown like a result
                own = strip_injected(text)
                tally.text(own, index, WEIGHT_PROSE, dirs=True)
                if len(own) < len(text.strip()):
                    tally.result(text, index, None)
            pending_read = None
    return tally.finish()
