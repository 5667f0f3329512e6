"""``POST /v1/responses``: the OpenAI Responses API through the same guard as chat completions.

The request's ``input`` items and ``instructions`` go through the warden (converted with
:func:`~contextwarden.formats.from_responses` / :func:`~contextwarden.formats.to_responses`);
every other field is forwarded as sent, and the reply (streamed or not) comes back untouched with
the same ``X-Contextwarden-*`` headers as chat. The recall tool is offered and answered as on
chat (:meth:`~contextwarden.proxy.app._Proxy.recall_offer`, :mod:`.recall_rounds`), in the
Responses shape: the model's output items and a ``function_call_output`` per recall call go
back to the upstream, and the client gets one response without the recall calls.

Forwarded **unchanged**, with the reason in ``X-Contextwarden-Skipped`` and the log line:

* ``previous_response_id`` or ``conversation`` set: the server holds the earlier history and the
  request carries only the new items; there is nothing here to trim.
* ``input`` a plain string (one user message), no ``input``, or a body that is not JSON.
* items the codec cannot read (``invalid_request``: the upstream answers with its own 400).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from .._exceptions import ContextOverflowError, ContextWardenError, FormatError, UnknownModelError
from .._models import ModelInfo
from ..formats.responses import (
    compaction_item_at,
    from_responses,
    provider_compaction,
    to_responses,
)
from .forward import forward, request_headers
from .outcome import climbs, fill_record, outcome_headers, raw_path, unread
from .recall_rounds import Rounds
from .stats import RequestRecord
from .transform import (
    PROVIDER_COMPACTION,
    BodyOutcome,
    effective_window,
    lone_surrogate,
    ran,
    reply_limit,
    reply_room,
    surrogate_outcome,
)

__all__ = ["RESPONSES_PATHS", "responses_endpoint", "transform_responses_body"]

logger = logging.getLogger("contextwarden.proxy")

#: The paths served (the SDK's default base URL ends in ``/v1``; some clients omit it).
RESPONSES_PATHS = ("/v1/responses", "/responses")

#: Request fields that mean "the server holds the history": forwarded untouched.
_SERVER_STATE = ("previous_response_id", "conversation")


def transform_responses_body(
    warden: Any,
    raw: bytes,
    *,
    window_cap: int | None = None,
    window_override: int | None = None,
    summarizer_for: Callable[[str | None], Any] | None = None,
    models: Mapping[str, ModelInfo] | None = None,
) -> BodyOutcome:
    """Run ``warden`` (a :class:`~contextwarden.Warden`) on the Responses API request ``raw``.

    Never raises for bad input (see the module docstring); raises
    :class:`~contextwarden.ContextOverflowError` when even the newest items are over the window.
    """
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return BodyOutcome(raw, False, skipped="not_json", detail="request body is not JSON")
    if not isinstance(body, dict):
        return BodyOutcome(
            raw, False, skipped="not_json", detail="request body is not a JSON object"
        )
    model = body.get("model") if isinstance(body.get("model"), str) else None
    stream = body.get("stream") is True
    for key in _SERVER_STATE:
        if body.get(key) is not None:
            return BodyOutcome(
                raw,
                False,
                model,
                stream,
                skipped=key,
                detail="the server holds the earlier history; forwarded unchanged",
            )
    if lone_surrogate(raw, body):
        return surrogate_outcome(raw, model, stream)
    items = body.get("input")
    if not isinstance(items, list):
        return BodyOutcome(
            raw, False, model, stream, skipped="no_items", detail="'input' is not a list of items"
        )
    provider = provider_compaction(body)
    if provider is not None:
        return BodyOutcome(raw, False, model, stream, skipped=PROVIDER_COMPACTION, detail=provider)
    # the items before the last compaction item are carried by it: kept as sent, not reduced
    kept = items[: compaction_item_at(items) or 0]
    instructions = body.get("instructions")
    tools = _chat_tools(body.get("tools"))
    warning: str | None = None
    try:
        messages = from_responses(items[len(kept) :], instructions=instructions)
        window = effective_window(model, window_cap, window_override, models)
        extra: dict[str, Any] = {}
        if summarizer_for is not None:
            extra["summarizer"] = summarizer_for(model)
        limit = reply_room(reply_limit(body, "responses"), model, window, window_override, models)
        if limit is not None:
            extra["max_tokens"] = limit
        try:
            result = warden.transform(messages, model=model, window=window, tools=tools, **extra)
        except UnknownModelError as exc:
            warning = f"unknown_model: {exc}; lossless layers only, pass --window to bound it"
            result = warden.transform(messages, tools=tools, **extra)
        new_instructions, new_items = to_responses(list(result.messages))
        new_items = [*kept, *new_items]
    except FormatError as exc:
        return BodyOutcome(raw, False, model, stream, skipped="invalid_request", detail=str(exc))
    except ContextOverflowError:
        raise
    except ContextWardenError as exc:
        return BodyOutcome(raw, False, model, stream, skipped=type(exc).__name__, detail=str(exc))
    rebuilt: dict[str, Any] | None = None
    if new_items != items or new_instructions != instructions:
        rebuilt = dict(body)  # key order kept: only input and instructions change
        rebuilt["input"] = new_items
        if new_instructions is None:
            rebuilt.pop("instructions", None)
        else:
            rebuilt["instructions"] = new_instructions
    return ran(raw, rebuilt, model, stream, result, warning)


def _chat_tools(tools: Any) -> list[Mapping[str, Any]] | None:
    """Responses function tools in the chat shape the counter reads (they count against the
    window); hosted tools (``web_search``, ``file_search``...) are described server-side."""
    if not isinstance(tools, list):
        return None
    out: list[Mapping[str, Any]] = []
    for t in tools:
        if isinstance(t, Mapping) and t.get("type") == "function" and "name" in t:
            fn = {k: v for k, v in t.items() if k in ("name", "description", "parameters")}
            out.append({"type": "function", "function": fn})
    return out or None


def responses_endpoint(proxy: Any) -> Callable[[Request], Awaitable[Response]]:
    """The request handler for :data:`RESPONSES_PATHS` of the app's ``proxy`` state object,
    running the calling client's own warden."""

    async def handle(request: Request) -> Response:
        started = time.perf_counter()
        path = request.url.path
        record = RequestRecord(request.method, path, "openai")
        if not proxy.authorized(request):
            return await proxy.deny(record, "openai", started)  # type: ignore[no-any-return]
        if climbs(request):
            return await proxy.bad_path(record, "openai", started)  # type: ignore[no-any-return]
        held = 0
        try:
            try:
                raw, why, held = await proxy.read_body(request)
            except ClientDisconnect:
                return await proxy.client_left(record, started)  # type: ignore[no-any-return]
            if raw is None:
                return await proxy.refuse(record, "openai", started, why)  # type: ignore[no-any-return]
            state = proxy.client_for(request)
            warden = getattr(state.warden, "inner", state.warden)
            budgets: list[Any] = []
            recall = None
            if request.headers.get("content-encoding", "identity").lower() != "identity":
                outcome = BodyOutcome(raw, False, skipped="encoded_body")
            elif not callable(getattr(warden, "transform", None)):
                outcome = BodyOutcome(
                    raw, False, skipped="unsupported", detail="custom body warden"
                )
            else:
                cfg = proxy.config
                try:
                    outcome = await proxy.in_thread(
                        state,
                        lambda: transform_responses_body(
                            warden,
                            raw,
                            window_cap=cfg.window,
                            window_override=cfg.warden.context_window,
                            summarizer_for=proxy.summarizer_for(request, "openai", state, budgets),
                            models=proxy.models,
                        ),
                    )
                except ContextOverflowError as exc:
                    return await proxy.overflow(record, "openai", started, exc)  # type: ignore[no-any-return]
                except Exception as exc:
                    outcome = unread(raw, path, exc)
                proxy.clients.account(state, outcome.conversation, len(raw))
                recall = await proxy.recall_offer("responses", state, outcome)
            fill_record(record, outcome, budgets, started)
            client, done = proxy.pool()
            url = proxy.config.upstream_url(raw_path(request), request.url.query)
            if recall is not None:
                body, fast, answer = recall
                headers = request_headers(request.headers.raw)
                return await proxy.with_recall(  # type: ignore[no-any-return]
                    Rounds(client, url, headers, "responses", body, fast, answer, record),
                    "openai",
                    started,
                    outcome_headers(outcome, record),
                    done,
                )
            return await forward(
                client,
                method=request.method,
                url=url,
                headers=request_headers(request.headers.raw),
                content=outcome.body,
                provider="openai",
                record=record,
                started=started,
                extra_headers=outcome_headers(outcome, record),
                finish=proxy.finish_with(done),
            )
        finally:
            proxy.release(held)

    return handle
