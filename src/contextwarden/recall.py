"""The recall tool: the model reads back, by its ``cw:`` reference, what an edit hid.

Every masked tool result, stripped reasoning, summarised span and window cut names the
reference its originals are kept under (``[... 120 lines, 8345 characters omitted; recall
cw:3f2a9c0d11e4b7a6 ...]``). :func:`recall_tool` is the tool definition to offer the model,
in the API's own shape; :func:`recall_answer` the text that answers a call of it, from what
:meth:`contextwarden.Warden.recall` (or :meth:`contextwarden.Session.recall`) found. The
proxy and the integrations offer the tool and answer it themselves, so the agent never sees it.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Sequence
from typing import Any, Literal

from ._budget import Budget
from ._markers import REF_PATTERN
from ._messages import Message, TextBlock, ToolResultBlock
from .summarizers._prompt import clip_middle, render_transcript

__all__ = [
    "RECALL_TOOL_NAME",
    "answer_max_chars",
    "recall_answer",
    "recall_ref",
    "recall_tool",
    "shown_refs",
]

RECALL_TOOL_NAME = "contextwarden_recall"

_DESCRIPTION = (
    "Read back, verbatim, earlier conversation content that was shortened to save context: "
    "a tool output shown as '[... omitted; recall cw:...]', or messages a summary replaced "
    "('ref cw:...'). Pass the cw:... reference exactly as shown. Use it instead of running a "
    "command or reading a file again when the earlier output is what you need."
)
_REF_ARG = {"type": "string", "description": "The reference as shown: cw: and 16 hex digits."}
_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"ref": _REF_ARG},
    "required": ["ref"],
    "additionalProperties": False,
}

#: the most characters one answer carries (the middle is cut beyond, saying how much)
ANSWER_MAX_CHARS = 60_000
#: the fewest characters an answer is allowed, however full the window (it says what it cut)
ANSWER_MIN_CHARS = 2_000
#: characters per token assumed when an answer is fitted to the room left in a window (few:
#: code and logs run about 3 to 4, so the answer errs short)
_CHARS_PER_TOKEN = 3
_REF = re.compile(rf"\b{REF_PATTERN}\b")


def recall_tool(api: Literal["openai", "anthropic", "responses"] = "openai") -> dict[str, Any]:
    """The recall tool's definition for ``api``: OpenAI Chat Completions (``openai``),
    Anthropic Messages (``anthropic``) or OpenAI Responses (``responses``). A new dict each
    call: the caller may change it."""
    return copy.deepcopy(_definition(api))


def _definition(api: str) -> dict[str, Any]:
    named = {"name": RECALL_TOOL_NAME, "description": _DESCRIPTION}
    if api == "openai":
        return {"type": "function", "function": {**named, "parameters": _PARAMETERS}}
    if api == "anthropic":
        return {**named, "input_schema": _PARAMETERS}
    if api == "responses":
        return {"type": "function", **named, "parameters": _PARAMETERS}
    raise ValueError(f"recall_tool: api must be 'openai', 'anthropic' or 'responses', not {api!r}")


def recall_ref(arguments: Any) -> str:
    """The reference a call of the tool asks for: from its arguments as a dict or as the JSON
    text a provider sends (a bare ``cw:...`` string is taken as it is). Empty if none."""
    if isinstance(arguments, str):
        text = arguments.strip()
        if text.startswith("cw:"):
            return text
        try:
            arguments = json.loads(text) if text else {}
        except ValueError:
            return ""
    if isinstance(arguments, dict):
        ref = arguments.get("ref")
        return ref.strip() if isinstance(ref, str) else ""
    return ""


def recall_answer(
    ref: str, found: Sequence[Message] | None, *, max_chars: int = ANSWER_MAX_CHARS
) -> tuple[str, bool]:
    """The tool's answer for ``ref`` and whether it is an error: the messages found, as a
    transcript (each tool output whole up to ``max_chars`` in all), or why there are none."""
    if not ref:
        return "contextwarden_recall needs a 'ref' argument: the cw:... reference shown.", True
    if not found:
        return f"No content is kept under {ref} in this conversation.", True
    text = "\n\n".join(render_transcript(found, max_chars))
    return (
        f"[recalled {ref}: {len(found)} message(s), verbatim]\n{clip_middle(text, max_chars)}",
        False,
    )


def shown_refs(messages: Sequence[Message]) -> list[str]:
    """The ``cw:`` references ``messages`` show (in their text and tool outputs), each once, in
    order: what a call of the tool can ask for. Empty when nothing was shortened."""
    texts = (
        b.text for m in messages for b in m.content if isinstance(b, TextBlock | ToolResultBlock)
    )
    return list(dict.fromkeys(ref for text in texts for ref in _REF.findall(text)))


def answer_max_chars(budget: Budget | None, tokens: int, spent: int = 0) -> int:
    """How many characters an answer may carry on top of a request of ``tokens`` tokens and
    ``spent`` characters of answers already added, so it stays under ``budget``'s hard limit
    (at least ``ANSWER_MIN_CHARS``, at most ``ANSWER_MAX_CHARS``; the latter when no budget is
    known)."""
    if budget is None:
        return ANSWER_MAX_CHARS
    room = budget.remaining(max(tokens, 0)) * _CHARS_PER_TOKEN - spent
    return max(ANSWER_MIN_CHARS, min(ANSWER_MAX_CHARS, room))
