"""Summaries written by an LLM through the API the caller uses (:mod:`._wire`: Chat Completions,
Anthropic Messages, Responses, Gemini), over httpx, retried with tenacity.

The span is rendered as a compact transcript and summarised in the four sections, updating the
previous summary; a transcript over the input budget is summarised in chunks whose summaries
are merged (map-reduce, recursively). Failures are :class:`~contextwarden.SummarizerError` with
the HTTP ``status`` and the upstream's own error text as ``reason``: HTTP errors after retries
(408, 409, 429, 5xx, timeouts and connection errors, with exponential backoff honouring
``Retry-After``), replies that are not the provider's JSON or lack a section, and no answer
within ``timeout``, one deadline for the whole summary. A must-keep fact the reply left out is
added from the history's own facts, and the whole is fitted under the length cap.
:func:`build_summarizer` makes the summarizer (this one or the extractive) of a config section.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import functools
import hashlib
import math
import os
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

import httpx
import tenacity

if TYPE_CHECKING:
    import ssl

from .._exceptions import OVERFLOW_RE, ConfigError, SummarizerError
from .._tokens import TokenCounter
from ..analysis.facts import Facts
from ..analysis.sections import SECTIONS, Entry, clip, fit, heading_name, parse_summary
from ._index import INDEX_GROUP, names_index
from ._prompt import (
    PROMPT_VERSION,
    SYSTEM_PROMPT,
    clip_middle,
    merge_prompt,
    render_transcript,
    summary_prompt,
)
from ._wire import ANTHROPIC_VERSION, CREDENTIAL_HEADERS, WIRES, Provider, error_text
from .base import Summarizer, SummaryRequest, effective_cap, request_facts, task_key
from .config import DEFAULT_MAX_CHARS, SummarizerConfig
from .extractive import MIN_SUMMARY_CHARS, ExtractiveSummarizer, facts_entries

__all__ = ["ANTHROPIC_VERSION", "LLMSummarizer", "Provider", "SummaryMeter", "build_summarizer"]

#: Statuses worth retrying: rate limits, timeouts, conflicts, server errors, Anthropic overload.
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
#: Characters / 3 errs high for English and code (real ratios ~3.5-4.5): chunks stay inside
#: the summarizer's window when no counter is given.
_CHARS_PER_TOKEN_ESTIMATE = 3
#: How long the caller waits past the deadline for the helper thread's own, more precise, error.
_JOIN_GRACE_S = 0.05
#: How many times a "context length exceeded" reply halves the budget before giving up.
_MAX_SHRINKS = 3


class _Late(Exception):
    """The summary's deadline has passed (turned into a :class:`SummarizerError`)."""


class _Retry(Exception):
    """An attempt failed in a way a later one may not: ``last`` says how, ``status`` is the
    HTTP status (None without an answer), ``asked`` the delay the server asked for."""

    def __init__(self, last: str, status: int | None = None, asked: float | None = None) -> None:
        super().__init__(last)
        self.last, self.status, self.asked = last, status, asked


class _InputTooLarge(Exception):
    """The provider found the input over the model's window; ``tokens``: the call's size."""

    def __init__(self, tokens: int) -> None:
        super().__init__(tokens)
        self.tokens = tokens


class SummaryMeter(Protocol):
    """Told about every HTTP call a summary makes (retries and map-reduce steps included).

    :meth:`start` comes before each call and may raise :class:`~contextwarden.SummarizerError`
    to refuse it (a cap reached); :meth:`done` after it, with the model, the input and output
    tokens the provider reported (estimated from the text without usage; 0 output for a failed
    call) and the status (0 when no answer came)."""

    def start(self) -> None: ...

    def done(self, model: str, input_tokens: int, output_tokens: int, status: int) -> None: ...


@dataclass(frozen=True)
class _Call:
    """One completion to make: the user turn and the length cap to ask for."""

    user: str
    max_chars: int


