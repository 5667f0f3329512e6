"""What a shell command does to files, read from its text alone (no execution, no I/O).

Agents edit files through bash as often as through editor tools: ``sed -i``, ``cat > f << EOF``,
``tee``, ``cp``/``mv``, ``patch < x.patch``, ``git checkout -- f`` and Python one-off scripts
that ``open(path, "w")``. :func:`analyze_command` turns one command string into a
:class:`ShellEffects` value listing the paths it reads, writes, deletes and reverts, whether it
is read-only (a search or a listing), and the heredoc bodies it carries (so a script written
now and run later can be scanned when it runs).

The analysis over-approximates on purpose: listing a file as modified that was not costs a few
characters in a summary; missing one loses a must-keep fact.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from .._messages import EMPTY, ToolCallBlock, reserve_attribute

__all__ = ["ShellEffects", "analyze_command", "call_effects", "command_key", "python_writes"]

#: Programs whose only effect is to print (a failing exit of 1 from these means "no match").
READ_ONLY_PROGRAMS = frozenset(
    (
        "cat head tail less more nl bat grep egrep fgrep rg ag ack find fd ls ll tree wc pwd echo "
        "printf which whereis type file stat diff cmp sort uniq cut tr awk du df env printenv "
        "date whoami uname id true false test [ xargs realpath dirname basename readlink column "
        "jq od hexdump strings sed cd git man help history locate"
    ).split()
)
#: ``git`` subcommands that change nothing.
_GIT_READ_ONLY = frozenset(
    (
        "status diff log show grep blame branch ls-files rev-parse describe remote config "
        "shortlog reflog tag"
    ).split()
)
#: Programs that print a file's content when given it as an argument.
_READERS = frozenset({"cat", "head", "tail", "less", "more", "nl", "bat", "view"})
#: Wrappers that run the next word as the program.
_WRAPPERS = frozenset({"sudo", "nohup", "time", "command", "exec", "nice", "stdbuf", "env"})
_ASSIGNMENT = re.compile(r"\w+=.*")

_HEREDOC_RE = re.compile(r"<<(-?)\s*(['\"]?)([A-Za-z_][\w.-]*)\2")
_OPEN_WRITE_RE = re.compile(
    r"""\bopen\(\s*(?P<arg>[^,\n]+?)\s*,\s*(?:mode\s*=\s*)?['"](?P<mode>[rwaxbt+]+)['"]"""
)
_STRING_LITERAL = re.compile(r"""[rbuRBU]?(['"])(?P<value>[^'"\n]+)\1""")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_WRITE_TEXT_RE = re.compile(
    r"""Path\(\s*(?P<q>['"])(?P<lit>[^'"\n]+)(?P=q)\s*\)\s*\.write_(?:text|bytes)\("""
)
_ASSIGN_RE = r"""(?m)^\s*{name}\s*=\s*(?:r|f)?(['"])([^'"\n]+)\1"""
_OPEN_READ_RE = re.compile(r"""open\(\s*(['"])([^'"\n]+)\1\s*(?:,\s*['"]r['"])?\s*\)""")
_DIFF_TARGET_RE = re.compile(r"(?m)^\+\+\+ (?:b/)?(?P<path>[^\s]+)")
_APPLY_PATCH_RE = re.compile(r"(?m)^\*\*\* (?:Add|Update|Delete) File: (?P<path>.+?)\s*$")
_MOVE_TO_RE = re.compile(r"(?m)^\*\*\* Move to: (?P<path>.+?)\s*$")
_OPERATORS = frozenset({"&&", "||", ";", "|", "&", "(", ")", ";;", "|&"})
_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", "<", "<<", "<<<", "<>", ">&", "<&"})


@dataclass(slots=True)
class ShellEffects:
    """What one command does, as far as its text tells.

    ``reads``/``writes``/``deletes``/``reverts`` are paths as written in the command;
    ``writes`` maps a path to how it was written (``sed -i``, ``redirect``, ``python``, ...).
    ``heredocs`` maps a file written from a heredoc to that heredoc's body, and ``scripts``
    lists the scripts the command runs (``python fix.py``), so callers can scan bodies they saw
    earlier. ``patch_inputs`` names patch files applied (``patch -p1 < fix.patch``).
    Tuples and shared empty mappings: a history holds one per shell call, most finding nothing.
    """

    reads: tuple[str, ...] = ()
    writes: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    deletes: tuple[str, ...] = ()
    reverts: tuple[str, ...] = ()
    heredocs: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    scripts: tuple[str, ...] = ()
    patch_inputs: tuple[str, ...] = ()
    read_only: bool = True
    runs_git_diff: bool = False
    last_program: str = ""
    #: the command analysed, and its :func:`command_key`
    command: str = ""
    key: str = ""

    def write(self, path: str, how: str) -> None:
        if _is_real_path(path):
            if path not in self.writes:
                self.writes = {**self.writes, path: how}
            self.read_only = False


def _is_real_path(path: str) -> bool:
    return bool(path) and not path.startswith(("/dev/", "&", "-")) and path not in {"/dev/null"}


def command_key(command: str) -> str:
    """A normalised form of ``command`` for "is this the same command again?".

    Drops leading ``cd DIR &&`` and ``timeout N``, stderr plumbing (``2>&1``, ``2>/dev/null``),
    heredoc bodies, ``|| true`` and trailing ``| head``/``| tail``/``| grep`` filters, and collapses whitespace:
    ``cd /testbed && python t.py 2>&1 | tail -20`` and ``python t.py`` share a key.
    """
    return _key(_split_heredocs(command)[0] if "<<" in command else command)


def _key(text: str) -> str:
    """:func:`command_key` of a command whose heredoc bodies are taken out."""
    text = " ".join(text.split())
    previous = None
    while previous != text:
        previous = text
        for needs, pattern in _KEY_NOISE:
            if needs in text:  # a pattern run over a long script costs microseconds
                text = pattern.sub("", text)
    return text.strip()


#: What :func:`command_key` drops, in order, until nothing changes, each with a text it needs
#: (the anchored ones fail at once).
_KEY_NOISE = (
    ("cd", re.compile(r"^cd\s+\S+\s*(&&|;)\s*")),
    ("", re.compile(r"^(timeout\s+\S+|env(\s+\w+=\S+)+|\w+=\S+)\s+")),
    (">", re.compile(r"\s*\d?>\s*&\s*\d|\s*\d?>\s*/dev/null")),
    ("||", re.compile(r"\s*\|\|\s*true$")),
    ("|", re.compile(r"\s*\|\s*(head|tail|grep|less|more|sed -n|cat)\b[^|]*$")),
)


def python_writes(code: str) -> list[str]:
    """Paths a Python snippet writes (``open(p, "w")``, ``Path(p).write_text``). When it also
    writes to a path it does not spell out (a variable we could not resolve), the files it opens
    for reading count too: the common agent script reads a file, edits the text and writes it
    back."""
    found: list[str] = []
    unresolved = False
    for m in _OPEN_WRITE_RE.finditer(code):
        if not any(c in m.group("mode") for c in "wax+"):
            continue
        arg = m.group("arg").strip()
        literal = _STRING_LITERAL.fullmatch(arg)
        if literal:
            found.append(literal.group("value"))
        elif _IDENTIFIER.fullmatch(arg):
            assigned = re.findall(_ASSIGN_RE.format(name=re.escape(arg)), code)
            found.extend(value for _, value in assigned)
            unresolved = unresolved or not assigned
        else:
            unresolved = True  # sys.argv[1], os.path.join(...), an f-string...
    found.extend(m.group("lit") for m in _WRITE_TEXT_RE.finditer(code))
    if unresolved:
        found.extend(m.group(2) for m in _OPEN_READ_RE.finditer(code))
    return list(dict.fromkeys(found))


def patch_targets(text: str) -> list[str]:
    """Files a unified diff or an ``apply_patch`` envelope changes."""
    paths = [m.group("path") for m in _DIFF_TARGET_RE.finditer(text)]
    paths += [m.group("path") for m in _APPLY_PATCH_RE.finditer(text)]
    paths += [m.group("path") for m in _MOVE_TO_RE.finditer(text)]
    return list(dict.fromkeys(p for p in paths if p != "/dev/null"))


def _split_heredocs(command: str) -> tuple[str, list[tuple[int, str]]]:
    """The command with heredoc bodies removed, and each body with the position of its ``<<``.

    A body runs from the line after the ``<<WORD`` to the line that is exactly ``WORD`` (leading
    tabs allowed with ``<<-``), or to the end of the text when the terminator is missing.
    """
    bodies: list[tuple[int, str]] = []
    out: list[str] = []
    lines = command.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        for m in _HEREDOC_RE.finditer(line):
            word, strip_tabs = m.group(3), m.group(1) == "-"
            body: list[str] = []
            while i < len(lines):
                candidate = lines[i].lstrip("\t") if strip_tabs else lines[i]
                i += 1
                if candidate.strip() == word:
                    break
                body.append(lines[i - 1])
            bodies.append((len("\n".join(out)) - len(line) + m.start(), "\n".join(body)))
    return "\n".join(out), bodies


#: A newline outside quotes (an escape or a quoted string is matched whole, to step over it;
#: an unclosed quote runs to the end).
_BARE_NEWLINE = re.compile(r'\\.|\'[^\']*+(?:\'|\Z)|"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)|\n', re.S)


def _unquoted_newlines_to_semicolons(text: str) -> str:
    if "\n" not in text:
        return text
    return _BARE_NEWLINE.sub(lambda m: " ; " if m.group() == "\n" else m.group(), text)


#: One token as :class:`shlex.shlex` reads it (posix, punctuation characters, whitespace split,
#: no comments): a run of its punctuation, or a word of unquoted characters, backslash escapes
#: and quoted strings; only space, tab, CR and LF separate. The regex does in C what the lexer
#: does a character at a time.
_TOKEN = re.compile(
    r'[ \t\r\n]++|[();<>|&]++|(?:[^ \t\r\n();<>|&\'"\\]++|\\.|\'[^\']*+\'|"(?:[^"\\]++|\\.)*+")++',
    re.S,
)
#: What a word holds that is not itself: an escape, a single- or double-quoted string.
_UNQUOTE = re.compile(r'\\(.)|\'([^\']*+)\'|"((?:[^"\\]++|\\.)*+)"', re.S)
#: In double quotes a backslash escapes only a double quote or a backslash.
_DQ_ESCAPE = re.compile(r'\\(["\\])')


def _unquote(m: re.Match[str]) -> str:
    escaped, single, double = m.groups()
    if escaped is not None:
        return escaped
    return single if single is not None else _DQ_ESCAPE.sub(r"\1", double)


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    end = 0
    for m in _TOKEN.finditer(text):
        if m.start() != end:  # an unclosed quote or a final backslash: whitespace words
            return text.split()
        end = m.end()
        tok = m.group()
        if tok[0] not in " \t\r\n":
            out.append(
                _UNQUOTE.sub(_unquote, tok) if "'" in tok or '"' in tok or "\\" in tok else tok
            )
    return out if end == len(text) else text.split()


def _segments(tokens: list[str]) -> list[tuple[list[str], list[tuple[str, str]]]]:
    """Split tokens into simple commands: (argv, [(redirect operator, target), ...])."""
    result: list[tuple[list[str], list[tuple[str, str]]]] = []
    argv: list[str] = []
    redirects: list[tuple[str, str]] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in _OPERATORS:
            if argv or redirects:
                result.append((argv, redirects))
            argv, redirects = [], []
        elif tok in _REDIRECTS or (tok and not tok.strip("<>&|")):  # only redirect marks
            target = tokens[i + 1] if i + 1 < len(tokens) else ""
            if argv and argv[-1].isdigit() and tok.startswith(">"):
                argv.pop()  # the fd number of "2>" belongs to the operator
            redirects.append((tok, target))
            i += 1
        else:
            argv.append(tok)
        i += 1
    if argv or redirects:
        result.append((argv, redirects))
    return result


def _strip_prefixes(argv: list[str]) -> list[str]:
    args = list(argv)
    while args:
        head = args[0]
        if head in _WRAPPERS or _ASSIGNMENT.fullmatch(head):
            args.pop(0)
        elif head == "timeout" and len(args) > 1:
            args = args[2:]
        else:
            break
    return args


def _sed_files(args: list[str]) -> tuple[list[str], bool]:
    """The files ``sed`` is given and whether it edits them in place (``-i``, ``-i.bak``,
    ``-ni``, ``--in-place``)."""
    in_place = False
    script_given = False
    files: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-e", "--expression", "-f", "--file"):
            script_given = True
            i += 2
            continue
        if a.startswith("--"):
            in_place = in_place or a.startswith("--in-place")
        elif a.startswith("-") and len(a) > 1:
            in_place = in_place or "i" in a[1:].split(".", 1)[0]
            if a == "-i" and i + 1 < len(args) and args[i + 1] in ("", "''"):
                i += 1  # BSD sed: "-i ''" (no backup suffix)
        elif not script_given:
            script_given = True
        else:
            files.append(a)
        i += 1
    return files, in_place


def analyze_command(command: str) -> ShellEffects:
    """Parse one shell command (possibly several joined by ``&&``/``;``/newlines, with heredocs)
    and return its :class:`ShellEffects`. Never raises on odd input: unparsable parts are
    skipped. Callers that keep results (a :class:`~contextwarden._memo.Memo`) share them:
    treat them as read-only."""
    text, bodies = _split_heredocs(command) if "<<" in command else (command, [])
    effects = ShellEffects(command=command, key=_key(text))
    tokens = _tokens(_unquoted_newlines_to_semicolons(text))
    pending_bodies = [body for _, body in bodies]
    for argv_raw, redirects in _segments(tokens):
        body: str | None = None
        if any(op == "<<" for op, _ in redirects) and pending_bodies:
            body = pending_bodies.pop(0)
        argv = _strip_prefixes(argv_raw)
        for op, target in redirects:
            if op in (">", ">>", ">|", "&>", "&>>") and _is_real_path(target):
                effects.write(target, "redirect" if op != ">>" else "append")
                if body is not None:
                    effects.heredocs = {**effects.heredocs, target: body}
            elif op == "<" and target and argv and argv[0] in ("patch", "git"):
                effects.patch_inputs += (target,)
        if not argv:
            continue
        prog = argv[0].rsplit("/", 1)[-1]
        args = argv[1:]
        effects.last_program = prog
        _apply_program(effects, prog, args, body)
    return effects


#: Where :func:`call_effects` keeps what a call's command does: on the (immutable) call itself,
#: like its kinds and a message's token count, so the mask plan, the facts and the task type read
#: one analysis of it.
_EFFECTS_SLOT = "_cw_effects"
reserve_attribute(_EFFECTS_SLOT, (ToolCallBlock,))


def call_effects(call: ToolCallBlock, command: str) -> ShellEffects:
    """:func:`analyze_command` of ``command``, the shell command ``call`` runs, made once per
    call value (shared: treat it as read-only)."""
    known: ShellEffects | None = getattr(call, _EFFECTS_SLOT, None)
    if known is None or known.command != command:
        known = analyze_command(command)
        object.__setattr__(call, _EFFECTS_SLOT, known)  # not through __dict__: see Message
    return known


def _apply_program(effects: ShellEffects, prog: str, args: list[str], body: str | None) -> None:
    if prog not in READ_ONLY_PROGRAMS:
        effects.read_only = False
    files = [a for a in args if not a.startswith("-")]  # the arguments that are not options
    if prog in _READERS:
        effects.reads += tuple(p for p in files if _is_real_path(p))
    elif prog == "sed":
        edited, in_place = _sed_files(args)
        if in_place:
            for f in edited:
                effects.write(f, "sed -i")
        else:
            effects.reads += tuple(edited)
    elif prog == "perl" and any(a.startswith("-") and "i" in a for a in args):
        for f in files[1:]:
            effects.write(f, "perl -i")
    elif prog in ("tee", "touch"):
        for f in files:
            effects.write(f, prog)
    elif prog in ("cp", "install", "ln") and len(files) >= 2:
        effects.write(files[-1], prog)
    elif prog == "mv" and len(files) >= 2:
        effects.write(files[-1], "mv")
        effects.deletes += tuple(files[:-1])
    elif prog in ("rm", "unlink"):
        effects.read_only = False
        effects.deletes += tuple(p for p in files if _is_real_path(p))
    elif prog == "patch":
        effects.read_only = False
        if body is not None:
            for p in patch_targets(body):
                effects.write(p, "patch")
        targets = [a for a in files if not a.startswith("<")]
        if targets:
            effects.write(targets[0], "patch")
        for i, a in enumerate(args):
            if a in ("-i", "--input") and i + 1 < len(args):
                effects.patch_inputs += (args[i + 1],)
    elif prog == "git":
        _apply_git(effects, args, files, body)
    elif prog.startswith("python"):
        _apply_python(effects, args, files, body)
    elif prog in ("bash", "sh", "zsh", "source", "."):
        effects.scripts += tuple(files[:1])


def _apply_git(effects: ShellEffects, args: list[str], words: list[str], body: str | None) -> None:
    if not words:  # the arguments without options: the subcommand first
        return
    sub = words[0]
    if sub not in _GIT_READ_ONLY:
        effects.read_only = False
    if sub == "diff":
        effects.runs_git_diff = True
    rest = words[1:]
    if sub in ("checkout", "restore"):
        # "git checkout -- f" / "git restore f" put files back; "git checkout branch" does not
        # name files, so only arguments that look like paths count.
        after_dashes = args[args.index("--") + 1 :] if "--" in args else rest
        effects.reverts += tuple(p for p in after_dashes if "/" in p or "." in p)
    elif sub == "apply" or sub == "am":
        if body is not None:
            for p in patch_targets(body):
                effects.write(p, "git apply")
        effects.patch_inputs += tuple(rest)
    elif sub == "mv" and len(rest) >= 2:
        effects.write(rest[-1], "git mv")
        effects.deletes += tuple(rest[:-1])
    elif sub == "rm":
        effects.deletes += tuple(rest)


def _apply_python(
    effects: ShellEffects, args: list[str], words: list[str], body: str | None
) -> None:
    code: str | None = None
    if "-c" in args:
        i = args.index("-c")
        code = args[i + 1] if i + 1 < len(args) else None
    elif body is not None and not words:
        code = body  # python3 << 'EOF' ... EOF
    elif "-m" not in args:
        effects.scripts += tuple(words[:1])
    if code:
        for p in python_writes(code):
            effects.write(p, "python")
