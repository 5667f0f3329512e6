"""ProxyConfig: everything the proxy needs, validated once at construction."""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .._config import WardenConfig
from .._exceptions import ConfigError
from ..summarizers.config import parse_summarizer_spec

__all__ = ["ProxyConfig"]


class ProxyConfig(BaseModel):
    """How the proxy listens, where it forwards, and what the warden does on the way.

    The proxy token, when set, must arrive in the ``X-Contextwarden-Token`` header of every request
    (``Bearer <token>`` or the bare token); the ``Authorization`` / ``x-api-key`` headers stay the
    upstream's and are forwarded untouched.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    upstream: str = Field(
        description="Base URL of the real API, e.g. https://api.openai.com or "
        "https://api.anthropic.com. A trailing /v1 is not doubled with the request's /v1. Required."
    )
    host: str = Field("127.0.0.1", description="Interface to bind. Default: 127.0.0.1 (loopback).")
    port: int = Field(8787, ge=0, le=65535, description="Port to bind. Default: 8787.")
    window: int | None = Field(
        None,
        ge=1,
        description="Cap on the context window whatever the model: min(model window, this). With "
        "it, unknown models are handled too. Default: none (the model's window).",
    )
    warden: WardenConfig = Field(
        default_factory=lambda: WardenConfig.model_validate({}),
        description="The warden's configuration. Default: WardenConfig's defaults.",
    )
    token: str | None = Field(
        None,
        min_length=1,
        description="Token protecting the proxy (X-Contextwarden-Token header). Default: none.",
    )
    cache: Literal["sqlite", "redis", "memory"] = Field(
        "sqlite",
        description="Summary cache backend: sqlite (one file, shared by processes on one machine), "
        "redis (shared by every process), memory (this process only). Default: sqlite.",
    )
    cache_path: Path | None = Field(
        None, description="SQLite summary cache file. Default: <data dir>/summary-cache.sqlite3."
    )
    redis_url: str | None = Field(
        None, description="Redis URL, required when cache is redis. Default: none."
    )
    timeout: float = Field(
        600.0,
        gt=0,
        description="Seconds to wait for the upstream (to read each chunk); past it the client gets "
        "a 504. Default: 600 (long generations are slow).",
    )
    connect_timeout: float = Field(
        10.0, gt=0, description="Seconds to connect to the upstream; past it, 502. Default: 10."
    )
    max_connections: int = Field(
        512, ge=1, description="Pooled connections to the upstream. Default: 512."
    )
    max_body_bytes: int = Field(
        32 * 1024 * 1024,
        ge=1,
        description="Largest chat request body the proxy reads, in bytes; a larger one is answered "
        "413 in the provider's error format before the rest of it is read. Default: 33554432 "
        "(32 MiB: Anthropic's documented cap on a Messages request).",
    )
    cache_breakpoints: bool = Field(
        True,
        description="Add Anthropic prompt-cache breakpoints (cache_control) to /v1/messages "
        "requests whose client set none: on the newest message, the end of the stable prefix and "
        "the system prompt, at most 4 in all. Default: true.",
    )
    recall_tool: bool = Field(
        True,
        description="Offer the model the contextwarden_recall tool on chat requests (Chat "
        "Completions, Messages) whose reduced history shows a cw: reference, and answer its "
        "calls at the proxy from the conversation's kept originals, calling the upstream again "
        "(at most 3 upstream calls per request); the client never sees the tool. Default: true.",
    )

    client_key: str | None = Field(
        None,
        min_length=16,
        description="Secret key of the keyed hash (HMAC-SHA256) that tells clients apart by "
        "their credential headers; each client gets its own conversations, summaries and "
        "caches. Give every worker the same one so that they agree on who is who. Default: "
        "random per process (``contextwarden proxy --workers N`` shares one among its workers).",
    )
    max_clients: int = Field(
        1024, ge=1, description="Clients (credentials) kept in memory at once. Default: 1024."
    )
    max_state_bytes: int = Field(
        512 << 20,
        ge=1 << 20,
        description="Budget, in bytes, for the state of all clients (each client's as its parts "
        "count it: its conversations' messages and the copies edits made, its codec's entries, "
        "its counters' caches, its summaries, its remembered bodies); over it the least recently "
        "used other client is forgotten. Default: 536870912 (512 MiB).",
    )
    client_state_bytes: int = Field(
        256 << 20,
        ge=1 << 20,
        description="The same budget for one client; over it that client forgets its own least "
        "recently used conversations. Default: 268435456 (256 MiB).",
    )
    max_buffered_bytes: int = Field(
        256 << 20,
        ge=1 << 20,
        description="Bytes of request bodies the proxy holds at once, all requests together; "
        "a request that would pass it is answered 503 in the provider's error format (the SDKs "
        "retry). Default: 268435456 (256 MiB).",
    )
    header_timeout: float = Field(
        10.0,
        gt=0,
        description="Seconds a client has to send a request's headers, from its connection or "
        "its previous request; then the connection is closed. Default: 10.",
    )
    body_timeout: float = Field(
        60.0,
        gt=0,
        description="Seconds a client has to send a whole chat request body; then 408 and the "
        "connection is closed (a client trickling bytes cannot hold memory). Default: 60.",
    )
    client_concurrency: int = Field(
        32,
        ge=1,
        description="Requests of one client the warden works on at once (the rest wait their "
        "turn without holding a thread). Default: 32.",
    )
    client_summary_concurrency: int = Field(
        8,
        ge=1,
        description="Summaries of one client asked for at once; a compaction finding them all "
        "under way gets the extractive summary at once rather than wait (so compactions stuck "
        "on a slow summarizer never hold all of a client's requests). Default: 8.",
    )
    max_transforms: int = Field(
        256,
        ge=1,
        description="Threads working on requests at once, all clients together (a compaction "
        "waiting on a slow summarizer holds one). Default: 256.",
    )
    summary_max_calls: int = Field(
        8,
        ge=1,
        description="Summary HTTP calls one compaction may make, retries and map-reduce chunks "
        "included; past it the extractive summary is used. Default: 8.",
    )
    summary_breaker_failures: int = Field(
        3,
        ge=1,
        description="Summaries failing in a row after which a client's compactions use the "
        "extractive summary for summary_breaker_cooldown seconds. Default: 3.",
    )
    summary_breaker_cooldown: float = Field(
        300.0, ge=0, description="Seconds the summary breaker stays open. Default: 300."
    )

    summarizer: str | None = Field(
        None,
        description="Who writes compaction summaries: 'upstream' (the proxy's upstream, with the "
        "calling client's own credentials and the request's model, or summary_model), "
        "'extractive' (embedded, offline, no call), 'config' (the warden config's summarizer: "
        "section, with its own key), or PROVIDER:MODEL (openai:gpt-4o-mini, "
        "anthropic:claude-haiku-4-5: that section's shortcut). A failed summary falls back to the "
        "extractive one. Default: 'config' when the warden config's summarizer: section names a "
        "provider, else 'upstream' (with that section's timeout_s and max_retries).",
    )
    summary_model: str | None = Field(
        None,
        min_length=1,
        description="With summarizer 'upstream': the model asked for summaries (a cheaper one "
        "than the agent's). Default: the request's own model.",
    )

    @field_validator("upstream")
    @classmethod
    def _check_upstream(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(
                f"upstream must be an http(s) URL like https://api.openai.com, got {value!r}"
            )
        if parts.query or parts.fragment:
            raise ValueError(f"upstream must not carry a query or fragment, got {value!r}")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _check_cache(self) -> ProxyConfig:
        if self.cache == "redis" and not self.redis_url:
            raise ValueError("cache 'redis' needs redis_url (e.g. redis://localhost:6379/0)")
        return self

    @field_validator("summarizer")
    @classmethod
    def _check_summarizer(cls, value: str | None) -> str | None:
        if value is None or value.strip().lower() in ("upstream", "config"):
            return value.strip().lower() if value else value
        try:
            parse_summarizer_spec(value)
        except ConfigError as exc:
            raise ValueError(
                f"{exc} (or 'upstream': the proxy's upstream with the caller's credentials; "
                "'config': the warden config's summarizer: section)"
            ) from None
        return value.strip()

    @property
    def summary_source(self) -> str:
        """Who writes summaries: ``upstream``, ``extractive``, ``config`` or ``PROVIDER:MODEL``
        (see the ``summarizer`` field; its default resolved)."""
        if self.summarizer is not None:
            return "extractive" if self.summarizer.lower() == "extractive" else self.summarizer
        if "provider" in self.warden.summarizer.model_fields_set:
            return "config"  # the section names its provider (its timeouts alone do not)
        return "upstream"

    def upstream_url(self, path: str, query: str = "") -> str:
        """The upstream URL for an incoming ``path`` (``/v1/...``) and query string.

        ``https://openrouter.ai/api/v1`` + ``/v1/chat/completions`` gives
        ``https://openrouter.ai/api/v1/chat/completions``: a base ending in ``/v1`` is not doubled.
        """
        base = self.upstream
        if base.endswith("/v1") and (path == "/v1" or path.startswith("/v1/")):
            path = path[3:]
        url = base + path
        return f"{url}?{query}" if query else url
