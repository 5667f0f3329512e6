"""The canonical message model: immutable values, tagged by role and by block type.

Every provider format converts to and from these values without loss (how each maps, and the
``extra`` and ``hints`` that keep what the model does not name: docs/formats.md). Roles:
``system``, ``user``, ``assistant`` and ``tool``; a ``tool`` message holds the results of one
assistant turn's calls, whatever the provider, with any text that rides along.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar, cast

__all__ = [
    "Block",
    "ImageBlock",
    "Message",
    "Role",
    "TextBlock",
    "ThinkingBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "assistant",
    "blake2b",
    "system",
    "tool_result",
    "user",
]

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[Role, ...] = ("system", "user", "assistant", "tool")

EMPTY: Mapping[str, Any] = MappingProxyType({})
_set = object.__setattr__
_B = TypeVar("_B")

if TYPE_CHECKING:  # the checkers know cached_property's semantics
    import hashlib
    from functools import cached_property as _memo
else:

    class _memo:
        """``functools.cached_property`` without its lock (Python 3.11 takes one on every
        first read, which costs more than the values computed here): the value is computed on
        first read and stored as an instance attribute, which later reads find first (set with
        ``object.__setattr__``, not through ``__dict__``: see :class:`Message`). Two
        threads reading it at once may both compute it: the values are pure functions of an
        immutable value, equal."""

        def __init__(self, fn):
            self.fn = fn
            self.name = fn.__name__
            self.__doc__ = fn.__doc__

        def __set_name__(self, owner, name):
            self.name = name

        def __get__(self, obj, owner=None):
            if obj is None:
                return self
            value = self.fn(obj)
            _set(obj, self.name, value)
            return value


def _empty() -> Mapping[str, Any]:
    return EMPTY


#: ``<Pin>...</Pin>`` marks content that must never be dropped or masked.
PIN_RE = re.compile(r"<Pin>(.*?)</Pin>", re.DOTALL | re.IGNORECASE)


def freeze(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A read-only view of a shallow copy of ``mapping`` (the shared empty mapping for none)."""
    if not mapping:
        return EMPTY
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True, init=False)
class TextBlock:
    """Plain text."""

    text: str
    extra: Mapping[str, Any] = field(default_factory=_empty)
    type: Literal["text"] = field(default="text", init=False)

    def __init__(self, text: str, extra: Mapping[str, Any] = EMPTY) -> None:
        # what dataclass's __init__ does, without a frozen __setattr__ call per field (the
        # hottest constructor of a long history); see Message for why not through __dict__
        _set(self, "text", text)
        _set(self, "extra", extra)
        _set(self, "type", "text")


@dataclass(frozen=True)
class ThinkingBlock:
    """Model reasoning. ``signature`` must go back to Anthropic unchanged; a redacted block
    carries its opaque payload in ``data`` and no readable text."""

    thinking: str
    signature: str | None = None
    redacted: bool = False
    data: str | None = None
    extra: Mapping[str, Any] = field(default_factory=_empty)
    type: Literal["thinking"] = field(default="thinking", init=False)


@dataclass(frozen=True)
class ToolCallBlock:
    """A tool call. ``arguments`` is the JSON text exactly as the model wrote it (it may be
    invalid JSON: models do that, and the text is kept as is)."""

    id: str
    name: str
    arguments: str = "{}"
    extra: Mapping[str, Any] = field(default_factory=_empty)
    type: Literal["tool_call"] = field(default="tool_call", init=False)

    @_memo
    def input(self) -> Any:
        """The parsed arguments, or ``{"_raw": text}`` when they are not valid JSON."""
        try:
            return json.loads(self.arguments) if self.arguments.strip() else {}
        except ValueError:
            return {"_raw": self.arguments}


@dataclass(frozen=True)
class ImageBlock:
    """An image, opaque to us: ``source`` is the provider's own description of it."""

    source: Mapping[str, Any]
    token_cost: int = (
        765  # OpenAI's cost of one 1024x1024 high-detail image; Claude's is ~1,600 max
    )
    extra: Mapping[str, Any] = field(default_factory=_empty)
    type: Literal["image"] = field(default="image", init=False)