class LLMSummarizer:
    """Summaries from an LLM endpoint (see the module docstring).

    ``base_url``: the API root (``provider="openai"`` posts to ``{base_url}/chat/completions``,
    default ``https://api.openai.com/v1``, any compatible server; ``"anthropic"`` to
    ``{base_url}/v1/messages``, default ``https://api.anthropic.com``). ``model``: the model
    sent. ``api_key_env``: the variable holding the key (default ``OPENAI_API_KEY`` /
    ``ANTHROPIC_API_KEY``), read at each call; unset, no key is sent. ``key_from_env=False``
    sends only the credentials in ``headers`` (the proxy's caller's).
    ``timeout``: the deadline of one summary in seconds, retries, waits and map-reduce steps
    included (default 60). ``attempt_timeout``: seconds one HTTP attempt may take (default: what
    is left of ``timeout``). ``max_retries`` (default 3) after the first attempt, waiting
    ``backoff * 2**attempt`` (default 0.5) or what ``Retry-After`` asks, at most
    ``max_backoff`` (default 30); a wait past the deadline is not started.
    ``max_chars``: the summary's cap (default 4000; the request's own applies too).
    ``input_token_budget``: history tokens one call may carry (default 48,000), measured with
    ``counter`` or characters/3. ``max_output_tokens``: the reply's limit (default 2048).
    ``tool_output_chars``: each tool output and call argument is clipped to this (default
    2000). ``ensure_facts``: add must-keep facts the reply left out (default true).
    ``temperature``: sent unless ``None`` (default 0). ``max_tokens_param``: the output-limit
    field of OpenAI-style servers (``max_completion_tokens`` for o-series). ``headers`` /
    ``extra_body``: merged into every request. ``transport``: an httpx async transport (both
    methods run an async client). ``sleep`` / ``asleep``: how :meth:`summarize` /
    :meth:`asummarize` wait between retries. ``max_concurrency``: parallel chunk calls of the
    async map step (default 4; :meth:`summarize` makes them one after another).
    """

    def __init__(
        self,
        base_url: str | None = None,
        model: str = "",
        *,
        provider: Provider = "openai",
        api_key_env: str | None = None,
        timeout: float = 60.0,
        attempt_timeout: float | None = None,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        max_chars: int = 4000,
        input_token_budget: int = 48_000,
        max_output_tokens: int = 2048,
        tool_output_chars: int = 2000,
        ensure_facts: bool = True,
        key_from_env: bool = True,
        temperature: float | None = 0.0,
        max_tokens_param: str = "max_tokens",
        counter: TokenCounter | None = None,
        headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        asleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        max_concurrency: int = 4,
    ) -> None:
        if provider not in WIRES:
            raise ConfigError(
                f"LLMSummarizer provider must be one of {', '.join(WIRES)}, got {provider!r}"
            )
        if not model or not isinstance(model, str):
            raise ConfigError("LLMSummarizer model must be a non-empty string")
        checks = {
            "timeout": (timeout, 0),
            "max_retries": (max_retries, -1),
            "backoff": (backoff, -1),
            "max_backoff": (max_backoff, -1),
            "max_chars": (max_chars, MIN_SUMMARY_CHARS - 1),
            "input_token_budget": (input_token_budget, 999),
            "max_output_tokens": (max_output_tokens, 0),
            "tool_output_chars": (tool_output_chars, 99),
            "max_concurrency": (max_concurrency, 0),
        }
        if attempt_timeout is not None:
            checks["attempt_timeout"] = (attempt_timeout, 0)
        for field_name, (value, above) in checks.items():
            if not value > above:
                raise ConfigError(f"LLMSummarizer {field_name} must be > {above}, got {value!r}")
        self.provider: Provider = provider
        self.base_url = (base_url or WIRES[provider].base_url).rstrip("/")
        self.model, self.api_key_env = model, api_key_env or WIRES[provider].key_env
        self.timeout, self.attempt_timeout = timeout, attempt_timeout
        self.max_retries, self.backoff, self.max_backoff = max_retries, backoff, max_backoff
        self.max_chars, self.input_token_budget = max_chars, input_token_budget
        self.max_output_tokens, self.tool_output_chars = max_output_tokens, tool_output_chars
        self.ensure_facts, self.key_from_env = ensure_facts, key_from_env
        self.temperature, self.max_tokens_param = temperature, max_tokens_param
        self.counter, self.transport = counter, transport
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}
        self.extra_body = dict(extra_body or {})
        self.sleep, self.asleep, self.max_concurrency = sleep, asleep, max_concurrency
        self.name = f"llm:{provider}:{model}"
        # TLS settings, made at the first summary (a client is opened per summary, and loading
        # the CA bundle takes milliseconds)
        self._verify: ssl.SSLContext | bool | None = None

    @property
    def config_id(self) -> str:
        """Everything that changes the output, for cache keys; with credentials in ``headers``
        (a proxy's caller's), a digest of them too, so that callers never share summaries."""
        ident = (
            f"llm:v{PROMPT_VERSION}:{self.provider}:{self.base_url}:{self.model}:"
            f"max_chars={self.max_chars}:budget={self.input_token_budget}:"
            f"clip={self.tool_output_chars}:facts={self.ensure_facts}:"
            f"temperature={self.temperature}"
        )
        secrets = [f"{k}={v}" for k, v in sorted(self.headers.items()) if k in CREDENTIAL_HEADERS]
        if secrets:
            digest = hashlib.blake2b("\n".join(secrets).encode(), digest_size=8).hexdigest()
            ident += f":auth={digest}"
        return ident

    @property
    def url(self) -> str:
        """Where requests go."""
        return self.base_url + WIRES[self.provider].path(self.model)

    def __repr__(self) -> str:
        return (
            f"LLMSummarizer(base_url={self.base_url!r}, model={self.model!r}, "
            f"provider={self.provider!r})"
        )

    # -- public API -----------------------------------------------------------------------------
    def summarize(
        self,
        request: SummaryRequest,
        *,
        deadline: float | None = None,
        meter: SummaryMeter | None = None,
    ) -> str:
        """The summary of ``request`` (blocking). Raises :class:`SummarizerError` at the latest
        ``timeout`` seconds after the call, or at ``deadline`` (a :func:`time.monotonic` time)
        when that comes first, so the summaries of one compaction can share one. ``meter`` is
        told about every HTTP call."""
        cap, facts, deadline = self._start(request, deadline)
        # A helper thread does the work while the caller waits until the deadline: a socket read
        # cannot be interrupted from outside. The helper stops on its own soon after (its reads
        # and waits are capped by the same deadline).
        outcome: list[str | BaseException] = []

        def work() -> None:
            try:  # the calls one after another, as the caller of a blocking summary expects
                run = self._run(request, cap, facts, deadline, meter, self._blocking_sleep, 1)
                outcome.append(asyncio.run(run))
            except BaseException as exc:  # handed to the caller's thread below
                outcome.append(exc)

        worker = threading.Thread(target=work, name="contextwarden-summary", daemon=True)
        worker.start()
        worker.join(max(deadline - time.monotonic(), 0.0) + _JOIN_GRACE_S)
        if not outcome:
            raise self._late("the request was still running")
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        return outcome[0]

    async def asummarize(
        self,
        request: SummaryRequest,
        *,
        deadline: float | None = None,
        meter: SummaryMeter | None = None,
    ) -> str:
        """:meth:`summarize`, the chunk calls of the map step running concurrently."""
        cap, facts, deadline = self._start(request, deadline)
        return await self._run(request, cap, facts, deadline, meter, self.asleep, None)

    def _start(self, request: SummaryRequest, given: float | None) -> tuple[int, Facts, float]:
        if not request.messages:
            raise SummarizerError("nothing to summarise: the request has no messages")
        cap = min(effective_cap(request), self.max_chars)
        if cap < MIN_SUMMARY_CHARS:
            raise SummarizerError(
                f"span too small to summarise: {cap} chars allowed, need {MIN_SUMMARY_CHARS}"
            )
        own = time.monotonic() + self.timeout
        deadline = own if given is None else min(own, given)
        if deadline <= time.monotonic():
            raise self._late("no time left before the deadline")
        return cap, request_facts(request), deadline

    async def _blocking_sleep(self, seconds: float) -> None:
        """``sleep`` for the blocking :meth:`summarize` (its own event loop runs nothing else)."""
        if self.sleep is time.sleep:
            await asyncio.sleep(seconds)
        else:
            self.sleep(seconds)

    async def _run(
        self,
        request: SummaryRequest,
        cap: int,
        facts: Facts,
        deadline: float,
        meter: SummaryMeter | None,
        sleep: Callable[[float], Awaitable[None]],
        concurrency: int | None,
    ) -> str:
        """The summary by :meth:`_plan`'s calls, ``concurrency`` at once (default
        ``max_concurrency``), within ``deadline``; the chunk budget halved each time the
        provider finds the input too long."""
        limit = asyncio.Semaphore(concurrency or self.max_concurrency)
        if self._verify is None:  # httpx's defaults
            make = getattr(httpx, "create_ssl_context", None)
            self._verify = make() if make is not None else True

        async def one(client: httpx.AsyncClient, call: _Call) -> str:
            async with limit:
                return await self._complete(client, call, deadline, meter, sleep)

        budget = self.input_token_budget
        try:
            async with (
                asyncio.timeout(deadline - time.monotonic()),
                httpx.AsyncClient(
                    timeout=self.timeout, transport=self.transport, verify=self._verify
                ) as client,
            ):
                for _ in range(_MAX_SHRINKS + 1):
                    plan = self._plan(request, facts, cap, budget)
                    try:
                        batch = next(plan)
                        while True:
                            batch = plan.send(await _all(one(client, c) for c in batch))
                    except StopIteration as done:
                        return self._finish(str(done.value), request, facts, cap)
                    except _InputTooLarge as refused:
                        budget = min(budget, refused.tokens) // 2
        except TimeoutError:
            raise self._late("the request was still running") from None
        raise SummarizerError(
            f"{self.name}: input still too long for the model after "
            f"shrinking the chunk budget to {budget} tokens"
        )

    def _late(self, last: str, status: int | None = None) -> SummarizerError:
        return SummarizerError(
            f"{self.name}: no summary from {self.url} within timeout={self.timeout:g}s (the "
            f"total for one summary, retries included); last: {last}",
            status=status,
            reason=f"timed out; last: {last}",
        )

    # -- the plan: single call or map-reduce (sans I/O) ----------------------------------------
    def _tokens(self, text: str) -> int:
        if self.counter is not None:
            return self.counter.count_text(text)
        return math.ceil(len(text) / _CHARS_PER_TOKEN_ESTIMATE)

    def _fit_tokens(self, text: str, budget: int) -> str:
        """``text`` clipped (head + tail) until it is at most ``budget`` tokens."""
        tokens = self._tokens(text)
        while tokens > budget and len(text) > 200:
            text = clip_middle(text, max(200, int(len(text) * budget / tokens * 0.9)))
            tokens = self._tokens(text)
        return text

    def _plan(
        self, request: SummaryRequest, facts: Facts, cap: int, budget: int
    ) -> Generator[list[_Call], list[str], str]:
        """Yields batches of calls and receives their replies; returns the final summary text:
        one call when the transcript fits ``budget``, else chunk summaries, then merges of at
        most what fits, until one summary is left."""
        task = request.task or facts.task
        task = clip_middle(task, self.tool_output_chars * 2) if task else None
        pinned = tuple(dict.fromkeys((*request.pinned, *facts.pins)))
        names = _names_lines(facts, request.held, cap)
        rendered = render_transcript(request.messages, self.tool_output_chars)
        prompt = functools.partial(
            summary_prompt,
            task=task,
            previous_summary=request.previous_summary,
            pinned=pinned,
            ref=request.ref,
            focus=request.focus,
            names=names,
        )
        overhead = self._tokens(SYSTEM_PROMPT) + self._tokens(prompt(""))
        room = budget - overhead
        if room < 500:
            raise SummarizerError(
                f"{self.name}: input_token_budget {budget} leaves {room} tokens for history "
                f"after the prompt, task, pins and previous summary ({overhead} tokens)"
            )
        transcript = "\n\n".join(rendered)
        if self._tokens(transcript) <= room:
            replies = yield [_Call(prompt(transcript), cap)]
            return replies[0]
        # map: consecutive chunks of whole messages, each under the room left
        chunks = _packed([self._fit_tokens(text, room) for text in rendered], room, 1, self._tokens)
        parts: list[str] = yield [
            _Call(prompt("\n\n".join(chunk), previous_summary=None, names=()), cap)
            for chunk in chunks
        ]
        if request.previous_summary and request.previous_summary.strip():
            parts = [request.previous_summary, *parts]
        # reduce: merge as many parts as fit, until one is left
        while len(parts) > 1:
            groups = _packed(parts, room, 10, self._tokens)
            if len(groups) == len(parts):  # no two parts fit together: merge in pairs anyway
                groups = [parts[i : i + 2] for i in range(0, len(parts), 2)]
            merge = functools.partial(
                merge_prompt, task=task, pinned=pinned, focus=request.focus, ref=request.ref
            )
            merged: list[str] = yield [
                _Call(merge(g, names=names), cap) if len(g) > 1 else _Call("", 0) for g in groups
            ]
            parts = [m if len(g) > 1 else g[0] for m, g in zip(merged, groups, strict=True)]
        return parts[0]

    # -- the final text ----------------------------------------------------------------------
    def _finish(self, reply: str, request: SummaryRequest, facts: Facts, cap: int) -> str:
        sections = parse_summary(reply)
        flat = " ".join(reply.split())
        # over the cap, the reply's lines go from the end: completed first, then notes, then
        # current state; the remaining work is kept longest
        entries = [
            Entry(
                name,
                ln.rstrip(),
                5,
                (1, i),
                bullet=False,
                recency=-(_KEEP_RANK[name] * 100_000 + i),
            )
            for name in SECTIONS
            for i, ln in enumerate(sections.get(name).splitlines())
            if ln.strip()
        ]
        if self.ensure_facts:
            task = request.task or facts.task
            if task and task_key(task) not in flat:
                text = clip(" ".join(task.split()), 300)
                entries.append(Entry("remaining", text, 0, (0,), "Original task", 0, False, 160))
            if request.ref and request.ref not in flat:
                entries.append(
                    Entry("current_state", f"originals: {request.ref}", 1, (2, -1), bullet=False)
                )
            for fact in facts_entries(
                facts, task=None, pinned=request.pinned, cap=cap, ref=request.ref, held=request.held
            ):
                # the must-keep facts, and the names index: what the reply left out of it
                e: Entry | None = fact
                if heading_name(fact.group or "") == INDEX_GROUP:  # a line of the names index
                    e = _missing_names(fact, flat)
                elif fact.tier > 3 or _present(fact, flat, facts):
                    e = None
                if e is None:
                    continue
                order = (0, *e.order) if e.section == "remaining" else (2, *e.order)
                # the files in play fill what room the reply's own lines (tier 5) leave
                tier = e.tier if e.tier <= 3 else 6
                entries.append(replace(e, tier=tier, order=order))
        return fit(entries, cap)

    # -- HTTP -------------------------------------------------------------------------------
    def _headers(self) -> dict[str, str]:
        key = os.environ.get(self.api_key_env, "") if self.key_from_env else ""
        headers = {"content-type": "application/json", **WIRES[self.provider].headers}
        if key:
            headers.update(WIRES[self.provider].auth(key))
        headers.update(self.headers)
        return headers

    def _payload(self, call: _Call) -> dict[str, Any]:
        wire = WIRES[self.provider]
        system = SYSTEM_PROMPT.format(max_chars=call.max_chars)
        payload = wire.body(self.model, system, call.user, self.max_output_tokens)
        if self.provider == "openai":
            payload[self.max_tokens_param] = self.max_output_tokens
        if self.temperature is not None:
            if wire.temperature_in is None:
                payload["generationConfig"]["temperature"] = self.temperature
            else:
                payload[wire.temperature_in] = self.temperature
        payload.update(self.extra_body)
        return payload

    def _reply_text(self, response: httpx.Response) -> str:
        status = response.status_code
        try:
            data = response.json()
        except ValueError as exc:
            raise self._error(
                f"response body is not JSON: {response.text[:200]!r}", status
            ) from exc
        try:
            text = WIRES[self.provider].text(data)
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise self._error(
                f"response is not a {self.provider} completion (missing {exc!s}): "
                f"{str(data)[:200]!r}",
                status,
            ) from exc
        if not isinstance(text, str) or not text.strip():
            raise self._error("the model returned an empty summary", status)
        return text

    def _error(self, reason: str, status: int | None = None) -> SummarizerError:
        return SummarizerError(f"{self.name}: {reason}", status=status, reason=reason)

    def _classify(self, response: httpx.Response, call: _Call) -> float | None:
        """``None`` when ``response`` is a success; else the delay before retrying. Raises for
        responses that retrying cannot fix."""
        status = response.status_code
        if 200 <= status < 300:
            return None
        body = response.text[:300]
        if status in (400, 413) and OVERFLOW_RE.search(body):
            raise _InputTooLarge(self._tokens(call.user) + self._tokens(SYSTEM_PROMPT))
        if status in RETRY_STATUSES:
            return _retry_after(response)
        hint = ""
        if status in (401, 403) and not self.key_from_env:
            hint = " (with the credentials in the summarizer's headers)"
        elif status in (401, 403):
            unset = "" if os.environ.get(self.api_key_env) else ", which is not set"
            hint = f" (key read from ${self.api_key_env}{unset})"
        raise SummarizerError(
            f"{self.name}: {self.url} answered {status}{hint}: {body!r}",
            status=status,
            reason=error_text(response.text),
        )

    async def _send(
        self, client: httpx.AsyncClient, call: _Call, deadline: float
    ) -> httpx.Response | httpx.TransportError:
        """One attempt, within ``attempt_timeout`` and the deadline: a body still arriving at the
        attempt's limit is a (retried) timeout, at the deadline the end (:class:`_Late`)."""
        now = time.monotonic()
        if now >= deadline:
            raise _Late()
        span = min(deadline - now, self.attempt_timeout or math.inf)
        ends = now + span
        try:
            async with client.stream(
                "POST", self.url, json=self._payload(call), headers=self._headers(), timeout=span
            ) as response:
                body = bytearray()
                async for chunk in response.aiter_raw():
                    body += chunk
                    now = time.monotonic()
                    if now > deadline:
                        raise _Late()
                    if now > ends:
                        raise httpx.ReadTimeout(
                            "the body was still arriving at the attempt's time limit",
                            request=response.request,
                        )
        except httpx.TransportError as exc:
            return exc
        try:  # the raw body, decoded once (content-encoding) here
            return httpx.Response(
                response.status_code,
                headers=response.headers,
                content=bytes(body),
                request=response.request,
            )
        except httpx.DecodingError as exc:
            raise SummarizerError(
                f"{self.name}: the body from {self.url} could not be decoded: {exc}"
            ) from exc

    async def _complete(
        self,
        client: httpx.AsyncClient,
        call: _Call,
        deadline: float,
        meter: SummaryMeter | None,
        sleep: Callable[[float], Awaitable[None]],
    ) -> str:
        """One call's text, retried by tenacity: what :meth:`_attempt` marks retryable, at most
        ``max_retries`` times, waiting what the server asked for or ``backoff * 2**n`` (capped at
        ``max_backoff``); a wait that would pass ``deadline`` ends the summary."""
        if not call.user:
            return ""
        last: list[_Retry] = []

        def wait(state: tenacity.RetryCallState) -> float:
            asked = last[-1].asked if last else None  # never negative (see _attempt)
            backoff = self.backoff * 2.0 ** (state.attempt_number - 1)
            delay = float(min(backoff if asked is None else asked, self.max_backoff))
            if time.monotonic() + delay >= deadline:
                failed = last[-1] if last else _Retry("no attempt made")
                raise self._late(
                    f"{failed.last} (a retry in {delay:g}s would pass the deadline)", failed.status
                )
            return delay

        retrying = tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(self.max_retries + 1),
            wait=wait,
            retry=tenacity.retry_if_exception_type(_Retry),
            sleep=sleep,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    if meter is not None:
                        meter.start()
                    try:
                        response = await self._send(client, call, deadline)
                    except _Late:
                        self._metered(meter, call, None)
                        failed = last[-1] if last else _Retry("no attempt made")
                        raise self._late(failed.last, failed.status) from None
                    return self._attempt(meter, call, response, last)
        except _Retry as failed:
            raise SummarizerError(
                f"{self.name}: {self.url} failed after {self.max_retries + 1} attempts; "
                f"last: {failed.last}",
                status=failed.status,
                reason=failed.last,
            ) from None
        raise AssertionError("tenacity ended without an outcome")  # pragma: no cover

    def _attempt(
        self,
        meter: SummaryMeter | None,
        call: _Call,
        reply: httpx.Response | httpx.TransportError,
        last: list[_Retry],
    ) -> str:
        """One attempt judged: the summary text, or :class:`_Retry` (remembered in ``last``) for
        what a retry may fix."""
        if isinstance(reply, httpx.TransportError):
            self._metered(meter, call, None)
            kind = "timed out" if isinstance(reply, httpx.TimeoutException) else "transport error"
            failed = _Retry(f"{kind} ({type(reply).__name__}: {reply!s})")
        else:
            self._metered(meter, call, reply)
            wait = self._classify(reply, call)
            if wait is None:  # the reply's four sections, re-rendered (raises when malformed)
                return parse_summary(self._reply_text(reply)).render()
            failed = _Retry(
                f"HTTP {reply.status_code}: {error_text(reply.text)[:200]!r}",
                reply.status_code,
                wait if wait >= 0 else None,
            )
        last.append(failed)
        raise failed

    def _metered(
        self, meter: SummaryMeter | None, call: _Call, response: httpx.Response | None
    ) -> None:
        """Tell ``meter`` about one call: the usage the provider reported, else (a success
        without usage) estimates from the text sent and received; a call that got no answer
        counts its input estimate (the provider may have billed it) and no output."""
        if meter is None:
            return
        sent = self._tokens(call.user) + self._tokens(SYSTEM_PROMPT)
        if response is None:
            meter.done(self.model, sent, 0, 0)
            return
        try:
            data = response.json()
        except ValueError:
            data = None
        usage = WIRES[self.provider].usage
        used_in, used_out = usage(data) if isinstance(data, dict) else (None, None)
        if used_in is None:
            used_in = sent if response.is_success else 0
        if used_out is None:
            used_out = self._tokens(response.text) if response.is_success else 0
        meter.done(self.model, used_in, used_out, response.status_code)


