"""Shared by the layer, warden and conformance tests: a predictable token counter, a
hypothesis strategy for valid agent histories, and validity checks for both provider APIs."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import strategies as st

from contextwarden._config import WardenConfig
from contextwarden._messages import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    assistant,
    system,
    tool_result,
    user,
)
from contextwarden.layers.base import LayerContext


class CharCounter:
    """chars/4 (rounded up) + 4 framing tokens per message, + 3 per request: additive and
    arithmetic, so budgets in tests can be reasoned about. Counts every text-like character."""

    name = "test-chars4"

    def __init__(self) -> None:
        self.calls = 0

    def count_text(self, text: str) -> int:
        return -(-len(text) // 4)

    def count_message(self, message: Message) -> int:
        self.calls += 1
        return 4 + -(-message.char_count // 4)

    def count_messages(
        self, messages: Sequence[Message], *, tools: Sequence[Mapping[str, Any]] | None = None
    ) -> int:
        tool_tokens = -(-len(repr(list(tools))) // 4) if tools else 0
        return 3 + tool_tokens + sum(self.count_message(m) for m in messages)


def budget(window: int, reserve: int = 0, trigger_ratio: float = 0.75) -> Any:
    from contextwarden._budget import Budget

    return Budget(window, reserve=reserve, trigger_ratio=trigger_ratio, target_ratio=0.5)


def config(**overrides: Any) -> WardenConfig:
    return WardenConfig.model_validate(overrides)


def ctx(
    *,
    cfg: WardenConfig | None = None,
    window: int | None = None,
    reserve: int = 0,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> LayerContext:
    return LayerContext(
        CharCounter(),
        cfg or config(),
        budget(window, reserve) if window is not None else None,
        tools,
    )


def call(cid: str, name: str = "bash", args: str = '{"cmd": "ls"}') -> ToolCallBlock:
    return ToolCallBlock(cid, name, args)


def lines(n: int, width: int = 40, tag: str = "line") -> str:
    """``n`` distinct lines of about ``width`` characters."""
    return "\n".join(f"{tag} {i} ".ljust(width, "x") for i in range(n))


def agent_run(n_steps: int, *, result_chars: int = 2000, with_system: bool = True) -> list[Message]:
    """The usual agent shape: (system,) one user task, then ``n_steps`` call/result pairs."""
    msgs: list[Message] = [system("You are a coding agent.")] if with_system else []
    msgs.append(user("Fix the failing test in calc.py"))
    for i in range(n_steps):
        msgs.append(assistant(f"step {i}", tool_calls=[call(f"c{i}")]))
        msgs.append(tool_result(f"c{i}", lines(max(result_chars // 41, 1), tag=f"out{i}")))
    return msgs


def validity_problems(messages: Sequence[Message], *, pending_ok: bool = False) -> list[str]:
    """Problems of ``messages`` as an OpenAI request and as an Anthropic request."""
    from contextwarden.formats import (
        check_messages,
        to_anthropic,
        to_openai,
        validate_anthropic,
        validate_openai,
    )

    problems = [f"canonical: {p}" for p in check_messages(messages, allow_pending=pending_ok)]
    problems += [f"openai: {p}" for p in validate_openai(to_openai(messages))]
    sys_prompt, anth = to_anthropic(messages)
    problems += [f"anthropic: {p}" for p in validate_anthropic(sys_prompt, anth)]
    return problems


# -- hypothesis: valid agent histories ---------------------------------------------------------
_words = st.sampled_from(["alpha", "beta", "gamma", "delta", "pytest", "error", "ok", "diff"])


@st.composite
def texts(draw: st.DrawFn, *, max_lines: int = 60) -> str:
    kind = draw(st.sampled_from(["short", "lines", "lines", "long_line", "huge"]))
    if kind == "short":
        return " ".join(draw(st.lists(_words, min_size=1, max_size=12)))
    if kind == "lines":
        n = draw(st.integers(1, max_lines))
        return lines(n, width=draw(st.integers(5, 90)), tag=draw(_words))
    if kind == "long_line":
        return draw(_words) * draw(st.integers(50, 400))
    return lines(draw(st.integers(150, 400)), width=60, tag="big")  # over the test max_chars


@st.composite
def histories(
    draw: st.DrawFn,
    *,
    max_units: int = 25,
    pins: bool = True,
    thinking: bool = True,
    extra_users: bool = True,
) -> list[Message]:
    """system?, the task, then units: an assistant (thinking?, text?, 0..10 parallel calls) with
    its results (one tool message each, or all in one), and now and then a user message.
    Tool call ids are unique; thinking blocks are signed (or redacted) as Anthropic's are."""
    ids = itertools.count()
    msgs: list[Message] = []
    if draw(st.booleans()):
        msgs.append(system("You are an agent. " + draw(texts(max_lines=5))))
    msgs.append(user("TASK: " + draw(texts(max_lines=8))))
    for _ in range(draw(st.integers(0, max_units))):
        kind = draw(st.sampled_from(["tools", "tools", "tools", "text", "user"]))
        if kind == "user" and extra_users:
            pinned = pins and draw(st.integers(0, 5)) == 0
            body = draw(texts(max_lines=6))
            if pins and draw(st.integers(0, 6)) == 0:
                body = f"note <Pin>keep {next(ids)}</Pin> " + body
            msgs.append(user(body, pinned=pinned))
            continue
        blocks: list[Any] = []
        if thinking and draw(st.integers(0, 2)) == 0:
            if draw(st.integers(0, 4)) == 0:
                blocks.append(ThinkingBlock("", redacted=True, data=f"opaque{next(ids)}"))
            else:
                blocks.append(ThinkingBlock(draw(texts(max_lines=10)), signature=f"sig{next(ids)}"))
        n_calls = 0 if kind == "text" else draw(st.integers(1, 10) | st.just(1))
        if n_calls == 0 or draw(st.booleans()):
            blocks.append(TextBlock(draw(texts(max_lines=4))))
        calls = [
            ToolCallBlock(
                f"call_{next(ids)}", draw(st.sampled_from(["bash", "read", "edit"])), "{}"
            )
            for _ in range(n_calls)
        ]
        blocks.extend(calls)
        msgs.append(
            Message("assistant", tuple(blocks), pinned=pins and draw(st.integers(0, 12)) == 0)
        )
        if calls:
            results = [
                ToolResultBlock(c.id, draw(texts()), is_error=draw(st.integers(0, 9)) == 0)
                for c in calls
            ]
            if draw(st.booleans()):
                msgs.extend(Message("tool", (r,)) for r in results)
            else:
                msgs.append(Message("tool", tuple(results)))
    return msgs


SMALL = config(
    truncate={"max_chars": 6000, "head_chars": 1000, "tail_chars": 1000},
    mask={"keep_recent": 4, "min_chars": 300},
)
