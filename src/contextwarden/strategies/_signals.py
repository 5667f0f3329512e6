"""What a message *is*, read from its content: the kinds of its tool calls, test runs,
completion, decisions, read-only listings, tool observations (errors and file writes are
:func:`~contextwarden.analysis.facts.extract_facts`'). Pure heuristics over tool names and shell
commands as real agents write them, erring towards keeping."""

from __future__ import annotations

import re
from collections.abc import Iterable
from itertools import combinations
from typing import Literal, get_args

from .._messages import Message, ToolCallBlock, reserve_attribute
from ..analysis.actions import (
    COMPLETE_WORDS,
    EXEC_WORDS,
    MEMORY_WORDS,
    RESEARCH_WORDS,
    SEARCH_TOOLS,
    SHELL_TOOLS,
    TODO_TOOLS,
    TODO_WORDS,
    file_action,
    norm_name,
)
from ..analysis.shell import call_effects

__all__ = [
    "CallKind",
    "call_command",
    "call_kinds",
    "is_completion",
    "is_decision",
    "is_readonly_listing",
    "message_call_kinds",
]

CallKind = Literal["edit", "exec", "inspect", "research", "test", "complete", "memory", "todo"]
#: Every set of kinds, made once: a history holds one per call, and calls have few distinct ones.
_KINDS = get_args(CallKind)
_KIND_SETS = {k: k for n in range(len(_KINDS) + 1) for k in map(frozenset, combinations(_KINDS, n))}

_TEST_CMD = re.compile(
    r"\b(?:pytest|py\.test|unittest|tox|nox|runtests\.py|manage\.py\s+test|npm\s+(?:run\s+)?test"
    r"|yarn\s+test|pnpm\s+test|jest|vitest|mocha|cargo\s+test|go\s+test|mvn\s+test|gradle\s+test"
    r"|ctest|make\s+(?:test|check)|rspec|phpunit)\b|\btest_\w+\.py\b"
)
_RESEARCH_CMD = re.compile(r"\b(?:curl|wget|psql|mysql|sqlite3|bq|duckdb|http)\b")
_COMPLETE_CMD = re.compile(r"COMPLETE_TASK|SUBMIT|submit_final|task_complete", re.IGNORECASE)
#: :data:`_COMPLETE_CMD` for an ASCII command lowered (five times as fast as ignoring case).
_COMPLETE_LOWER = re.compile(_COMPLETE_CMD.pattern.lower())
_READONLY_CMD = re.compile(
    r"^\s*(?:cd\s+\S+\s*&&\s*)?(?:ls|cat|head|tail|find|pwd|tree|wc|nl|less|more|echo|which|file|"
    r"stat|du|env|printenv)\b(?:(?!&&|;|\||>|\bsed\s+-i).)*$",
    re.DOTALL,
)

_DECISION = re.compile(
    r"\b(?:I(?:'ll| will) (?:now )?(?:fix|change|implement|modify|use|add|remove|replace|rewrite)|"
    r"decided?|decision|the (?:root )?cause|the (?:issue|problem|bug) is|conclusion|plan:|"
    r"approach|solution|fixed|resolved|instead)\b",
    re.IGNORECASE,
)
_COMPLETION = re.compile(
    r"\b(?:task (?:is )?(?:complete|completed|done|finished)|all tests pass(?:ed)?|"
    r"successfully (?:implemented|fixed|completed)|the fix (?:works|is complete))\b|"
    r"COMPLETE_TASK_AND_SUBMIT",
    re.IGNORECASE,
)


_NAME_SEPARATOR = re.compile(r"[^a-z0-9]+")
_NAME_WORD = re.compile(r"[A-Z][a-z]+|[a-z]+")


def _name_words(name: str) -> set[str]:
    if name.isascii() and name.isalpha() and name.islower():
        return {name}  # the usual "bash", "read": one word, whichever way it is split
    low = name.lower()
    words = set(_NAME_SEPARATOR.split(low)) | {low}
    # CamelCase names (Claude Code's "TodoWrite", "NotebookEdit") split too
    words |= {w.lower() for w in _NAME_WORD.findall(name)}
    return {w for w in words if w}


