"""What every wire format gives the proxy (:class:`Wire`), with the parts most of them share."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ...formats._common import reply_limit
from ...recall import RECALL_TOOL_NAME, recall_tool
from ..errors import ErrorKind, Provider, error_sse
from ..recall import Event, add_usage, encode_event
from ..stats import Route

__all__ = ["PROVIDER_COMPACTION", "Has", "Holding", "Ran", "Splice", "Turn", "Wire", "json_object"]

#: ``has(pattern, width)``: whether a request body's bytes match ``pattern`` (whose matches are
#: at most ``width`` bytes long); see :meth:`~contextwarden.formats._body.BodyRead.has`.
Has = Callable[[re.Pattern[bytes], int], bool]

#: The ``skipped`` reason of a request whose history the provider compacts itself (its
#: ``context_management``, a compaction block): forwarded as sent, so that the same history is
#: not compacted twice.
PROVIDER_COMPACTION = "provider_compaction"


@dataclass(frozen=True)
class Turn:
    """One round's reply as the next round sends it back (``sent``: the assistant message with
    its text, thinking and recall calls; Responses: the output items but the client's calls)
    and its recall calls: (call id, ref). The client's own tool calls are left out."""

    sent: tuple[dict[str, Any], ...]
    calls: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Ran:
    """A warden run on a body: the top-level ``fields`` to set in it (a value of None: remove
    the key), the warden's result, and the cache breakpoints the proxy added."""

    fields: dict[str, Any]
    result: Any
    cache_breakpoints: int = 0


class Splice(Protocol):
    """What makes a client's one stream of the recall rounds' streams: ``feed`` gives what to
    send the client now for an event, ``end_round`` the round's :class:`Turn` once its stream
    ended, ``next_round`` begins the next (the held events dropped), ``flush`` gives the last
    round's held events as the client gets them."""

    failed: bool

    def feed(self, event: Event) -> list[bytes]: ...
    def end_round(self) -> Turn: ...
    def next_round(self) -> None: ...
    def flush(self) -> list[bytes]: ...


@dataclass
class Holding:
    """A splice that holds a round's events until the round ends (its ``held``) and writes
    each as the client gets it (its ``_emit``); ``usage``: the earlier rounds', summed."""

    round: int = 0
    holding: bool = False
    failed: bool = False
    held: list[Event] = field(default_factory=list)
    usage: Any = None

    def advance(self, usage: Any) -> None:
        """Begin the next round: the one ending's ``usage`` added in, its held events dropped."""
        self.usage = add_usage(self.usage, usage)
        self.round += 1
        self.holding, self.held = False, []

    def flush(self) -> list[bytes]:
        """The held events of the last round, as the client gets them."""
        return [self._emit(e, d) if isinstance(d := e.json(), dict) else e.raw for e in self.held]

    def _emit(self, event: Event, data: dict[str, Any]) -> bytes:
        raise NotImplementedError


