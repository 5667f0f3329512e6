"""Errors the proxy itself produces, in the wire format of the API the client speaks.

How it works: docs/proxy.md (`contextwarden.proxy.errors`).
"""

from __future__ import annotations

from typing import Any, Literal

from .recall import encode_event

__all__ = [
    "ErrorKind",
    "Provider",
    "context_length_message",
    "error_body",
    "error_sse",
    "provider_for_path",
    "responses_error_code",
    "responses_error_sse",
    "status_for",
]

Provider = Literal["openai", "anthropic", "gemini"]
ErrorKind = Literal[
    "unauthorized",
    "too_large",
    "context_length",
    "timeout",
    "unreachable",
    "internal",
    "overloaded",
    "read_timeout",
    "bad_path",
    "invalid_request",
]

#: kind -> (HTTP status, Anthropic's documented error type, the ``type`` + ``code`` pair OpenAI's
#: SDK shows)
_KINDS: dict[ErrorKind, tuple[int, str, str, str]] = {
    "unauthorized": (401, "authentication_error", "authentication_error", "invalid_proxy_token"),
    "too_large": (413, "request_too_large", "invalid_request_error", "request_too_large"),
    "context_length": (
        400,
        "invalid_request_error",
        "invalid_request_error",
        "context_length_exceeded",
    ),
    "timeout": (504, "timeout_error", "server_error", "upstream_timeout"),
    "unreachable": (502, "api_error", "server_error", "upstream_unreachable"),
    "internal": (500, "api_error", "server_error", "proxy_error"),
    "overloaded": (503, "overloaded_error", "server_error", "proxy_overloaded"),
    "read_timeout": (408, "timeout_error", "invalid_request_error", "request_timeout"),
    "bad_path": (400, "invalid_request_error", "invalid_request_error", "invalid_path"),
    "invalid_request": (400, "invalid_request_error", "invalid_request_error", "invalid_request"),
}
#: Google's canonical status names, which the Gemini API's errors carry beside the code.
_GEMINI_STATUS: dict[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    408: "DEADLINE_EXCEEDED",
    413: "INVALID_ARGUMENT",
    500: "INTERNAL",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def provider_for_path(path: str) -> Provider:
    """Anthropic for ``/v1/messages`` and below (and ``/v1/complete``), Gemini for
    ``/v1beta/`` and ``/v1/models/...:verb`` paths, else OpenAI."""
    p = path.rstrip("/")
    if p.startswith("/v1beta/") or (p.startswith("/v1/models/") and ":" in p):
        return "gemini"
    if p.endswith("/v1/messages") or "/v1/messages/" in p or p.endswith("/v1/complete"):
        return "anthropic"
    return "openai"


def status_for(kind: ErrorKind) -> int:
    """401, 413, 400 (context length, bad path), 408, 503, 504, 502 or 500."""
    return _KINDS[kind][0]


def error_body(provider: Provider, kind: ErrorKind, message: str) -> dict[str, Any]:
    """The JSON error object the provider's SDK expects, e.g. for Anthropic
    ``{"type": "error", "error": {"type": "timeout_error", "message": ...}}``."""
    status, anthropic_type, etype, code = _KINDS[kind]
    if provider == "anthropic":
        return {"type": "error", "error": {"type": anthropic_type, "message": message}}
    if provider == "gemini":
        return {"error": {"code": status, "message": message, "status": _GEMINI_STATUS[status]}}
    param = "messages" if kind == "context_length" else None
    return {"error": {"message": message, "type": etype, "param": param, "code": code}}


#: Each provider's own wording for a request over the window, with the counts and without.
_OVER_WINDOW: dict[Provider, tuple[str, str]] = {
    "gemini": (
        "The input token count ({tokens}) exceeds the maximum number of tokens allowed ({limit}).",
        "The input token count exceeds the maximum number of tokens allowed.",
    ),
    "anthropic": ("prompt is too long: {tokens} tokens > {limit} maximum", "prompt is too long"),
    "openai": (
        "This model's maximum context length is {limit} tokens. However, your messages "
        "resulted in {tokens} tokens. Please reduce the length of the messages.",
        "This model's maximum context length was exceeded.",
    ),
}


def context_length_message(provider: Provider, tokens: int | None, limit: int | None) -> str:
    """The provider's own wording for a request over the window (agents and SDK wrappers match
    on it: "maximum context length" for OpenAI, "prompt is too long" for Anthropic)."""
    counted, bare = _OVER_WINDOW[provider]
    text = bare if tokens is None or limit is None else counted.format(tokens=tokens, limit=limit)
    return (
        f"{text} (contextwarden proxy: the system prompt, tools and newest message alone are "
        "over the limit)"
    )


def error_sse(provider: Provider, kind: ErrorKind, message: str) -> bytes:
    """The same error as one server-sent event, for failures after a stream has started (the status
    line is already sent): Anthropic's ``event: error``, OpenAI's ``data: {"error": ...}``."""
    return encode_event(
        "error" if provider == "anthropic" else "", error_body(provider, kind, message)
    )


def responses_error_code(kind: ErrorKind) -> str:
    """The ``code`` an OpenAI error of ``kind`` carries (``upstream_timeout``...)."""
    return _KINDS[kind][3]


def responses_error_sse(
    code: str, message: str, sequence_number: int, response: dict[str, Any] | None
) -> bytes:
    """An error after a Responses stream has started, as that API streams one: an ``error``
    event (``{"type": "error", "code", "message", "param", "sequence_number"}``, which the SDK
    yields as a ``ResponseErrorEvent``), then, when the stream's ``response`` is known, the
    terminal ``response.failed`` event carrying it with status ``failed`` and the error (Codex
    reads that one: it retries on ``rate_limit_exceeded``, stops on ``context_length_exceeded``)."""
    error = {
        "type": "error",
        "code": code,
        "message": message,
        "param": None,
        "sequence_number": sequence_number,
    }
    out = encode_event("error", error)
    if response is not None:
        failed = {
            "type": "response.failed",
            "response": {
                **response,
                "status": "failed",
                "error": {"code": code, "message": message},
            },
            "sequence_number": sequence_number + 1,
        }
        out += encode_event("response.failed", failed)
    return out
