"""What a history's messages say, read without an LLM: the floor that layers, strategies and
summarizers stand on.

- :mod:`.actions`: the one vocabulary of tool actions (which tools read, write, edit, run,
  search or plan) and :class:`ToolAction`, a call read as a read, an edit or a run;
- :mod:`.shell`: what a shell command does to files, from its text;
- :mod:`.readers`: exit statuses, error lines, plans and findings;
- :mod:`.mentions`: the files and code names a span has in play;
- :mod:`.working`: where the agent edited, with the file's lines around each edit;
- :mod:`.sections`: the four sections of a summary (an earlier summary is part of a history);
- :mod:`.facts`: all of the above for a span, in one :class:`Facts` value.

Pure functions of immutable values; nothing here imports a layer, a strategy or a summarizer.
"""

from __future__ import annotations

from .actions import (
    ActionKind,
    ActionMemo,
    FileAction,
    ToolAction,
    all_paths,
    file_action,
    first_path,
    norm_name,
    norm_path,
    prints_file,
    protected_results,
    same_file,
    shell_command,
    superseded_results,
    tool_actions,
)
from .facts import CommandRun, ErrorSeen, Facts, FileTouch, TodoItem, extract_facts, walk_facts
from .mentions import CodeMentions, Mention, code_mentions, defined_names, names_of, words_of
from .shell import ShellEffects, analyze_command, command_key
from .working import EditSite, edit_sites

__all__ = [
    "ActionKind",
    "ActionMemo",
    "CodeMentions",
    "CommandRun",
    "EditSite",
    "ErrorSeen",
    "Facts",
    "FileAction",
    "FileTouch",
    "Mention",
    "ShellEffects",
    "TodoItem",
    "ToolAction",
    "all_paths",
    "analyze_command",
    "code_mentions",
    "command_key",
    "defined_names",
    "edit_sites",
    "extract_facts",
    "file_action",
    "first_path",
    "names_of",
    "norm_name",
    "norm_path",
    "prints_file",
    "protected_results",
    "same_file",
    "shell_command",
    "superseded_results",
    "tool_actions",
    "walk_facts",
    "words_of",
]