_KEEP_RANK: Mapping[str, int] = {"remaining": 0, "current_state": 1, "notes": 2, "completed": 3}


def _missing_names(entry: Entry, flat: str) -> Entry | None:
    """The index line ``entry`` with only what the reply ``flat`` does not hold (None when it
    holds all of it): a file line keeps its file, as the anchor of its names."""
    if entry.text.startswith("names: "):
        names = [n for n in entry.text[len("names: ") :].split(", ") if n not in flat]
        text = "names: " + ", ".join(names) if names else ""
    else:
        label, _, rest = entry.text.partition(": ")
        path = label.split(" (", 1)[0]
        names = [n for n in rest.split(", ") if n and n not in flat]
        if path in flat and not names:
            return None
        text = f"{label}: {', '.join(names)}" if names else label
    if not text:
        return None
    return replace(entry, text=text)


def _names_lines(facts: Facts, held: frozenset[str], cap: int) -> tuple[str, ...]:
    """The names index of the span (:func:`~._index.names_index`) as lines for the prompt's
    ``<names>``, best first, within half the summary's cap."""
    lines: list[str] = []
    used = 0
    for line in names_index(facts.code, facts.earlier, status=facts.file_status(), held=held):
        text = line.text
        if used + len(text) > cap // 2:
            break
        lines.append(text)
        used += len(text) + 1
    return tuple(lines)


