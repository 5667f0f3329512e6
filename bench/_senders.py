"""Context managers as an agent loop uses them: one :data:`~bench._agent.Sender` per
conversation, each given the agent's history before every call.

* contextwarden: one ``Warden`` per conversation, ``transform_openai(history, model, window)``;
* LangChain ``ClearToolUsesEdit`` through ``ContextEditingMiddleware.wrap_model_call`` (it
  deep-copies the history and edits the copy, so every call starts again from the full
  history), with and without ``clear_at_least``;
* LangChain ``trim_messages`` (stateless), with and without ``start_on``;
* pydantic-ai-harness ``SlidingWindowCompaction``, ``ClearToolResults`` (its defaults: keep
  the last 3 pairs) and ``TieredCompaction`` (clear tool results, then slide) through their ``before_model_request`` hook on a run context whose
  ``messages`` is the agent's history: their cut persists in that history, as in a
  pydantic-ai run, and new messages are appended after it.

Every peer gets the same budget: the warden's trigger for the window (fire above it) and its
target (what to cut to), with the same exact o200k counts (LangChain: a tiktoken counter framed
like ours; pydantic-ai-harness: its ``tokenizer`` hook with the o200k text count). Every
request goes back to OpenAI dicts, so the cache sees what the provider would.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._agent import Sender
from ._convert import _RAW, lc_to_openai, openai_to_lc, openai_to_pai, pai_to_openai

__all__ = ["PEER_SENDERS", "PeerSpec", "available", "budget", "warden_sender"]


@dataclass(frozen=True)
class Budget:
    """When a peer fires (``trigger`` tokens) and what it cuts to (``target``)."""

    window: int
    trigger: int
    target: int


def budget(model: str, window: int) -> Budget:
    """The warden's default budget for ``model`` at ``window``."""
    from contextwarden import Warden

    b = Warden().budget_for(model, window)
    assert b is not None
    return Budget(b.window, b.trigger, b.target)


