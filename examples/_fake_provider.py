"""A scripted stand-in for a model and its tools, so the examples run offline with no key.

The "model" explores a repository: it reads one large file per turn (the kind of tool output
that fills a context window), then answers. Deterministic: the same run every time. It speaks
both wire formats: :func:`openai_chat` answers like Chat Completions' ``message``,
:func:`anthropic_messages` like the Messages API's response.
"""

from __future__ import annotations

import json
import re
from typing import Any

FILES = [f"src/module_{i}.py" for i in range(30)]

TOOLS_OPENAI = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the repository.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]
TOOLS_ANTHROPIC = [
    {
        "name": "read_file",
        "description": "Read a file of the repository.",
        "input_schema": TOOLS_OPENAI[0]["function"]["parameters"],
    }
]


def run_tool(name: str, arguments: dict[str, Any]) -> str:
    """Run a tool: ``read_file`` returns a long, made-up Python file."""
    if name != "read_file":
        return f"error: unknown tool {name!r}"
    path = arguments.get("path", "?")
    body = [f"# {path}", "import os", ""]
    for j in range(30):
        body.append(f"def helper_{j}(value):  # TODO: check the {j}th case in {path}")
        body.append(f"    return os.environ.get('SETTING_{j}', value) * {j + 1}")
    return "\n".join(body)


def _next_file(request: Any) -> int:
    """Which file to read next: the one after the highest-numbered file the request mentions
    (in a tool output, a masked one's first line, or a compaction summary)."""
    seen = [int(n) for n in re.findall(r"src/module_(\d+)\.py", json.dumps(request))]
    return max(seen, default=-1) + 1


def openai_chat(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant ``message`` a Chat Completions call would return for ``messages``."""
    turn = _next_file(messages)
    if turn >= len(FILES):
        return {"role": "assistant", "content": f"Read {len(FILES)} files; the TODOs are listed."}
    args = json.dumps({"path": FILES[turn]})
    call = {"id": f"call_{turn}", "type": "function"}
    call["function"] = {"name": "read_file", "arguments": args}
    return {"role": "assistant", "content": f"Reading {FILES[turn]}.", "tool_calls": [call]}


def anthropic_messages(system: Any, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The response a Messages API call would return (``role``, ``content``, ``stop_reason``)."""
    turn = _next_file(messages)
    if turn >= len(FILES):
        text = f"Read {len(FILES)} files; the TODOs are listed."
        return {
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
        }
    use = {
        "type": "tool_use",
        "id": f"toolu_{turn}",
        "name": "read_file",
        "input": {"path": FILES[turn]},
    }
    content = [{"type": "text", "text": f"Reading {FILES[turn]}."}, use]
    return {"role": "assistant", "content": content, "stop_reason": "tool_use"}
