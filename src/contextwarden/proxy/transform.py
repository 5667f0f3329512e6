"""The request-body step of the proxy, written once for every wire format (:mod:`.wire`): parse
the body, run the warden on its history, and write it back with every other field left as sent.

How it works: docs/proxy.md (`contextwarden.proxy.transform`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .._exceptions import ContextWardenError, FormatError, UnknownModelError
from .._models import ModelInfo, context_window
from ..formats._body import BodyReader
from ..formats.cache_control import Continued
from .wire import WIRES, Ran, Wire
from .wire._base import Has

__all__ = [
    "BodyOutcome",
    "BodyWarden",
    "dump_body",
    "effective_window",
    "load_body",
    "ran",
    "reply_room",
    "transform_body",
]

try:  # the proxy extra's fast JSON; the standard library's without it
    import orjson as _orjson
except ImportError:  # pragma: no cover - installed with the proxy extra
    _orjson = None  # type: ignore[assignment]

#: Digits to ``0``, ``.`` kept, every other byte to a space: a number of 19 digits or more not
#: after a ``.`` (an integer orjson may read as a float: beyond 64 bits) is then a space and 19
#: zeros. A scan in C (about 0.7 ms per MB, where a regular expression takes 20).
_DIGITS = bytes(0x30 if 0x30 <= c <= 0x39 else 0x2E if c == 0x2E else 0x20 for c in range(256))
_LONG_INTEGER = b" " + b"0" * 19

#: A ``\\uD800``-``\\uDFFF`` escape: a body holding one may hold a lone surrogate.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _lone_surrogate(has: Has, body: Any) -> bool:
    """Whether the parsed ``body`` holds a lone surrogate (only looked for when its bytes escape
    a surrogate: paired escapes, an emoji, are one character once parsed)."""
    if not has(_SURROGATE_ESCAPE, 6):
        return False
    try:
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class TransformResultLike(Protocol):
    """The fields of the warden's TransformResult the proxy reads."""

    @property
    def tokens_before(self) -> int: ...

    @property
    def tokens_after(self) -> int: ...

    @property
    def compaction(self) -> Any: ...

    # Also read when present: ``stable_prefix: int``, the number of leading messages of the
    # result the conversation's next edits will not rewrite (where a cache breakpoint pays), and
    # ``messages``, the canonical result it counts in.


class BodyWarden(Protocol):
    """What the proxy needs from a warden (``contextwarden.Warden`` fits). It must only read the
    ``messages``, ``system`` and ``tools`` it is given: the proxy gives the messages a
    conversation's previous request had to the next one as they were parsed (not again). A
    request that states the reply's output limit is run with ``max_tokens=`` as well, and a
    compaction with the upstream's summarizer with ``summarizer=``."""

    def transform_openai(
        self,
        messages: list[dict[str, Any]],
        *,
        model: str | None = None,
        window: int | None = None,
        tools: Sequence[Any] | None = None,
    ) -> tuple[list[dict[str, Any]], TransformResultLike]: ...

    def transform_anthropic(
        self,
        messages: list[dict[str, Any]],
        *,
        system: Any = None,
        model: str | None = None,
        window: int | None = None,
        tools: Sequence[Any] | None = None,
    ) -> tuple[Any, list[dict[str, Any]], TransformResultLike]: ...


