"""Facts an agent history holds, extracted without an LLM: the raw material of every summary and
of :func:`~contextwarden.summarizers.base.check_summary`.

:func:`extract_facts` reads a span of messages once, in order, and returns a :class:`Facts`
value: the original task, every command run with its exit status, every file read, created,
modified, deleted or reverted, every error seen and whether it was later fixed, the latest plan
or todo list, pinned content, recent findings and the latest ``git diff --stat``.

It understands the common agent shapes: bash tools (mini-swe-agent's ``<returncode>N</returncode>``,
OpenHands' "exit code N", pi's "Command exited with code N", Claude Code's ``is_error``),
editor tools (``str_replace_editor``, ``str_replace_based_edit_tool``, ``edit``/``write``/
``read``, ``apply_patch``) and todo tools (``TodoWrite``, ``update_plan``, ``task_tracker``).
Pure and deterministic; the messages are not modified.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from .._messages import PIN_RE, Message, TextBlock, ToolCallBlock, ToolResultBlock
from ._sections import SummarySections, clip, looks_like_summary, parse_summary
from ._shell import analyze_command, command_key, patch_targets, python_writes

__all__ = [
    "CommandRun",
    "ErrorSeen",
    "Facts",
    "FileAction",
    "FileTouch",
    "TodoItem",
    "extract_facts",
]

FileAction = Literal["read", "created", "modified", "deleted", "reverted"]
TodoStatus = Literal["pending", "in_progress", "completed"]

#: Errors and commands are quoted at most this long in facts (summaries clip further).
ERROR_KEY_CHARS = 200
ERROR_EXCERPT_CHARS = 600
COMMAND_CHARS = 300
#: Seed 003 keeps "the last 10 memories".
MAX_MEMORIES = 10

_WRITE_ACTIONS: frozenset[str] = frozenset({"created", "modified", "deleted", "reverted"})


@dataclass(frozen=True)
class FileTouch:
    """One thing done to one file: ``path`` as the agent wrote it, ``action``, the index of the
    message that did it and ``via`` (the tool or shell idiom: ``sed -i``, ``edit``...)."""

    path: str
    action: FileAction
    index: int
    via: str


@dataclass(frozen=True)
class CommandRun:
    """A command (or tool call) and how it ended. ``ok`` is ``None`` when no result was seen;
    ``exit_code`` is ``None`` when the result does not state one."""

    command: str
    key: str
    tool: str
    index: int
    exit_code: int | None
    ok: bool | None
    read_only: bool


@dataclass(frozen=True)
class ErrorSeen:
    """An error in a tool result. ``key`` is its signature line (``ValueError: bad x``,
    ``error TS2739: ...``), the string a summary must quote; ``fixed_at`` is the index of the
    message that showed it fixed (a later success of the same command, or of an edit of the same
    file), ``None`` while unresolved."""

    index: int
    source: str
    key: str
    excerpt: str
    fixed_at: int | None = None
    #: what a later success must match to fix it: the command's key, ``file:PATH`` for an edit,
    #: ``read:PROGRAM`` for a failed read (any later successful read by the same program fixes
    #: an exploratory miss such as a wrong path)
    match_keys: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @property
    def fixed(self) -> bool:
        return self.fixed_at is not None


@dataclass(frozen=True)
class TodoItem:
    """One item of a plan or todo list."""

    text: str
    status: TodoStatus


@dataclass(frozen=True)
class Facts:
    """Everything :func:`extract_facts` found, in message order."""

    task: str | None = None
    commands: tuple[CommandRun, ...] = ()
    files: tuple[FileTouch, ...] = ()
    errors: tuple[ErrorSeen, ...] = ()
    plan: tuple[TodoItem, ...] = ()
    plan_index: int | None = None
    pins: tuple[str, ...] = ()
    memories: tuple[str, ...] = ()
    diff_stat: tuple[str, ...] = ()
    earlier: SummarySections | None = None
    earlier_files: tuple[FileTouch, ...] = field(default=(), repr=False)
    plan_source: str = ""

    def file_status(self) -> dict[str, FileAction]:
        """Each path's final state: the latest write action, else ``read``. A path created and
        then edited stays ``created``."""
        status: dict[str, FileAction] = {}
        for t in (*self.earlier_files, *self.files):
            before = status.get(t.path)
            if t.action == "read":
                status.setdefault(t.path, "read")
            elif t.action == "modified" and before == "created":
                continue
            else:
                status[t.path] = t.action
        return status

    @property
    def changed_files(self) -> tuple[str, ...]:
        """Every path written (created, modified, deleted or reverted), first-seen order: the
        must-keep file list of a summary."""
        return tuple(p for p, a in self.file_status().items() if a in _WRITE_ACTIONS)

    @property
    def read_files(self) -> tuple[str, ...]:
        """Paths only read, never written."""
        return tuple(p for p, a in self.file_status().items() if a == "read")

    @property
    def unresolved_errors(self) -> tuple[ErrorSeen, ...]:
        return tuple(e for e in self.errors if not e.fixed)

    @property
    def last_unresolved_error(self) -> ErrorSeen | None:
        """The most recent error not shown fixed later in the span."""
        unresolved = self.unresolved_errors
        return unresolved[-1] if unresolved else None


# -- tool classification -------------------------------------------------------------------------
_PATH_KEYS = ("path", "file_path", "filepath", "file", "filename", "target_file", "notebook_path",
              "absolute_path", "target", "file_name")
_SHELL_TOOLS = frozenset({"bash", "shell", "execute_bash", "run", "terminal", "run_command",
                          "exec_command", "local_shell", "run_shell_command", "execute_command",
                          "cmd", "command", "sh", "run_terminal_cmd", "container.exec"})
_EDITOR_COMMANDS: Mapping[str, FileAction] = {
    "view": "read", "create": "created", "str_replace": "modified", "insert": "modified",
    "undo_edit": "modified", "write": "created", "append": "modified", "edit": "modified",
}
_TODO_TOOLS = frozenset({"todowrite", "todo_write", "update_plan", "task_tracker", "write_todos",
                         "todo", "todos", "update_todos", "plan"})
_PATCH_TOOLS = frozenset({"apply_patch", "applypatch", "patch", "apply_diff"})


def _norm_name(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def _file_action_for_tool(name: str, args: Mapping[str, Any]) -> FileAction | None:
    n = _norm_name(name)
    cmd = args.get("command")
    if isinstance(cmd, str) and cmd in _EDITOR_COMMANDS and _first_path(args):
        return _EDITOR_COMMANDS[cmd]
    if any(w in n for w in ("write", "create", "new_file", "save")):
        return "created"
    if any(w in n for w in ("edit", "replace", "insert", "patch", "modify", "update", "rewrite")):
        return "modified"
    if any(w in n for w in ("read", "view", "open", "cat", "show_file", "look")):
        return "read"
    return None


def _first_path(args: Mapping[str, Any]) -> str | None:
    for key in _PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _all_paths(args: Mapping[str, Any]) -> list[str]:
    paths = [p for p in [_first_path(args)] if p]
    for key in ("paths", "files", "file_paths"):
        value = args.get(key)
        if isinstance(value, list):
            paths.extend(v for v in value if isinstance(v, str))
    for key in ("edits",):
        value = args.get(key)
        if isinstance(value, list):
            for item in value:
                if isinstance(item, Mapping):
                    p = _first_path(item)
                    if p:
                        paths.append(p)
    return list(dict.fromkeys(paths))


def _shell_command(name: str, args: Mapping[str, Any]) -> str | None:
    """The shell command a tool call runs, or ``None`` if it is not a shell tool."""
    n = _norm_name(name)
    for key in ("command", "cmd", "script", "code"):
        value = args.get(key)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = " ".join(value)
        if isinstance(value, str) and value.strip():
            if value in _EDITOR_COMMANDS and _first_path(args):
                return None  # str_replace_editor's "command": "view"
            if n in _SHELL_TOOLS or key in ("command", "cmd") and not _first_path(args):
                return value
    raw = args.get("_raw")
    if n in _SHELL_TOOLS and isinstance(raw, str):
        return raw
    return None


def _todo_items(args: Mapping[str, Any]) -> list[TodoItem] | None:
    for value in args.values():
        if not isinstance(value, list) or not value or not all(isinstance(v, Mapping) for v in value):
            continue
        items: list[TodoItem] = []
        for v in value:
            text = next((v[k] for k in ("content", "title", "step", "task", "description", "text")
                         if isinstance(v.get(k), str)), None)
            if text is None:
                break
            items.append(TodoItem(" ".join(text.split()), _todo_status(v)))
        else:
            return items
    return None


def _todo_status(item: Mapping[str, Any]) -> TodoStatus:
    raw = item.get("status", item.get("state", item.get("done", item.get("completed"))))
    if raw is True:
        return "completed"
    s = str(raw).lower()
    if s in ("completed", "complete", "done", "finished", "true", "x"):
        return "completed"
    if s in ("in_progress", "in-progress", "active", "doing", "started", "running"):
        return "in_progress"
    return "pending"


# -- results: exit status and errors -------------------------------------------------------------
_EXIT_PATTERNS = (
    re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>"),
    re.compile(r"(?i)\bexit(?:ed)? (?:with )?code[:\s]+(-?\d+)"),
    re.compile(r"(?i)\bexit (?:status|code)[:=\s]+(-?\d+)"),
    re.compile(r"(?i)\bprocess exited with (?:code|status) (-?\d+)"),
    re.compile(r"(?i)\breturn ?code[:=\s]+(-?\d+)"),
)
_TRACEBACK = "Traceback (most recent call last)"
_EXC_LINE = re.compile(
    r"^\s*((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure|Fault)\b"
    r"(?::.*)?)$"
)
_ERROR_LINE = re.compile(
    r"^\s*((?:error|fatal|FAILED|FAIL|ERROR|panic|Error)(?:\[\w+\])?[:\s!].*|.*\berror (?:TS|CS|C)\d+:.*"
    r"|.*: error: .*|E\s{2,}\w+Error.*|.*No such file or directory.*|.*command not found.*"
    r"|.*Permission denied.*|.*Segmentation fault.*)$"
)
_EDITOR_FAILURE = re.compile(
    r"(?i)^\s*(error\b|no replacement was performed|old_?str(ing)? .*not found|string to replace "
    r"not found|file .*does not exist|invalid `?path|could not find)"
)
_EXIT_LINE = re.compile(
    r"(?i)^\s*(<returncode>.*|\[?(the )?command (exited|finished|completed) with .*|exit code.*)$"
)
#: Programs whose exit status 1 means "no match" / "differs" / "false", not failure.
_SEARCH_PROGRAMS = frozenset({"grep", "egrep", "fgrep", "zgrep", "rg", "ag", "ack", "test", "[",
                              "diff", "cmp", "which", "git"})
_DIFF_STAT_LINE = re.compile(r"^\s*\S.*\s\|\s+(\d+\s*[+-]*|Bin .*)\s*$")
_DIFF_SUMMARY = re.compile(r"^\s*\d+ files? changed\b.*$")
_DIFF_HEADER = re.compile(r"(?m)^diff --git a/(\S+) b/(\S+)")
_GIT_STATUS_LONG = re.compile(r"(?m)^\s*(modified|new file|deleted|renamed):\s+(\S.*?)\s*$")
_GIT_STATUS_SHORT = re.compile(r"(?m)^(?=.?[MADRCU?])([ MADRCU?]{2}) (\S.*?)\s*$")


def _result_text(block: ToolResultBlock) -> str:
    return block.text


def _exit_code(text: str) -> int | None:
    """The exit status a result states: mini-swe-agent's ``<returncode>`` at the top, else the
    "exit code N" style lines agents append at the bottom (or, for short results, anywhere)."""
    m = _EXIT_PATTERNS[0].search(text[:200])
    if m:
        return int(m.group(1))
    for region in (text[-300:], text[:300]):
        codes: list[tuple[int, int]] = []
        for pattern in _EXIT_PATTERNS[1:]:
            codes.extend((m.start(), int(m.group(1))) for m in pattern.finditer(region))
        if codes:
            return max(codes)[1]
    return None


@lru_cache(maxsize=8192)
def _error_key(text: str) -> str | None:
    """The line that names an error in ``text``, or ``None`` when none stands out."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    if _TRACEBACK in text:
        after = text.rsplit(_TRACEBACK, 1)[1].splitlines()
        for ln in reversed(after):
            m = _EXC_LINE.match(ln)
            if m:
                return m.group(1).strip()
    for ln in reversed(lines):
        m = _EXC_LINE.match(ln)
        if m and ":" in m.group(1):
            return m.group(1).strip()
    for i, ln in enumerate(lines):
        if _ERROR_LINE.match(ln) and not _EXIT_LINE.match(ln):
            line = ln.strip()
            if len(line) < 20 and line.endswith(":") and i + 1 < len(lines):
                line = f"{line} {lines[i + 1].strip()}"  # "ERROR:" alone says nothing
            return line
    return None


