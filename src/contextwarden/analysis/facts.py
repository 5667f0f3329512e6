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
from dataclasses import dataclass, field, replace
from typing import Any, cast

from .._memo import Memo
from .._messages import PIN_RE, Message, TextBlock, ToolCallBlock, ToolResultBlock
from .._task import strip_injected
from .actions import (
    PATCH_TOOLS,
    TODO_TOOLS,
    FileAction,
    all_paths,
    file_action,
    first_path,
    norm_name,
    reads_as_output,
    shell_command,
    text_command,
)
from .mentions import CodeMentions, code_mentions
from .readers import (
    DIFF_HEADER,
    DIFF_STAT_LINE,
    DIFF_SUMMARY,
    EDITOR_FAILURE,
    ERROR_KEY_CHARS,
    EXC_LINE,
    EXIT_LINE,
    GIT_STATUS_LONG,
    GIT_STATUS_SHORT,
    SEARCH_PROGRAMS,
    SUCCESS_TAIL_LINES,
    TodoItem,
    error_excerpt,
    error_key,
    exit_code,
    findings,
    last_lines,
    output_body,
    plan_from_text,
    todo_items,
)
from .sections import (
    SECTIONS,
    SummarySections,
    clip,
    heading_name,
    looks_like_summary,
    parse_summary,
)
from .shell import ShellEffects, analyze_command, call_effects, patch_targets, python_writes
from .working import EditSite, edit_sites

__all__ = [
    "CommandRun",
    "ErrorSeen",
    "Facts",
    "FileAction",
    "FileTouch",
    "TodoItem",
    "extract_facts",
    "walk_facts",
]


#: Commands are quoted at most this long in facts (summaries clip further).
COMMAND_CHARS = 300
#: How many memories (the newest) a summary keeps.
MAX_MEMORIES = 10


@dataclass(frozen=True, slots=True)
class FileTouch:
    """One thing done to one file: ``path`` as the agent wrote it, ``action`` and the index of
    the message that did it."""

    path: str
    action: FileAction
    index: int


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
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

    @property
    def fixed(self) -> bool:
        return self.fixed_at is not None


@dataclass(frozen=True)
class Facts:
    """Everything :func:`extract_facts` found, in message order; ``code``: the files and code
    names in play, scored (:func:`~contextwarden.analysis.mentions.code_mentions`);
    ``working``: the edits that name the text they replace, with the file's lines around each
    (:func:`~contextwarden.analysis.working.edit_sites`)."""

    task: str | None = None
    commands: tuple[CommandRun, ...] = ()
    files: tuple[FileTouch, ...] = ()
    errors: tuple[ErrorSeen, ...] = ()
    plan: tuple[TodoItem, ...] = ()
    plan_index: int | None = None
    pins: tuple[str, ...] = ()
    memories: tuple[str, ...] = ()
    #: what the user wrote after the task, verbatim (client-injected blocks taken out), in order
    instructions: tuple[str, ...] = ()
    diff_stat: tuple[str, ...] = ()
    earlier: SummarySections | None = None
    earlier_files: tuple[FileTouch, ...] = field(default=(), repr=False)
    plan_source: str = ""
    code: CodeMentions = field(default_factory=CodeMentions, repr=False)
    working: tuple[EditSite, ...] = field(default=(), repr=False)

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
        return tuple(p for p, a in self.file_status().items() if a != "read")

    @property
    def writes(self) -> frozenset[int]:
        """The indices of the messages that wrote a file (created, modified, deleted or
        reverted it)."""
        return frozenset(t.index for t in self.files if t.action != "read")

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


# -- the walk ----------------------------------------------------------------------------------
@dataclass(slots=True)
class _Pending:
    call: ToolCallBlock
    index: int
    command: str | None
    args: Mapping[str, Any]
    effects: ShellEffects | None  # the command's, read when the call was


