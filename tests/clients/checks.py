"""An independent validity checker for the requests the upstream received.

Written from the providers' documented rules, not from contextwarden's own validator (which is
what is under test): each function returns the problems of one request body, one string each.

* Anthropic Messages: the system prompt is text; ``messages`` start with the user, user and
  assistant alternate (a mid-conversation ``system`` message of text stands outside the
  alternation), no empty content but a final assistant prefill, every ``tool_use`` answered by
  a ``tool_result`` at the head of the next message, every result answering a call of the
  message before, ids unique and well formed, thinking only in assistant turns and signed, at
  most 4 ``cache_control`` breakpoints in tools, system and messages together.
* OpenAI chat: every assistant ``tool_calls`` entry answered by a ``tool`` message before the
  next other message, no result without its call, no empty user or system content.
* OpenAI Responses: every ``function_call`` / ``custom_tool_call`` followed by exactly one
  output of the same ``call_id`` and every output preceded by its call, reasoning items followed
  by the item they produced, messages with a role and content.
"""

from __future__ import annotations

import re
from typing import Any

MAX_BREAKPOINTS = 4
_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def count_breakpoints(body: dict[str, Any]) -> int:
    """``cache_control`` markers in an Anthropic request (tools, system, messages, nested)."""

    def walk(v: Any) -> int:
        if isinstance(v, dict):
            return int("cache_control" in v) + sum(walk(x) for x in v.values())
        if isinstance(v, list):
            return sum(walk(x) for x in v)
        return 0

    return walk(body.get("tools")) + walk(body.get("system")) + walk(body.get("messages"))


def _empty(content: Any) -> bool:
    if content is None:
        return True
    if isinstance(content, str):
        return not content.strip()
    if isinstance(content, list):
        return not content
    return False


