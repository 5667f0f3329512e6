"""Task-type detection: code, analysis, conversation, mixed or unknown, read from the
history itself, which picks the order the compaction strategies run in.

Rules, in order (counts are over the assistant's tool calls, see :mod:`._signals`, and the
commands it writes in text whose output comes back as a user message):

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

from collections import Counter
from collections.abc import Sequence
from typing import get_args

from .._config import TaskType
from .._messages import Message, ToolCallBlock
from ..analysis.actions import text_actions, text_output
from ._signals import call_kinds

__all__ = ["TASK_TYPES", "TaskType", "detect_task_type"]

TASK_TYPES: tuple[TaskType, ...] = get_args(TaskType)


def _call_bucket(call: ToolCallBlock) -> str | None:
    """Which tally one assistant tool call counts in: edit, research, execute or inspect."""
    kinds = call_kinds(call)
    if "edit" in kinds:
        return "edit"
    if "research" in kinds:
        return "research"
    if kinds & {"exec", "test"}:
        return "execute"
    return "inspect" if "inspect" in kinds else None


#: The tally a command written in text counts in, by what it did (an output sent back as a
#: user message, mini-swe-agent's text protocol).
_TEXT_BUCKETS = {"edit": "edit", "run": "execute", "read": "inspect"}

# Thresholds of the rules above; round numbers, chosen on the shared trajectories (mini-swe-agent
# runs are all ``code``; the Claude Code port is ``code``: Read/Grep around Edit/Bash).
CODE_SHARE = 0.6
ANALYSIS_SHARE = 0.2
CONVERSATION_CALL_RATIO = 0.2


def detect_task_type(messages: Sequence[Message]) -> TaskType:
    """The task type of ``messages`` per the module rules. Pure and deterministic; it runs
    once per compaction, over the history being compacted."""
    tally: Counter[str | None] = Counter()
    text_turns = user_turns = 0
    seen_task = False
    for i, message in enumerate(messages):
        if message.role == "user":
            if i and text_output(messages[i - 1], message, i) is not None:
                # a command's output: the command it answers counts as a call, no user turn
                for action in text_actions(messages[i - 1], i - 1, messages):
                    tally[_TEXT_BUCKETS.get(action.kind)] += 1
                continue
            if seen_task:
                user_turns += 1
                text_turns += 1 if message.text.strip() else 0
            seen_task = True
        elif message.role == "assistant":
            for call in message.tool_calls:
                tally[_call_bucket(call)] += 1
            text_turns += 1 if message.text.strip() else 0
    edit, research = tally["edit"], tally["research"]
    code = edit + tally["execute"]
    analysis = research + tally["inspect"]
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
