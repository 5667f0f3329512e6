"""Summaries through the proxy's own upstream, with the calling client's credentials.

A proxy in front of an agent already knows a model the client may use, where it lives and the
client's credentials for it. :func:`summarizer_for_request` builds an
:class:`~contextwarden.summarizers.llm.LLMSummarizer` from those, so that a compaction can be
summarised by an LLM with no key of the proxy's own: the client pays for its own summaries, on
its own account, the way it pays for its own calls.

Only the headers that authenticate or select the API version are passed on (``authorization``,
``x-api-key``, ``api-key``, the OpenAI organisation and project, ``anthropic-version`` and
``anthropic-beta``); cookies, tracing and the client's content headers are not. No key is read
from the proxy's environment: a client that sent no credentials gets a summarizer that sends
none (and fails, and the compaction falls back to the extractive summary).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

import httpx

from .._exceptions import ConfigError
from .llm import LLMSummarizer

__all__ = ["FORWARDED_HEADERS", "summarizer_for_request"]

#: Request headers passed on to the summary call: credentials and API-version selectors.
FORWARDED_HEADERS = frozenset(
    {
        "authorization",
        "x-api-key",
        "api-key",
        "openai-organization",
        "openai-project",
        "anthropic-version",
        "anthropic-beta",
    }
)


#: OpenAI reasoning models (o1, o3, o4-mini, the gpt-5 family, with or without a router's
#: ``openai/`` prefix): they refuse ``max_tokens`` ("Use 'max_completion_tokens' instead") and any
#: temperature but the default, and spend output tokens on reasoning before the answer.
_OPENAI_REASONING = re.compile(r"^(?:openai/)?(?:o\d|gpt-5)", re.IGNORECASE)


def _request_shape(api: str, model: str) -> dict[str, Any]:
    """The :class:`LLMSummarizer` settings a model's API accepts (see above)."""
    if api == "openai" and _OPENAI_REASONING.match(model):
        return {
            "max_tokens_param": "max_completion_tokens",
            "temperature": None,
            "max_output_tokens": 8192,  # room for the reasoning as well as the summary
        }
    return {}


def _api_root(upstream_base_url: str, api: Literal["openai", "anthropic"]) -> str:
    """The base URL :class:`LLMSummarizer` wants: with ``/v1`` for OpenAI (it posts to
    ``{base}/chat/completions``), without for Anthropic (``{base}/v1/messages``). An upstream
    given with or without ``/v1`` works either way, as it does for the proxy."""
    base = upstream_base_url.rstrip("/")
    has_v1 = base.endswith("/v1")
    if api == "openai":
        return base if has_v1 else f"{base}/v1"
    return base[: -len("/v1")] if has_v1 else base


def summarizer_for_request(
    upstream_base_url: str,
    headers: Mapping[str, str],
    model: str,
    api: Literal["openai", "anthropic"],
    *,
    summary_model: str | None = None,
    timeout_s: float = 60.0,
    max_retries: int = 2,
    max_chars: int = 4000,
    transport: httpx.BaseTransport | None = None,
    async_transport: httpx.AsyncBaseTransport | None = None,
) -> LLMSummarizer:
    """A summarizer that asks ``upstream_base_url`` in the request's own ``api`` wire format,
    with the client's credentials from ``headers`` (any case), and the request's ``model``
    unless ``summary_model`` names a cheaper one (the proxy's ``--summary-model``).

    ``timeout_s`` and ``max_retries`` as in :class:`~contextwarden.SummarizerConfig`;
    ``max_chars`` caps the summary (the compaction's ``summary_max_chars``); the transports are
    for tests and custom networking. Raises :class:`~contextwarden.ConfigError` for an API
    other than ``openai``/``anthropic``, an upstream that is not an http(s) URL, or no model.
    """
    if api not in ("openai", "anthropic"):
        raise ConfigError(
            f"summarizer_for_request: api must be 'openai' or 'anthropic', got {api!r}"
        )
    if not upstream_base_url.startswith(("http://", "https://")):
        raise ConfigError(
            f"summarizer_for_request: upstream_base_url must be an http(s) URL, "
            f"got {upstream_base_url!r}"
        )
    chosen = summary_model or model
    if not chosen or not chosen.strip():
        raise ConfigError(
            "summarizer_for_request: the request names no model and no summary_model was given"
        )
    passed = {k.lower(): v for k, v in headers.items() if k.lower() in FORWARDED_HEADERS}
    return LLMSummarizer(
        _api_root(upstream_base_url, api),
        chosen.strip(),
        provider=api,
        timeout=timeout_s,
        max_retries=max_retries,
        max_chars=max_chars,
        headers=passed,
        key_from_env=False,
        transport=transport,
        async_transport=async_transport,
        **_request_shape(api, chosen.strip()),
    )