def _present(entry: Entry, flat: str, facts: Facts) -> bool:
    """Whether the must-keep fact ``entry`` (not a line of the names index) carries is already
    in the reply."""
    if heading_name(entry.group or "") == "Last unresolved error":
        error = facts.last_unresolved_error
        return error is not None and " ".join(error.key.split()) in flat
    if heading_name(entry.group or "") == "Files changed":
        path = entry.text.rsplit(" (", 1)[0] if entry.text.endswith(")") else entry.text
        return path in flat
    return " ".join(entry.text.split()) in flat


async def _all(calls: Iterable[Coroutine[Any, Any, str]]) -> list[str]:
    """The results of ``calls``, run concurrently; the first failure cancels the others and is
    raised once they have stopped (none is left running, half-connected, when it is raised)."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(call) for call in calls]
    except BaseExceptionGroup as failed:
        raise failed.exceptions[0] from None
    return [task.result() for task in tasks]


def _retry_after(response: httpx.Response) -> float:
    """Seconds the server asks us to wait (``retry-after-ms``, ``Retry-After`` as seconds or an
    HTTP date), or -1 when it does not say."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        with contextlib.suppress(ValueError):  # absent or not a number
            return max(float(response.headers.get(name, "-")) / scale, 0.0)
    try:
        when = email.utils.parsedate_to_datetime(response.headers.get("retry-after", ""))
    except (TypeError, ValueError):
        return -1.0
    return max(float(when.timestamp()) - time.time(), 0.0)


