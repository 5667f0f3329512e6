"""Is this request valid? Checks for provider message lists and for canonical messages.

How it works: docs/formats.md (`contextwarden.formats.validate`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .._messages import Message, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock
from ._common import tname

__all__ = [
    "check_messages",
    "validate_anthropic",
    "validate_gemini",
    "validate_openai",
    "validate_responses",
]

_OPENAI_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")


# -- canonical -------------------------------------------------------------------------------------
def check_messages(messages: Sequence[Message], *, allow_pending: bool = False) -> list[str]:
    """Problems of a canonical conversation (empty list when there are none).

    * every tool call is answered by a result in the ``tool`` messages that directly follow
      its assistant turn (before the next user or system message, or an assistant message
      that follows a tool message). Consecutive assistant messages count as one turn:
      Anthropic combines them, Claude Code records one per block, and
      :func:`~contextwarden.formats.to_openai` merges them when they came from Anthropic;
    * every tool result answers a call of the last assistant message, once;
    * tool call ids are unique;
    * no message is empty (no blocks, or only empty text), except a final assistant message
      (a prefill) that is simply empty.

    ``allow_pending=True`` accepts unanswered calls at the very end (a history cut before the
    tools ran).
    """
    problems: list[str] = []
    pending: dict[str, tuple[int, str]] = {}  # call id -> (assistant index, tool name)
    seen_calls: dict[str, int] = {}
    answered: set[str] = set()
    last = len(messages) - 1
    prev_role = None
    for i, m in enumerate(messages):
        role = m.role
        if role != "tool" and pending and not (role == "assistant" == prev_role):
            _unanswered(problems, pending, i)
        prev_role = role
        if not _has_content(m) and not (i == last and role == "assistant"):
            problems.append(f"message {i} ({role}): empty content")
        for b in m.content:
            if type(b) is ToolCallBlock:
                if role != "assistant":
                    problems.append(
                        f"message {i} ({role}): tool call {b.id!r} outside an assistant message"
                    )
                if b.id in seen_calls:
                    problems.append(
                        f"message {i}: tool call id {b.id!r} already used by message {seen_calls[b.id]}"
                    )
                else:
                    seen_calls[b.id] = i
                    pending[b.id] = (i, b.name)
            elif type(b) is ToolResultBlock:
                cid = b.tool_call_id
                if role == "assistant":
                    problems.append(
                        f"message {i} (assistant): tool result {cid!r} in an assistant message"
                    )
                if cid in pending:
                    del pending[cid]
                    answered.add(cid)
                elif cid in answered:
                    problems.append(f"message {i}: tool call {cid!r} is answered twice")
                elif cid in seen_calls:
                    problems.append(
                        f"message {i}: tool result {cid!r} answers a call of message "
                        f"{seen_calls[cid]} after other messages came between"
                    )
                else:
                    problems.append(f"message {i}: tool result {cid!r} has no tool call before it")
    if pending and not allow_pending:
        _unanswered(problems, pending, None)
    return problems


def _has_content(m: Message) -> bool:
    return any(
        b.text if type(b) is TextBlock else b.thinking or b.data if type(b) is ThinkingBlock else 1
        for b in m.content
    )


def _unanswered(problems: list[str], pending: dict[str, tuple[int, str]], at: int | None) -> None:
    where = f"before message {at}" if at is not None else "by the end"
    for cid, (i, name) in pending.items():
        problems.append(f"message {i}: tool call {cid!r} ({name}) is not answered {where}")
    pending.clear()


# -- OpenAI ----------------------------------------------------------------------------------------
def validate_openai(
    messages: Sequence[Any], *, tools: Sequence[Mapping[str, Any]] | None = None
) -> list[str]:
    """Problems of an OpenAI Chat Completions ``messages`` list (empty list = valid).

    Checks roles; content types; that user and system messages are not empty, a tool
    message has content (an empty string is fine: a tool may print nothing) and an
    assistant message has content or calls; tool call shapes; that every assistant
    ``tool_calls`` message is followed by one ``tool`` message per call id before any other
    message, and every ``tool`` message answers such a call; ids unique; a legacy
    ``function`` message follows a ``function_call``. With ``tools`` (the request's tool or
    function definitions), that every called name is defined.
    """
    if not isinstance(messages, list | tuple):
        return [f"messages: expected a list, got {tname(messages)}"]
    problems: list[str] = []
    if not messages:
        problems.append("messages: the list is empty")
    names = _tool_names(tools)
    pending: dict[str, int] = {}
    seen: dict[str, int] = {}
    legacy_pending: int | None = None
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            problems.append(f"message {i}: expected an object, got {tname(m)}")
            continue
        role = m.get("role")
        if role not in _OPENAI_ROLES:
            problems.append(f"message {i}: unknown role {role!r}")
            continue
        if role != "tool" and pending:
            for cid, at in pending.items():
                problems.append(
                    f"message {at}: tool call {cid!r} has no tool message before message {i}"
                )
            pending.clear()
        if role != "function":
            legacy_pending = None  # an assistant function_call below sets it again
        content = m.get("content")
        if role == "assistant":
            calls = m.get("tool_calls")
            fc = m.get("function_call")
            if (
                not (isinstance(content, str | list) and content)
                and not calls
                and not fc
                and not m.get("refusal")
            ):
                problems.append(f"message {i} (assistant): no content and no tool calls")
            _check_openai_content(problems, i, role, content, allow_null=True)
            if calls is not None and not isinstance(calls, list):
                problems.append(f"message {i}: 'tool_calls' must be a list, got {tname(calls)}")
            elif calls:
                for j, c in enumerate(calls):
                    call_id = _check_openai_call(problems, i, j, c, names)
                    if call_id is None:
                        continue
                    if call_id in seen:
                        problems.append(
                            f"message {i}: tool call id {call_id!r} already used by message "
                            f"{seen[call_id]}"
                        )
                    seen[call_id] = i
                    pending[call_id] = i
            if fc is not None:
                if not isinstance(fc, Mapping) or not isinstance(fc.get("name"), str):
                    problems.append(f"message {i}: 'function_call' needs a string 'name'")
                else:
                    legacy_pending = i
                    if not isinstance(fc.get("arguments"), str):
                        problems.append(f"message {i}: 'function_call.arguments' must be a string")
                    if names is not None and fc["name"] not in names:
                        problems.append(
                            f"message {i}: calls {fc['name']!r}, which is not among the tools"
                        )
        elif role == "tool":
            answer = m.get("tool_call_id")
            if not isinstance(answer, str):
                problems.append(
                    f"message {i} (tool): 'tool_call_id' must be a string, got {tname(answer)}"
                )
            elif answer in pending:
                del pending[answer]
            elif answer in seen:
                problems.append(
                    f"message {i} (tool): {answer!r} does not answer a call of the assistant "
                    f"message right before it (answered twice, or messages came between)"
                )
            else:
                problems.append(f"message {i} (tool): {answer!r} answers no tool call")
            if content != "":  # a tool may print nothing: an empty result is fine
                _check_openai_content(problems, i, role, content, allow_null=False)
        elif role == "function":
            if not isinstance(m.get("name"), str):
                problems.append(f"message {i} (function): 'name' must be a string")
            if legacy_pending is None:
                problems.append(f"message {i} (function): no function_call before it")
            legacy_pending = None
        else:
            _check_openai_content(problems, i, role, content, allow_null=False)
        name = m.get("name")
        if name is not None and not isinstance(name, str):
            problems.append(f"message {i}: 'name' must be a string, got {tname(name)}")
    for cid, at in pending.items():
        problems.append(f"message {at}: tool call {cid!r} has no tool message after it")
    return problems


def _tool_names(tools: Sequence[Mapping[str, Any]] | None) -> set[str] | None:
    if tools is None:
        return None
    names: set[str] = set()
    for t in tools:
        if not isinstance(t, Mapping):
            continue
        fn = t.get("function")
        if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
            names.add(fn["name"])
        elif isinstance(t.get("name"), str):  # legacy ``functions`` and Anthropic tool shapes
            names.add(t["name"])
    return names


def _check_openai_content(
    problems: list[str], i: int, role: str, content: Any, *, allow_null: bool
) -> None:
    if content is None:
        if not allow_null:
            problems.append(f"message {i} ({role}): content is missing or null")
        return
    if isinstance(content, str):
        if not content and not allow_null:
            problems.append(f"message {i} ({role}): empty content")
        return
    if not isinstance(content, list):
        problems.append(
            f"message {i} ({role}): content must be a string or a list, got {tname(content)}"
        )
        return
    if not content and not allow_null:
        problems.append(f"message {i} ({role}): empty content list")
    for j, p in enumerate(content):
        if not isinstance(p, Mapping) or not isinstance(p.get("type"), str):
            problems.append(f"message {i}: content[{j}] must be an object with a string 'type'")
        elif p["type"] == "text" and not isinstance(p.get("text"), str):
            problems.append(f"message {i}: content[{j}].text must be a string")
        elif p["type"] == "image_url" and role not in ("user",):
            problems.append(
                f"message {i} ({role}): content[{j}] is an image; only user messages take images"
            )


def _check_openai_call(
    problems: list[str], i: int, j: int, c: Any, names: set[str] | None
) -> str | None:
    path = f"message {i}: tool_calls[{j}]"
    if not isinstance(c, Mapping):
        problems.append(f"{path} must be an object, got {tname(c)}")
        return None
    cid = c.get("id")
    if not isinstance(cid, str) or not cid:
        problems.append(f"{path}.id must be a non-empty string")
        cid = None
    if c.get("type", "function") != "function":
        problems.append(f"{path}.type must be 'function', got {c.get('type')!r}")
    fn = c.get("function")
    if not isinstance(fn, Mapping):
        problems.append(f"{path}.function must be an object")
        return cid
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        problems.append(f"{path}.function.name must be a non-empty string")
    elif names is not None and name not in names:
        problems.append(f"{path} calls {name!r}, which is not among the tools")
    if not isinstance(fn.get("arguments"), str):
        problems.append(
            f"{path}.function.arguments must be a string, got {tname(fn.get('arguments'))}"
        )
    return cid


# -- Anthropic -------------------------------------------------------------------------------------
def validate_anthropic(
    system: Any, messages: Sequence[Any], memo: dict[str, Any] | None = None
) -> list[str]:
    """Problems of an Anthropic Messages request (empty list = valid).

    Checks the system prompt (a string or a list of text blocks); that messages are user /
    assistant (or system messages of text, the mid-conversation beta, outside the alternation
    and not between a tool call and its result), start with the user and alternate; that no
    content is empty (the final assistant message, a prefill, may be); block shapes; that
    ``tool_result`` blocks sit only in user messages, come first there, and answer a
    ``tool_use`` of the assistant message right before; that every ``tool_use`` is answered in
    the next user message; that tool ids are unique and well-formed; that thinking blocks keep
    their signature (and redacted ones their data) and appear only in assistant messages.

    ``memo``: a dict kept between the requests of one conversation (the proxy's), in which the
    check of a request is remembered at a few points before its end; the next request is
    checked from the last point up to which it has the same messages.
    """
    problems: list[str] = []
    if system is not None and not isinstance(system, str):
        if not isinstance(system, list):
            problems.append(
                f"system: expected a string or a list of text blocks, got {tname(system)}"
            )
        else:
            for j, b in enumerate(system):
                if (
                    not isinstance(b, Mapping)
                    or b.get("type") != "text"
                    or not isinstance(b.get("text"), str)
                ):
                    problems.append(f"system[{j}]: expected a text block")
                elif not b["text"]:
                    problems.append(f"system[{j}]: empty text")
    if not isinstance(messages, list | tuple):
        return [*problems, f"messages: expected a list, got {tname(messages)}"]
    if not messages:
        problems.append("messages: the list is empty")
    found: list[str] = []
    pending: dict[str, int] = {}  # tool_use id -> assistant index, for the next user message
    seen: dict[str, int] = {}
    prev_role: Any = None
    last = len(messages) - 1
    start, points = 0, []
    before, saved = (memo or {}).get("anthropic", ((), []))
    for k, state in reversed(saved):
        if k <= last and before[:k] == messages[:k]:  # resume where the two agree
            start, points = k, [p for p in saved if p[0] <= k]
            found, pending, seen = list(state[0]), dict(state[1]), dict(state[2])
            prev_role = state[3]
            break
    mark = max(last - _MEMO_BEFORE_END, 0)
    for i in range(start, len(messages)):
        if memo is not None and i > start and (i == mark or i % _MEMO_EVERY == 0):
            points.append((i, (list(found), dict(pending), dict(seen), prev_role)))
        prev_role = _anthropic_message(found, i, messages[i], i == last, pending, seen, prev_role)
    if memo is not None and points:
        points = points[-_MEMO_POINTS:]
        memo["anthropic"] = (messages[: points[-1][0]], points)
    for cid, at in pending.items():
        found.append(f"message {at}: tool_use {cid!r} is not answered by a following user message")
    return problems + found


#: Where the check of a request is remembered: a few messages short of its end (the next
#: request may spell its newest ones otherwise: a breakpoint moved, a reminder taken back), and
#: every so many messages before, the last few of those kept (an edit rewrites a message a few
#: turns back: the check resumes before it).
_MEMO_BEFORE_END = 4
_MEMO_EVERY = 32
_MEMO_POINTS = 4


def _anthropic_message(
    problems: list[str],
    i: int,
    m: Any,
    is_last: bool,
    pending: dict[str, int],
    seen: dict[str, int],
    prev_role: Any,
) -> Any:
    """Check message ``i`` of an Anthropic request (see :func:`validate_anthropic`); the role
    the next message follows."""
    if not isinstance(m, Mapping):
        problems.append(f"message {i}: expected an object, got {tname(m)}")
        return prev_role
    role = m.get("role")
    content = m.get("content")
    if role == "system":
        # a system message inside ``messages`` (the mid-conversation system beta): text only, not
        # empty, not between a tool_use and its tool_result, outside the user/assistant alternation
        if isinstance(content, str | list) and not content:
            problems.append(f"message {i} (system): empty content")
        elif not isinstance(content, str | list):
            problems.append(
                f"message {i} (system): content must be a string or a list, got {tname(content)}"
            )
        for j, b in enumerate(content if isinstance(content, list) else ()):
            if not isinstance(b, Mapping) or b.get("type") != "text":
                problems.append(f"message {i}: content[{j}] of a system message must be text")
            elif not isinstance(b.get("text"), str) or not b["text"]:
                problems.append(f"message {i}: content[{j}]: empty text block")
        if pending and prev_role == "assistant":
            for cid, a in pending.items():
                problems.append(
                    f"message {a}: tool_use {cid!r} is followed by a system message, not its result"
                )
        return prev_role
    if role not in ("user", "assistant"):
        problems.append(f"message {i}: role must be 'user', 'assistant' or 'system', got {role!r}")
        return prev_role
    if prev_role is None and role != "user":
        problems.append(f"message {i}: the first message must have role 'user'")
    if role == prev_role:
        problems.append(f"message {i}: two {role} messages in a row (roles must alternate)")
    if role == "assistant" and pending and prev_role != "assistant":
        _anthropic_unanswered(problems, pending, i)
    prefill = role == "assistant" and is_last
    if isinstance(content, str):
        if not content and not prefill:
            problems.append(f"message {i} ({role}): empty content")
        if role == "user" and pending:
            _anthropic_unanswered(problems, pending, i)
    elif isinstance(content, list):
        if not content and not prefill:
            problems.append(f"message {i} ({role}): empty content")
        _check_blocks(problems, i, role, content, pending, seen)
    else:
        problems.append(
            f"message {i} ({role}): content must be a string or a list, got {tname(content)}"
        )
    return role


def _anthropic_unanswered(problems: list[str], pending: dict[str, int], at: int) -> None:
    for cid, a in pending.items():
        problems.append(f"message {a}: tool_use {cid!r} is not answered in message {at}")
    pending.clear()


def _check_blocks(
    problems: list[str],
    i: int,
    role: str,
    content: list[Any],
    pending: dict[str, int],
    seen: dict[str, int],
) -> None:
    answering = dict(pending) if role == "user" else {}
    if role == "user":
        pending.clear()
    after_other = False
    for j, b in enumerate(content):
        where = f"message {i}: content[{j}]"
        if not isinstance(b, Mapping) or not isinstance(b.get("type"), str):
            problems.append(f"{where} must be an object with a string 'type'")
            continue
        t = b["type"]
        if t in ("tool_use", "thinking", "redacted_thinking") and role != "assistant":
            problems.append(f"{where}: {t} outside an assistant message")
        if t == "text":
            if not isinstance(b.get("text"), str):
                problems.append(f"{where}.text must be a string")
            elif not b["text"]:
                problems.append(f"{where}: empty text block")
        elif t == "tool_use":
            cid = b.get("id")
            if not isinstance(cid, str) or not _ANTHROPIC_ID.fullmatch(cid):
                problems.append(f"{where}.id must match [a-zA-Z0-9_-]+, got {cid!r}")
            elif cid in seen:
                problems.append(f"{where}: tool_use id {cid!r} already used by message {seen[cid]}")
            else:
                seen[cid] = i
                if role == "assistant":
                    pending[cid] = i
            if not isinstance(b.get("name"), str) or not b.get("name"):
                problems.append(f"{where}.name must be a non-empty string")
            if not isinstance(b.get("input"), Mapping):
                problems.append(f"{where}.input must be an object, got {tname(b.get('input'))}")
        elif t == "tool_result":
            cid = b.get("tool_use_id")
            if role != "user":
                problems.append(f"{where}: tool_result outside a user message")
            elif after_other:
                problems.append(
                    f"{where}: tool_result after other content (tool results come first)"
                )
            if cid in answering:
                del answering[cid]
            else:
                problems.append(
                    f"{where}: tool_result {cid!r} answers no tool_use of the previous assistant message"
                )
            inner = b.get("content")
            if inner is not None and not isinstance(inner, str | list):
                problems.append(f"{where}.content must be a string or a list, got {tname(inner)}")
            if "is_error" in b and not isinstance(b["is_error"], bool):
                problems.append(f"{where}.is_error must be a bool")
        elif t == "thinking":
            if not isinstance(b.get("signature"), str) or not b.get("signature"):
                problems.append(f"{where}: thinking block without its signature")
            if not isinstance(b.get("thinking"), str):
                problems.append(f"{where}.thinking must be a string")
        elif t == "redacted_thinking" and (not isinstance(b.get("data"), str) or not b["data"]):
            problems.append(f"{where}: redacted_thinking without its data")
        elif t == "image" and not isinstance(b.get("source"), Mapping):
            problems.append(f"{where}.source must be an object")
        if t != "tool_result":
            after_other = True
    _anthropic_unanswered(problems, answering, i)


# -- OpenAI Responses ----------------------------------------------------------------------------
def validate_responses(items: Sequence[Any]) -> list[str]:
    """Problems of an OpenAI Responses ``input`` item list (empty list = valid).

    Checks that the list is not empty; that every item is an object with a string ``type``
    (or a ``role``: a message); that messages have a known role and content; that every call
    output (``function_call_output``, ``custom_tool_call_output``, ...) answers a call of the
    same ``call_id`` earlier in the list, once, and every call with a ``call_id`` is answered
    later in it; call ids unique.
    """
    if not isinstance(items, list | tuple):
        return [f"input: expected a list of items, got {tname(items)}"]
    if not items:
        return ["input: no items"]
    problems: list[str] = []
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            problems.append(f"item {i}: expected an object, got {tname(item)}")
            continue
        kind = item.get("type", "message" if "role" in item else None)
        if not isinstance(kind, str):
            problems.append(f"item {i}: 'type' must be a string")
            continue
        if kind == "message":
            if item.get("role") not in ("system", "developer", "user", "assistant"):
                problems.append(f"item {i}: unknown role {item.get('role')!r}")
            content = item.get("content")
            if not isinstance(content, str | list) or (
                item.get("role") != "assistant" and not content
            ):
                problems.append(f"item {i} ({item.get('role')}): empty or missing content")
            continue
        call_id = item.get("call_id")
        if not isinstance(call_id, str):
            continue
        if kind.endswith("_output"):
            if call_id not in calls:
                problems.append(f"item {i}: output for call {call_id!r} with no call before it")
            elif call_id in answered:
                problems.append(f"item {i}: call {call_id!r} is answered twice")
            answered.add(call_id)
        elif kind.endswith("_call"):
            if call_id in calls:
                problems.append(f"item {i}: call id {call_id!r} is not unique")
            calls[call_id] = i
    for call_id, i in calls.items():
        if call_id not in answered:
            problems.append(f"item {i}: call {call_id!r} has no output")
    return problems


# -- Gemini --------------------------------------------------------------------------------------
#: The keys of a Gemini part that carry its data: exactly one per part (camelCase or snake_case).
_GEMINI_DATA = {
    spelling: key
    for key in (
        "text",
        "inlineData",
        "fileData",
        "functionCall",
        "functionResponse",
        "executableCode",
        "codeExecutionResult",
    )
    for spelling in (key, re.sub("([A-Z])", lambda m: "_" + m[1].lower(), key))
}


def validate_gemini(contents: Sequence[Any]) -> list[str]:
    """Problems of a Gemini ``contents`` list (empty list = valid).

    Checks that it is not empty and opens with a ``user`` content; roles ``user`` / ``model``;
    that every content has parts and every part one kind of data (a text, which is not empty
    unless it carries a ``thoughtSignature``, media, a function call or response, code);
    ``functionCall`` parts only in ``model`` contents, right after a ``user`` content, and
    answered by the next content, a ``user`` one with as many ``functionResponse`` parts, of the
    same names (and ids, when the calls have ids); ``functionResponse`` parts only there.
    """
    if not isinstance(contents, list | tuple):
        return [f"contents: expected a list, got {tname(contents)}"]
    if not contents:
        return ["contents: no content"]
    problems: list[str] = []
    calls: list[tuple[Any, Any]] = []  # the previous model content's calls: (name, id)
    previous = ""
    for i, content in enumerate(contents):
        if not isinstance(content, Mapping):
            problems.append(f"content {i}: expected an object, got {tname(content)}")
            continue
        role = content.get("role", "user")
        if role not in ("user", "model", "function"):
            problems.append(f"content {i}: role must be 'user' or 'model', got {role!r}")
        if i == 0 and role == "model":
            problems.append("content 0: the first content must be the user's")
        parts = content.get("parts")
        if not isinstance(parts, list) or not parts:
            problems.append(f"content {i} ({role}): no parts")
            parts = []
        here: list[tuple[Any, Any]] = []
        answers: list[tuple[Any, Any]] = []
        for j, part in enumerate(parts):
            kind = _gemini_part(problems, i, j, part)
            if kind == "functionCall":
                fn = part.get("functionCall", part.get("function_call"))
                here.append(
                    (fn.get("name"), fn.get("id")) if isinstance(fn, Mapping) else ("", None)
                )
                if role != "model":
                    problems.append(f"content {i} part {j}: a function call outside a model turn")
            elif kind == "functionResponse":
                fn = part.get("functionResponse", part.get("function_response"))
                answers.append(
                    (fn.get("name"), fn.get("id")) if isinstance(fn, Mapping) else ("", None)
                )
                if role == "model":
                    problems.append(f"content {i} part {j}: a function response in a model turn")
        if calls:
            _gemini_answers(problems, i, calls, answers)
        elif answers:
            problems.append(f"content {i}: function responses with no function call before them")
        if here and previous not in ("user", "function"):
            problems.append(
                f"content {i}: a function call turn must come right after a user turn or a "
                "function response turn"
            )
        calls = here
        previous = role
    if calls:
        problems.append(f"content {len(contents) - 1}: its function calls are not answered")
    return problems


def _gemini_part(problems: list[str], i: int, j: int, part: Any) -> str | None:
    if not isinstance(part, Mapping):
        problems.append(f"content {i} part {j}: expected an object, got {tname(part)}")
        return None
    kinds = {_GEMINI_DATA[k] for k in part if k in _GEMINI_DATA}
    if len(kinds) != 1:
        what = (
            "no data" if not kinds else f"more than one kind of data ({', '.join(sorted(kinds))})"
        )
        problems.append(f"content {i} part {j}: {what}")
        return None
    (kind,) = kinds
    text = part.get("text")
    signed = "thoughtSignature" in part or "thought_signature" in part
    if kind == "text" and (not isinstance(text, str) or (not text and not signed)):
        problems.append(f"content {i} part {j}: empty text")
    return kind


def _gemini_answers(
    problems: list[str], i: int, calls: list[tuple[Any, Any]], answers: list[tuple[Any, Any]]
) -> None:
    """The content ``i`` after a model turn's ``calls`` must answer each of them."""
    if len(answers) != len(calls):
        problems.append(
            f"content {i}: {len(answers)} function responses for the {len(calls)} function "
            "calls of the turn before"
        )
        return
    if sorted(str(n) for n, _ in calls) != sorted(str(n) for n, _ in answers):
        problems.append(f"content {i}: the function responses do not name the calls' functions")
    ids = {c for _, c in calls if c}
    if ids and ids != {a for _, a in answers if a}:
        problems.append(f"content {i}: the function responses' ids are not the calls' ids")