def anthropic_problems(body: dict[str, Any]) -> list[str]:
    out: list[str] = []
    system = body.get("system")
    if system is not None and not isinstance(system, str):
        if not isinstance(system, list) or not all(
            isinstance(b, dict) and b.get("type") == "text" and b.get("text") for b in system
        ):
            out.append("system: must be a string or non-empty text blocks")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        return [*out, "messages: missing or empty"]
    n = count_breakpoints(body)
    if n > MAX_BREAKPOINTS:
        out.append(f"{n} cache_control breakpoints (at most {MAX_BREAKPOINTS})")
    seen: set[str] = set()
    waiting: set[str] = set()  # tool_use ids the next message must answer
    prev: str | None = None
    last = len(msgs) - 1
    for i, m in enumerate(msgs):
        if not isinstance(m, dict):
            out.append(f"messages[{i}]: not an object")
            continue
        role, content = m.get("role"), m.get("content")
        if role == "system":
            if waiting:
                out.append(f"messages[{i}]: system message between tool_use and its tool_result")
                waiting = set()
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            if not isinstance(blocks, list) or _empty(content):
                out.append(f"messages[{i}]: empty system message")
            elif not all(isinstance(b, dict) and b.get("type") == "text" for b in blocks):
                out.append(f"messages[{i}]: system message with non-text blocks")
            continue
        if role not in ("user", "assistant"):
            out.append(f"messages[{i}]: bad role {role!r}")
            continue
        if prev is None and role != "user":
            out.append(f"messages[{i}]: the first turn is {role}, not user")
        if role == prev:
            out.append(f"messages[{i}]: two {role} turns in a row")
        if _empty(content) and not (role == "assistant" and i == last):
            out.append(f"messages[{i}]: empty {role} content")
        blocks = content if isinstance(content, list) else []
        answered: set[str] = set()
        leading = True
        for j, b in enumerate(blocks):
            t = b.get("type") if isinstance(b, dict) else None
            if t == "text" and not b.get("text"):
                out.append(f"messages[{i}].content[{j}]: empty text block")
            if t == "tool_result":
                cid = b.get("tool_use_id")
                if role != "user":
                    out.append(f"messages[{i}].content[{j}]: tool_result in {role} turn")
                elif not leading:
                    out.append(f"messages[{i}].content[{j}]: tool_result after other content")
                if cid not in waiting:
                    out.append(f"messages[{i}].content[{j}]: tool_result {cid!r} answers no call")
                answered.add(cid)
            else:
                leading = False
            if t == "tool_use":
                cid = b.get("id")
                if role != "assistant":
                    out.append(f"messages[{i}].content[{j}]: tool_use in {role} turn")
                if not isinstance(cid, str) or not _ID.match(cid):
                    out.append(f"messages[{i}].content[{j}]: bad tool_use id {cid!r}")
                elif cid in seen:
                    out.append(f"messages[{i}].content[{j}]: duplicate tool_use id {cid!r}")
                seen.add(str(cid))
                if not isinstance(b.get("input"), dict):
                    out.append(f"messages[{i}].content[{j}]: tool_use input is not an object")
            if t == "compaction":
                if role != "assistant":
                    out.append(f"messages[{i}].content[{j}]: compaction in {role} turn")
                summary = b.get("content")
                if summary is not None and (not isinstance(summary, str) or not summary):
                    out.append(f"messages[{i}].content[{j}]: compaction content not text or null")
            if t in ("thinking", "redacted_thinking"):
                if role != "assistant":
                    out.append(f"messages[{i}].content[{j}]: {t} in {role} turn")
                if t == "thinking" and not b.get("signature"):
                    out.append(f"messages[{i}].content[{j}]: unsigned thinking")
        if role == "user":
            missing = waiting - answered
            if missing:
                out.append(f"messages[{i}]: tool_use {sorted(missing)} not answered here")
            waiting = set()
        else:
            if waiting and prev == "user":
                waiting = set()
            waiting |= {
                b.get("id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"
            }
        prev = role
    if waiting:
        out.append(f"tool_use {sorted(waiting)} never answered")
    return out


def openai_problems(body: dict[str, Any]) -> list[str]:
    out: list[str] = []
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        return ["messages: missing or empty"]
    waiting: set[str] = set()
    seen: set[str] = set()
    for i, m in enumerate(msgs):
        if not isinstance(m, dict):
            out.append(f"messages[{i}]: not an object")
            continue
        role = m.get("role")
        if role == "tool":
            cid = m.get("tool_call_id")
            if cid not in waiting:
                out.append(f"messages[{i}]: tool result {cid!r} answers no pending call")
            waiting.discard(cid)
            continue
        if waiting:
            out.append(f"messages[{i}]: calls {sorted(waiting)} not answered before it")
            waiting = set()
        if role not in ("system", "developer", "user", "assistant"):
            out.append(f"messages[{i}]: bad role {role!r}")
        calls = m.get("tool_calls") or []
        if role == "assistant":
            if _empty(m.get("content")) and not calls:
                out.append(f"messages[{i}]: empty assistant message")
            for c in calls:
                cid = c.get("id") if isinstance(c, dict) else None
                if not cid or cid in seen:
                    out.append(f"messages[{i}]: missing or duplicate tool call id {cid!r}")
                seen.add(str(cid))
                waiting.add(str(cid))
        elif _empty(m.get("content")):
            out.append(f"messages[{i}]: empty {role} content")
    if waiting:
        out.append(f"calls {sorted(waiting)} never answered")
    return out


_CALLS = {"function_call": "function_call_output", "custom_tool_call": "custom_tool_call_output"}
_OUTPUTS = {v: k for k, v in _CALLS.items()}


def responses_problems(body: dict[str, Any]) -> list[str]:
    out: list[str] = []
    items = body.get("input")
    if isinstance(items, str):
        return [] if items else ["input: empty"]
    if not isinstance(items, list) or not items:
        return ["input: missing or empty"]
    calls: dict[str, str] = {}
    answered: set[str] = set()
    for i, it in enumerate(items):
        if not isinstance(it, dict):
            out.append(f"input[{i}]: not an object")
            continue
        t = it.get("type", "message")
        if t in _CALLS:
            cid = it.get("call_id")
            if not cid or cid in calls:
                out.append(f"input[{i}]: missing or duplicate call_id {cid!r}")
            calls[str(cid)] = t
        elif t in _OUTPUTS:
            cid = it.get("call_id")
            if calls.get(str(cid)) != _OUTPUTS[t]:
                out.append(f"input[{i}]: {t} {cid!r} has no earlier {_OUTPUTS[t]}")
            elif cid in answered:
                out.append(f"input[{i}]: second output for {cid!r}")
            answered.add(str(cid))
        elif t == "reasoning":
            nxt = items[i + 1] if i + 1 < len(items) else None
            if not isinstance(nxt, dict) or (
                nxt.get("type", "message") not in (*_CALLS, "reasoning")
                and nxt.get("role") != "assistant"
            ):
                out.append(f"input[{i}]: reasoning item not followed by the item it produced")
        elif t == "compaction":
            if not isinstance(it.get("encrypted_content"), str) or not it["encrypted_content"]:
                out.append(f"input[{i}]: compaction item without encrypted_content")
        elif t == "compaction_trigger":
            if i != len(items) - 1:
                out.append(f"input[{i}]: compaction_trigger is not the last item")
        elif t == "message":
            if it.get("role") not in ("user", "assistant", "system", "developer"):
                out.append(f"input[{i}]: bad role {it.get('role')!r}")
            if _empty(it.get("content")):
                out.append(f"input[{i}]: empty message")
    for cid in calls:
        if cid not in answered:
            out.append(f"call {cid!r} has no output")
    return out


def gemini_problems(body: dict[str, Any]) -> list[str]:
    """Gemini's rules for ``contents``: user and model turns, no empty part; a model turn's
    function calls answered by the next turn's function responses, one each, the first call of
    each model turn carrying its ``thoughtSignature`` (Gemini 3 refuses the request without it)."""
    out: list[str] = []
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return ["contents: missing or empty"]
    waiting: list[str] = []
    for i, c in enumerate(contents):
        role = c.get("role") if isinstance(c, dict) else None
        parts = c.get("parts") if isinstance(c, dict) else None
        if role not in ("user", "model"):
            out.append(f"contents[{i}]: bad role {role!r}")
        if not isinstance(parts, list) or not parts:
            out.append(f"contents[{i}]: no parts")
            continue
        calls = [p["functionCall"] for p in parts if isinstance(p, dict) and "functionCall" in p]
        answers = [
            p["functionResponse"] for p in parts if isinstance(p, dict) and "functionResponse" in p
        ]
        for j, p in enumerate(parts):
            if not isinstance(p, dict) or not any(
                k in p
                for k in ("text", "functionCall", "functionResponse", "inlineData", "fileData")
            ):
                out.append(f"contents[{i}].parts[{j}]: empty or unknown part")
            elif "text" in p and not p["text"] and len(p) == 1:
                out.append(f"contents[{i}].parts[{j}]: empty text")
        # a side call (Gemini CLI's loop check) may end on a question after unanswered calls
        side_question = i == len(contents) - 1 and role == "user" and not answers
        if waiting and not side_question:
            got = [a.get("name") for a in answers]
            if role != "user" or sorted(got) != sorted(waiting):
                out.append(f"contents[{i}]: answers {got} for calls {waiting}")
        elif answers:
            out.append(f"contents[{i}]: function responses answer no call")
        if calls and role != "model":
            out.append(f"contents[{i}]: function call in a {role} turn")
        if calls:
            first = next(p for p in parts if isinstance(p, dict) and "functionCall" in p)
            if not first.get("thoughtSignature"):
                out.append(f"contents[{i}]: first function call without its thoughtSignature")
        waiting = [str(c.get("name")) for c in calls]
    return out


def problems(api: str, body: dict[str, Any]) -> list[str]:
    return {
        "anthropic": anthropic_problems,
        "openai": openai_problems,
        "responses": responses_problems,
        "gemini": gemini_problems,
    }[api](body)