def warden_sender(model: str, window: int, config: Mapping[str, Any] | None = None) -> Sender:
    """A fresh warden for one conversation: ``Warden()`` (the defaults, as users call it) or,
    with ``config``, the warden that config describes."""
    from contextwarden import Warden

    if config is None:
        warden = Warden()
    else:
        from contextwarden._config import WardenConfig
        from contextwarden._replay import make_warden

        warden = make_warden(WardenConfig.model_validate(dict(config)))

    def send(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        request, _ = warden.transform_openai(history, model=model, window=window)
        return request

    return send


# -- LangChain ------------------------------------------------------------------------------------
class _LcCache:
    """LangChain messages for the agent's dicts, converted once per dict (the agent's history
    is one list that only grows), and a content-keyed token count (the middleware deep-copies
    its messages, so object identity cannot key it)."""

    def __init__(self) -> None:
        from ._convert import tiktoken_message_counter
        from .counting import tiktoken_encoding

        self._lc: dict[int, tuple[dict[str, Any], Any]] = {}
        self._count = tiktoken_message_counter(tiktoken_encoding("o200k_base"))
        self._counts: dict[tuple[Any, ...], int] = {}

    def convert(self, history: list[dict[str, Any]]) -> list[Any]:
        out = []
        for d in history:
            hit = self._lc.get(id(d))
            if hit is None or hit[0] is not d:
                hit = (d, openai_to_lc([d])[0])
                self._lc[id(d)] = hit
            out.append(hit[1])
        return out

    def count_one(self, message: Any) -> int:
        # The texts are the agent's own string objects (a deep copy keeps str objects), so
        # hashing them is cached by Python; no repr of the whole message on every recount.
        extra = message.additional_kwargs
        key = (
            type(message).__name__,
            message.content if isinstance(message.content, str) else repr(message.content),
            getattr(message, "tool_call_id", None),
            tuple((extra.get(_RAW) or {}).items()),
            extra.get("reasoning_content"),
            tuple(c.get("id") for c in getattr(message, "tool_calls", None) or ()),
        )
        n = self._counts.get(key)
        if n is None:
            n = self._counts[key] = self._count(message)
        return n

    def count(self, messages: Any) -> int:
        return sum(self.count_one(m) for m in messages)


def _clear_tool_uses(clear_at_least: bool) -> Callable[[str, int], Sender]:
    def make(model: str, window: int) -> Sender:
        from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware
        from langchain.agents.middleware.types import ModelRequest
        from langchain_core.language_models.fake_chat_models import FakeListChatModel
        from langchain_core.messages import AIMessage, SystemMessage

        b = budget(model, window)
        cache = _LcCache()
        edit = ClearToolUsesEdit(
            trigger=b.trigger, clear_at_least=(b.trigger - b.target) if clear_at_least else 0
        )
        middleware = ContextEditingMiddleware(edits=[edit], token_counter=cache.count)
        fake = FakeListChatModel(responses=["ok"])

        def send(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
            lc = cache.convert(history)
            system = lc[0] if lc and isinstance(lc[0], SystemMessage) else None
            rest = lc[1:] if system is not None else lc
            seen: list[Any] = []

            def handler(req: Any) -> Any:
                seen.extend(req.messages)
                return AIMessage(content="ok")

            middleware.wrap_model_call(
                ModelRequest(model=fake, messages=rest, system_message=system), handler
            )
            return lc_to_openai([system, *seen] if system is not None else seen)

        return send

    return make


def _trim(start_on: bool) -> Callable[[str, int], Sender]:
    def make(model: str, window: int) -> Sender:
        from langchain_core.messages import BaseMessage, trim_messages

        b = budget(model, window)
        cache = _LcCache()

        def count(message: BaseMessage) -> int:
            return cache.count_one(message)

        # trim_messages reads the annotation to learn that it counts one message at a time
        count.__annotations__["message"] = BaseMessage
        kwargs: dict[str, Any] = {
            "max_tokens": b.trigger - 3,
            "token_counter": count,
            "strategy": "last",
            "include_system": True,
        }
        if start_on:
            kwargs.update(start_on="human", end_on=("human", "tool"))

        def send(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return lc_to_openai(trim_messages(cache.convert(history), **kwargs))

        return send

    return make


# -- pydantic-ai-harness ---------------------------------------------------------------------------
def _harness(kind: str) -> Callable[[str, int], Sender]:
    def make(model: str, window: int) -> Sender:
        from pydantic_ai.models import ModelRequestContext, ModelRequestParameters
        from pydantic_ai.models.test import TestModel
        from pydantic_ai.tools import RunContext
        from pydantic_ai.usage import RunUsage
        from pydantic_ai_harness.compaction import (
            ClearToolResults,
            SlidingWindowCompaction,
            TieredCompaction,
        )

        from .counting import tiktoken_encoding

        b = budget(model, window)
        enc = tiktoken_encoding("o200k_base")

        def tokenizer(text: str) -> int:
            return len(enc.encode_ordinary(text))

        capability: Any
        if kind == "sliding":
            capability = SlidingWindowCompaction(
                max_tokens=b.trigger, keep_tokens=b.target, tokenizer=tokenizer
            )
        elif kind == "clear":
            capability = ClearToolResults(max_tokens=b.trigger, tokenizer=tokenizer)
        else:
            capability = TieredCompaction(
                tiers=[
                    ClearToolResults(max_tokens=1, tokenizer=tokenizer),
                    SlidingWindowCompaction(
                        max_tokens=1, keep_tokens=b.target, tokenizer=tokenizer
                    ),
                ],
                target_tokens=b.trigger,
                tokenizer=tokenizer,
            )
        test_model = TestModel()
        ctx = RunContext(deps=None, model=test_model, usage=RunUsage(), messages=[])
        appended = 0  # how much of the agent's history the run's messages already hold

        def send(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
            nonlocal appended
            ctx.messages.extend(openai_to_pai(history[appended:]))
            appended = len(history)
            request = ModelRequestContext(
                model=test_model,
                messages=list(ctx.messages),
                model_settings=None,
                model_request_parameters=ModelRequestParameters(),
            )
            out = asyncio.run(capability.before_model_request(ctx, request))
            return pai_to_openai(out.messages)

        return send

    return make


@dataclass(frozen=True)
class PeerSpec:
    """A peer: its name, the module it needs, and ``make(model, window) -> Sender`` for one
    conversation."""

    name: str
    requires: str
    make: Callable[[str, int], Sender]


PEER_SENDERS: tuple[PeerSpec, ...] = (
    PeerSpec("ClearToolUsesEdit", "langchain.agents.middleware", _clear_tool_uses(False)),
    PeerSpec(
        "ClearToolUsesEdit (clear_at_least)", "langchain.agents.middleware", _clear_tool_uses(True)
    ),
    PeerSpec("trim_messages (start_on)", "langchain_core", _trim(True)),
    PeerSpec("trim_messages (no start_on)", "langchain_core", _trim(False)),
    PeerSpec("SlidingWindowCompaction", "pydantic_ai_harness", _harness("sliding")),
    PeerSpec("TieredCompaction (clear, slide)", "pydantic_ai_harness", _harness("tiered")),
    PeerSpec("ClearToolResults", "pydantic_ai_harness", _harness("clear")),
)


def available() -> tuple[list[PeerSpec], dict[str, str]]:
    """The peers whose packages import, and why the others are skipped."""
    ok: list[PeerSpec] = []
    skipped: dict[str, str] = {}
    for peer in PEER_SENDERS:
        try:
            importlib.import_module(peer.requires)
        except ImportError as exc:
            skipped[peer.name] = f"{peer.requires} not importable: {exc}"
            continue
        ok.append(peer)
    return ok, skipped