#: A successful run's output counts as an error only when its last lines show one (a script
#: that ends printing the exception it reproduced), not when a passing test suite logs an
#: expected exception on the way.
_SUCCESS_TAIL_LINES = 6


def _tail(text: str, lines: int) -> str:
    kept = [ln for ln in text.splitlines() if ln.strip()][-lines:]
    return "\n".join(kept)


def _output_body(text: str) -> str:
    """The result text without the status framing (``<returncode>``, ``<output>`` tags)."""
    body = re.sub(r"<returncode>.*?</returncode>", "", text[:200], flags=re.DOTALL) + text[200:]
    body = re.sub(r"</?(returncode|output|warning|exception)[^>]*>", "", body)
    return body.strip()


# -- assistant text: plans and findings -------------------------------------------------------------
_NUMBERED = re.compile(r"^\s*(?:\d+[.)]|[-*]\s*\[[ xX]\])\s+(.+?)\s*$")
_CHECKBOX = re.compile(r"^\s*[-*]\s*\[([ xX])\]\s+(.+?)\s*$")
_FINDING_WORDS = re.compile(
    r"(?i)\b(found|the (issue|problem|bug|cause|error|fix)|root cause|because|works|fixed|"
    r"confirmed|turns out|is caused|i see|notice|succeed|passes|passed|failing|fails|"
    r"the reason|it seems|appears to)\b"
)
_INTENT = re.compile(r"(?i)^(let me|now let me|let's|i'll|i will|i need to|next,? i|now i'll|"
                     r"first,? let me|i'm going to)\b")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")


