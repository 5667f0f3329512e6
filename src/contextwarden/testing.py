"""Test doubles for code that uses contextwarden (public API, like httpx's ``MockTransport``):
:class:`FakeSummarizer` (scripted output or failures, recording every request),
:class:`FixedCounter` (exact, predictable token counts) and :class:`ConversationBuilder`
(agent histories built fluently, with deterministic tool-call ids).

Example::

    from contextwarden.testing import ConversationBuilder, FixedCounter

    history = (
        ConversationBuilder()
        .system("You are a coding agent.")
        .user("Fix the failing test in calc.py")
        .bash("pytest -q", "1 failed", returncode=1)
        .edit("calc.py", "return a - b", "return a + b")
        .bash("pytest -q", "1 passed")
        .assistant("Fixed: add() subtracted.")
        .build()
    )
    assert FixedCounter().count_messages(history) > 0
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from ._exceptions import SummarizerError
from ._messages import (
    Block,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from .summarizers.base import SummaryRequest, request_facts, task_key

__all__ = ["ConversationBuilder", "FakeSummarizer", "FixedCounter"]


# -- FakeSummarizer ------------------------------------------------------------------------------
class FakeSummarizer:
    """A summarizer for tests: deterministic, configurable, observable.

    ``output``: a string, or a callable ``request -> str``; ``None`` (the default) writes a valid
    four-part summary holding the request's must-keep facts and the message count, so it passes
    :func:`~contextwarden.summarizers.check_summary` whenever the length allows. ``fail``: raise on
    every call (``True``: :class:`~contextwarden.SummarizerError`; an exception instance: that);
    ``fail_times``: raise on the first N calls only. Every request is appended to :attr:`calls`."""

    def __init__(
        self,
        output: str | Callable[[SummaryRequest], str] | None = None,
        *,
        fail: bool | BaseException = False,
        fail_times: int = 0,
        name: str = "fake",
    ) -> None:
        self.output = output
        self.fail = fail
        self.fail_times = fail_times
        self.name = name
        self.calls: list[SummaryRequest] = []

    @property
    def config_id(self) -> str:
        return f"fake:{self.name}"

    def summarize(self, request: SummaryRequest) -> str:
        self.calls.append(request)
        failing = len(self.calls) <= self.fail_times if self.fail_times else self.fail is not False
        if failing:
            if isinstance(self.fail, BaseException):
                raise self.fail
            raise SummarizerError(f"{self.name}: scripted failure (call {len(self.calls)})")
        if callable(self.output):
            return self.output(request)
        if isinstance(self.output, str):
            return self.output
        return _default_summary(request)

    async def asummarize(self, request: SummaryRequest) -> str:
        return self.summarize(request)


def _default_summary(request: SummaryRequest) -> str:
    facts = request_facts(request)
    task = request.task or facts.task
    remaining = f"Original task: {task_key(task)}" if task else "Original task: (unknown)"
    files = "\n".join(f"- {p}" for p in facts.changed_files)
    state = f"Files changed:\n{files}" if files else "No files changed."
    error = facts.last_unresolved_error
    if error is not None:
        state += f"\nLast unresolved error: {error.key}"
    pins = "\n".join(dict.fromkeys((*request.pinned, *facts.pins)))
    return (
        f"<completed>\nSummarised {len(request.messages)} messages.\n</completed>\n"
        f"<remaining>\n{remaining}\n</remaining>\n"
        f"<current_state>\n{state}\n</current_state>\n"
        f"<notes>\n{pins}\n</notes>"
    )


# -- FixedCounter --------------------------------------------------------------------------------
class FixedCounter:
    """A token counter with exact, predictable arithmetic (no tokenizer): ``mode="chars"`` counts
    ``ceil(len(text) / chars_per_token)`` (default 4), ``mode="words"`` one a word. A message costs
    ``per_message`` (default 0) plus its blocks (text, thinking, a call's name and arguments, a
    result's text, an image's ``token_cost``); a request adds ``per_request`` and the tools' JSON."""

    def __init__(
        self,
        mode: Literal["chars", "words"] = "chars",
        *,
        chars_per_token: int = 4,
        per_message: int = 0,
        per_request: int = 0,
    ) -> None:
        if mode not in ("chars", "words"):
            raise ValueError(f"FixedCounter mode must be 'chars' or 'words', got {mode!r}")
        if chars_per_token < 1:
            raise ValueError(f"FixedCounter chars_per_token must be >= 1, got {chars_per_token}")
        self.mode = mode
        self.chars_per_token = chars_per_token
        self.per_message = per_message
        self.per_request = per_request
        self.name = f"fixed-{mode}" + (f"/{chars_per_token}" if mode == "chars" else "")

    def count_text(self, text: str) -> int:
        if self.mode == "words":
            return len(text.split())
        return math.ceil(len(text) / self.chars_per_token)

    def _block(self, block: Block) -> int:
        if isinstance(block, TextBlock):
            return self.count_text(block.text)
        if isinstance(block, ThinkingBlock):
            return self.count_text(block.thinking)
        if isinstance(block, ToolCallBlock):
            return self.count_text(block.name) + self.count_text(block.arguments)
        if isinstance(block, ToolResultBlock):
            if isinstance(block.content, str):
                return self.count_text(block.content)
            return sum(self._block(b) for b in block.content)
        return block.token_cost  # ImageBlock

    def count_message(self, message: Message) -> int:
        return self.per_message + sum(self._block(b) for b in message.content)

    def count_messages(
        self, messages: Sequence[Message], *, tools: Sequence[Mapping[str, Any]] | None = None
    ) -> int:
        total = self.per_request + sum(self.count_message(m) for m in messages)
        if tools:
            total += self.count_text(json.dumps(list(tools), sort_keys=True))
        return total


