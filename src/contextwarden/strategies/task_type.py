"""Task-type detection: code, analysis, conversation, mixed or unknown, read from the
history itself, which picks the order the compaction strategies run in.

Rules, in order (counts are over the assistant's tool calls, see :mod:`._signals`):

* no tool calls: ``conversation`` when there are at least two user/assistant text turns after
  the task, else ``unknown`` (a bare task tells us nothing);
* few tool calls among many text turns (calls fewer than a fifth of the user/assistant text
  messages, and at least three user turns): ``conversation``;
* ``code`` signals are edits and shell/runner calls (``bash``, ``edit``, ``str_replace``,
  ``write``, ``apply_patch``, ``git``...); ``analysis`` signals are research and read-only
  inspection (``search``, ``read``, ``grep``, ``web``, ``sql``, ``query``...). A share of code
  signals of 60% or more is ``code``; 20% or less is ``analysis``; in between it is ``code``
  when files were edited and no research tool ran (reading around an edit is coding), else
  ``mixed``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import get_args

from .._config import TaskType
from .._messages import Message
from ._signals import call_kinds

__all__ = ["TASK_TYPES", "TaskType", "detect_task_type"]

TASK_TYPES: tuple[TaskType, ...] = get_args(TaskType)


def _assistant_tally(message: Message) -> tuple[int, int, int, int, int]:
    """(edit, execute, inspect, research, text turn) counts of one assistant message."""
    edit = execute = inspect = research = 0
    for call in message.tool_calls:
        kinds = call_kinds(call)
        if "edit" in kinds:
            edit += 1
        elif "research" in kinds:
            research += 1
        elif kinds & {"exec", "test"}:
            execute += 1
        elif "inspect" in kinds:
            inspect += 1
    return (edit, execute, inspect, research, 1 if message.text.strip() else 0)


# Thresholds of the rules above; round numbers, chosen on the shared trajectories (mini-swe-agent
# runs are all ``code``; the Claude Code port is ``code``: Read/Grep around Edit/Bash).
CODE_SHARE = 0.6
ANALYSIS_SHARE = 0.2
CONVERSATION_CALL_RATIO = 0.2


def detect_task_type(messages: Sequence[Message]) -> TaskType:
    """The task type of ``messages`` per the module rules. Pure and deterministic; it runs
    once per compaction, over the history being compacted."""
    edit = execute = inspect = research = text_turns = user_turns = 0
    seen_task = False
    for message in messages:
        if message.role == "user":
            if seen_task:
                user_turns += 1
                text_turns += 1 if message.text.strip() else 0
            seen_task = True
        elif message.role == "assistant":
            e, x, i, r, t = _assistant_tally(message)
            edit, execute, inspect, research = edit + e, execute + x, inspect + i, research + r
            text_turns += t
    code = edit + execute
    analysis = research + inspect
    calls = code + analysis
    if calls == 0:
        return "conversation" if text_turns >= 2 else "unknown"
    if user_turns >= 3 and calls < CONVERSATION_CALL_RATIO * text_turns:
        return "conversation"
    share = code / calls
    if share >= CODE_SHARE:
        return "code"
    if share <= ANALYSIS_SHARE:
        return "analysis"
    if edit > 0 and research == 0:
        return "code"
    return "mixed"
