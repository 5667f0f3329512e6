"""The LLM summarizer's prompt text and the rendering of a history into its input.

Pure functions: a span of messages becomes a compact transcript (thinking left out, tool
outputs and call arguments clipped to head + tail), and the transcript, the previous summary,
the task, pins and focus become the user turn of a summarisation call.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._messages import ImageBlock, Message, TextBlock, ToolCallBlock, ToolResultBlock
from .._task import strip_injected
from ..analysis.actions import text_output

__all__ = [
    "PROMPT_VERSION",
    "SYSTEM_PROMPT",
    "clip_middle",
    "merge_prompt",
    "render_message",
    "render_transcript",
    "summary_prompt",
]

#: Bumped whenever the prompt text changes, so cached summaries of the old prompt are not reused.
PROMPT_VERSION = "5"

SYSTEM_PROMPT = """\
You condense the working history of an autonomous agent so that it can carry on with its task \
from a fresh, short context. Write a summary that lets the agent continue without redoing work \
and without losing anything it still needs.

Answer with exactly these four sections, in this order, each inside its tag, and nothing else:

<completed>
What has been done, one item a line: the commands that worked (exactly as run, so they can be \
run again) and those that failed, edits made, answers found.
</completed>
<remaining>
The user's task as given in <task>, its opening quoted verbatim; then every later instruction \
the user gave (in the history or under "User instructions" in the previous summary), each \
quoted verbatim, in order; then what is still to do, most urgent first.
</remaining>
<current_state>
The working set first. Every file created, modified or deleted, with its path written exactly \
as in the history, and for each file still being edited the lines around its latest edits \
copied verbatim (indentation included: the next edit must quote them exactly); the files the \
agent read and relied on, each with the functions, classes and tests it looked at or changed \
there, names spelled exactly; every error still open, its error line quoted verbatim; test \
status, key values, environment facts. When the request lists <names>, end with "Files and code \
in play:" and as many of them as room allows, best first, spelled exactly: the agent will type \
them again.
</current_state>
<notes>
Pitfalls already met and how to avoid them, constraints, decisions and why; any pinned text, \
copied verbatim.
</notes>

Rules: be dense and specific. Prefer exact names, paths, commands and error messages to \
descriptions: the agent will type them again. Drop the detail of finished steps that no longer \
matter. Never invent facts. When the request gives a reference (cw:...), write it once in \
<current_state> as "originals: cw:..." and after each file, error and test you list: the agent \
can recall the full history with it, so point to it rather than copying long outputs. Keep every cw:... reference an earlier summary \
gave. Keep the whole answer under {max_chars} characters."""

_MERGE_INSTRUCTIONS = """\
The parts below summarise consecutive stretches of one agent history, oldest first. Merge them \
into a single summary in the same four-section format. When parts disagree, the later part \
holds. Keep every modified file path, the files, functions, classes and tests still in play, \
the latest unresolved error, every cw:... reference, every instruction the user gave (verbatim) \
and all pinned text."""


def clip_middle(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters: the head (60%) and the tail (40%) with a
    marker saying how much was left out between them. Errors and results tend to sit at the
    end of an output, headers at its start: both survive."""
    if len(text) <= limit:
        return text
    head = max(limit * 3 // 5, 1)
    tail = max(limit - head, 0)
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[... {omitted} characters omitted ...]\n{text[len(text) - tail :]}"


def render_message(message: Message, call_names: dict[str, str], clip_chars: int) -> str:
    """One message as transcript text. ``call_names`` maps tool-call ids to tool names (filled
    as assistant messages are rendered); tool results and call arguments are clipped to
    ``clip_chars``; thinking is left out (it is the costliest and least reusable part)."""
    lines: list[str] = []
    if message.role == "tool":
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                name = call_names.get(block.tool_call_id, "tool")
                flag = ", error" if block.is_error else ""
                lines.append(f"[result of {name}{flag}]")
                lines.append(clip_middle(block.text, clip_chars))
            elif isinstance(block, TextBlock) and block.text.strip():
                lines.append(f"[user]\n{block.text}")
        return "\n".join(lines)
    lines.append(f"[{message.role}]")
    for block in message.content:
        if isinstance(block, TextBlock):
            lines.append(
                clip_middle(block.text, max(clip_chars * 2, 200))
                if message.role != "user"
                else block.text
            )
        elif isinstance(block, ToolCallBlock):
            call_names[block.id] = block.name
            lines.append(f"[call {block.name}] {clip_middle(block.arguments, clip_chars)}")
        elif isinstance(block, ImageBlock):
            lines.append("[image]")
    return "\n".join(lines)


def render_transcript(messages: Sequence[Message], clip_chars: int) -> list[str]:
    """Each message rendered by :func:`render_message`, in order; a user message that is the
    output of a command the assistant wrote in its text (mini-swe-agent's text protocol,
    :func:`~contextwarden.analysis.actions.text_output`) is clipped as a tool result is, not
    quoted whole as the user's own words."""
    names: dict[str, str] = {}
    out = []
    for i, m in enumerate(messages):
        if i and text_output(messages[i - 1], m, i) is not None:
            out.append(f"[output]\n{clip_middle(m.text, clip_chars)}")
        else:
            out.append(render_message(m, names, clip_chars))
    return out


def _tagged(tag: str, body: str | None) -> str:
    return f"<{tag}>\n{body.strip()}\n</{tag}>\n\n" if body and body.strip() else ""


def _context(
    task: str | None, pinned: Sequence[str], ref: str | None, names: Sequence[str]
) -> list[str]:
    """The tagged parts every prompt opens with; the task without the blocks clients inject
    into the user's turn (:func:`contextwarden._task.strip_injected`)."""
    task = strip_injected(task) or None if task else None
    return [
        _tagged("task", task),
        _tagged("pinned", "\n".join(pinned) if pinned else None),
        _tagged("reference", ref),
        _tagged("names", "\n".join(names) if names else None),
    ]


def summary_prompt(
    transcript: str,
    *,
    task: str | None,
    previous_summary: str | None,
    pinned: Sequence[str],
    focus: str | None,
    ref: str | None = None,
    names: Sequence[str] = (),
) -> str:
    """The user turn asking for a summary of ``transcript``; ``ref`` is the ``cw:`` reference
    its originals are kept under; ``names``, the span's names index (files with the code names
    seen in them, then other names, best first: what the summary should carry)."""
    parts = _context(task, pinned, ref, names)
    if previous_summary and previous_summary.strip():
        parts.append(
            "An earlier stretch of this history was already summarised. Update that summary "
            "with the new history: keep what still holds, drop what is obsolete.\n\n"
        )
        parts.append(_tagged("previous_summary", previous_summary))
    if focus and focus.strip():
        parts.append("Give priority to everything about this focus:\n\n" + _tagged("focus", focus))
    parts.append(_tagged("history", transcript))
    parts.append("Write the four-section summary now.")
    return "".join(parts)


def merge_prompt(
    parts: Sequence[str],
    *,
    task: str | None,
    pinned: Sequence[str],
    focus: str | None,
    ref: str | None = None,
    names: Sequence[str] = (),
) -> str:
    """The user turn asking to merge partial summaries (the reduce step); ``names`` as for
    :func:`summary_prompt`."""
    body = "".join(f'<part n="{i}">\n{p.strip()}\n</part>\n' for i, p in enumerate(parts, 1))
    out = [
        *_context(task, pinned, ref, names),
        _tagged("focus", focus) if focus else "",
        _MERGE_INSTRUCTIONS + "\n\n",
        body,
        "\nWrite the merged four-section summary now.",
    ]
    return "".join(out)