@dataclass(frozen=True)
class ToolResultBlock:
    """The result of the tool call ``tool_call_id``: text, or a tuple of text/image blocks."""

    tool_call_id: str
    content: str | tuple[TextBlock | ImageBlock, ...] = ""
    is_error: bool = False
    extra: Mapping[str, Any] = field(default_factory=_empty)
    type: Literal["tool_result"] = field(default="tool_result", init=False)

    @property
    def text(self) -> str:
        """The textual part of the result (images are left out)."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))


Block: TypeAlias = TextBlock | ThinkingBlock | ToolCallBlock | ToolResultBlock | ImageBlock


@dataclass(frozen=True, init=False)
class Message:
    """One message of a conversation. Immutable; build changed copies with :meth:`replace`.

    ``id``, ``timestamp`` and ``usage`` are metadata carried through untouched; ``pinned``
    (or ``<Pin>...</Pin>`` in the text) protects the message from every lossy step.
    """

    role: Role
    content: tuple[Block, ...] = ()
    name: str | None = None
    pinned: bool = False
    id: str | None = None
    timestamp: Any = None
    usage: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=_empty)
    hints: Mapping[str, Any] = field(default_factory=_empty, compare=False, repr=False)

    def __init__(
        self,
        role: Role,
        content: tuple[Block, ...] | Iterable[Block] = (),
        name: str | None = None,
        pinned: bool = False,
        id: str | None = None,  # noqa: A002 - the field's name
        timestamp: Any = None,
        usage: Mapping[str, Any] | None = None,
        extra: Mapping[str, Any] = EMPTY,
        hints: Mapping[str, Any] = EMPTY,
    ) -> None:
        # what dataclass's __init__ and __post_init__ do, without a frozen __setattr__ call per
        # field (the hottest constructor of a long history). Not through self.__dict__, nor the
        # values cached on it: reading __dict__ gives a message a dict object of its own (two
        # objects per message for the garbage collector to walk instead of one)
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        _set(self, "role", role)
        _set(self, "content", content if isinstance(content, tuple) else tuple(content))
        _set(self, "name", name)
        _set(self, "pinned", pinned)
        _set(self, "id", id)
        _set(self, "timestamp", timestamp)
        _set(self, "usage", usage)
        _set(self, "extra", extra)
        _set(self, "hints", hints)

    def __post_init__(self) -> None:  # a subclass's generated __init__ still checks the same
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {self.role!r}")
        if not isinstance(self.content, tuple):
            object.__setattr__(self, "content", tuple(self.content))

    # -- derived views -------------------------------------------------------------------
    @_memo
    def text(self) -> str:
        """All text blocks joined by newlines (thinking, calls and results left out)."""
        content = self.content
        if len(content) == 1 and type(content[0]) is TextBlock:
            return content[0].text
        return "\n".join([b.text for b in content if isinstance(b, TextBlock)])

    @_memo
    def tool_calls(self) -> tuple[ToolCallBlock, ...]:
        return _blocks(self.content, ToolCallBlock)

    @_memo
    def tool_results(self) -> tuple[ToolResultBlock, ...]:
        return _blocks(self.content, ToolResultBlock)

    @_memo
    def thinking(self) -> tuple[ThinkingBlock, ...]:
        return _blocks(self.content, ThinkingBlock)

    @_memo
    def is_pinned(self) -> bool:
        """Pinned by flag or by a ``<Pin>`` tag anywhere in its text or tool results."""
        return self.pinned or any("<" in t and PIN_RE.search(t) for t in _texts(self.content))

    @_memo
    def fingerprint(self) -> str:
        """A stable content hash (role, name, pin and blocks; not metadata or hints).

        Two messages with the same fingerprint count the same tokens and transform the same
        way, so caches key on it. Computed once per value.
        """
        head = f"{self.role}\x00{self.name}\x00{self.pinned}\x00".encode()
        content = self.content
        if len(content) == 1 and type(content[0]) is TextBlock:  # the usual message, at once
            text = content[0].text.encode("utf-8", "surrogatepass")
            return blake2b(16, head + b"T\x00" + text + b"\x00").hexdigest()
        h = blake2b(16, head)
        for block in content:
            _hash_block(h, block)
        return h.hexdigest()

    @_memo
    def char_count(self) -> int:
        """Characters of text, thinking, call arguments and results (a cheap size measure)."""
        content = self.content
        if len(content) == 1 and type(content[0]) is TextBlock:
            return len(content[0].text)
        return sum(map(len, _texts(content, with_thinking=True, with_calls=True)))

    def replace(self, **changes: Any) -> Message:
        """A copy with ``changes`` applied (``dataclasses.replace``)."""
        return replace(self, **changes)


def _blocks(content: tuple[Block, ...], kind: type[_B]) -> tuple[_B, ...]:
    """The blocks of ``kind`` in ``content``; ``content`` itself when it holds only those (one
    tuple fewer per message for the garbage collector to walk through a long history)."""
    found = tuple([b for b in content if isinstance(b, kind)])
    return found if len(found) < len(content) else cast("tuple[_B, ...]", content)


def _texts(
    blocks: Iterable[Block], *, with_thinking: bool = False, with_calls: bool = False
) -> Iterator[str]:
    for b in blocks:
        if isinstance(b, TextBlock):
            yield b.text
        elif isinstance(b, ToolResultBlock):
            if isinstance(b.content, str):
                yield b.content
            else:
                yield from (x.text for x in b.content if isinstance(x, TextBlock))
        elif with_thinking and isinstance(b, ThinkingBlock):
            yield b.thinking
        elif with_calls and isinstance(b, ToolCallBlock):
            yield b.name
            yield b.arguments


def blake2b(digest_size: int, data: bytes = b"") -> hashlib.blake2b:
    """A BLAKE2b hash of ``digest_size`` bytes, started on ``data``: the one hash of message
    fingerprints, conversation keys and recall references. hashlib loads on first use, not
    with the warden (its OpenSSL bindings cost 5 ms)."""
    import hashlib

    return hashlib.blake2b(data, digest_size=digest_size)


def _hash_block(h: Any, b: Block) -> None:
    if isinstance(b, TextBlock):
        h.update(b"T\x00" + b.text.encode("utf-8", "surrogatepass") + b"\x00")
    elif isinstance(b, ThinkingBlock):
        h.update(f"K\x00{b.redacted}\x00{len(b.data or '')}\x00".encode())
        h.update(b.thinking.encode("utf-8", "surrogatepass") + b"\x00")
    elif isinstance(b, ToolCallBlock):
        h.update(f"C\x00{b.id}\x00{b.name}\x00".encode("utf-8", "surrogatepass"))
        h.update(b.arguments.encode("utf-8", "surrogatepass") + b"\x00")
    elif isinstance(b, ToolResultBlock):
        h.update(f"R\x00{b.tool_call_id}\x00{b.is_error}\x00".encode("utf-8", "surrogatepass"))
        if isinstance(b.content, str):
            h.update(b.content.encode("utf-8", "surrogatepass") + b"\x00")
        else:
            for x in b.content:
                _hash_block(h, x)
        h.update(b"\x01")
    else:  # ImageBlock
        h.update(f"I\x00{b.token_cost}\x00".encode())
        h.update(json.dumps(dict(b.source), sort_keys=True, default=str).encode())


def reserve_attribute(name: str, on: tuple[type, ...] | None = None) -> None:
    """Make room for values cached under ``name`` on instances of ``on`` (default: messages
    and text blocks). CPython keeps an instance's attributes in the instance, with no dict of
    its own, for the names its class's shared table holds; the table stops taking names once
    many instances exist, or once it holds about thirty, so a name first cached later gives
    every instance a dict (one more object for the collector to walk), and a name reserved on
    a class that never caches it takes a place another name needs."""
    for kind in on or (Message, TextBlock):
        _set(object.__new__(kind), name, None)


# the values messages and calls cache on themselves, entered while the tables have room
for _kind in (Message, ToolCallBlock):
    for _name, _value in vars(_kind).items():
        if isinstance(_value, _memo):
            reserve_attribute(_name, (_kind,) if _kind is ToolCallBlock else None)
del _kind, _name, _value

#: What a message costs in memory beyond its characters: the object, its blocks, the mappings
#: and tuples they hold, and the values cached on it (fingerprint, text, counts), as measured on
#: agent histories (about 300 bytes of objects and 700 of cached values).
MESSAGE_BYTES = 1024


def held_bytes(message: Message) -> int:
    """About how many bytes ``message`` keeps alive: :data:`MESSAGE_BYTES` plus its characters
    (text, thinking, call arguments, results). What the bounded tables that hold messages
    count them as."""
    return MESSAGE_BYTES + message.char_count


# -- builders ----------------------------------------------------------------------------------
def system(text: str, **meta: Any) -> Message:
    """A system message."""
    return Message("system", (TextBlock(text),), **meta)


def user(text: str, **meta: Any) -> Message:
    """A user message with one text block."""
    return Message("user", (TextBlock(text),), **meta)


def assistant(
    text: str = "",
    *,
    tool_calls: Sequence[ToolCallBlock] = (),
    thinking: str | None = None,
    **meta: Any,
) -> Message:
    """An assistant message: optional thinking, then text, then tool calls."""
    blocks: list[Block] = []
    if thinking is not None:
        blocks.append(ThinkingBlock(thinking))
    if text:
        blocks.append(TextBlock(text))
    blocks.extend(tool_calls)
    return Message("assistant", tuple(blocks), **meta)


def tool_result(tool_call_id: str, text: str, *, is_error: bool = False, **meta: Any) -> Message:
    """A tool message holding one result."""
    return Message("tool", (ToolResultBlock(tool_call_id, text, is_error=is_error),), **meta)