def _packed(
    texts: list[str], room: int, extra: int, tokens: Callable[[str], int]
) -> list[list[str]]:
    """``texts`` in consecutive groups of at most ``room`` tokens (``extra`` more each)."""
    groups: list[list[str]] = [[]]
    used = 0
    for text in texts:
        cost = tokens(text) + extra
        if groups[-1] and used + cost > room:
            groups.append([])
            used = 0
        groups[-1].append(text)
        used += cost
    return groups


def build_summarizer(
    config: SummarizerConfig, *, env: Mapping[str, str] | None = None, max_chars: int | None = None
) -> Summarizer:
    """The summarizer ``config`` describes. An LLM provider's key variable must be set in ``env``
    (default ``os.environ``), else :class:`ConfigError` names it now rather than at the first
    compaction (a local server that needs no key: set it to anything); the key is read again at
    each call. ``max_chars`` caps every summary (the compaction's ``summary_max_chars``)."""
    if config.provider == "extractive":
        return ExtractiveSummarizer(max_chars=max_chars)
    environ = os.environ if env is None else env
    key_env = config.key_env
    assert key_env is not None and config.model is not None  # the validator saw to both
    if not environ.get(key_env):
        raise ConfigError(
            f"summarizer.api_key_env: the {config.provider} summarizer reads its key from "
            f"${key_env}, which is not set (set it, or name another variable in "
            f"summarizer.api_key_env)"
        )
    return LLMSummarizer(
        config.base_url,
        config.model,
        provider=config.provider,
        api_key_env=key_env,
        timeout=config.timeout_s,
        max_retries=config.max_retries,
        max_chars=DEFAULT_MAX_CHARS if max_chars is None else max_chars,
    )