#: A numbered list is a plan only when the text leading into it says so (an analysis written
#: as "1. ... 2. ..." is not); checkbox lists always are.
_PLAN_CUE = re.compile(r"(?i)\b(plan|steps?|todo|to-do|next|need to|will|approach|going to|"
                       r"let me|tasks?|remaining)\b")


@lru_cache(maxsize=8192)
def _plan_from_text(text: str) -> tuple[TodoItem, ...] | None:
    items: list[TodoItem] = []
    lead: str | None = None
    checkbox = False
    lines = text.splitlines()
    for n, line in enumerate(lines):
        cb = _CHECKBOX.match(line)
        if cb:
            status: TodoStatus = "completed" if cb.group(1).lower() == "x" else "pending"
            items.append(TodoItem(clip(" ".join(cb.group(2).split()), 200), status))
            checkbox = True
        else:
            m = _NUMBERED.match(line)
            if not m:
                continue
            items.append(TodoItem(clip(" ".join(m.group(1).split()), 200), "pending"))
        if lead is None:
            lead = "\n".join(lines[max(0, n - 3) : n])[-300:]
    if len(items) < 2:
        return None
    if not checkbox and not _PLAN_CUE.search(lead or ""):
        return None
    return tuple(items)


@lru_cache(maxsize=8192)
def _findings(text: str) -> tuple[str, ...]:
    out: list[str] = []
    for sentence in _SENTENCE_SPLIT.split(text):
        s = " ".join(sentence.split()).strip("#*- ")
        if not 20 <= len(s) <= 300 or _INTENT.match(s) or s.startswith(("```", "|")):
            continue
        if _FINDING_WORDS.search(s):
            out.append(s)
    return tuple(out)


