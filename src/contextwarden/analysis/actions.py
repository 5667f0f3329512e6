"""What a tool call does, in one vocabulary: the tables of tool names by what they do to files,
and :class:`ToolAction`, one call (or one command written in text) read as a read, an edit, a
run or something else.

Every part that asks "does this call read or change a file?" asks here: the mask plan
(superseded and protected results), the facts a summary is written from, the working set of
edit sites, the strategies' signals. Names are compared after :func:`norm_name` (lower case,
``-`` as ``_``); a name no table holds is guessed from the words in it, erring towards an
action (a summary that lists one file too many costs a line; one that misses an edit loses a
must-keep fact). Shell commands are read by :mod:`.shell`. Pure functions of values.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .._messages import Message, TextBlock, ToolCallBlock, ToolResultBlock, reserve_attribute
from .._task import strip_injected
from .shell import analyze_command, call_effects, patch_targets

__all__ = [
    "CLINE_RESULT",
    "COMPLETE_WORDS",
    "EDITOR_COMMANDS",
    "EDITOR_TOOLS",
    "EXEC_WORDS",
    "FILE_TOOLS",
    "MEMORY_WORDS",
    "NOTIFICATION_TAGS",
    "PATCH_TOOLS",
    "RESEARCH_WORDS",
    "SEARCH_TOOLS",
    "SHELL_TOOLS",
    "TEXT_RESULT_PREFIX",
    "TODO_TOOLS",
    "TODO_WORDS",
    "XML_TAG",
    "ActionKind",
    "ActionMemo",
    "FileAction",
    "ToolAction",
    "all_paths",
    "call_action",
    "file_action",
    "first_path",
    "is_notification",
    "norm_name",
    "norm_path",
    "prints_file",
    "protected_results",
    "same_file",
    "shell_command",
    "split_commands",
    "superseded_results",
    "text_actions",
    "text_command",
    "xml_command",
    "output_block",
    "reads_as_output",
    "text_output",
    "tool_actions",
]

FileAction = Literal["read", "created", "modified", "deleted", "reverted"]
#: What a :class:`ToolAction` is: it printed a file's lines, changed files, ran a command, or
#: something else.
ActionKind = Literal["read", "edit", "run", "other"]

#: Tools by what they do to the file their arguments name (Claude Code, pi, OpenHands, Cline,
#: Codex, Gemini CLI, aider-style and generic names).
FILE_TOOLS: Mapping[str, FileAction] = {
    **dict.fromkeys(
        ("read", "read_file", "readfile", "view", "view_file", "open_file", "cat"), "read"
    ),
    **dict.fromkeys(("write", "write_file", "write_to_file", "create_file"), "created"),
    **dict.fromkeys(
        (
            "edit multiedit multi_edit edit_file replace_in_file str_replace insert notebookedit "
            "apply_patch applypatch apply_diff patch"
        ).split(),
        "modified",
    ),
}
#: Tools that change files by a patch in their arguments (the files are the patch's targets).
PATCH_TOOLS = frozenset({"apply_patch", "applypatch", "apply_diff", "patch"})
#: One tool for several actions, named by its ``command`` argument.
EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool", "file_editor"})
EDITOR_COMMANDS: Mapping[str, FileAction] = {
    "view": "read",
    "create": "created",
    "write": "created",
    "str_replace": "modified",
    "insert": "modified",
    "undo_edit": "modified",
    "append": "modified",
    "edit": "modified",
}
#: Tools that run a shell command (the command is read by :mod:`.shell`).
SHELL_TOOLS = frozenset(
    (
        "bash shell execute_bash run terminal run_command exec_command local_shell "
        "run_shell_command execute_command cmd command sh run_terminal_cmd container.exec"
    ).split()
)
#: Tools that look around without printing a file's lines or changing one.
SEARCH_TOOLS = frozenset(
    (
        "grep glob search find ls list list_dir list_directory list_files search_files "
        "file_search grep_search codebase_search"
    ).split()
)
#: Tools that write the agent's plan or todo list.
TODO_TOOLS = frozenset(
    "todowrite todo_write update_plan task_tracker write_todos todo todos update_todos plan".split()
)
#: Words in a tool's name (lower-cased, split on non-letters) that say what it does besides
#: files (a plan, memory, research, running code, finishing), for names no table above holds.
TODO_WORDS = frozenset({"todo", "todowrite", "todoread", "plan", "tasks", "task_list"})
MEMORY_WORDS = frozenset({"memory", "remember", "memorize", "note", "notes"})
RESEARCH_WORDS = frozenset(
    (
        "web websearch webfetch fetch browse browser http url sql query database db api docs lookup"
    ).split()
)
EXEC_WORDS = frozenset(
    (
        "bash shell sh terminal run exec execute command cmd python ipython jupyter git code "
        "interpreter"
    ).split()
)
COMPLETE_WORDS = frozenset({"finish", "submit", "complete", "done", "attempt_completion"})

#: A name no table holds: the words that make it a write, an edit or a read (first match).
_GUESSES: tuple[tuple[FileAction, tuple[str, ...]], ...] = (
    ("created", ("write", "create", "new_file", "save")),
    ("deleted", ("delete", "unlink")),
    ("modified", ("edit", "replace", "insert", "patch", "modify", "update", "rewrite", "apply")),
    ("modified", ("move", "rename")),
    ("read", ("read", "view", "open", "cat", "show_file", "look")),
)
#: Argument keys that name the file a call works on, most specific first.
PATH_KEYS = tuple(
    "path file_path filepath file filename target_file notebook_path absolute_path target "
    "file_name".split()
)


def norm_name(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def norm_path(path: str) -> str:
    """``path`` without quotes and leading ``./``."""
    path = path.strip().strip("'\"")
    while path.startswith("./"):
        path = path[2:]
    return path


def file_action(name: str, args: Mapping[str, Any]) -> FileAction | None:
    """What a call of tool ``name`` with ``args`` does to the file its arguments name: an
    editor's ``command`` when it names a file, else the tables, else a guess from the words of
    the name (todo, shell and search tools do nothing to files by their name)."""
    n = norm_name(name)
    cmd = args.get("command")
    if isinstance(cmd, str) and cmd in EDITOR_COMMANDS and first_path(args):
        return EDITOR_COMMANDS[cmd]
    known = FILE_TOOLS.get(n)
    if known is not None:
        return known
    if n in TODO_TOOLS or n in SHELL_TOOLS or n in SEARCH_TOOLS:
        return None
    for action, words in _GUESSES:
        if any(w in n for w in words):
            return action
    return None


def first_path(args: Mapping[str, Any]) -> str | None:
    for key in PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def all_paths(args: Mapping[str, Any]) -> list[str]:
    paths = [p for p in [first_path(args)] if p]
    for key in ("paths", "files", "file_paths"):
        value = args.get(key)
        if isinstance(value, list):
            paths.extend(v for v in value if isinstance(v, str))
    edits = args.get("edits")
    if isinstance(edits, list):
        paths.extend(p for e in edits if isinstance(e, Mapping) and (p := first_path(e)))
    return list(dict.fromkeys(paths))


def shell_command(name: str, args: Mapping[str, Any]) -> str | None:
    """The shell command a tool call runs, or ``None`` if it is not a shell tool."""
    n = norm_name(name)
    for key in ("command", "cmd", "script", "code"):
        value = args.get(key)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = " ".join(value)
        if isinstance(value, str) and value.strip():
            if value in EDITOR_COMMANDS and first_path(args):
                return None  # str_replace_editor's "command": "view"
            if n in SHELL_TOOLS or key in ("command", "cmd") and not first_path(args):
                return value
    raw = args.get("_raw")
    if n in SHELL_TOOLS and isinstance(raw, str):
        return raw
    return None


#: The ``id`` of a command output that arrives as a user message (agents that write their
#: commands in text: SWE-agent, mini-swe-agent without function calling) rather than as a tool
#: result: ``"msg:<index of that user message>"``.
TEXT_RESULT_PREFIX = "msg:"
#: A fenced block in a message's text: its label and body. Blocks pair left to right, so a
#: ```python snippet's closing fence never opens a block of its own.
_FENCE = re.compile(r"```([\w-]*)[ \t]*\n(.*?)\n?[ \t]*```", re.DOTALL)
#: Labels of a block that is a command to run (mini-swe-agent 1.x writes ``bash``, its 2.x
#: text-based config ``mswea_bash_command``); SWE-agent's blocks carry no label.
_SHELL_FENCES = frozenset({"bash", "sh", "shell", "console", "mswea_bash_command"})
#: How a command's output sent as a user message starts: mini-swe-agent's
#: ``<returncode>N</returncode>`` and ``<output>`` tags (``<exception>`` first when the command
#: failed to run), SWE-agent's ``OBSERVATION:`` label.
_OUTPUT_MARKERS = ("<returncode>", "<output>", "<exception>", "Observation:", "OBSERVATION:")
#: The header of a tool's result that Cline and Roo Code give back as text when the model
#: writes its tool uses as XML in its reply: ``[read_file for 'src/app.py'] Result:``.
CLINE_RESULT = re.compile(r"\[(?P<name>[\w:.-]+)(?: for [^\n]*?)?\] Result:")
#: How Claude Code reports a background task that stopped (a sub-agent's final report in its
#: ``<result>``, a background command's exit, a monitor's event): a user message the client
#: sends on its own, answering no command of the reply before it. Its 2.0 releases wrote a
#: sub-agent's as ``<agent-notification>``.
NOTIFICATION_TAGS = ("<task-notification>", "<agent-notification>")
#: Cline's XML tool uses that amount to a shell command (their parameters as child tags; Roo
#: Code's ``apply_diff`` is Cline's ``replace_in_file``, its ``read_file`` may nest several
#: ``<file><path>``): each is read as that command, so what it read, ran or wrote is known as
#: for a command in a fence.
_XML_TOOL = re.compile(
    r"<(execute_command|read_file|list_files|search_files|write_to_file|replace_in_file"
    r"|apply_diff)>(.*?)</\1>",
    re.DOTALL,
)
#: An XML tag's opening or closing, as Cline's tool uses write them.
XML_TAG = re.compile(r"</?[a-z_]+>")
_XML_PARAM = re.compile(r"<(path|command|regex|file_pattern|recursive)>\s*(.*?)\s*</\1>", re.DOTALL)
_SED_RANGE = re.compile(r"""\bsed\s+-n\s+(['"]?)(\d+)\s*(?:,\s*(\d+|\$))?\s*p\1""")
_HEAD_TAIL = re.compile(r"\b(head|tail)\s+(?:-n\s*)?-?(\d+)\b")
#: SWE-agent's file viewer commands (``open path [line]``, ``goto N``, ``edit A:B``).
_SWE_OPEN = re.compile(r"^\s*open\s+\"?([^\s\"]+)\"?(?:\s+(\d+))?\s*$")
_SWE_EDIT = re.compile(r"^\s*edit\s+\d+:\d+\b")


def split_commands(text: str) -> tuple[list[str], str]:
    """The command blocks of an assistant's ``text`` (those labelled as shell, else the
    unlabelled ones) and the text around them."""
    blocks = list(_FENCE.finditer(text)) if "```" in text else []
    shell = [b for b in blocks if b.group(1).lower() in _SHELL_FENCES]
    shell = shell or [b for b in blocks if not b.group(1)]
    for b in reversed(shell):
        text = text[: b.start()] + " " + text[b.end() :]
    return [b.group(2) for b in shell], text


def text_command(message: Message, commands: Sequence[str] | None = None) -> str | None:
    """The command an assistant ``message`` writes in its text: its one command block (see
    :func:`split_commands`; ``commands``: its blocks when already split) when it makes no
    tool calls, or with no block its one Cline XML tool use (:func:`xml_command`); None with
    none or several (an agent of the text protocol runs nothing then, it asks for exactly
    one)."""
    if message.role != "assistant" or message.tool_calls:
        return None
    if commands is None:
        commands = split_commands(message.text)[0]
    if not commands and "</" in message.text:
        return xml_command(message.text)
    return commands[0].strip() if len(commands) == 1 else None


def xml_command(text: str) -> str | None:
    """The shell command that the one Cline XML tool use in ``text`` amounts to:
    ``execute_command`` its command, ``read_file`` ``cat`` of its path, ``list_files`` ``ls``
    (``-R`` when recursive), ``search_files`` ``grep -rn`` of its regex, ``write_to_file`` a
    redirect into its path (``cat > path``), ``replace_in_file`` (Roo Code's ``apply_diff``)
    ``patch`` of its path; None for no such use, several, or another tool."""
    uses = _XML_TOOL.findall(text)
    if len(uses) != 1:
        return None
    tool, body = uses[0]
    params: dict[str, list[str]] = {}
    for key, value in _XML_PARAM.findall(body):
        params.setdefault(key, []).append(value)
    paths = [shlex.quote(p) for p in params.get("path", ())] or ["."]
    path = paths[0]  # an edit's content comes after its path and may hold anything
    if tool == "execute_command":
        return params.get("command", [""])[0] or None
    if tool == "read_file":
        return f"cat {' '.join(paths)}"
    if tool == "write_to_file":
        return f"cat > {path}"
    if tool in ("replace_in_file", "apply_diff"):
        return f"patch {path}"
    if tool == "list_files":
        return f"ls -R {path}" if params.get("recursive") == ["true"] else f"ls {path}"
    include = (
        f" --include={shlex.quote(params['file_pattern'][0])}" if "file_pattern" in params else ""
    )
    return f"grep -rn{include} -e {shlex.quote(params.get('regex', [''])[0])} {path}"


def text_output(before: Message, message: Message, position: int) -> ToolResultBlock | None:
    """User ``message`` (at ``position``) as the tool result it stands for
    (:func:`output_block`) when it answers the :func:`text_command` of the message ``before``
    it, or when it is a background task's report (:func:`is_notification`, which answers no
    command); None for anything else, the user's own words above all."""
    block = output_block(message, position) if message.role == "user" else None
    if block is None or is_notification(message.text):
        return block
    return None if text_command(before) is None else block


def is_notification(text: str) -> bool:
    """Whether ``text`` is nothing but a client's report of a background task (Claude Code's
    :data:`NOTIFICATION_TAGS`), with other injected blocks at most: no words of the user's."""
    return any(tag in text for tag in NOTIFICATION_TAGS) and not strip_injected(text).strip()


def reads_as_output(text: str) -> bool:
    """Whether ``text`` reads as a command's output sent as a user message: within its first
    400 characters, it starts with one of the output markers (after blank space), or names the
    command in ``<command>`` tags before its ``<output>`` (mini-swe-agent's note on a command
    that timed out), or it starts with Cline's result header and holds no ``<feedback>`` of
    the user's; or it is a background task's report (:func:`is_notification`)."""
    head = text[:400].lstrip()
    if CLINE_RESULT.match(head):
        # the user's words given with a result (a denied or commented tool use) stay words
        return "<feedback>" not in text
    if head.startswith(_OUTPUT_MARKERS) or -1 < head.find("<command>") < head.find("<output>"):
        return True
    return is_notification(text)


def output_block(message: Message, position: int) -> ToolResultBlock | None:
    """``message``'s text as the result ``"msg:<position>"`` when it reads as a command's
    output (:func:`reads_as_output`) and holds only text; else None."""
    content = message.content
    if not content or any(type(b) is not TextBlock for b in content):
        return None
    if not reads_as_output(message.text):
        return None
    texts = tuple(b for b in content if isinstance(b, TextBlock))
    return ToolResultBlock(f"{TEXT_RESULT_PREFIX}{position}", texts)


@dataclass(frozen=True, slots=True)
class ToolAction:
    """What one tool call (or one command written in text) did, as far as its name, arguments
    and command line tell.

    ``id`` names its result (the tool call's id, or ``"msg:<i>"`` for a command whose output is
    the user message at ``i``); ``position`` is the index of the message that holds the result;
    ``kind`` is ``read`` (it printed a file's lines: Read, ``view``, ``cat``, ``sed -n``,
    ``nl -ba``, ``head``/``tail`` of a file), ``edit`` (it changed files), ``run`` (any other
    command: tests, searches, listings) or ``other``; ``paths`` are the files it read or
    edited; ``key`` is what makes two actions equivalent (the same file and line range read,
    the same normalised command run): the later of two actions with one key supersedes the
    earlier's output. ``quotes``: an edit that names the text it replaces (Edit/MultiEdit
    ``old_string``, ``str_replace``, pi ``oldText``, Cline SEARCH blocks, ``apply_patch``
    context lines): the agent had to reproduce the file's lines exactly, from what it read.
    """

    id: str
    position: int
    kind: ActionKind
    paths: tuple[str, ...] = ()
    key: str | None = None
    quotes: bool = False


def same_file(a: str, b: str) -> bool:
    """Whether two spellings name one file (``/testbed/src/x.py`` and ``src/x.py`` do)."""
    a, b = norm_path(a), norm_path(b)
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def _shell_action(
    command: str, rid: str, position: int, call: ToolCallBlock | None = None
) -> ToolAction:
    """What running ``command`` (the shell command of ``call``, if any) did."""
    if "*** Begin Patch" in command or "*** Update File:" in command:
        # a patch: its context lines quote the file
        paths = tuple(norm_path(p) for p in patch_targets(command))
        return ToolAction(rid, position, "edit", paths, quotes=True)
    effects = analyze_command(command) if call is None else call_effects(call, command)
    written = [*effects.writes, *effects.deletes, *effects.reverts]
    if written:
        return ToolAction(rid, position, "edit", tuple(dict.fromkeys(map(norm_path, written))))
    reads = [norm_path(p) for p in effects.reads if not p.lstrip("+-").isdigit()]  # head -n 50
    # a file printed whole or by a line range: cat, nl -ba, sed -n 'A,Bp', head/tail -n N
    if len(reads) == 1 and effects.read_only and effects.last_program not in ("grep", "rg", "wc"):
        m, ht = _SED_RANGE.search(command), _HEAD_TAIL.search(command)
        span = f"{m[2]},{m[3] or m[2]}" if m else f"{ht[1]} {ht[2]}" if ht else ""
        return ToolAction(rid, position, "read", (reads[0],), f"read {reads[0]} {span}".rstrip())
    return ToolAction(rid, position, "run", tuple(reads), f"run {effects.key}")


def prints_file(call: ToolCallBlock) -> bool:
    """Whether ``call`` prints a file's lines (Read, ``view``, ``cat``, ``sed -n``, ``nl -ba``,
    ``head``/``tail`` of a file): a :class:`ToolAction` of kind ``read``."""
    return call_action(call, 0).kind == "read"


#: Where :func:`call_action` keeps what a call did (at position 0), on the call itself as
#: :func:`~.shell.call_effects` does: the mask plan, the facts and the edit sites read it.
_ACTION_SLOT = "_cw_action"
reserve_attribute(_ACTION_SLOT, (ToolCallBlock,))


def call_action(call: ToolCallBlock, position: int) -> ToolAction:
    """What ``call``, answered at ``position``, did (made once per call value)."""
    known: ToolAction | None = getattr(call, _ACTION_SLOT, None)
    if known is None:
        known = _call_action(call)
        object.__setattr__(call, _ACTION_SLOT, known)  # not through __dict__: see Message
    if position == 0:
        return known
    return ToolAction(known.id, position, known.kind, known.paths, known.key, known.quotes)


def _call_action(call: ToolCallBlock) -> ToolAction:
    name, call_id, position = call.name, call.id, 0
    a = call.input if isinstance(call.input, dict) else {}
    paths = tuple(norm_path(p) for p in all_paths(a))
    action = file_action(name, a)
    if action == "read" and paths:
        span = [a.get(k) for k in ("offset", "limit", "start_line", "end_line", "view_range")]
        key = f"read {paths[0]}" + "".join(f" {s}" for s in span if s is not None)
        return ToolAction(call_id, position, "read", paths[:1], key)
    if action is not None and action != "read" and (paths or norm_name(name) not in EDITOR_TOOLS):
        text = a.get("input") or a.get("patch") or a.get("diff") or a.get("_raw")
        if not paths and isinstance(text, str):
            paths = tuple(norm_path(p) for p in patch_targets(text))
        return ToolAction(call_id, position, "edit", paths, quotes=_quotes(a))
    argv = a.get("command")
    if (
        isinstance(argv, list)
        and len(argv) == 3
        and all(isinstance(x, str) for x in argv)
        and argv[1] in ("-c", "-lc")
    ):
        a = {**a, "command": argv[2]}  # Codex's shell: ["bash", "-lc", "<script>"]
    command = shell_command(name, a)
    if command is None and isinstance(a.get("_raw"), str):
        command = a["_raw"]
    if command is not None:
        return _shell_action(command, call_id, position, call)
    path = first_path(a)
    return ToolAction(call_id, position, "other", (norm_path(path),) if path else ())


_OLD_TEXT_KEYS = ("old_string", "old_str", "oldText", "old_text", "search")


def _quotes(args: Mapping[str, Any]) -> bool:
    """Whether an edit call's arguments name the text it replaces."""
    if any(isinstance(args.get(k), str) and args[k] for k in _OLD_TEXT_KEYS):
        return True
    edits = args.get("edits")
    if isinstance(edits, list) and any(
        isinstance(e, Mapping) and any(isinstance(e.get(k), str) for k in _OLD_TEXT_KEYS)
        for e in edits
    ):
        return True
    text = args.get("diff") or args.get("input") or args.get("patch")
    return isinstance(text, str) and ("SEARCH" in text or "*** Update File" in text or "@@" in text)


def text_actions(message: Message, position: int, history: Sequence[Message]) -> list[ToolAction]:
    """The command an assistant message writes in its text, answered by the next user message."""
    if position + 1 >= len(history) or history[position + 1].role != "user":
        return []
    command = text_command(message)
    if command is None:
        return []
    rid = f"{TEXT_RESULT_PREFIX}{position + 1}"
    opened = _SWE_OPEN.match(command)
    if opened:
        path = norm_path(opened.group(1))
        key = f"read {path} {opened.group(2) or ''}".rstrip()
        return [ToolAction(rid, position + 1, "read", (path,), key)]
    if _SWE_EDIT.match(command):
        return [ToolAction(rid, position + 1, "edit", ())]
    return [_shell_action(command, rid, position + 1)]


#: What :func:`tool_actions` remembers between calls on a growing history: the actions of a
#: call by ``(call id, result position)``, of an answered text command by ``("", position)``.
ActionMemo = dict[tuple[str, int], tuple[ToolAction, ...]]


def tool_actions(history: Sequence[Message], memo: ActionMemo | None = None) -> list[ToolAction]:
    """Every tool call of ``history`` (and every command written in an assistant's text and
    answered by the next user message) as a :class:`ToolAction`, in history order. A call with
    no result in ``history`` is left out. Pure; ``memo`` (kept by the caller for one growing
    history) spares analysing the same commands again on each call."""
    where: dict[str, int] = {}
    for i, m in enumerate(history):
        for r in m.tool_results:
            where[r.tool_call_id] = i
    out: list[ToolAction] = []
    for i, m in enumerate(history):
        if m.role != "assistant":
            continue
        calls = m.tool_calls
        if not calls:
            found = memo.get(("", i)) if memo is not None else None
            if found is None:
                found = tuple(text_actions(m, i, history))
                if memo is not None and i + 1 < len(history):  # answered: it stays so
                    memo["", i] = found
            out.extend(found)
            continue
        for c in calls:
            at = where.get(c.id)
            if at is None:
                continue
            found = memo.get((c.id, at)) if memo is not None else None
            if found is None:
                found = (call_action(c, at),)
                if memo is not None:
                    memo[c.id, at] = found
            out.extend(found)
    out.sort(key=lambda a: a.position)
    return out


def _result_texts(history: Sequence[Message]) -> dict[str, str]:
    texts: dict[str, str] = {}
    for i, m in enumerate(history):
        for r in m.tool_results:
            texts[r.tool_call_id] = r.text
        if m.role == "user":
            texts[f"{TEXT_RESULT_PREFIX}{i}"] = m.text
    return texts


def superseded_results(
    history: Sequence[Message], *, actions: Sequence[ToolAction] | None = None
) -> dict[str, str]:
    """The tool results a later one made redundant, each mapped to the id of the result that
    superseded it (the latest one).

    A result is superseded when a later action has the same :attr:`ToolAction.key` (the same
    file read again over the same line range, or whole; the same normalised command run again:
    a test re-run, a listing or a search repeated) or when a later result has exactly the same
    text (a duplicate, whatever produced it; empty and one-line results are not counted). Such
    results can go first, and be reduced to a one-line marker: the agent has the newer output.
    Edits' own results are never superseded by key (each edit changed something). Pure; keys
    are the ids of :func:`tool_actions` (``actions``: those already made of ``history``).
    """
    actions = tool_actions(history) if actions is None else actions
    texts = _result_texts(history)
    latest_by_key: dict[str, str] = {}
    latest_by_text: dict[str, str] = {}
    out: dict[str, str] = {}
    for a in reversed(actions):
        text = texts.get(a.id, "")
        if a.key is not None and a.kind != "edit":
            later = latest_by_key.get(a.key)
            # a whole-file read supersedes ranged reads of that file
            if later is None and a.kind == "read" and a.paths:
                later = latest_by_key.get(f"read {a.paths[0]}")
            if later is not None:
                out[a.id] = later
            else:
                latest_by_key[a.key] = a.id
        if "\n" in text and not text.isspace():
            dup = latest_by_text.get(text)
            if dup is not None:
                out.setdefault(a.id, dup)
            else:
                latest_by_text[text] = a.id
    return out


def protected_results(
    history: Sequence[Message],
    recent_edits: int = 8,
    *,
    quoting: bool = False,
    actions: Sequence[ToolAction] | None = None,
    superseded: Mapping[str, str] | None = None,
) -> frozenset[str]:
    """The tool results that should outlive a mask edit: the latest reads of the files the
    agent is working on.

    The working set is the files changed by the last ``recent_edits`` edit actions (Edit,
    MultiEdit, Write, ``str_replace_editor`` ``str_replace``/``create``/``insert``, Cline's
    ``replace_in_file``/``write_to_file``, ``apply_patch``, ``sed -i``, ``cat > f``, a Python
    script that writes the file...). Protected are (1) every read of a working file that no
    later read superseded (the file's current text, over each line range the agent viewed:
    what its next edit must quote exactly) and (2) every read made after the first of those
    recent edits (the agent reads what it is about to edit). Superseded results
    (:func:`superseded_results`) are never protected. A history without edits protects
    nothing. Pure; the ids are those of :func:`tool_actions`. With ``quoting``, only edits
    that name the text they replace (:attr:`ToolAction.quotes`) count: the agent must quote
    what it read exactly only for those (a ``sed -i`` or a whole-file write needs no read).

    Protection is a ranking, not a promise: a caller masks protected results last and keeps
    them whole while the budget allows, but a window cut may still drop them. ``actions`` and
    ``superseded``: those already made of ``history``.
    """
    actions = tool_actions(history) if actions is None else actions
    edits = [a for a in actions if a.kind == "edit" and a.paths and (a.quotes or not quoting)]
    if not edits:
        return frozenset()
    recent = edits[-recent_edits:]
    working = {p for a in recent for p in a.paths}
    since = recent[0].position
    if superseded is None:
        superseded = superseded_results(history, actions=actions)
    out: set[str] = set()
    for a in actions:
        if a.kind != "read" or a.id in superseded:
            continue
        if a.position >= since or any(same_file(p, w) for p in a.paths for w in working):
            out.add(a.id)
    return frozenset(out)
