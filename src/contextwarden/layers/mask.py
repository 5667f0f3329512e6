"""Layer: mask old tool results.

The ``keep_recent`` newest tool results (counted as result blocks, newest first, whatever the
message layout) stay whole. An older result whose text is longer than ``min_chars`` becomes its
first ``head_lines`` lines and last ``tail_lines`` lines around one marker line::

    [... 120 lines, 8345 characters omitted ...]

or, when the caller keeps the original under a ``cw:`` reference (the warden does), one that
names it so that ``recall`` (or the agent's recall tool) can bring the whole output back::

    [... 120 lines, 8345 characters omitted; recall cw:3f2a9c0d11e4b7a6 ...]

Kept lines longer than ``line_chars`` are cut too (a one-line 20 KB JSON blob would otherwise
survive masking whole), and the marker's counts include those characters. A result is masked
only when that makes it shorter, and a result that already carries the marker is left alone, so
masking twice changes nothing. Tool call arguments are never touched; results of tools named in
``exclude_tools`` (the name comes from the matching call) and pinned messages stay whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .._events import Event
from .._markers import MASK_MARKER_RE, NAMES_LINE_PREFIX, SUPERSEDED_MARKER_RE
from .._messages import Message, ToolCallBlock, ToolResultBlock
from ..summarizers._mentions import defined_names, words_of
from ..summarizers._readers import all_paths, first_path, norm_name, shell_command
from ..summarizers._shell import analyze_command, command_key, patch_targets
from .base import (
    Applied,
    LayerContext,
    LayerResult,
    apply_memoized,
    edit_result_text,
    place_events,
    require_messages,
    shrink_event,
)
from .config import MaskConfig
from .units import HistoryIndex, index_of

__all__ = [
    "ActionMemo",
    "MaskConfig",
    "MaskPlan",
    "ToolAction",
    "call_action",
    "mask_plan",
    "mask_text",
    "mask_tool_results",
    "prints_file",
    "protected_results",
    "same_file",
    "superseded_results",
    "superseded_text",
    "text_actions",
    "tool_actions",
]

LAYER = "mask"

#: Appended to a kept line that was cut at ``line_chars``.
LINE_CUT = " [...]"

#: The key of :attr:`Message.hints` under which a masked message keeps the message it masks.
UNMASKED = "unmasked"

#: The names line holds one name per this many omitted characters (and at most
#: ``MaskConfig.names``): a long output names more than a short listing.
NAMES_PER_CHARS = 400
#: ... and one per this many of a file's lines (a read): the definitions and identifiers an
#: agent comes back to, to call or to edit, are in the files it read.
NAMES_PER_CHARS_READ = 120


def omitted_names(
    omitted: str, kept: str = "", held: frozenset[str] = frozenset(), limit: int = 12
) -> tuple[str, ...]:
    """The files and code names of ``omitted`` (the lines a mask drops) that the agent is most
    likely to need again, best first, at most ``limit``: what it defines (``def``/``class``),
    the files it names (``grep`` hits, traceback frames, test ids, paths), then the other code
    names, most frequent first. Names in ``kept`` (the lines the mask keeps) or in ``held``
    (what the request holds anyway, such as the call's own arguments) are left out."""
    if limit <= 0 or not omitted:
        return ()

    paths, names = words_of(omitted)
    skip = set(held)
    if kept:
        kept_paths, kept_names = words_of(kept)
        skip.update(kept_paths, kept_names)
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = omitted.count(n)
    ranked = [
        *defined_names(omitted),
        *paths,
        *sorted(names, key=lambda n: -counts[n]),  # stable: first seen first among equals
    ]
    out: list[str] = []
    for n in ranked:
        if n in skip or n in out:
            continue
        out.append(n)
        if len(out) >= limit:
            break
    return tuple(out)


def mask_text(
    text: str,
    config: MaskConfig | None = None,
    ref: str | None = None,
    held: frozenset[str] = frozenset(),
    *,
    read: bool = False,
) -> str:
    """``text`` reduced to head lines + marker + tail lines, or ``text`` itself when it is short
    (``<= min_chars``), already masked, or would not get shorter. ``ref``, the ``cw:``
    reference the original is kept under, is named in the marker; the line after it names the
    files and code names of the omitted lines (:func:`omitted_names`, at most
    ``config.names``, more of them for ``read``, a file's lines; ``held``: names the request
    holds anyway)."""
    cfg = config or MaskConfig()
    if (
        len(text) <= cfg.min_chars
        or MASK_MARKER_RE.search(text)
        or SUPERSEDED_MARKER_RE.search(text)
    ):
        return text
    lines = text.split("\n")
    n = len(lines)
    if n > cfg.head_lines + cfg.tail_lines:
        head = lines[: cfg.head_lines]
        tail = lines[n - cfg.tail_lines :] if cfg.tail_lines else []
        omitted_lines = n - cfg.head_lines - cfg.tail_lines
    else:  # few, long lines: nothing to drop whole, only lines to shorten
        head, tail, omitted_lines = lines, [], 0
    cap = cfg.line_chars
    kept = len(head) + len(tail)
    kept_chars = sum(min(len(ln), cap) for ln in head) + sum(min(len(ln), cap) for ln in tail)
    # the newlines between kept lines survive too; everything else is omitted
    omitted_chars = len(text) - kept_chars - max(kept - 1, 0)
    head = [ln if len(ln) <= cap else ln[:cap] + LINE_CUT for ln in head]
    tail = [ln if len(ln) <= cap else ln[:cap] + LINE_CUT for ln in tail]
    recall = f"; recall {ref}" if ref else ""
    marker = f"[... {omitted_lines} lines, {max(omitted_chars, 0)} characters omitted{recall} ...]"
    names: tuple[str, ...] = ()
    if cfg.names and omitted_lines:
        middle = "\n".join(lines[cfg.head_lines : n - cfg.tail_lines])
        per = NAMES_PER_CHARS_READ if read else NAMES_PER_CHARS
        limit = min(cfg.names, 1 + len(middle) // per)
        names = omitted_names(middle, "\n".join([*head, *tail]), held, limit)
    index = [f"{NAMES_LINE_PREFIX}{', '.join(names)}]"] if names else []
    masked = "\n".join([*head, marker, *index, *tail])
    return masked if len(masked) < len(text) else text


def mask_message(
    message: Message,
    decision: tuple[int, tuple[str, ...]],
    ctx: LayerContext,
    ref: str | None = None,
    *,
    plan: MaskPlan | None = None,
    held: frozenset[str] = frozenset(),
    reads: frozenset[str] = frozenset(),
) -> Applied:
    """Mask the first ``decision[0]`` tool results of one tool message (names in decision[1]);
    ``ref``, the reference its original is kept under, is named in each marker. With ``plan``
    (:func:`mask_plan` of the history when the mask edit is made), a protected result stays
    whole and a superseded one becomes :func:`superseded_text`'s one-line marker. ``held``:
    names the request holds anyway (the calls' arguments), left out of the names line;
    ``reads``: the ids of the results that print a file's lines (:func:`prints_file`)."""
    cfg = ctx.config.mask
    n_old, names = decision
    blocks = []
    masked_names: list[str] = []
    before = after = 0
    k = 0
    for b in message.content:
        if isinstance(b, ToolResultBlock):
            name = names[k] if k < len(names) else ""
            old = k < n_old
            k += 1
            if plan is not None and b.tool_call_id in plan.protected:
                old = False
            if old and name not in cfg.exclude_tools:
                by = plan.superseded.get(b.tool_call_id, "") if plan is not None else ""
                nb, b_before, b_after = edit_result_text(
                    b, _masker(cfg, ref, by, held, b.tool_call_id in reads)
                )
                if nb is not b:
                    before += b_before
                    after += b_after
                    masked_names.append(name)
                    b = nb
        blocks.append(b)
    if not masked_names:
        return message, ()
    # the message as it was before the mask rides along (not sent): a summary of a span
    # holding it is written from what the agent saw, not from the marker
    original = message.hints.get(UNMASKED, message)
    out = message.replace(content=tuple(blocks), hints={**message.hints, UNMASKED: original})
    event = shrink_event("masked", LAYER, message, out, masked_names, (before, after), ctx)
    return out, (event,)


def _masker(
    cfg: MaskConfig,
    ref: str | None,
    by: str,
    held: frozenset[str] = frozenset(),
    read: bool = False,
) -> Callable[[str], str]:
    """The text edit for one old result: the one-line superseded marker when a later result
    (``by``) superseded it, else the head-and-tail mask."""
    if by:
        return lambda text: superseded_text(text, ref, by)
    return lambda text: mask_text(text, cfg, ref, held, read=read)


def mask_decision(
    message: Message, i: int, index: HistoryIndex
) -> tuple[int, tuple[str, ...]] | None:
    """What masking message ``i`` depends on besides its content, or None when it is untouched."""
    names = index.names[i]
    if not names or message.is_pinned:
        return None
    n_old = index.old_results(i, len(names))
    if n_old == 0:
        return None
    return n_old, names[:n_old]


def mask_tool_results(messages: Sequence[Message], ctx: LayerContext) -> LayerResult:
    """Keep the ``keep_recent`` newest tool results whole and mask older ones
    longer than ``min_chars`` (see the module docstring). Position-based: it counts results
    from the end, not user turns. Pure; one ``masked`` event per message changed."""
    cfg = ctx.config.mask
    require_messages(messages)
    if not cfg.enabled:
        return LayerResult(tuple(messages))
    index = index_of(messages, keep_results=cfg.keep_recent, keep_thinking=0)
    out: list[Message] = []
    events: list[Event] = []
    for i, m in enumerate(messages):
        d = mask_decision(m, i, index)
        if d is None:
            out.append(m)
            continue
        (new, templates), fresh = apply_memoized(
            LAYER, m, d, lambda msg, dec: mask_message(msg, dec, ctx), ctx.memo
        )
        out.append(new)
        place_events(templates, i, events, log=fresh)
    return LayerResult(tuple(out), tuple(events))


# -- what a tool result is: reads, edits, runs ----------------------------------------------------
#: The ``id`` of a command output that arrives as a user message (agents that write their
#: commands in text: SWE-agent, mini-swe-agent without function calling) rather than as a tool
#: result: ``"msg:<index of that user message>"``.
TEXT_RESULT_PREFIX = "msg:"

ActionKind = Literal["read", "edit", "run", "other"]

_READ_TOOLS = frozenset({"read", "read_file", "view", "view_file", "open_file", "cat", "readfile"})
_EDIT_TOOLS = frozenset(
    {
        "edit",
        "multiedit",
        "multi_edit",
        "write",
        "write_file",
        "write_to_file",
        "replace_in_file",
        "edit_file",
        "str_replace",
        "create_file",
        "apply_patch",
        "applypatch",
        "apply_diff",
        "insert",
        "notebookedit",
    }
)
_EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool", "file_editor"})
_EDITOR_READ = frozenset({"view"})
_EDITOR_EDIT = frozenset(
    {"create", "str_replace", "insert", "undo_edit", "write", "append", "edit"}
)
#: A fenced command in an assistant message's text (the agents that write commands in text).
_FENCED = re.compile(r"```(?:bash|sh|shell|console)?[ \t]*\n(.*?)```", re.DOTALL)
_SED_RANGE = re.compile(r"""\bsed\s+-n\s+(['"]?)(\d+)\s*(?:,\s*(\d+|\$))?\s*p\1""")
_HEAD_TAIL = re.compile(r"\b(head|tail)\s+(?:-n\s*)?-?(\d+)\b")
#: SWE-agent's file viewer commands (``open path [line]``, ``goto N``, ``edit A:B``).
_SWE_OPEN = re.compile(r"^\s*open\s+\"?([^\s\"]+)\"?(?:\s+(\d+))?\s*$")
_SWE_EDIT = re.compile(r"^\s*edit\s+\d+:\d+\b")


@dataclass(frozen=True)
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


def _norm_path(path: str) -> str:
    path = path.strip().strip("'\"")
    while path.startswith("./"):
        path = path[2:]
    return path


def same_file(a: str, b: str) -> bool:
    """Whether two spellings name one file (``/testbed/src/x.py`` and ``src/x.py`` do)."""
    a, b = _norm_path(a), _norm_path(b)
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def _shell_action(command: str) -> tuple[ActionKind, tuple[str, ...], str | None]:
    if "*** Begin Patch" in command or "*** Update File:" in command:
        return "edit", tuple(_norm_path(p) for p in patch_targets(command)), "quotes"
    effects = analyze_command(command)
    written = [*effects.writes, *effects.deletes, *effects.reverts]
    if written:
        return "edit", tuple(dict.fromkeys(_norm_path(p) for p in written)), None
    key = command_key(command)
    reads = [_norm_path(p) for p in effects.reads if not p.lstrip("+-").isdigit()]  # head -n 50
    # a file printed whole or by a line range: cat, nl -ba, sed -n 'A,Bp', head/tail -n N
    if len(reads) == 1 and effects.read_only and effects.last_program not in ("grep", "rg", "wc"):
        m = _SED_RANGE.search(command)
        ht = _HEAD_TAIL.search(command)
        if m:
            span = f"{m.group(2)},{m.group(3) or m.group(2)}"
        elif ht:
            span = f"{ht.group(1)} {ht.group(2)}"
        else:
            span = ""
        return "read", (reads[0],), f"read {reads[0]} {span}".rstrip()
    return "run", tuple(reads), f"run {key}"


def prints_file(call: ToolCallBlock) -> bool:
    """Whether ``call`` prints a file's lines (Read, ``view``, ``cat``, ``sed -n``, ``nl -ba``,
    ``head``/``tail`` of a file): a :class:`ToolAction` of kind ``read``."""
    return call_action(call.name, call.input, call.id, 0).kind == "read"


def call_action(name: str, args: Any, call_id: str, position: int) -> ToolAction:
    """What the call ``name(args)`` with id ``call_id``, answered at ``position``, did."""
    n = norm_name(name)
    a = args if isinstance(args, dict) else {}
    paths = tuple(_norm_path(p) for p in all_paths(a))
    if n in _EDITOR_TOOLS:
        sub = a.get("command")
        if sub in _EDITOR_READ and paths:
            span = a.get("view_range")
            key = f"read {paths[0]} {span}" if span else f"read {paths[0]}"
            return ToolAction(call_id, position, "read", paths[:1], key)
        if sub in _EDITOR_EDIT and paths:
            return ToolAction(call_id, position, "edit", paths[:1], quotes=_quotes(a))
    if n in _EDIT_TOOLS:
        text = a.get("input") or a.get("patch") or a.get("diff") or a.get("_raw")
        if not paths and isinstance(text, str):
            paths = tuple(_norm_path(p) for p in patch_targets(text))
        return ToolAction(call_id, position, "edit", paths, quotes=_quotes(a))
    if n in _READ_TOOLS and paths:
        span = [a.get(k) for k in ("offset", "limit", "start_line", "end_line", "view_range")]
        key = f"read {paths[0]}" + "".join(f" {s}" for s in span if s is not None)
        return ToolAction(call_id, position, "read", paths[:1], key)
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
        kind, cpaths, run_key = _shell_action(command)
        if run_key == "quotes":  # a patch: its context lines quote the file
            return ToolAction(call_id, position, kind, cpaths, None, quotes=True)
        return ToolAction(call_id, position, kind, cpaths, run_key)
    path = first_path(a)
    return ToolAction(call_id, position, "other", (_norm_path(path),) if path else ())


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
    text = message.text
    blocks = _FENCED.findall(text)
    if not blocks:
        return []
    command = blocks[-1].strip()
    rid = f"{TEXT_RESULT_PREFIX}{position + 1}"
    opened = _SWE_OPEN.match(command)
    if opened:
        path = _norm_path(opened.group(1))
        return [
            ToolAction(
                rid, position + 1, "read", (path,), f"read {path} {opened.group(2) or ''}".rstrip()
            )
        ]
    if _SWE_EDIT.match(command):
        return [ToolAction(rid, position + 1, "edit", ())]
    kind, paths, key = _shell_action(command)
    if key == "quotes":
        return [ToolAction(rid, position + 1, kind, paths, None, quotes=True)]
    return [ToolAction(rid, position + 1, kind, paths, key)]


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
                found = (call_action(c.name, c.input, c.id, at),)
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


@dataclass(frozen=True)
class MaskPlan:
    """What a mask edit should know about the results it may mask: ``protected`` (keep whole
    while the budget allows; mask last) and ``superseded`` (mask first, to a one-line marker;
    each mapped to the id of the result that superseded it)."""

    protected: frozenset[str]
    superseded: Mapping[str, str]


def mask_plan(
    history: Sequence[Message],
    recent_edits: int = 8,
    *,
    quoting: bool = False,
    memo: ActionMemo | None = None,
) -> MaskPlan:
    """:func:`protected_results` and :func:`superseded_results` of ``history`` in one value,
    its tool actions made once (``memo``: see :func:`tool_actions`)."""
    actions = tool_actions(history, memo)
    superseded = superseded_results(history, actions=actions)
    protected = protected_results(
        history, recent_edits, quoting=quoting, actions=actions, superseded=superseded
    )
    return MaskPlan(protected, superseded)


def superseded_text(text: str, ref: str | None = None, by: str | None = None) -> str:
    """The one-line marker that replaces a superseded result: its size, the result that
    superseded it (``by``, a tool call id) and the ``cw:`` reference the original is kept
    under. ``text`` itself when it is already a marker or not longer than the marker."""
    if SUPERSEDED_MARKER_RE.search(text) or MASK_MARKER_RE.search(text):
        return text
    lines = text.count("\n") + 1
    later = f" by {by}" if by else ""
    recall = f"; recall {ref}" if ref else ""
    marker = f"[... superseded{later}: {lines} lines, {len(text)} characters omitted{recall} ...]"
    return marker if len(marker) < len(text) else text
