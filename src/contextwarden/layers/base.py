"""What every layer shares: the context it is given, the result it returns, and the memo that
lets the warden skip work it has already done.

A layer is a pure function ``(messages, ctx) -> LayerResult``. It returns new messages and the
events describing what it changed; it never mutates its input (messages are immutable values and
the input sequence is only read). Messages a layer does not change come back as the *same
objects*, so token counts cached on them stay valid.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import TYPE_CHECKING, Any, Protocol

from .._events import Event, EventKind, emit
from .._exceptions import FormatError
from .._messages import PIN_RE, Message, TextBlock, ToolResultBlock

if TYPE_CHECKING:
    from .._budget import Budget
    from .._memo import Memo
    from .._tokens import TokenCounter
    from .config import MaskConfig, ThinkingConfig, TruncateConfig, WindowConfig

__all__ = [
    "Layer",
    "LayerContext",
    "LayerResult",
    "LayerSettings",
    "cut_middle",
    "truncation_marker",
    "require_messages",
    "edit_result_text",
    "is_protected",
    "pinned_spans",
    "shrink_event",
]


class LayerSettings(Protocol):
    """The sections a layer reads (a :class:`~contextwarden.WardenConfig` is one)."""

    @property
    def mask(self) -> MaskConfig: ...

    @property
    def thinking(self) -> ThinkingConfig: ...

    @property
    def truncate(self) -> TruncateConfig: ...

    @property
    def window(self) -> WindowConfig: ...


@dataclass(frozen=True)
class LayerContext:
    """What a layer may use besides the messages.

    ``counter`` counts tokens (cached per message); ``budget`` is ``None`` when no window is
    known, in which case budget-driven layers (the sliding window) leave the messages alone;
    ``config`` holds every layer's settings; ``tools`` are the request's tool definitions, which
    count against the budget; ``memo`` keeps what the call read from texts (the warden's call
    shares it with the compaction it runs; None: nothing is kept).
    """

    counter: TokenCounter
    config: LayerSettings
    budget: Budget | None = None
    tools: Sequence[Mapping[str, Any]] | None = None
    memo: Memo | None = field(default=None, compare=False, repr=False)

    def overhead_tokens(self) -> int:
        """Tokens a request costs besides its messages: tool definitions and reply priming."""
        return self.counter.count_messages([], tools=self.tools or None)

    def request_tokens(self, messages: Sequence[Message]) -> int:
        """Tokens of a whole request made of ``messages`` (and :attr:`tools`)."""
        return self.counter.count_messages(messages, tools=self.tools or None)


@dataclass(frozen=True)
class LayerResult:
    """A layer's output: the new messages, the events (in message order) and, for the
    sliding window, whether the newest unit had to be cut (it is never dropped)."""

    messages: tuple[Message, ...]
    events: tuple[Event, ...] = ()
    newest_truncated: bool = False


class Layer(Protocol):
    """The shape of a layer function (built-in or your own)."""

    def __call__(self, messages: Sequence[Message], ctx: LayerContext, /) -> LayerResult: ...


#: What applying a layer to one message produced: the new message and the event templates
#: (events without a message index; the index is filled in per position).
Applied = tuple[Message, tuple[Event, ...]]


def place_events(templates: tuple[Event, ...], index: int, out: list[Event]) -> None:
    """Append ``templates`` to ``out`` (and the log) with their message ``index`` set."""
    for t in templates:
        e = Event(
            t.kind,
            t.layer,
            index,
            t.tool_name,
            t.tokens_before,
            t.tokens_after,
            t.chars_before,
            t.chars_after,
            t.detail,
            t.compaction,
            t.data,
        )
        emit(out, e)


def truncation_marker(omitted: int) -> str:
    """The marker put where characters were cut: ``... [N characters truncated] ...``
    framed by blank lines."""
    return f"\n\n... [{omitted} characters truncated] ...\n\n"


def cut_middle(text: str, head: int, tail: int) -> str:
    """``text`` with its middle replaced by :func:`truncation_marker`, keeping ``head`` characters
    from the start and ``tail`` from the end. The caller checks that this is worth it."""
    omitted = len(text) - head - tail
    end = text[len(text) - tail :] if tail else ""
    return text[:head] + truncation_marker(omitted) + end


def edit_result_text(
    result: ToolResultBlock, edit: Callable[[str], str]
) -> tuple[ToolResultBlock, int, int]:
    """Apply ``edit`` to the text of one tool result: its string content, or each
    :class:`TextBlock` part (images and other parts are kept as they are).

    ``edit`` returns its argument itself when it leaves a text alone. Returns the new block (the
    *same object* when no text changed) and the characters before and after, summed over the
    texts that changed only.
    """
    if isinstance(result.content, str):
        new = edit(result.content)
        if new is result.content:
            return result, 0, 0
        return replace(result, content=new), len(result.content), len(new)
    parts = []
    changed = False
    before = after = 0
    for x in result.content:
        if isinstance(x, TextBlock):
            text = edit(x.text)
            if text is not x.text:
                before += len(x.text)
                after += len(text)
                changed = True
                x = replace(x, text=text)
        parts.append(x)
    if not changed:
        return result, 0, 0
    return replace(result, content=tuple(parts)), before, after


def shrink_event(
    kind: EventKind,
    layer: str,
    message: Message,
    out: Message,
    names: Sequence[str],
    chars: tuple[int, int],
    ctx: LayerContext,
) -> Event:
    """The event template (no message index) for a layer that shrank tool results of
    ``message`` into ``out``: the distinct non-empty tool ``names`` (or None), the tokens of both
    messages, ``chars`` (before, after) and, when more than one result changed, their count."""
    return Event(
        kind,
        layer,
        None,
        ", ".join(dict.fromkeys(n for n in names if n)) or None,
        ctx.counter.count_message(message),
        ctx.counter.count_message(out),
        chars[0],
        chars[1],
        f"{len(names)} results" if len(names) > 1 else "",
    )


def is_protected(message: Message) -> bool:
    """True for system messages and pinned messages: by the ``pinned`` flag or by
    ``<Pin>...</Pin>`` anywhere in the text or tool results (:attr:`Message.is_pinned`). Layers
    leave protected messages exactly as they are; the sliding window keeps the whole unit around
    a pinned message (a pinned tool result cannot stay without the call that produced it)."""
    return message.role == "system" or message.is_pinned


def pinned_spans(messages: Sequence[Message]) -> list[tuple[int, str]]:
    """Every ``<Pin>...</Pin>`` body as ``(message index, text)``, in order (for summaries that
    must carry pinned content forward: no lossy step may drop, mask or cut it)."""
    return [
        (i, match.group(1))
        for i, m in enumerate(messages)
        for block in m.content
        if isinstance(block, TextBlock | ToolResultBlock)
        for match in PIN_RE.finditer(block.text)
    ]


def require_messages(messages: Sequence[object], start: int = 0) -> None:
    """Raise :class:`FormatError` naming the index of the first item that is not a Message."""
    items = messages if start == 0 else islice(messages, start, None)
    if all(issubclass(t, Message) for t in set(map(type, items))):
        return  # the usual case, read at C speed: a warm call's history is a thousand messages
    for i in range(start, len(messages)):
        m = messages[i]
        if not isinstance(m, Message):
            raise FormatError(
                f"expected a contextwarden Message, got {type(m).__name__} (convert provider "
                "dicts with contextwarden.formats.from_openai / from_anthropic)",
                index=i,
            )
