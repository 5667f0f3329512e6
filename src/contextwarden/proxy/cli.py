"""``contextwarden proxy``: the typer command (mounted by the CLI app). Thin: builds a
:class:`ProxyConfig` and serves it with :mod:`contextwarden.proxy.server`.

How it works: docs/proxy.md (`contextwarden.proxy.cli`).
"""

from __future__ import annotations

import importlib
import ipaddress
import re
from pathlib import Path
from types import ModuleType
from typing import Annotated, Literal

import typer
from pydantic import ValidationError

from .._config import load_config
from .._exceptions import ContextWardenError
from ..store.cache import RedisCache
from .config import ProxyConfig

__all__ = ["app", "main", "proxy", "redact", "serve"]

CacheName = Literal["sqlite", "redis", "memory"]
LogFormat = Literal["json", "text"]


def proxy(
    upstream: Annotated[
        str, typer.Option(help="Base URL of the real API, e.g. https://api.openai.com (required).")
    ],
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8787,
    host: Annotated[
        str,
        typer.Option(help="Interface to bind; loopback by default (use --token if you widen it)."),
    ] = "127.0.0.1",
    window: Annotated[
        int | None,
        typer.Option(help="Cap the context window at N tokens whatever the model.", min=1),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            help="YAML file with warden settings (default: $CONTEXTWARDEN_CONFIG or ./contextwarden.yaml).",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            help="Require this token in the X-Contextwarden-Token header of every request.",
            envvar="CONTEXTWARDEN_PROXY_TOKEN",
            show_default=False,
        ),
    ] = None,
    cache: Annotated[
        CacheName, typer.Option(help="Summary cache: sqlite (file), redis (shared), memory.")
    ] = "sqlite",
    redis_url: Annotated[
        str | None, typer.Option(help="Redis URL for --cache redis, e.g. redis://localhost:6379/0.")
    ] = None,
    cache_path: Annotated[
        Path | None,
        typer.Option(help="SQLite cache file (default: <data dir>/summary-cache.sqlite3)."),
    ] = None,
    timeout: Annotated[
        float, typer.Option(help="Seconds to wait on the upstream before answering 504.", min=0.001)
    ] = 600.0,
    workers: Annotated[
        int,
        typer.Option(
            help="Worker processes (they share the summary cache; /stats and /metrics sum them "
            "unless --cache memory).",
            min=1,
        ),
    ] = 1,
    max_body_bytes: Annotated[
        int,
        typer.Option(
            help="Largest chat request body to accept, in bytes (larger: 413). Default 32 MiB.",
            min=1,
        ),
    ] = 32 * 1024 * 1024,
    cache_breakpoints: Annotated[
        bool,
        typer.Option(
            help="Add Anthropic prompt-cache breakpoints to /v1/messages requests that set none."
        ),
    ] = True,
    recall_tool: Annotated[
        bool,
        typer.Option(
            help="Offer the model the contextwarden_recall tool when a request shows a cw: "
            "reference, and answer it at the proxy."
        ),
    ] = True,
    summarizer: Annotated[
        str | None,
        typer.Option(
            help="Who writes compaction summaries: upstream (the upstream, with each client's "
            "own key; the default), extractive (offline), config (--config's summarizer: "
            "section), or PROVIDER:MODEL, e.g. openai:gpt-4o-mini.",
            show_default=False,
        ),
    ] = None,
    summary_model: Annotated[
        str | None,
        typer.Option(
            help="With --summarizer upstream: the model asked for summaries (default: the "
            "request's own).",
            show_default=False,
        ),
    ] = None,
    client_key: Annotated[
        str | None,
        typer.Option(
            help="Secret (16+ characters) keying the hash that tells clients apart by their "
            "credentials; the same on every proxy sharing a summary cache (default: random).",
            envvar="CONTEXTWARDEN_PROXY_CLIENT_KEY",
            show_default=False,
        ),
    ] = None,
    header_timeout: Annotated[
        float, typer.Option(help="Seconds a client has to send a request's headers.", min=0.001)
    ] = 10.0,
    body_timeout: Annotated[
        float, typer.Option(help="Seconds a client has to send a chat request body.", min=0.001)
    ] = 60.0,
    max_buffered_bytes: Annotated[
        int,
        typer.Option(
            help="Bytes of request bodies held at once, all clients (over it: 503).", min=1 << 20
        ),
    ] = 256 << 20,
    max_state_bytes: Annotated[
        int,
        typer.Option(
            help="Budget for the conversation state of all clients, in bytes.", min=1 << 20
        ),
    ] = 512 << 20,
    log_format: Annotated[
        LogFormat, typer.Option(help="Log lines on stderr: json (one object a line) or text.")
    ] = "json",
) -> None:
    """Run an OpenAI/Anthropic-compatible proxy that keeps every request inside the window.

    Point the agent's base URL at http://HOST:PORT/v1 (OpenAI) or http://HOST:PORT (Anthropic).
    """
    options = {k: v for k, v in locals().items() if k not in ("config", "workers", "log_format")}
    try:
        settings = ProxyConfig.model_validate(
            options
            | {
                # YAML file (or $CONTEXTWARDEN_CONFIG / ./contextwarden.yaml), then CONTEXTWARDEN_*
                "warden": load_config(config),
                "token": token or None,
                "client_key": client_key or None,
            }
        )
    except (ValidationError, ContextWardenError) as exc:
        typer.echo(f"contextwarden proxy: {_one_line(exc)}", err=True)
        raise typer.Exit(2) from None
    serve(settings, workers=workers, log_format=log_format)