class _Walker:
    def __init__(self, task: str | None, memo: Memo, commands: bool = True) -> None:
        self.task = task
        self.memo = memo
        self.keep_commands = commands
        self.commands: list[CommandRun] = []
        self.files: list[FileTouch] = []
        self.errors: list[ErrorSeen] = []
        #: unresolved errors (indices in ``errors``) by the keys a success would fix them by
        self.open_errors: dict[str, list[int]] = {}
        self.plan: tuple[TodoItem, ...] = ()
        self.plan_index: int | None = None
        self.plan_source = ""
        self.pins: list[str] = []
        self.memories: list[str] = []
        self.instructions: list[str] = []
        self.diff_stat: tuple[str, ...] = ()
        self.earlier: SummarySections | None = None
        self.earlier_files: list[FileTouch] = []
        self.seen_paths: set[str] = set()
        self.pending: dict[str, _Pending] = {}
        self.scripts: dict[str, str] = {}  # file -> heredoc body written to it
        self.patches: dict[str, list[str]] = {}  # patch file -> targets
        self.last_text_command: tuple[str, int] | None = None

    def effects(self, command: str) -> ShellEffects:
        return self.memo(analyze_command, command, costly=True)

    def error_key(self, text: str) -> str | None:
        return self.memo(error_key, text, lambda key: len(key) if key else 0)

    # files ---------------------------------------------------------------------------------
    def touch(self, path: str, action: FileAction, index: int) -> None:
        """Record ``action`` on ``path``; writing a file already seen is a modification."""
        path = path.strip()
        if not path:
            return
        if action == "created" and path in self.seen_paths:
            action = "modified"
        self.seen_paths.add(path)
        self.files.append(FileTouch(path, action, index))

    # messages ------------------------------------------------------------------------------
    def message(self, index: int, msg: Message) -> None:
        self.collect_pins(msg)
        if msg.role == "user":
            text = msg.text
            output = reads_as_output(text)
            if looks_like_summary(text):
                self.merge_earlier(text, index)
            elif not output:
                # the user's own words: not the blocks a client injects (environment context,
                # system reminders, repository maps); a message of those alone is not the task
                own = strip_injected(text).strip()
                if self.task is None:
                    self.task = own or None
                elif own and own != self.task.strip():
                    self.instructions.append(own)
            if self.last_text_command and output:
                # the text protocol (mini-swe-agent): the command was written in a fenced
                # block, and the reply that reads as its output shows it really ran
                command, at = self.last_text_command
                effects = self.shell_effects(command, at)
                self.finish_command(
                    command,
                    "bash",
                    at,
                    index,
                    text,
                    is_error=False,
                    read_only=effects.read_only,
                    effects=effects,
                )
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
                *(f"{self.earlier.get(n)}\n{sections.get(n)}".strip() for n in SECTIONS)
            )
        for path, action in _files_from_summary(sections.current_state):
            self.earlier_files.append(FileTouch(path, action, index))
            self.seen_paths.add(path)

    def assistant(self, index: int, msg: Message) -> None:
        text = msg.text
        if text.strip():
            plan = self.memo(plan_from_text, text)
            if plan:
                self.plan, self.plan_index, self.plan_source = plan, index, "text"
            self.memories.extend(self.memo(findings, text))
            command = text_command(msg)
            if command is not None:
                self.last_text_command = (command, index)
        for call in msg.tool_calls:
            args = call.input if isinstance(call.input, Mapping) else {"_raw": call.arguments}
            self.call(index, call, args)

    def call(self, index: int, call: ToolCallBlock, args: Mapping[str, Any]) -> None:
        name = norm_name(call.name)
        if name in TODO_TOOLS or "todo" in name:
            items = todo_items(args)
            if items is not None:
                self.plan, self.plan_index, self.plan_source = tuple(items), index, call.name
        command = shell_command(call.name, args)
        effects = self.shell_effects(command, index, call) if command is not None else None
        self.pending[call.id] = _Pending(call, index, command, args, effects)

    def shell_effects(
        self, command: str, index: int, call: ToolCallBlock | None = None
    ) -> ShellEffects:
        effects = self.effects(command) if call is None else call_effects(call, command)
        for path in effects.reads:
            self.touch(path, "read", index)
        for path, how in effects.writes.items():
            self.touch(
                path, "created" if how in ("redirect", "touch", "cp", "mv") else "modified", index
            )
        for path, body in effects.heredocs.items():
            self.scripts[path] = body
            targets = self.memo(patch_targets, body)
            if targets:
                self.patches[path] = targets
                self.patches.setdefault(path.rsplit("/", 1)[-1], targets)
            # a script that will edit files when it runs (read again by the next walk)
            for p in self.memo(python_writes, body):
                self.touch(p, "modified", index)
        for script in effects.scripts:
            script_body = self.scripts.get(script) or self.scripts.get(script.rsplit("/", 1)[-1])
            if script_body:
                for p in self.memo(python_writes, script_body):
                    self.touch(p, "modified", index)
        for patch in effects.patch_inputs:
            for p in self.patches.get(patch, self.patches.get(patch.rsplit("/", 1)[-1], [])):
                self.touch(p, "modified", index)
        for path in effects.deletes:
            self.touch(path, "deleted", index)
        for path in effects.reverts:
            self.touch(path, "reverted", index)
        return effects

    def result(self, index: int, block: ToolResultBlock) -> None:
        pending = self.pending.pop(block.tool_call_id, None)
        text = block.text
        if pending is None:
            # a result whose call is outside the span: still look for errors
            self.finish_command("", "tool", index, index, text, block.is_error, read_only=False)
            return
        name = pending.call.name
        effects = pending.effects
        if pending.command is not None and effects is not None:
            code = self.finish_command(
                pending.command,
                name,
                pending.index,
                index,
                text,
                block.is_error,
                effects.read_only,
                effects,
            )
            if effects.runs_git_diff:
                self.git_output(text, index)
            if "git" in pending.command and re.search(r"\bgit status\b", pending.command):
                self.git_status(text, index)
            if not effects.read_only and code in (None, 0) and not block.is_error:
                for path in effects.writes:
                    self.resolve(f"file:{path}", index)
            return
        self.tool_result(pending, index, text, block.is_error)

    def tool_result(self, pending: _Pending, index: int, text: str, is_error: bool) -> None:
        name, args = pending.call.name, pending.args
        n = norm_name(name)
        failed = is_error or bool(EDITOR_FAILURE.match(text[:300]))
        path = first_path(args) or ""
        described = f"{name} {path}".strip()
        match_key = f"file:{path}" if path else f"tool:{n}"
        action = file_action(name, args)
        self.record_run(
            described, match_key, name, pending.index, None, not failed, read_only=action == "read"
        )
        if failed:
            key = (
                self.error_key(text)
                or clip(" ".join(text.split()), ERROR_KEY_CHARS)
                or (f"{name} failed")
            )
            keys = (match_key, f"read:{n}") if action == "read" else (match_key,)
            self.add_error(index, described, key, text, keys)
            return
        if action == "read":
            self.resolve(f"read:{n}", index)
        else:
            for p in all_paths(args) or [""]:
                self.resolve(f"file:{p}" if p else match_key, index)
        if n in PATCH_TOOLS or "patch" in n:
            raw = next(
                (v for k, v in args.items() if isinstance(v, str) and ("*** " in v or "+++ " in v)),
                "",
            )
            for p in patch_targets(raw):
                self.touch(p, "modified", pending.index)
            if raw:
                return
        if action is not None:
            for p in all_paths(args):
                self.touch(p, action, pending.index)

    def finish_command(
        self,
        command: str,
        tool: str,
        call_index: int,
        index: int,
        text: str,
        is_error: bool,
        read_only: bool,
        effects: ShellEffects | None = None,
    ) -> int | None:
        """Record how ``command`` ended (its result ``text``); its exit code."""
        code = exit_code(text)
        body = output_body(text)
        key = effects.key if command and effects is not None else ""
        prog = effects.last_program if command and effects is not None else ""
        search_miss = code == 1 and prog in SEARCH_PROGRAMS
        failed = bool((code not in (None, 0) and not search_miss) or (is_error and code is None))
        signature = None
        if failed:
            signature = self.error_key(body)
        elif not read_only:
            tail_text = last_lines(body, SUCCESS_TAIL_LINES)
            signature = self.error_key(tail_text)
            if signature and not EXC_LINE.match(signature):
                signature = None  # a stray "error" word in a successful run's output
        ok = not failed and signature is None
        if command:
            self.record_run(command, key, tool, call_index, code, ok, read_only)
        if not ok:
            if signature is None:
                last = next(
                    (
                        ln.strip()
                        for ln in reversed(body.splitlines())
                        if ln.strip() and not EXIT_LINE.match(ln)
                    ),
                    "",
                )
                signature = (
                    clip(last, ERROR_KEY_CHARS)
                    if last
                    else (
                        f"`{clip(key, 80)}` exited with code {code}"
                        if code is not None
                        else f"{tool} reported an error"
                    )
                )
            source = f"`{clip(key or command, 120)}`" if command else tool
            keys = (key or f"result:{index}",) + ((f"read:{prog}",) if read_only and prog else ())
            self.add_error(index, source, signature, body, keys)
        elif key:
            self.resolve(key, index)
            if read_only and prog:
                self.resolve(f"read:{prog}", index)
        return code

    def record_run(
        self,
        command: str,
        key: str,
        tool: str,
        index: int,
        code: int | None,
        ok: bool | None,
        read_only: bool,
    ) -> None:
        if not self.keep_commands:
            return
        text = clip(" ".join(command.split()), COMMAND_CHARS)
        self.commands.append(CommandRun(text, key, tool, index, code, ok, read_only))

    def add_error(
        self, index: int, source: str, key: str, text: str, match_keys: tuple[str, ...]
    ) -> None:
        key = clip(" ".join(key.split()), ERROR_KEY_CHARS)
        excerpt = error_excerpt(text, key)
        for match_key in dict.fromkeys(match_keys):
            self.open_errors.setdefault(match_key, []).append(len(self.errors))
        self.errors.append(ErrorSeen(index, source, key, excerpt))

    def resolve(self, match_key: str, index: int) -> None:
        """A success of ``match_key`` (the same command, or a write of the same file) fixes the
        earlier unresolved errors it caused."""
        for i in self.open_errors.pop(match_key, ()):
            err = self.errors[i]
            if err.fixed_at is None:  # an error with several keys may be fixed by another
                self.errors[i] = replace(err, fixed_at=index)

    def git_output(self, text: str, index: int) -> None:
        for m in DIFF_HEADER.finditer(text):
            self.touch(m.group(2), "modified", index)
        stat = [
            ln.rstrip()
            for ln in text.splitlines()
            if DIFF_STAT_LINE.match(ln) or DIFF_SUMMARY.match(ln)
        ]
        if stat and any(DIFF_SUMMARY.match(ln) for ln in stat):
            self.diff_stat = tuple(" ".join(ln.split()) for ln in stat)

    def git_status(self, text: str, index: int) -> None:
        for m in GIT_STATUS_LONG.finditer(text):
            action: FileAction = "created" if m.group(1) == "new file" else "modified"
            self.touch(m.group(2).split(" -> ")[-1], action, index)
        for m in GIT_STATUS_SHORT.finditer(text):
            flag, path = m.group(1), m.group(2).split(" -> ")[-1]
            self.touch(path, "created" if "?" in flag or "A" in flag else "modified", index)

    def finish(self) -> Facts:
        # calls whose results are beyond the span: their file effects still happened
        for pending in self.pending.values():
            if pending.command is None:
                action = file_action(pending.call.name, pending.args)
                if action is not None and action != "read":
                    for p in all_paths(pending.args):
                        self.touch(p, action, pending.index)
            else:
                self.record_run(
                    pending.command,
                    pending.effects.key if pending.effects is not None else "",
                    pending.call.name,
                    pending.index,
                    None,
                    None,
                    pending.effects.read_only if pending.effects is not None else True,
                )
        return Facts(
            task=self.task,
            instructions=tuple(self.instructions),
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


_SUMMARY_FILE_LINE = re.compile(
    r"^\s*-\s+(\S+?)(?:\s+\((created|modified|reverted|deleted)\))?\s*$"
)
#: The extractive summary lists the files of one action together: "- created: a.py, b.py".
_SUMMARY_FILES_LINE = re.compile(r"^\s*-\s+(created|modified|reverted|deleted): (.+?)\s*$")


def _files_from_summary(current_state: str) -> list[tuple[str, FileAction]]:
    """File paths listed under our own "Files changed" heading of an earlier summary."""
    out: list[tuple[str, FileAction]] = []
    heading: str | None = None
    for line in current_state.splitlines():
        if line.endswith(":") and not line.startswith("-"):
            # "Files changed (recall cw:...):" is the same heading as "Files changed:"
            heading = heading_name(line[:-1]).strip().lower()
            continue
        if heading not in ("files changed", "modified files", "created files"):
            continue
        many = _SUMMARY_FILES_LINE.match(line)
        if many:
            action = cast(FileAction, many.group(1))
            out.extend((p.strip(), action) for p in many.group(2).split(", ") if p.strip())
            continue
        m = _SUMMARY_FILE_LINE.match(line)
        if m:
            # one file a line: "path" when modified, "path (note)" otherwise
            out.append((m.group(1), cast(FileAction, m.group(2) or "modified")))
    return out


def walk_facts(
    messages: Sequence[Message],
    *,
    task: str | None = None,
    previous_summary: str | None = None,
    memo: Memo | None = None,
    commands: bool = True,
) -> Facts:
    """:func:`extract_facts` without :attr:`Facts.code` and :attr:`Facts.working` (left
    empty): the commands, files, errors, plan, pins and memories, in one walk. Without
    ``commands``, :attr:`Facts.commands` is left empty too (a caller reading only files and
    errors spares a record per command)."""
    # the user's own words: a task given as the first user message's text may still carry the
    # client's injected blocks (environment context, system reminders)
    own = strip_injected(task) if task else ""
    walker = _Walker(own or None, memo if memo is not None else Memo(), commands)
    if previous_summary:
        walker.merge_earlier(previous_summary, -1)
    for i, msg in enumerate(messages):
        walker.message(i, msg)
    return walker.finish()


def extract_facts(
    messages: Sequence[Message] | Iterable[Message],
    *,
    task: str | None = None,
    previous_summary: str | None = None,
    memo: Memo | None = None,
) -> Facts:
    """Read ``messages`` in order and return their :class:`Facts`.

    ``task`` is the original task when known (client-injected blocks are taken out of it);
    otherwise the span's first user message with words of the user's own (the text left once
    :func:`contextwarden._task.strip_injected` took out the client's blocks) is used.
    ``previous_summary`` (and any message in the span that is itself a four-part summary) is
    merged: its file list carries over, its sections are kept in :attr:`Facts.earlier`.
    ``memo`` keeps what is derived from each text (a shell command's effects, an error line):
    the compactor passes its own; without one, the call uses one of its own.
    """
    span = messages if isinstance(messages, Sequence) else list(messages)
    memo = memo if memo is not None else Memo()
    facts = walk_facts(span, task=task, previous_summary=previous_summary, memo=memo)
    return replace(facts, code=code_mentions(span, memo=memo), working=tuple(edit_sites(span)))