@dataclass(frozen=True)
class BodyOutcome:
    """The body to forward and what happened to it.

    ``body`` is the client's own bytes when nothing changed, else the re-serialized JSON. Token
    counts are ``None`` when the warden did not run (``skipped`` says why, ``detail`` in words).
    ``summarizer`` names who wrote the new compaction's summary (``llm:openai:MODEL``,
    ``extractive``); ``refused`` why the reduced request cannot be sent (the proxy answers 400
    with it, never an empty or invalid request); ``sent`` the body as parsed (and rebuilt), which
    the recall rounds add to without parsing what the proxy wrote; ``restored`` the oldest
    messages the client dropped that were put back
    (:meth:`~contextwarden.formats._body.BodyReader.restore`).
    """

    body: bytes
    changed: bool
    model: str | None = None
    stream: bool = False
    tokens_before: int | None = None
    tokens_after: int | None = None
    compacted: int = 0
    strategy: str | None = None
    skipped: str | None = None
    detail: str | None = None
    warning: str | None = None
    cache_breakpoints: int = 0
    summarizer: str | None = None
    conversation: str = ""
    edited: bool = False
    refused: str | None = None
    sent: dict[str, Any] | None = None
    fast_json: bool = False
    restored: int = 0


def effective_window(
    model: str | None,
    cap: int | None,
    override: int | None = None,
    models: Mapping[str, ModelInfo] | None = None,
) -> int | None:
    """The window to give the warden: ``None`` without a cap (the warden asks the model registry),
    else ``min(model's window, cap)``, or the cap alone when the model is unknown. ``models``:
    the proxy's :class:`~contextwarden.ModelRegistry` (its config's ``models:`` section)."""
    if cap is None:
        return None
    known = _own_window(model, override, models)
    return min(known, cap) if known else cap


def _own_window(
    model: str | None, override: int | None, models: Mapping[str, ModelInfo] | None
) -> int | None:
    try:
        return context_window(model, override, models) if (model or override) else None
    except UnknownModelError:
        return None


def reply_room(
    limit: int | None,
    model: str | None,
    window: int | None,
    override: int | None = None,
    models: Mapping[str, ModelInfo] | None = None,
) -> int | None:
    """The room a request's output ``limit`` (:func:`reply_limit`) asks for in ``window``, the
    window the warden is given. The provider checks the limit against the model's own window:
    under a cap (``--window``) smaller than that, the limit asks for less room, and for none
    once the cap leaves more than it. ``window`` None (the model's own) or a model of unknown
    window: the limit as it is."""
    if limit is None or window is None:
        return limit
    own = _own_window(model, override, models)
    if own is None or own <= window:
        return limit
    left = limit - (own - window)
    return left if left > 0 else None


