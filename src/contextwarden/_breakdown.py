"""Where a history's tokens go: by role, by block kind, message by message.

What ``contextwarden count`` and ``inspect`` print; pure arithmetic over a counter. Block
kinds count their content only (a tool call: its name and arguments; an image: its estimated
cost); what the request adds around them (per-message framing, tool-call framing, reply
priming) is the ``framing`` row, and tool definitions are the ``tools`` row, so the rows add up
to exactly the counter's total for the request.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ._messages import (
    Block,
    ImageBlock,
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from ._tokens import TokenCounter

__all__ = [
    "Breakdown",
    "token_breakdown",
]

BlockKind = Literal["text", "thinking", "tool_call", "tool_result", "image"]
ROLE_ORDER: tuple[Role, ...] = ("system", "user", "assistant", "tool")
KIND_ORDER: tuple[BlockKind, ...] = ("text", "thinking", "tool_call", "tool_result", "image")


@dataclass(frozen=True)
class Row:
    """One line of a breakdown: how many items, and their tokens."""

    name: str
    count: int
    tokens: int


@dataclass(frozen=True)
class Breakdown:
    """The token accounting of one request.

    ``total`` is the counter's figure for the whole request (tools included);
    ``by_role`` sums whole messages (framing included) per role; ``by_kind`` sums block
    contents per kind, then ``framing`` and ``tools`` rows, adding up to ``total``;
    ``per_message`` is each message's cost, in order.
    """

    total: int
    by_role: tuple[Row, ...]
    by_kind: tuple[Row, ...]
    per_message: tuple[int, ...]
    tools: int

    def largest(self, n: int = 10) -> list[int]:
        """Indices of the ``n`` most expensive messages, most expensive first (ties: earlier
        first)."""
        order = sorted(range(len(self.per_message)), key=lambda i: (-self.per_message[i], i))
        return order[:n]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "total": self.total,
            "tools": self.tools,
            "by_role": {r.name: {"messages": r.count, "tokens": r.tokens} for r in self.by_role},
            "by_kind": {k.name: {"blocks": k.count, "tokens": k.tokens} for k in self.by_kind},
        }


def _block_tokens(counter: TokenCounter, block: Block) -> int:
    if isinstance(block, TextBlock):
        return counter.count_text(block.text)
    if isinstance(block, ThinkingBlock):
        return counter.count_text(block.thinking) + (
            counter.count_text(block.data) if block.data else 0
        )
    if isinstance(block, ToolCallBlock):
        return counter.count_text(block.name) + counter.count_text(block.arguments)
    if isinstance(block, ImageBlock):
        return block.token_cost
    if isinstance(block.content, str):
        return counter.count_text(block.content)
    return sum(_block_tokens(counter, part) for part in block.content)


def token_breakdown(
    messages: Sequence[Message],
    counter: TokenCounter,
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    on_message: Callable[[int], None] | None = None,
) -> Breakdown:
    """Account for every token of the request ``messages`` (+ ``tools``) under ``counter``.

    ``on_message(1)`` is called after each message is counted (a progress bar's ``advance``).
    """
    role_n, role_t, kind_n, kind_t = Counter[str](), Counter[str](), Counter[str](), Counter[str]()
    costs: list[int] = []
    for message in messages:
        cost = counter.count_message(message)
        costs.append(cost)
        role_n[message.role] += 1
        role_t[message.role] += cost
        for block in message.content:
            kind_n[block.type] += 1
            kind_t[block.type] += _block_tokens(counter, block)
        if on_message is not None:
            on_message(1)
    per_message = tuple(costs)
    # The counter caches each message's count: the totals below cost little more than a sum.
    total = counter.count_messages(messages, tools=tools)
    without_tools = counter.count_messages(messages) if tools else total

    by_role = tuple(Row(r, role_n[r], role_t[r]) for r in ROLE_ORDER if r in role_n)
    kinds = [Row(k, kind_n[k], kind_t[k]) for k in KIND_ORDER if k in kind_n]
    content = sum(r.tokens for r in kinds)
    kinds.append(Row("framing", len(messages), without_tools - content))
    tool_tokens = total - without_tools
    if tools:
        kinds.append(Row("tools", len(tools), tool_tokens))
    return Breakdown(total, by_role, tuple(kinds), per_message, tool_tokens)
