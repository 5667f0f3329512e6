"""Histories in the peers' own message types and back to OpenAI dicts, so every peer's output
is checked by the same validator and counted by the same counter.

The route is ours -> OpenAI dicts (``contextwarden.formats.to_openai``) -> LangChain, AutoGen or
pydantic-ai messages -> (peer) -> OpenAI dicts. Tool-call arguments keep their recorded JSON text (a
LangChain ``AIMessage`` holds parsed ``args``; the raw text rides along in
``additional_kwargs`` so counts do not drift with re-serialisation). AutoGen has no field for
reasoning, so an assistant message's reasoning is dropped on that route (AutoGen would not send
it either).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from contextwarden._messages import Message
from contextwarden._tokens import (
    MESSAGE_TOKENS,
    NAME_TOKENS,
    TOOL_CALL_TOKENS,
)

__all__ = [
    "autogen_to_openai",
    "lc_to_openai",
    "openai_to_autogen",
    "openai_to_lc",
    "openai_to_pai",
    "pai_to_openai",
    "task_text",
    "text_of",
    "tiktoken_message_counter",
]

_RAW = "cw_raw_arguments"


def text_of(content: Any) -> str:
    """The text of an OpenAI/LangChain ``content`` value (a string or a list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in content:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append(part["text"])
    return "\n".join(parts)


def task_text(messages: Sequence[Message]) -> str:
    """The task: the text of the first user message (empty when there is none)."""
    return next((m.text for m in messages if m.role == "user"), "")


# -- LangChain -----------------------------------------------------------------------------------
def openai_to_lc(dicts: Sequence[dict[str, Any]]) -> list[Any]:
    """LangChain messages for OpenAI chat dicts."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    out: list[Any] = []
    for d in dicts:
        role = d["role"]
        content = d.get("content")
        if role in ("system", "developer"):
            out.append(SystemMessage(content=text_of(content)))
        elif role == "user":
            out.append(HumanMessage(content=content if content is not None else ""))
        elif role == "assistant":
            calls = []
            raw: dict[str, str] = {}
            for c in d.get("tool_calls") or []:
                fn = c["function"]
                try:
                    args = json.loads(fn["arguments"] or "{}")
                except ValueError:
                    args = {}
                if not isinstance(args, dict):
                    args = {"value": args}
                calls.append({"name": fn["name"], "args": args, "id": c["id"], "type": "tool_call"})
                raw[c["id"]] = fn["arguments"]
            extra: dict[str, Any] = {_RAW: raw}
            if d.get("reasoning_content"):
                extra["reasoning_content"] = d["reasoning_content"]
            out.append(
                AIMessage(
                    content=content if content is not None else "",
                    tool_calls=calls,
                    additional_kwargs=extra,
                )
            )
        elif role == "tool":
            out.append(ToolMessage(content=text_of(content), tool_call_id=d["tool_call_id"]))
    return out


def lc_to_openai(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """OpenAI chat dicts for LangChain messages (``RemoveMessage`` markers are skipped)."""
    from langchain_core.messages import (
        AIMessage,
        HumanMessage,
        RemoveMessage,
        SystemMessage,
        ToolMessage,
    )

    out: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, RemoveMessage):
            continue
        if isinstance(m, SystemMessage):
            out.append({"role": "system", "content": text_of(m.content)})
        elif isinstance(m, HumanMessage):
            out.append({"role": "user", "content": m.content})
        elif isinstance(m, AIMessage):
            raw = m.additional_kwargs.get(_RAW, {})
            d: dict[str, Any] = {"role": "assistant", "content": m.content or None}
            if m.tool_calls:
                d["tool_calls"] = [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {
                            "name": c["name"],
                            "arguments": raw.get(c["id"], json.dumps(c["args"])),
                        },
                    }
                    for c in m.tool_calls
                ]
            if m.additional_kwargs.get("reasoning_content"):
                d["reasoning_content"] = m.additional_kwargs["reasoning_content"]
            out.append(d)
        elif isinstance(m, ToolMessage):
            out.append(
                {"role": "tool", "tool_call_id": m.tool_call_id, "content": text_of(m.content)}
            )
        else:
            raise TypeError(f"unexpected LangChain message {type(m).__name__}")
    return out


def tiktoken_message_counter(encoding: Any) -> Any:
    """A LangChain per-message token counter on tiktoken that frames messages the way
    ``ExactCounter`` does (same constants), so both give the same count for the same message:
    the LangChain peers trim on exactly the numbers contextwarden uses."""
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
    )

    enc = encoding.encode_ordinary
    roles = {
        SystemMessage: len(enc("system")),
        HumanMessage: len(enc("user")),
        AIMessage: len(enc("assistant")),
        ToolMessage: len(enc("tool")),
    }

    def count(message: BaseMessage) -> int:
        n = MESSAGE_TOKENS + roles.get(type(message), 1)
        if message.name:
            n += NAME_TOKENS + len(enc(message.name))
        n += len(enc(text_of(message.content)))
        if isinstance(message, AIMessage):
            raw = message.additional_kwargs.get(_RAW, {})
            reasoning = message.additional_kwargs.get("reasoning_content")
            if reasoning:
                n += len(enc(reasoning))
            for c in message.tool_calls:
                args = raw.get(c["id"]) or json.dumps(c["args"])
                n += TOOL_CALL_TOKENS + len(enc(c["name"])) + len(enc(args))
        return n

    return count


# -- AutoGen -------------------------------------------------------------------------------------
def openai_to_autogen(dicts: Sequence[dict[str, Any]]) -> tuple[str | None, list[Any]]:
    """``(system text, AutoGen LLM messages)`` for OpenAI chat dicts (AutoGen keeps the system
    prompt outside the model context; consecutive tool messages become one result message)."""
    from autogen_core import FunctionCall
    from autogen_core.models import (
        AssistantMessage,
        FunctionExecutionResult,
        FunctionExecutionResultMessage,
        UserMessage,
    )

    system: str | None = None
    out: list[Any] = []
    names: dict[str, str] = {}
    for d in dicts:
        role = d["role"]
        content = d.get("content")
        if role in ("system", "developer") and system is None and not out:
            system = text_of(content)
        elif role in ("user", "system", "developer"):
            out.append(UserMessage(content=text_of(content), source="user"))
        elif role == "assistant":
            calls = d.get("tool_calls") or []
            if calls:
                fcs = []
                for c in calls:
                    names[c["id"]] = c["function"]["name"]
                    fcs.append(
                        FunctionCall(
                            id=c["id"],
                            name=c["function"]["name"],
                            arguments=c["function"]["arguments"],
                        )
                    )
                out.append(
                    AssistantMessage(
                        content=fcs, thought=text_of(content) or None, source="assistant"
                    )
                )
            else:
                out.append(AssistantMessage(content=text_of(content), source="assistant"))
        elif role == "tool":
            result = FunctionExecutionResult(
                content=text_of(content),
                name=names.get(d["tool_call_id"], "tool"),
                call_id=d["tool_call_id"],
            )
            if out and isinstance(out[-1], FunctionExecutionResultMessage):
                out[-1] = FunctionExecutionResultMessage(content=[*out[-1].content, result])
            else:
                out.append(FunctionExecutionResultMessage(content=[result]))
    return system, out


def autogen_to_openai(system: str | None, messages: Sequence[Any]) -> list[dict[str, Any]]:
    """OpenAI chat dicts for an AutoGen context's messages (system prompt first)."""
    from autogen_core.models import (
        AssistantMessage,
        FunctionExecutionResultMessage,
        SystemMessage,
        UserMessage,
    )

    out: list[dict[str, Any]] = []
    if system is not None:
        out.append({"role": "system", "content": system})
    for m in messages:
        if isinstance(m, SystemMessage):
            out.append({"role": "system", "content": m.content})
        elif isinstance(m, UserMessage):
            out.append({"role": "user", "content": text_of(m.content)})
        elif isinstance(m, AssistantMessage):
            if isinstance(m.content, list):
                out.append(
                    {
                        "role": "assistant",
                        "content": m.thought,
                        "tool_calls": [
                            {
                                "id": c.id,
                                "type": "function",
                                "function": {"name": c.name, "arguments": c.arguments},
                            }
                            for c in m.content
                        ],
                    }
                )
            else:
                out.append({"role": "assistant", "content": m.content})
        elif isinstance(m, FunctionExecutionResultMessage):
            out.extend(
                {"role": "tool", "tool_call_id": r.call_id, "content": r.content} for r in m.content
            )
    return out


# -- pydantic-ai ---------------------------------------------------------------------------------
def openai_to_pai(dicts: Sequence[dict[str, Any]]) -> list[Any]:
    """pydantic-ai messages for OpenAI chat dicts: consecutive system, user and tool dicts form
    one ``ModelRequest`` (as a pydantic-ai run records them), an assistant dict one
    ``ModelResponse`` (reasoning as a ``ThinkingPart``; tool-call arguments kept as their
    recorded JSON text)."""
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    out: list[Any] = []
    parts: list[Any] = []
    names: dict[str, str] = {}

    def flush() -> None:
        if parts:
            out.append(ModelRequest(parts=list(parts)))
            parts.clear()

    for d in dicts:
        role = d["role"]
        content = d.get("content")
        if role in ("system", "developer"):
            parts.append(SystemPromptPart(content=text_of(content)))
        elif role == "user":
            parts.append(UserPromptPart(content=text_of(content)))
        elif role == "tool":
            call_id = d["tool_call_id"]
            parts.append(
                ToolReturnPart(
                    tool_name=names.get(call_id, "bash"),
                    content=text_of(content),
                    tool_call_id=call_id,
                )
            )
        elif role == "assistant":
            flush()
            response: list[Any] = []
            if d.get("reasoning_content"):
                response.append(ThinkingPart(content=d["reasoning_content"]))
            if text_of(content):
                response.append(TextPart(content=text_of(content)))
            for c in d.get("tool_calls") or []:
                names[c["id"]] = c["function"]["name"]
                response.append(
                    ToolCallPart(
                        tool_name=c["function"]["name"],
                        args=c["function"]["arguments"],
                        tool_call_id=c["id"],
                    )
                )
            out.append(ModelResponse(parts=response))
    flush()
    return out


def pai_to_openai(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """OpenAI chat dicts for pydantic-ai messages (one dict per request part; one assistant
    dict per response)."""
    from pydantic_ai.messages import (
        ModelRequest,
        SystemPromptPart,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    out: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, ModelRequest):
            for part in m.parts:
                if isinstance(part, SystemPromptPart):
                    out.append({"role": "system", "content": part.content})
                elif isinstance(part, UserPromptPart):
                    out.append({"role": "user", "content": text_of(part.content)})
                elif isinstance(part, ToolReturnPart):
                    out.append(
                        {
                            "role": "tool",
                            "tool_call_id": part.tool_call_id,
                            "content": part.model_response_str(),
                        }
                    )
                else:  # a receipt or a retry prompt: sent as user text
                    out.append({"role": "user", "content": str(getattr(part, "content", ""))})
            continue
        text = "".join(p.content for p in m.parts if isinstance(p, TextPart))
        d: dict[str, Any] = {"role": "assistant", "content": text or None}
        calls = [p for p in m.parts if isinstance(p, ToolCallPart)]
        if calls:
            d["tool_calls"] = [
                {
                    "id": c.tool_call_id,
                    "type": "function",
                    # the recorded JSON text as it was (args_as_json_str re-serialises it)
                    "function": {
                        "name": c.tool_name,
                        "arguments": c.args if isinstance(c.args, str) else c.args_as_json_str(),
                    },
                }
                for c in calls
            ]
        thinking = "".join(p.content for p in m.parts if isinstance(p, ThinkingPart))
        if thinking:
            d["reasoning_content"] = thinking
        out.append(d)
    return out
