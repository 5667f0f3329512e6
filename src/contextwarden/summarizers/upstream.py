"""Summaries through the proxy's own upstream, with the calling client's credentials.

:func:`summarizer_for_request` builds an :class:`~contextwarden.summarizers.llm.LLMSummarizer`
that asks the client's upstream in the client's own API (so a model served on one API only,
such as OpenAI's codex models on Responses, answers too): the client pays for its own summaries
and the proxy needs no key. Only :data:`FORWARDED_HEADERS` pass (credentials and API-version
selectors; a Gemini ``key=`` query parameter goes as ``x-goog-api-key``); nothing is read from
the proxy's environment, so a client that sent no credentials gets a summarizer that sends none
(it fails, and the compaction falls back to the extractive summary)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import httpx

from .._exceptions import ConfigError
from ._wire import CREDENTIAL_HEADERS, WIRES, Provider
from .llm import LLMSummarizer

__all__ = ["FORWARDED_HEADERS", "summarizer_for_request"]

#: Request headers passed on to the summary call: credentials and API-version selectors.
FORWARDED_HEADERS = CREDENTIAL_HEADERS | {
    "openai-organization",
    "openai-project",
    "anthropic-version",
    "anthropic-beta",
}


#: OpenAI reasoning models (o1, o3, o4-mini, the gpt-5 family, with or without a router's
#: ``openai/`` prefix): they refuse ``max_tokens`` ("Use 'max_completion_tokens' instead") and any
#: temperature but the default, and spend output tokens on reasoning before the answer.
_OPENAI_REASONING = re.compile(r"^(?:openai/)?(?:o\d|gpt-5)", re.IGNORECASE)


def _request_shape(api: str, model: str) -> dict[str, Any]:
    """The :class:`LLMSummarizer` settings a model's API accepts (see above)."""
    if api in ("openai", "responses") and _OPENAI_REASONING.match(model):
        return {
            "max_tokens_param": "max_completion_tokens",
            "temperature": None,
            "max_output_tokens": 8192,  # room for the reasoning as well as the summary
        }
    return {}


def _api_root(upstream_base_url: str, api: Provider) -> str:
    """The base URL :class:`LLMSummarizer` wants: with ``/v1`` for OpenAI's APIs (it posts to
    ``{base}/chat/completions`` or ``{base}/responses``), without for Anthropic
    (``{base}/v1/messages``) and Gemini (``{base}/v1beta/models/...``). An upstream given with
    or without its version works either way, as it does for the proxy."""
    base = upstream_base_url.rstrip("/")
    if api in ("openai", "responses"):
        return base if base.endswith("/v1") else f"{base}/v1"
    for version in ("/v1", "/v1beta"):
        if base.endswith(version):
            return base[: -len(version)]
    return base


def summarizer_for_request(
    upstream_base_url: str,
    headers: Mapping[str, str],
    model: str,
    api: Provider,
    *,
    query_key: str | None = None,
    summary_model: str | None = None,
    timeout_s: float = 60.0,
    max_retries: int = 2,
    max_chars: int = 4000,
    transport: httpx.AsyncBaseTransport | None = None,
) -> LLMSummarizer:
    """A summarizer asking ``upstream_base_url`` in the request's ``api``, with the credentials in
    ``headers`` (any case), for the request's ``model`` unless ``summary_model`` names a cheaper
    one; ``query_key``: a Gemini key sent as ``key=``. ``timeout_s`` and ``max_retries`` as in
    :class:`~contextwarden.SummarizerConfig`; ``max_chars`` caps the summary. Raises
    :class:`~contextwarden.ConfigError` for an unknown ``api``, an upstream that is not an http(s)
    URL, or no model."""
    if api not in WIRES:
        raise ConfigError(
            f"summarizer_for_request: api must be one of {', '.join(WIRES)}, got {api!r}"
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
    if query_key and "x-goog-api-key" not in passed:
        passed["x-goog-api-key"] = query_key
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
        **_request_shape(api, chosen.strip()),
    )