def call_command(call: ToolCallBlock) -> str:
    """The shell command (or the whole argument text) a call carries, for pattern matching."""
    args = call.input
    if isinstance(args, dict):
        for key in ("command", "cmd", "script", "code", "input", "_raw"):
            value = args.get(key)
            if isinstance(value, str):
                return value
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return " ".join(value)
    return call.arguments


#: Where :func:`call_kinds` keeps a call's kinds: on the (immutable) call itself, like a
#: message's token count, so they live and go with it.
_KINDS_SLOT = "_cw_call_kinds"
reserve_attribute(_KINDS_SLOT, (ToolCallBlock,))


def call_kinds(call: ToolCallBlock) -> frozenset[CallKind]:
    """The kinds of one tool call: by its name first, then, for shells and generic runners, by
    the command it carries (``sed -i`` is an edit, ``pytest`` a test run, ``curl`` research).
    Computed once per call value (a history is classified again on every compaction)."""
    kinds: frozenset[CallKind] | None = getattr(call, _KINDS_SLOT, None)
    if kinds is None:
        kinds = _call_kinds(call)
        object.__setattr__(call, _KINDS_SLOT, kinds)  # not through __dict__: see Message
    return kinds


def _kind_by_name(call: ToolCallBlock) -> CallKind | None:
    words = _name_words(call.name)
    name = norm_name(call.name)
    if name in TODO_TOOLS or words & TODO_WORDS:
        return "todo"
    if words & MEMORY_WORDS:
        return "memory"
    action = file_action(call.name, call.input if isinstance(call.input, dict) else {})
    if action is not None and action != "read":
        return "edit"
    if words & RESEARCH_WORDS:
        return "research"
    if action == "read" or name in SEARCH_TOOLS:
        return "inspect"
    if name in SHELL_TOOLS or words & EXEC_WORDS:
        return "exec"
    if words & COMPLETE_WORDS:
        return "complete"
    return None


def _call_kinds(call: ToolCallBlock) -> frozenset[CallKind]:
    by_name = _kind_by_name(call)
    kinds: set[CallKind] = {by_name} if by_name is not None else set()
    command = call_command(call)
    if not kinds or "exec" in kinds:
        fx = call_effects(call, command)
        if fx.writes or fx.deletes or fx.reverts or fx.patch_inputs:
            kinds.add("edit")
        if _TEST_CMD.search(command):
            kinds.add("test")
        if _RESEARCH_CMD.search(command):
            kinds.add("research")
        ascii_only = command.isascii()
        if _COMPLETE_LOWER.search(command.lower()) if ascii_only else _COMPLETE_CMD.search(command):
            kinds.add("complete")
        if not kinds:
            kinds.add("exec")
    elif _TEST_CMD.search(command):
        kinds.add("test")
    return _KIND_SETS[frozenset(kinds)]


def message_call_kinds(message: Message) -> frozenset[CallKind]:
    """The union of :func:`call_kinds` over a message's tool calls (empty for none)."""
    out: set[CallKind] = set()
    for call in message.tool_calls:
        out |= call_kinds(call)
    return frozenset(out)


def is_readonly_listing(calls: Iterable[ToolCallBlock]) -> bool:
    """True when every call only looks around (``ls``, ``cat``, ``find``, ``Read``, ``Glob``):
    the low-value outputs importance scoring drops first. False for no calls."""
    seen = False
    for call in calls:
        seen = True
        kinds = call_kinds(call)
        if kinds == {"inspect"}:
            continue
        if kinds == {"exec"} and _READONLY_CMD.match(call_command(call)):
            continue
        return False
    return seen


def is_decision(message: Message) -> bool:
    """An assistant message stating a decision, a cause, a plan or a fix."""
    return message.role == "assistant" and bool(_DECISION.search(message.text))


def is_completion(message: Message) -> bool:
    """An assistant message (or its call) declaring the task done."""
    if message.role != "assistant":
        return False
    if _COMPLETION.search(message.text):
        return True
    return any("complete" in call_kinds(c) for c in message.tool_calls)