def _server() -> ModuleType:
    """:mod:`contextwarden.proxy.server` (Starlette and uvicorn: the ``proxy`` extra), imported
    when the command runs; exits naming the extra when it is not installed."""
    try:
        return importlib.import_module("contextwarden.proxy.server")
    except ImportError as exc:
        typer.echo(
            "contextwarden proxy needs starlette and uvicorn: pip install 'contextwarden[proxy]'",
            err=True,
        )
        raise typer.Exit(1) from exc


def serve(settings: ProxyConfig, *, workers: int = 1, log_format: LogFormat = "json") -> None:
    """Run the proxy in the foreground until interrupted; ``workers`` > 1 runs that many
    processes on the same port (the transform is CPU-bound: one process uses one core); each
    line it logs is in ``log_format``."""
    server = _server()
    if settings.token is None and not _is_loopback(settings.host):
        typer.echo(
            f"warning: listening on {settings.host} without --token; anyone who can reach it can "
            "use it (and the upstream keys its clients send)",
            err=True,
        )
    if settings.cache == "redis" and settings.redis_url:
        _check_redis(settings.redis_url)
    try:
        app, settings = server.app_for(settings, workers, log_format)
    except ContextWardenError as exc:
        typer.echo(f"contextwarden proxy: {_one_line(exc)}", err=True)
        raise typer.Exit(2) from None
    typer.echo(
        f"contextwarden proxy on http://{settings.host}:{settings.port} -> "
        f"{redact(settings.upstream)}" + (f" ({workers} workers)" if workers > 1 else ""),
        err=True,
    )
    server.run(app, settings, workers)


def _check_redis(url: str) -> None:
    """Warn (do not fail) when Redis does not answer: a cache miss never fails a request."""
    cache = RedisCache(url)
    try:
        cache.ping()
    except ContextWardenError as exc:
        typer.echo(f"warning: {exc}; summaries will not be cached until it answers", err=True)
    finally:
        cache.close()


_USERINFO = re.compile(r"(?<=://)[^/@\s]*@")


def redact(text: str) -> str:
    """``text`` with the user and password of every URL in it replaced by ``***``."""
    return _USERINFO.sub("***@", text)


def _one_line(exc: Exception) -> str:
    """A bad option as one line naming it, credentials redacted (not pydantic's multi-line
    dump, whose input echo would print a password in ``--upstream``)."""
    if isinstance(exc, ValidationError):
        problems = []
        for error in exc.errors(include_url=False, include_input=False):
            where = ".".join(str(part) for part in error["loc"])
            message = str(error["msg"]).removeprefix("Value error, ")
            problems.append(f"{where.replace('_', '-')}: {message}" if where else message)
        text = "; ".join(problems)
    else:
        text = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return redact(text)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


#: A one-command typer app, so ``contextwarden proxy --upstream ...`` (mounted by the main CLI)
#: and ``python -m contextwarden.proxy.cli`` parse the same options.
#: Its help is laid out as the main CLI's (click's plain layout at the terminal's width: flags as
#: flags, ``--port PORT``, no typed columns; see ``contextwarden.cli``).
app = typer.Typer(
    add_completion=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
    context_settings={"max_content_width": 10_000},
)
app.command(name="proxy")(proxy)


def main(args: list[str] | None = None) -> None:
    """Run the proxy command with ``args`` (default: ``sys.argv[1:]``)."""
    app(args=args, prog_name="contextwarden proxy")


if __name__ == "__main__":
    main()