# -- the walk ----------------------------------------------------------------------------------
@dataclass
class _Pending:
    call: ToolCallBlock
    index: int
    command: str | None
    args: Mapping[str, Any]


class _Walker:
    def __init__(self, task: str | None) -> None:
        self.task = task
        self.commands: list[CommandRun] = []
        self.files: list[FileTouch] = []
        self.errors: list[ErrorSeen] = []
        self.plan: tuple[TodoItem, ...] = ()
        self.plan_index: int | None = None
        self.plan_source = ""
        self.pins: list[str] = []
        self.memories: list[str] = []
        self.diff_stat: tuple[str, ...] = ()
        self.earlier: SummarySections | None = None
        self.earlier_files: list[FileTouch] = []
        self.seen_paths: set[str] = set()
        self.pending: dict[str, _Pending] = {}
        self.scripts: dict[str, str] = {}  # file -> heredoc body written to it
        self.patches: dict[str, list[str]] = {}  # patch file -> targets
        self.last_text_command: tuple[str, int] | None = None

    # files ---------------------------------------------------------------------------------
    def touch(self, path: str, action: FileAction, index: int, via: str) -> None:
        """Record ``action`` on ``path``; writing a file already seen is a modification."""
        path = path.strip()
        if not path:
            return
        if action == "created" and path in self.seen_paths:
            action = "modified"
        self.seen_paths.add(path)
        self.files.append(FileTouch(path, action, index, via))

    # messages ------------------------------------------------------------------------------
    def message(self, index: int, msg: Message) -> None:
        self.collect_pins(msg)
        if msg.role == "user":
            text = msg.text
            if looks_like_summary(text):
                self.merge_earlier(text, index)
            elif self.task is None and text.strip() and not text.lstrip().startswith("<returncode>"):
                self.task = text.strip()
            if self.last_text_command and "<returncode>" in text[:200]:
                # mini-swe-agent's text protocol: the command was in a ```bash block, and the
                # reply with its return code shows it really ran
                command, at = self.last_text_command
                self.shell_effects(command, at)
                self.finish_command(command, "bash", at, index, text, is_error=False,
                                    read_only=analyze_command(command).read_only)
            self.last_text_command = None
        elif msg.role == "assistant":
            self.assistant(index, msg)
        elif msg.role == "tool":
            for block in msg.tool_results:
                self.result(index, block)

    def collect_pins(self, msg: Message) -> None:
        if not msg.is_pinned:
            return
        if msg.pinned:
            text = msg.text.strip()
            if text:
                self.pins.append(text)
            return
        texts = [b.text for b in msg.content if isinstance(b, TextBlock)]
        texts += [b.text for b in msg.tool_results]
        for t in texts:
            self.pins.extend(m.group(1).strip() for m in PIN_RE.finditer(t) if m.group(1).strip())

    def merge_earlier(self, text: str, index: int) -> None:
        sections = parse_summary(text, strict=False)
        if self.earlier is None:
            self.earlier = sections
        else:  # two earlier summaries in one span: keep both, oldest first
            self.earlier = SummarySections(
                *(f"{self.earlier.get(n)}\n{sections.get(n)}".strip() for n in
                  ("completed", "remaining", "current_state", "notes"))
            )
        for path, action in _files_from_summary(sections.current_state):
            self.earlier_files.append(FileTouch(path, action, index, "earlier summary"))
            self.seen_paths.add(path)

    def assistant(self, index: int, msg: Message) -> None:
        text = msg.text
        if text.strip():
            plan = _plan_from_text(text)
            if plan:
                self.plan, self.plan_index, self.plan_source = plan, index, "text"
            self.memories.extend(_findings(text))
            if not msg.tool_calls:
                blocks = re.findall(r"```(?:bash|sh|shell)\s*\n(.*?)```", text, re.DOTALL)
                if len(blocks) == 1:
                    self.last_text_command = (blocks[0].strip(), index)
        for call in msg.tool_calls:
            args = call.input if isinstance(call.input, Mapping) else {"_raw": call.arguments}
            self.call(index, call, args)

    def call(self, index: int, call: ToolCallBlock, args: Mapping[str, Any]) -> None:
        name = _norm_name(call.name)
        if name in _TODO_TOOLS or "todo" in name:
            items = _todo_items(args)
            if items is not None:
                self.plan, self.plan_index, self.plan_source = tuple(items), index, call.name
        command = _shell_command(call.name, args)
        if command is not None:
            self.shell_effects(command, index)
        self.pending[call.id] = _Pending(call, index, command, args)

    def shell_effects(self, command: str, index: int) -> None:
        effects = analyze_command(command)
        for path in effects.reads:
            self.touch(path, "read", index, "shell")
        for path, how in effects.writes.items():
            self.touch(path, "created" if how in ("redirect", "touch", "cp", "mv") else "modified",
                       index, how)
        for path, body in effects.heredocs.items():
            self.scripts[path] = body
            targets = patch_targets(body)
            if targets:
                self.patches[path] = targets
                self.patches.setdefault(path.rsplit("/", 1)[-1], targets)
            written, _ = python_writes(body)
            for p in written:  # a script that will edit files when it runs
                self.touch(p, "modified", index, f"script {path}")
        for script in effects.scripts:
            script_body = self.scripts.get(script) or self.scripts.get(script.rsplit("/", 1)[-1])
            if script_body:
                for p in python_writes(script_body)[0]:
                    self.touch(p, "modified", index, f"ran {script}")
        for patch in effects.patch_inputs:
            for p in self.patches.get(patch, self.patches.get(patch.rsplit("/", 1)[-1], [])):
                self.touch(p, "modified", index, f"patch {patch}")
        for path in effects.deletes:
            self.touch(path, "deleted", index, "rm")
        for path in effects.reverts:
            self.touch(path, "reverted", index, "git checkout")

    def result(self, index: int, block: ToolResultBlock) -> None:
        pending = self.pending.pop(block.tool_call_id, None)
        text = _result_text(block)
        if pending is None:
            # a result whose call is outside the span: still look for errors
            self.finish_command("", "tool", index, index, text, block.is_error, read_only=False)
            return
        name = pending.call.name
        if pending.command is not None:
            effects = analyze_command(pending.command)
            self.finish_command(pending.command, name, pending.index, index, text,
                                block.is_error, effects.read_only)
            if effects.runs_git_diff:
                self.git_output(text, index)
            if re.search(r"\bgit status\b", pending.command):
                self.git_status(text, index)
            if not effects.read_only and _exit_code(text) in (None, 0) and not block.is_error:
                for path in effects.writes:
                    self.resolve(f"file:{path}", index)
            return
        self.tool_result(pending, index, text, block.is_error)

    def tool_result(self, pending: _Pending, index: int, text: str, is_error: bool) -> None:
        name, args = pending.call.name, pending.args
        n = _norm_name(name)
        failed = is_error or bool(_EDITOR_FAILURE.match(text[:300]))
        path = _first_path(args) or ""
        described = f"{name} {path}".strip()
        match_key = f"file:{path}" if path else f"tool:{n}"
        action = _file_action_for_tool(name, args)
        self.record_run(described, match_key, name, pending.index, None, not failed,
                        read_only=action == "read")
        if failed:
            key = _error_key(text) or clip(" ".join(text.split()), ERROR_KEY_CHARS) or (
                f"{name} failed")
            keys = (match_key, f"read:{n}") if action == "read" else (match_key,)
            self.add_error(index, described, key, text, keys)
            return
        if action == "read":
            self.resolve(f"read:{n}", index)
        else:
            for p in _all_paths(args) or [""]:
                self.resolve(f"file:{p}" if p else match_key, index)
        if n in _PATCH_TOOLS or "patch" in n:
            raw = next((v for k, v in args.items() if isinstance(v, str) and
                        ("*** " in v or "+++ " in v)), "")
            for p in patch_targets(raw):
                self.touch(p, "modified", pending.index, name)
            if raw:
                return
        if action is not None:
            for p in _all_paths(args):
                self.touch(p, action, pending.index, name)

    def finish_command(self, command: str, tool: str, call_index: int, index: int, text: str,
                       is_error: bool, read_only: bool) -> None:
        code = _exit_code(text)
        body = _output_body(text)
        key = command_key(command) if command else ""
        prog = analyze_command(command).last_program if command else ""
        search_miss = code == 1 and prog in _SEARCH_PROGRAMS
        failed = bool((code not in (None, 0) and not search_miss) or (is_error and code is None))
        signature = None
        if failed:
            signature = _error_key(body)
        elif not read_only:
            tail = _tail(body, _SUCCESS_TAIL_LINES)
            signature = _error_key(tail)
            if signature and not _EXC_LINE.match(signature):
                signature = None  # a stray "error" word in a successful run's output
        ok = not failed and signature is None
        if command:
            self.record_run(command, key, tool, call_index, code, ok, read_only)
        if not ok:
            if signature is None:
                last = next((ln.strip() for ln in reversed(body.splitlines())
                             if ln.strip() and not _EXIT_LINE.match(ln)), "")
                signature = clip(last, ERROR_KEY_CHARS) if last else (
                    f"`{clip(key, 80)}` exited with code {code}" if code is not None
                    else f"{tool} reported an error")
            source = f"`{clip(key or command, 120)}`" if command else tool
            keys = (key or f"result:{index}",) + ((f"read:{prog}",) if read_only and prog else ())
            self.add_error(index, source, signature, body, keys)
        elif key:
            self.resolve(key, index)
            if read_only and prog:
                self.resolve(f"read:{prog}", index)

    def record_run(self, command: str, key: str, tool: str, index: int, code: int | None,
                   ok: bool | None, read_only: bool) -> None:
        self.commands.append(CommandRun(clip(" ".join(command.split()), COMMAND_CHARS), key, tool,
                                        index, code, ok, read_only))

    def add_error(self, index: int, source: str, key: str, text: str,
                  match_keys: tuple[str, ...]) -> None:
        key = clip(" ".join(key.split()), ERROR_KEY_CHARS)
        excerpt = _error_excerpt(text, key)
        self.errors.append(ErrorSeen(index, source, key, excerpt, None, match_keys))

    def resolve(self, match_key: str, index: int) -> None:
        """A success of ``match_key`` (the same command, or a write of the same file) fixes the
        earlier unresolved errors it caused."""
        for i, err in enumerate(self.errors):
            if err.fixed_at is None and match_key in err.match_keys:
                self.errors[i] = ErrorSeen(err.index, err.source, err.key, err.excerpt, index,
                                           err.match_keys)

    def git_output(self, text: str, index: int) -> None:
        for m in _DIFF_HEADER.finditer(text):
            self.touch(m.group(2), "modified", index, "git diff")
        stat = [ln.rstrip() for ln in text.splitlines()
                if _DIFF_STAT_LINE.match(ln) or _DIFF_SUMMARY.match(ln)]
        if stat and any(_DIFF_SUMMARY.match(ln) for ln in stat):
            self.diff_stat = tuple(" ".join(ln.split()) for ln in stat)

    def git_status(self, text: str, index: int) -> None:
        for m in _GIT_STATUS_LONG.finditer(text):
            action: FileAction = "created" if m.group(1) == "new file" else "modified"
            self.touch(m.group(2).split(" -> ")[-1], action, index, "git status")
        for m in _GIT_STATUS_SHORT.finditer(text):
            flag, path = m.group(1), m.group(2).split(" -> ")[-1]
            self.touch(path, "created" if "?" in flag or "A" in flag else "modified", index,
                       "git status")

    def finish(self) -> Facts:
        # calls whose results are beyond the span: their file effects still happened
        for pending in self.pending.values():
            if pending.command is None:
                action = _file_action_for_tool(pending.call.name, pending.args)
                if action is not None and action != "read":
                    for p in _all_paths(pending.args):
                        self.touch(p, action, pending.index, pending.call.name)
            else:
                self.record_run(pending.command, command_key(pending.command),
                                pending.call.name, pending.index, None, None,
                                analyze_command(pending.command).read_only)
        return Facts(
            task=self.task,
            commands=tuple(self.commands),
            files=tuple(self.files),
            errors=tuple(self.errors),
            plan=self.plan,
            plan_index=self.plan_index,
            plan_source=self.plan_source,
            pins=tuple(dict.fromkeys(self.pins)),
            memories=tuple(dict.fromkeys(reversed(self.memories)))[:MAX_MEMORIES][::-1],
            diff_stat=self.diff_stat,
            earlier=self.earlier,
            earlier_files=tuple(self.earlier_files),
        )