def transform_body(
    warden: BodyWarden,
    api: str | Wire,
    raw: bytes,
    *,
    path: str = "",
    window_cap: int | None = None,
    window_override: int | None = None,
    cache_breakpoints: bool = False,
    summarizer_for: Callable[[str | None], Any] | None = None,
    bodies: BodyReader | None = None,
    models: Mapping[str, ModelInfo] | None = None,
) -> BodyOutcome:
    """Run ``warden`` on the request ``raw`` of the wire format ``api`` (a :class:`Wire` or its
    name: ``openai``, ``anthropic``, ``count_tokens``, ``responses``, ``gemini``) sent to
    ``path``. Never raises for bad input: see docs/proxy.md. ``cache_breakpoints`` adds
    Anthropic cache breakpoints when the client set none (Anthropic bodies only).
    ``summarizer_for(model)`` gives the summarizer for this request's compaction, if one is
    needed (the proxy's upstream, with the caller's credentials); without it the warden's own
    writes. ``bodies`` remembers the last body of each of the client's conversations, so that
    their known messages are not parsed again (one per client: a body reader shared by clients
    would answer faster for a history another client sent). ``models``: the proxy's model
    registry, for the window under ``window_cap``."""
    wire = WIRES[api] if isinstance(api, str) else api
    read = bodies.read(raw, wire.items) if bodies is not None else None
    has: Has
    if read is not None:
        body, fast, has = read.body, read.finite, read.has
    else:
        has = lambda pattern, _: pattern.search(raw) is not None  # noqa: E731
        try:
            body, fast = load_body(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return BodyOutcome(raw, False, skipped="not_json", detail="request body is not JSON")
    if not isinstance(body, dict):
        return BodyOutcome(
            raw, False, skipped="not_json", detail="request body is not a JSON object"
        )
    model = wire.model(body, path)
    stream = wire.stream(body, path)

    def skipped(why: str, detail: str) -> BodyOutcome:
        return BodyOutcome(raw, False, model, stream, skipped=why, detail=detail)

    if not isinstance(body.get(wire.items), list):
        return skipped("no_messages", f"no '{wire.items}' list in the body")
    skip = wire.skip(body)
    if skip is not None:
        return skipped(*skip)
    if _lone_surrogate(has, body):
        detail = "a string holds a lone surrogate (half a character); forwarded unchanged"
        return skipped("lone_surrogate", detail)
    # a history whose oldest messages the client dropped goes on as the history it trims
    restored = bodies.restore(read, wire.items) if bodies is not None and read is not None else 0
    warning: str | None = None
    options: dict[str, Any] = {}

    def run(model: str | None, window: int | None) -> Ran:
        # only a warden that is asked to use another summarizer (or told the reply's limit)
        # needs to accept the keyword
        if summarizer_for is not None:
            options["summarizer"] = summarizer_for(model)
        call = {"model": model, "window": window, "tools": wire.count_tools(body), **options}
        return wire.run(warden, body, has, call, cache_breakpoints)

    try:
        window = effective_window(model, window_cap, window_override, models)
        limit = reply_room(wire.limit(body), model, window, window_override, models)
        if limit is not None:
            options["max_tokens"] = limit
        try:
            ran_ = run(model, window)
        except UnknownModelError as exc:
            # Only reached without a cap or override: lossless layers only (no window, no model).
            warning = f"unknown_model: {exc}; lossless layers only, pass --window to bound it"
            ran_ = run(None, None)
    except FormatError as exc:
        return skipped("invalid_request", str(exc))
    except ContextWardenError as exc:
        return skipped(type(exc).__name__, str(exc))

    rebuilt: dict[str, Any] | None = None
    fields = ran_.fields
    if restored and wire.items not in fields:
        fields = {**fields, wire.items: body[wire.items]}
    if fields:
        rebuilt = dict(body)  # key order kept: only the fields the wire names change
        for key, value in fields.items():
            if value is None:
                rebuilt.pop(key, None)
            else:
                rebuilt[key] = value
        refused = _unsendable(wire, body, rebuilt, read.memo if read is not None else None)
        if refused is not None:
            return BodyOutcome(raw, False, model, stream, refused=refused, sent=body)
    return ran(
        raw,
        rebuilt,
        model,
        stream,
        ran_.result,
        warning,
        fast_json=fast,
        cache_breakpoints=ran_.cache_breakpoints,
        sent=rebuilt if rebuilt is not None else body,
        restored=restored,
    )


#: The warning a request record carries when the cost model said the room is tight.
TIGHT_ROOM = "tight_room"


def _unsendable(
    wire: Wire, before: dict[str, Any], after: dict[str, Any], memo: dict[str, Any] | None
) -> str | None:
    """Why the body the warden wrote cannot be sent, or None: it breaks the provider's rules
    (:meth:`Wire.problems`) where the client's own body did not, or its history came out empty
    (and came in not). A body that came invalid and stays so goes on: the upstream judges it,
    as without us. ``memo``: what the checks remember of the conversation's last body."""
    problems = wire.problems(after, memo)
    if not problems:
        return None
    if (after[wire.items] or not before[wire.items]) and wire.problems(before):
        return None
    shown = "; ".join(problems[:3]) + (
        f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
    )
    return f"contextwarden proxy: the reduced request would be invalid for this API ({shown})"


def ran(
    raw: bytes,
    rebuilt: dict[str, Any] | None,
    model: str | None,
    stream: bool,
    result: TransformResultLike,
    warning: str | None,
    *,
    fast_json: bool = False,
    **extra: Any,
) -> BodyOutcome:
    """The outcome of a warden run on a body: ``rebuilt`` is the new body to send (None when
    nothing changed, so the client's own bytes go on), with the run's counts and compaction.
    ``fast_json``: the body was read by :func:`load_body`'s fast parser (see :func:`dump_body`)."""
    if rebuilt is not None:
        raw = dump_body(rebuilt, fast_json)
    if warning is None and any(  # the cost model's: the room the fixed part leaves is tight
        e.kind == "warning" and e.layer == "policy" for e in getattr(result, "events", ())
    ):
        # a header value: short and ASCII (the event's own detail is logged with it)
        warning = f"{TIGHT_ROOM}: summaries spaced apart, oldest turns cut between them"
    compaction = result.compaction  # None (no compaction) has none of the attributes read
    return BodyOutcome(
        raw,
        rebuilt is not None,
        model,
        stream,
        tokens_before=result.tokens_before,
        tokens_after=result.tokens_after,
        compacted=int(getattr(compaction, "compacted_count", 1)) if compaction is not None else 0,
        strategy=str(getattr(compaction, "strategy", "")) or None,
        summarizer=getattr(compaction, "summarizer", None),
        warning=warning,
        conversation=str(getattr(result, "conversation", "") or ""),
        edited=bool(getattr(result, "edits", ())),
        fast_json=fast_json,
        **extra,
    )


def load_body(raw: bytes) -> tuple[Any, bool]:
    """The JSON value of a request body, and whether the fast parser (orjson, the ``proxy``
    extra's) read it. It reads it when it reads it exactly as :func:`json.loads` does: not when
    it is missing, refuses the body (``NaN``, a lone surrogate, a byte-order mark, another
    encoding...: then :func:`json.loads` judges) or the body may hold an integer of 19 digits or
    more (orjson reads one beyond 64 bits as a float; a string holding such a run of digits is
    read by json.loads too). Faster by a third, the check included."""
    if _orjson is not None and type(raw) is bytes and _LONG_INTEGER not in raw.translate(_DIGITS):
        try:
            return _orjson.loads(raw), True
        except _orjson.JSONDecodeError:
            pass
    return json.loads(raw), False


def dump_body(body: Any, fast: bool) -> bytes:
    """A request body as compact UTF-8 JSON. ``fast`` (the body was read by the fast parser, so
    it holds no NaN or infinity) writes with orjson, ten times faster than :func:`json.dumps`
    and the same text except for the spelling of some floats (``1e-7`` for ``1e-07``,
    ``0.00005`` for ``5e-05``: the same numbers); what orjson refuses (an integer outside 64
    bits) is written by :func:`json.dumps`, as it is without orjson. The messages of a
    :class:`~..formats.cache_control.Continued` list (dicts never changed) are written once
    each: a conversation's next request writes only those it did not send before."""
    if fast and _orjson is not None:
        try:
            if type(body) is dict and any(type(v) is Continued for v in body.values()):
                body = {k: _known_json(v) if type(v) is Continued else v for k, v in body.items()}
            return _orjson.dumps(body)
        except TypeError:  # orjson.JSONEncodeError is a TypeError
            pass
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _known_json(messages: Continued) -> Any:
    """The JSON of ``messages`` (as :func:`orjson.dumps` writes it), each dict's taken from
    the writer's last request where the same dict went into it (``messages.written``, which
    then holds this request's)."""
    sent = messages.written
    now: dict[int, tuple[Any, bytes]] = {}
    parts: list[bytes] = []
    for m in messages:
        hit = sent.get(id(m)) if sent is not None else None
        if hit is None or hit[0] is not m:  # the entry holds its dict: the id is not reused
            hit = (m, _orjson.dumps(m))
        now[id(m)] = hit
        parts.append(hit[1])
    if sent is not None:
        sent.clear()
        sent.update(now)
    return _orjson.Fragment(b"[" + b",".join(parts) + b"]")