class Wire:
    """One API the proxy serves (see :mod:`contextwarden.proxy.wire`). The defaults fit an API
    whose body names its ``model``, asks for a stream with ``stream: true``, keeps its history
    in the list under :attr:`items` and its tools under ``tools``."""

    #: the route's name in the log and ``/stats``
    name: Route = "openai"
    #: whose error bodies the proxy's own errors on this route imitate
    provider: Provider = "openai"
    #: the key of the history list in the body
    items: str = "messages"
    #: the paths served
    paths: tuple[str, ...] = ()
    #: the API whose keys hold the reply's output limit
    #: (:data:`~contextwarden.formats._common.REPLY_LIMIT_KEYS`) and whose recall tool it offers
    api: Literal["openai", "anthropic", "responses"] = "openai"
    #: the check of the history list the proxy wrote (:meth:`problems`)
    check: Callable[[Any], list[str]] | None = None
    #: whether the recall tool is offered on this route
    recall: bool = True
    #: the warden's method :meth:`run` calls (a warden of the caller's own may lack it)
    method: str = "transform"

    def serves(self, path: str) -> bool:
        return path in self.paths

    def model(self, body: Mapping[str, Any], path: str) -> str | None:
        model = body.get("model")
        return model if isinstance(model, str) else None

    def stream(self, body: Mapping[str, Any], path: str) -> bool:
        return body.get("stream") is True

    def skip(self, body: Mapping[str, Any]) -> tuple[str, str] | None:
        """Why a body whose history list is there is still forwarded unchanged, if it is."""
        return None

    def limit(self, body: Mapping[str, Any]) -> int | None:
        """The output limit the request gives the provider, if it gives a usable one."""
        return reply_limit(body, self.api)

    def count_tools(self, body: Mapping[str, Any]) -> list[Any] | None:
        """The tool definitions that count against the window, as the warden counts them."""
        tools = body.get("tools")
        return tools if isinstance(tools, list) else None

    def run(
        self, warden: Any, body: dict[str, Any], has: Has, options: dict[str, Any], marks: bool
    ) -> Ran:
        """The warden on the body's history: ``options`` are the keywords of its call
        (``model``, ``window``, ``tools``, and ``summarizer``, ``max_tokens`` when given);
        ``has(pattern, width)``: whether the body's bytes match a pattern; ``marks``: add
        prompt-cache breakpoints where the API takes them and the client set none."""
        raise NotImplementedError

    def problems(self, body: Mapping[str, Any], memo: dict[str, Any] | None = None) -> list[str]:
        """What makes the body the proxy wrote invalid by the provider's rules (none: valid);
        ``memo``: what the check remembers between the bodies of one conversation."""
        return [] if self.check is None else self.check(body[self.items])

    # -- the recall tool -------------------------------------------------------------------------
    def tool_name(self, tool: Any) -> Any:
        return tool.get("name") if isinstance(tool, dict) else None

    def recall_tool(self) -> dict[str, Any]:
        return recall_tool(self.api)

    def choice_allows(self, choice: Any) -> bool:
        """Whether the client's ``tool_choice`` leaves the model free to call another tool."""
        return choice in ("auto", "required")

    def no_choice(self) -> dict[str, Any]:
        """The fields that forbid every tool call (the last round of a client without tools)."""
        return {"tool_choice": "none"}

    def tools_of(self, body: Mapping[str, Any]) -> list[Any] | None:
        """The client's tool list (None: none given; not a list: not ours to touch)."""
        tools = body.get("tools")
        return tools if isinstance(tools, list) or tools is None else None

    def may_offer(self, body: Mapping[str, Any]) -> bool:
        """Whether the recall tool may be added to ``body``: its tools (if any) a list without a
        tool of that name, its tool choice forcing neither a tool nor none."""
        if not self.recall:
            return False
        tools = body.get("tools")
        if tools is not None and not isinstance(tools, list):
            return False
        if any(self.tool_name(t) == RECALL_TOOL_NAME for t in self.tools_of(body) or ()):
            return False
        choice = body.get("tool_choice")
        return choice is None or self.choice_allows(choice)

    def with_tools(self, body: dict[str, Any], tools: list[Any]) -> None:
        body["tools"] = tools

    def round_body(
        self, body: dict[str, Any], extra: list[dict[str, Any]], *, last: bool
    ) -> dict[str, Any]:
        """One round's request: ``body`` with the recall exchanges so far (``extra``) after its
        history and the tool offered at the end of its tools, unless the round is the ``last``:
        then the client's tools alone, or, when it sent none, the tool described (the exchanges
        name it) and every call forbidden."""
        tools = list(self.tools_of(body) or [])
        out = dict(body)
        if extra:
            out[self.items] = [*body[self.items], *self.sent_back(body, extra)]
        if not last:
            self.with_tools(out, [*tools, self.recall_tool()])
        elif extra and not tools:
            self.with_tools(out, [self.recall_tool()])
            out.update(self.no_choice())
        return out

    def sent_back(self, body: Mapping[str, Any], extra: list[dict[str, Any]]) -> list[Any]:
        """The recall exchanges as this request sends them back."""
        return extra

    def reply_turn(self, reply: dict[str, Any]) -> Turn:
        raise NotImplementedError

    def answers(self, turn: Turn, found: list[tuple[str, bool]]) -> list[dict[str, Any]]:
        """The items a round appends: ``turn``'s, then each call's answer (text, is_error)."""
        pairs = zip(turn.calls, found, strict=True)
        return [*turn.sent, *(self.answer(cid, text, error) for (cid, _), (text, error) in pairs)]

    def answer(self, call_id: str, text: str, error: bool) -> dict[str, Any]:
        """The item answering the recall call ``call_id`` (:meth:`answers`)."""
        raise NotImplementedError

    def splice(self) -> Splice:
        raise NotImplementedError

    def usage(self, reply: Mapping[str, Any]) -> Any:
        return reply.get("usage")

    def client_reply(self, reply: dict[str, Any], usage: Any) -> dict[str, Any]:
        """The last round's whole reply as the client gets it: its usage the sum over the rounds
        (``usage``, when known)."""
        return dict(reply) if usage is None else {**reply, "usage": usage}

    def always_rewrite(self) -> bool:
        """Whether the last round's reply is written again even after one round (the Responses
        API's echo of the tools holds the recall tool)."""
        return False

    def broke(self, splice: Splice, kind: ErrorKind, message: str) -> bytes:
        """The event that ends the client's stream when the upstream failed the proxy."""
        return error_sse(self.provider, kind, message)

    def refused(self, splice: Splice, status: int, raw: bytes) -> bytes:
        """A later round's refusal by the upstream, as this API's error event (the upstream's
        own words when its body has them)."""
        body = json_object(raw)
        if body is None or not isinstance(body.get("error"), dict):
            return error_sse(self.provider, "unreachable", refused_message(status))
        return encode_event("", body)


def refused_message(status: int) -> str:
    return f"contextwarden proxy: the upstream answered {status} to a recall round"


def json_object(raw: bytes | str) -> dict[str, Any] | None:
    """``raw`` as a JSON object, None when it is not one."""
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