# -- ConversationBuilder -------------------------------------------------------------------------
def _lead(text: str, thinking: ThinkingBlock | None) -> tuple[Block, ...]:
    """What an assistant message says before its calls: its thinking, then its text."""
    return (*(() if thinking is None else (thinking,)), *((TextBlock(text),) if text else ()))


class ConversationBuilder:
    """Builds a history fluently; every method returns the builder, :meth:`build` the list.

    Tool-call ids are ``call_1``, ``call_2``... in order, so the same script builds equal
    histories. Arguments may be a mapping (written as compact JSON, keys in the given order)
    or a JSON string (kept as is, even if invalid).
    """

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self._calls = 0

    # plain messages -----------------------------------------------------------------------
    def system(self, text: str) -> ConversationBuilder:
        self._messages.append(Message("system", (TextBlock(text),)))
        return self

    def user(self, text: str, *, pinned: bool = False) -> ConversationBuilder:
        """A user message; ``pinned`` sets the message's pin flag."""
        self._messages.append(Message("user", (TextBlock(text),), pinned=pinned))
        return self

    def pin(self, text: str) -> ConversationBuilder:
        """A user message carrying ``<Pin>text</Pin>`` (an inline pin)."""
        return self.user(f"<Pin>{text}</Pin>")

    def assistant(
        self,
        text: str = "",
        *,
        thinking: str | None = None,
        signature: str | None = None,
        redacted: bool = False,
    ) -> ConversationBuilder:
        """An assistant message: optional thinking block (with ``signature``; ``redacted``
        puts the text in ``data`` instead), then the text."""
        thought = None
        if thinking is not None:
            thought = ThinkingBlock(thinking, signature=signature)
            if redacted:
                thought = ThinkingBlock("", signature=signature, redacted=True, data=thinking)
        self._messages.append(Message("assistant", _lead(text, thought)))
        return self

    def image(
        self, source: Mapping[str, Any] | None = None, *, text: str = "", token_cost: int = 765
    ) -> ConversationBuilder:
        """A user message with an image (and optional text)."""
        blocks: list[Block] = [
            ImageBlock(dict(source or {"type": "url", "url": "x.png"}), token_cost=token_cost)
        ]
        if text:
            blocks.insert(0, TextBlock(text))
        self._messages.append(Message("user", tuple(blocks)))
        return self

    # tool loops ---------------------------------------------------------------------------
    def tool_loop(
        self,
        name: str,
        args: Mapping[str, Any] | str,
        result: str,
        *,
        is_error: bool = False,
        text: str = "",
        thinking: str | None = None,
    ) -> ConversationBuilder:
        """One assistant message calling ``name(args)`` (after optional ``thinking`` and
        ``text``), then the tool message with ``result``."""
        return self.parallel([(name, args, result, is_error)], text=text, thinking=thinking)

    def parallel(
        self,
        calls: Sequence[tuple[str, Mapping[str, Any] | str, str, bool]],
        *,
        text: str = "",
        thinking: str | None = None,
    ) -> ConversationBuilder:
        """One assistant message with several calls ``(name, args, result, is_error)``, then
        one tool message per result, in order (OpenAI's shape)."""
        blocks = list(_lead(text, ThinkingBlock(thinking) if thinking is not None else None))
        ids = []
        for name, args, _, _ in calls:
            self._calls += 1
            call_id = f"call_{self._calls}"
            ids.append(call_id)
            arguments = args if isinstance(args, str) else json.dumps(dict(args))
            blocks.append(ToolCallBlock(call_id, name, arguments))
        self._messages.append(Message("assistant", tuple(blocks)))
        for call_id, (_, _, result, is_error) in zip(ids, calls, strict=True):
            self._messages.append(
                Message("tool", (ToolResultBlock(call_id, result, is_error=is_error),))
            )
        return self

    def bash(
        self, command: str, output: str = "", *, returncode: int = 0, text: str = ""
    ) -> ConversationBuilder:
        """A ``bash`` tool loop whose result is in mini-swe-agent's shape
        (``<returncode>N</returncode>`` then ``<output>``)."""
        result = f"<returncode>{returncode}</returncode>\n<output>\n{output}\n</output>"
        return self.tool_loop("bash", {"command": command}, result, text=text)

    def read(self, path: str, content: str = "") -> ConversationBuilder:
        """A ``read`` tool loop (pi / Claude Code shape)."""
        return self.tool_loop("read", {"path": path}, content)

    def write(self, path: str, content: str) -> ConversationBuilder:
        """A ``write`` tool loop creating ``path``."""
        return self.tool_loop(
            "write",
            {"path": path, "content": content},
            f"Wrote {len(content)} characters to {path}",
        )

    def edit(
        self, path: str, old: str, new: str, *, error: str | None = None
    ) -> ConversationBuilder:
        """A ``str_replace_editor`` edit of ``path``; ``error`` makes it a failed edit."""
        args = {"command": "str_replace", "path": path, "old_str": old, "new_str": new}
        if error is not None:
            return self.tool_loop("str_replace_editor", args, error, is_error=True)
        return self.tool_loop("str_replace_editor", args, f"The file {path} has been edited.")

    def todo(self, items: Sequence[tuple[str, str]]) -> ConversationBuilder:
        """A ``TodoWrite`` call with ``(content, status)`` items."""
        todos = [{"content": c, "status": s} for c, s in items]
        return self.tool_loop("TodoWrite", {"todos": todos}, "Todos have been modified.")

    def extend(self, messages: Sequence[Message]) -> ConversationBuilder:
        """Append ready-made messages."""
        self._messages.extend(messages)
        return self

    # results ------------------------------------------------------------------------------
    @property
    def messages(self) -> tuple[Message, ...]:
        return tuple(self._messages)

    def build(self) -> list[Message]:
        """The history so far, as a new list."""
        return list(self._messages)

    def __len__(self) -> int:
        return len(self._messages)
