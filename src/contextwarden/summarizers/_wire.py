"""The four APIs a summary can be asked through, one small value each: where the request goes
(``openai``: ``{base}/chat/completions``, any compatible server; ``anthropic``:
``{base}/v1/messages``; ``responses``: ``{base}/responses``, where OpenAI serves its codex
models; ``gemini``: ``{base}/v1beta/models/{model}:generateContent``), its headers, its body,
and where the reply's text, usage and error message sit. Pure; the HTTP is :mod:`.llm`'s."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote

__all__ = ["ANTHROPIC_VERSION", "CREDENTIAL_HEADERS", "WIRES", "Provider", "Wire", "error_text"]

Provider = Literal["openai", "anthropic", "responses", "gemini"]

#: The headers that carry credentials, in every API here.
CREDENTIAL_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "x-goog-api-key"})
#: The ``anthropic-version`` header sent with every Anthropic request.
ANTHROPIC_VERSION = "2023-06-01"

Usage = tuple[int | None, int | None]


@dataclass(frozen=True)
class Wire:
    """One API: ``base_url``, the public API's root (when none is given); ``key_env``, the
    environment variable its key is read from (when none is named); ``path(model)`` appended to
    the base URL, ``auth(key)`` the headers that carry the key, ``body(model, system, user,
    max_output_tokens)`` the request (temperature and the output-limit field's name are the
    caller's), ``text(reply)`` the reply's text (``KeyError`` and friends when the reply is not
    of this API), ``usage(reply)`` (input, output) tokens; ``headers``: sent with every
    request."""

    base_url: str
    key_env: str
    path: Callable[[str], str]
    auth: Callable[[str], dict[str, str]]
    body: Callable[[str, str, str, int], dict[str, Any]]
    text: Callable[[Any], str]
    usage: Callable[[Any], Usage]
    #: the body field of the temperature (None: in ``generationConfig``)
    temperature_in: str | None = "temperature"
    headers: Mapping[str, str] = field(default_factory=dict)


def _count(usage: Any, keys: tuple[str, ...]) -> int | None:
    if not isinstance(usage, dict):
        return None
    found = [
        v for v in (usage.get(k) for k in keys) if isinstance(v, int) and not isinstance(v, bool)
    ]
    return sum(v for v in found if v >= 0) if found else None


def _usage(field: str, inputs: tuple[str, ...], outputs: tuple[str, ...]) -> Callable[[Any], Usage]:
    """Reads (input, output) tokens from the reply's ``field``: each the sum of its keys'
    whole numbers (None when none is there)."""
    return lambda d: (_count(d.get(field), inputs), _count(d.get(field), outputs))


def _joined(parts: Any, *, skip: Callable[[dict[str, Any]], bool]) -> str:
    return "".join(p.get("text", "") for p in parts if isinstance(p, dict) and not skip(p))


def _chat_text(data: Any) -> str:
    content = data["choices"][0]["message"]["content"]
    if isinstance(content, list):
        return _joined(content, skip=lambda p: False)
    return content or ""


def _responses_text(data: Any) -> str:
    texts = [
        _joined(item["content"], skip=lambda p: p.get("type") != "output_text")
        for item in data["output"]
        if isinstance(item, dict) and item.get("type") == "message"
    ]
    return "".join(texts)


def _gemini_text(data: Any) -> str:
    # thought parts are the model's reasoning, not the summary
    return _joined(data["candidates"][0]["content"]["parts"], skip=lambda p: bool(p.get("thought")))


WIRES: Mapping[Provider, Wire] = {
    "openai": Wire(
        "https://api.openai.com/v1",
        "OPENAI_API_KEY",
        path=lambda model: "/chat/completions",
        auth=lambda key: {"authorization": f"Bearer {key}"},
        body=lambda model, system, user, limit: {
            "model": model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        },
        text=_chat_text,
        usage=_usage("usage", ("prompt_tokens",), ("completion_tokens",)),
    ),
    "anthropic": Wire(
        "https://api.anthropic.com",
        "ANTHROPIC_API_KEY",
        path=lambda model: "/v1/messages",
        auth=lambda key: {"x-api-key": key},
        body=lambda model, system, user, limit: {
            "model": model,
            "max_tokens": limit,
            "system": system,
            "messages": [{"role": "user", "content": user}],
        },
        text=lambda d: _joined(d["content"], skip=lambda p: p.get("type") != "text"),
        # the input counts cache reads and writes too (they are billed, at their own rates)
        usage=_usage(
            "usage",
            ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"),
            ("output_tokens",),
        ),
        headers={"anthropic-version": ANTHROPIC_VERSION},
    ),
    "responses": Wire(
        "https://api.openai.com/v1",
        "OPENAI_API_KEY",
        path=lambda model: "/responses",
        auth=lambda key: {"authorization": f"Bearer {key}"},
        body=lambda model, system, user, limit: {
            "model": model,
            "instructions": system,
            "input": [{"role": "user", "content": user}],
            "max_output_tokens": limit,
            "store": False,
        },
        text=_responses_text,
        usage=_usage("usage", ("input_tokens",), ("output_tokens",)),
    ),
    "gemini": Wire(
        "https://generativelanguage.googleapis.com",
        "GEMINI_API_KEY",
        path=lambda model: f"/v1beta/models/{quote(model, safe='')}:generateContent",
        auth=lambda key: {"x-goog-api-key": key},
        body=lambda model, system, user, limit: {
            "systemInstruction": {"parts": [{"text": system}]},
            "contents": [{"role": "user", "parts": [{"text": user}]}],
            "generationConfig": {"maxOutputTokens": limit},
        },
        text=_gemini_text,
        # thinking tokens are billed as output
        usage=_usage(
            "usageMetadata", ("promptTokenCount",), ("candidatesTokenCount", "thoughtsTokenCount")
        ),
        temperature_in=None,
    ),
}


def error_text(body: str) -> str:
    """The upstream's own error message in a reply body (every API here nests it as
    ``{"error": {"message": ...}}``, some as ``{"error": "..."}``), else the body's start."""
    try:
        data = json.loads(body)
    except ValueError:
        return body[:300]
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        kind = error.get("type") or error.get("status") or error.get("code")
        return f"{kind}: {error['message']}" if isinstance(kind, str) else error["message"]
    if isinstance(error, str):
        return error
    return body[:300]