def _error_excerpt(text: str, key: str) -> str:
    body = _output_body(text)
    lines = body.splitlines()
    for i, ln in enumerate(lines):
        if key[:60] and key[:60] in " ".join(ln.split()):
            start = max(0, i - 3)
            return clip("\n".join(lines[start : i + 3]).strip(), ERROR_EXCERPT_CHARS)
    return clip(body, ERROR_EXCERPT_CHARS)


_SUMMARY_FILE_LINE = re.compile(r"^\s*-\s+(\S+?)(?:\s+\((reverted|deleted)\))?\s*$")


def _files_from_summary(current_state: str) -> list[tuple[str, FileAction]]:
    """File paths listed under our own "Files changed" heading of an earlier summary."""
    out: list[tuple[str, FileAction]] = []
    heading: str | None = None
    for line in current_state.splitlines():
        if line.endswith(":") and not line.startswith("-"):
            heading = line[:-1].strip().lower()
            continue
        if heading in ("files changed", "modified files", "created files"):
            m = _SUMMARY_FILE_LINE.match(line)
            if m:
                action: FileAction = "modified"
                if m.group(2) in ("reverted", "deleted"):
                    action = "reverted" if m.group(2) == "reverted" else "deleted"
                out.append((m.group(1), action))
    return out


def extract_facts(
    messages: Sequence[Message] | Iterable[Message],
    *,
    task: str | None = None,
    previous_summary: str | None = None,
) -> Facts:
    """Read ``messages`` in order and return their :class:`Facts`.

    ``task`` is the original task when known; otherwise the first user message's text is used.
    ``previous_summary`` (and any message in the span that is itself a four-part summary) is
    merged: its file list carries over, its sections are kept in :attr:`Facts.earlier`.
    """
    walker = _Walker(task.strip() if task and task.strip() else None)
    if previous_summary:
        walker.merge_earlier(previous_summary, -1)
    for i, msg in enumerate(messages):
        walker.message(i, msg)
    return walker.finish()
