"""Reading the successive requests of a conversation without reading its known prefix again.

How it works: docs/formats.md (`contextwarden.formats._prefix`).
"""

from __future__ import annotations

import hashlib
import marshal
import operator
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar, cast

from .._messages import Message, held_bytes
from .anthropic import (
    AnthropicWrite,
    SystemPrompt,
    from_anthropic,
    read_anthropic,
    read_system,
    write_anthropic,
)
from .anthropic import message_out as anthropic_message_out
from .openai import from_openai, read_openai, write_openai
from .openai import message_out as openai_message_out

__all__ = ["ImagedList", "PrefixCodec", "image_digest"]

_VERSION = 2  # no back-references (they depend on reference counts); floats in binary
_SYSTEM = b"\x00system\x00"  # marks the image of an Anthropic system prompt (no marshal image
# starts with a NUL byte)
#: How many leading messages may name a conversation: its system messages and first user message.
_ANCHOR_SCAN = 8
#: Branches kept per conversation name (agents sharing a system prompt and a task).
_BRANCHES = 4
#: What an entry keeps per message besides the message: its digest and three list slots.
_DIGEST_BYTES = 16 + 33 + 3 * 8


def image_digest(value: Any, head: bytes = b"") -> bytes:
    """The digest of ``value``'s image (:func:`marshal.dumps` version 2, after ``head``).
    Raises ValueError (TypeError) for a value marshal cannot image."""
    return hashlib.blake2b(head + marshal.dumps(value, _VERSION), digest_size=16).digest()


class ImagedList(list[Any]):
    """Provider messages with the digest of the image of each (``images``, as
    :func:`image_digest` makes them), as a reader that knows them gives them
    (:class:`~._body.BodyReader`, for the proxy): they are not imaged again. Its caller only
    reads what it is given back (it serialises the request): the warden answers it with written
    messages shared with other calls (``shared=True``), which nobody may change."""

    images: list[bytes]
    #: ``has(pattern, width)``: whether the request body's bytes hold a match of ``pattern`` (the
    #: reader's :meth:`~._body.BodyRead.has`, which looks only in bytes the conversation's last
    #: body did not have); None when the list holds messages that were not in the body
    has: Callable[[re.Pattern[bytes], int], bool] | None = None


def _images_of(messages: Sequence[Any]) -> list[bytes]:
    if type(messages) is ImagedList and len(messages.images) == len(messages):
        return messages.images
    return _images(messages)


class _Entry:
    """One request read: the digests of its items' images, the canonical messages made from
    them and the reader's state after each (OpenAI: the unanswered legacy function_call);
    ``size``: what it keeps alive (the messages and the digests)."""

    __slots__ = ("images", "messages", "size", "states")

    def __init__(
        self,
        images: list[bytes],
        messages: tuple[Message, ...],
        states: tuple[Any, ...],
        base: _Entry | None = None,
    ) -> None:
        self.images = images
        self.messages = messages
        self.states = states
        # an entry that extends ``base`` (all of it, then more) counts only what it adds
        n = len(base.messages) if base is not None else 0
        known = base.size if base is not None else 0
        self.size: int = (
            known + sum(map(held_bytes, messages[n:])) + _DIGEST_BYTES * (len(images) - n)
        )


def _images(values: Sequence[Any], head: bytes = b"") -> list[bytes]:
    """The digest of each value's image, up to the first one marshal cannot image exactly."""
    try:
        return [image_digest(v, head) for v in values]
    except (ValueError, TypeError):
        out: list[bytes] = []
        for v in values:
            if type(v) is not dict:  # a cheap first check: marshal images subclasses inexactly
                break
            try:
                out.append(image_digest(v, head))
            except (ValueError, TypeError):
                break
        return out


def _same(a: Sequence[Any], b: Sequence[Any]) -> int:
    """The length of the longest common prefix of two lists of the same objects."""
    if not a or not b or a[0] is not b[0]:
        return 0
    differ = list(map(operator.is_not, a, b))
    return differ.index(True) if True in differ else len(differ)


def _common(a: Sequence[bytes], b: Sequence[bytes]) -> int:
    """The length of the longest common prefix of two image lists."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:  # the usual case (an agent appended), compared in C
        return n
    return next(i for i in range(n) if a[i] != b[i])


class PrefixCodec:
    """Reads provider messages into canonical ones, reusing those of the prefix the last request
    of the same conversation shared, and writes canonical messages back, reusing what each
    Message object was written as before (see docs/formats.md)."""

    def __init__(
        self,
        max_conversations: int = 128,
        max_bytes: int = 128 << 20,
        max_written_bytes: int = 64 << 20,
    ) -> None:
        self.max_conversations = max_conversations
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._table: OrderedDict[tuple[Any, ...], list[_Entry]] = OrderedDict()
        self._bytes = 0
        self._openai_out = _Written(max_written_bytes // 2)
        self._anthropic_out = _Written(max_written_bytes // 2)
        #: the last Anthropic writes for callers that only read them, the newest first
        self._writes: list[AnthropicWrite] = []
        #: messages reused and read since construction (for tests and benchmarks)
        self.reused = 0
        self.read = 0

    @property
    def rewritten(self) -> int:
        """Messages written from what they were written as before (for tests and benchmarks)."""
        return self._openai_out.hits + self._anthropic_out.hits

    # -- the formats -----------------------------------------------------------------------------
    def from_openai(self, messages: Sequence[Mapping[str, Any]]) -> list[Message]:
        """:func:`~contextwarden.formats.from_openai`, reusing a known prefix."""
        if not isinstance(messages, list | tuple):
            return from_openai(messages)  # raises the usual error
        images = _images_of(messages)
        anchor = ("openai", *images[: _anchor(messages, 0)])
        return self._read(anchor, images, partial(read_openai, messages))

    def from_anthropic(
        self, messages: Sequence[Mapping[str, Any]], system: Any = None
    ) -> list[Message]:
        """:func:`~contextwarden.formats.from_anthropic`, reusing a known prefix (the system
        prompt, when given, is its first item)."""
        if not isinstance(messages, list | tuple):
            return from_anthropic(messages, system=system)  # raises the usual error
        lead = 0
        images: list[bytes] = []
        if system is not None:
            images = _images((system,), _SYSTEM) if type(system) in (str, list) else []
            if not images:
                return from_anthropic(messages, system=system)
            lead = 1
        images += _images_of(messages)
        anchor = ("anthropic", *images[: lead + 1])

        def rest(start: int, state: Any, out: list[Message], states: list[Any]) -> None:
            if start < lead:
                out.append(read_system(system))
                states.append(None)
            read_anthropic(messages, max(start - lead, 0), out)
            states.extend([None] * (len(out) - len(states)))

        return self._read(anchor, images, rest)

    def to_openai(
        self, messages: Sequence[Message], *, shared: bool = False
    ) -> list[dict[str, Any]]:
        """:func:`~contextwarden.formats.to_openai`, each message written once: new dicts on
        every call (the caller may change them), or with ``shared=True`` the same dicts each
        time (a caller that only reads them: serialises, compares)."""
        produce = self._openai_out.producer(openai_message_out, shared)
        return write_openai(messages, [produce(i, m) for i, m in enumerate(messages)])

    def to_anthropic(
        self, messages: Sequence[Message], *, shared: bool = False
    ) -> tuple[SystemPrompt, list[dict[str, Any]]]:
        """:func:`~contextwarden.formats.to_anthropic`, each message written once (see
        :meth:`to_openai` for ``shared``)."""
        produce = self._anthropic_out.producer(anthropic_message_out, shared)
        if not shared:  # the caller may change what it gets: nothing of it is kept
            return write_anthropic(messages, produce).result()
        with self._lock:
            writes = tuple(self._writes)
        last, same = None, 0
        for w in writes:  # the write that shares the longest prefix of messages goes on
            k = _same(w.messages, messages)
            if k > same:
                last, same = w, k
        new = write_anthropic(messages, produce, last, same)
        with self._lock:
            self._writes = [new, *(w for w in self._writes if w is not last)][:_BRANCHES]
        return new.result(continued=True)

    # -- the table -------------------------------------------------------------------------------
    def _read(
        self,
        anchor: tuple[Any, ...],
        images: list[bytes],
        rest: Callable[[int, Any, list[Message], list[Any]], None],
    ) -> list[Message]:
        with self._lock:
            entries = self._table.get(anchor)
            branches = tuple(entries) if entries else ()
        best: _Entry | None = None
        n = 0
        for entry in branches:
            k = _common(entry.images, images)
            if k > n:
                best, n = entry, k
        out: list[Message] = list(best.messages[:n]) if best is not None else []
        states: list[Any] = list(best.states[:n]) if best is not None else []
        rest(n, states[-1] if states else None, out, states)  # may raise FormatError
        self.reused += n
        self.read += len(out) - n
        if images and len(images) <= len(out):
            k = len(images)
            extends = best if best is not None and n == len(best.images) <= k else None
            entry = _Entry(images[:k], tuple(out[:k]), tuple(states[:k]), extends)
            self._store(anchor, entry, best, n)
        return out

    @property
    def kept_bytes(self) -> int:
        """About how many bytes the codec keeps alive: the entries (their messages and digests)
        and what it wrote (see :class:`_Written`)."""
        return self._bytes + self._openai_out.kept_bytes + self._anthropic_out.kept_bytes

    def _store(self, anchor: tuple[Any, ...], entry: _Entry, base: _Entry | None, n: int) -> None:
        if entry.size > self.max_bytes:
            return
        with self._lock:
            branches = self._table.pop(anchor, [])
            if base is not None and n == len(base.images) and base in branches:
                branches.remove(base)  # the new request extends it: it stands for both
                self._bytes -= base.size
            branches.insert(0, entry)
            self._bytes += entry.size
            for old in branches[_BRANCHES:]:
                self._bytes -= old.size
            del branches[_BRANCHES:]
            self._table[anchor] = branches
            while self._table and (
                len(self._table) > self.max_conversations or self._bytes > self.max_bytes
            ):
                _, dropped = self._table.popitem(last=False)
                self._bytes -= sum(e.size for e in dropped)

    def clear(self) -> None:
        """Forget every conversation and every message written."""
        with self._lock:
            self._table.clear()
            self._bytes = 0
        self._openai_out.clear()
        self._anthropic_out.clear()
        self._writes = []


_T = TypeVar("_T")


class _Generation:
    """One generation of :class:`_Written` in flat tables by message id (no object per message
    for the collector to walk): the message (its id is not reused while it is kept), its image,
    the shared dicts, and the bytes all that keeps alive."""

    __slots__ = ("bytes", "images", "messages", "shared")

    def __init__(self) -> None:
        self.messages: dict[int, Message] = {}
        self.images: dict[int, bytes] = {}
        self.shared: dict[int, Any] = {}
        self.bytes = 0


class _Written:
    """What Message objects were written as, by identity: the marshal image of the dicts, read
    back into new dicts on every use (in C), and for callers that only read them
    (``shared=True``) the dicts themselves, the same for every such call (only what its caller
    uses is kept: an entry a shared caller made holds no image, and copies its dicts for a
    caller that takes copies). Two generations: when the current one keeps ``limit`` bytes alive
    (the messages, :func:`~contextwarden._messages.held_bytes` each, the images and the dicts)
    it becomes the previous one, and what is used from the previous one moves back."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._current = _Generation()
        self._previous = _Generation()
        self._lock = threading.Lock()
        self.hits = 0

    @property
    def kept_bytes(self) -> int:
        """About how many bytes both generations keep alive."""
        return self._current.bytes + self._previous.bytes

    def producer(
        self, produce: Callable[[int, Message], _T], shared: bool = False
    ) -> Callable[[int, Message], _T]:
        def remembered(i: int, msg: Message) -> _T:
            key = id(msg)
            gen = self._current
            if gen.messages.get(key) is not msg:
                gen = self._previous
                if gen.messages.get(key) is not msg:
                    written = produce(i, msg)  # raises FormatError as the plain writer does
                    try:
                        image = marshal.dumps(cast(Any, written), _VERSION)
                    except (ValueError, TypeError):  # an object marshal cannot image
                        return written
                    if shared:
                        self._put(key, msg, None, written)
                    else:
                        self._put(key, msg, image, None)
                    return written
                self._put(key, msg, gen.images.get(key), gen.shared.get(key))
                if self._current.messages.get(key) is msg:
                    gen = self._current
            self.hits += 1
            dicts = gen.shared.get(key)
            if not shared:
                # an entry a shared caller made keeps no image: a copy of its dicts then
                kept = gen.images.get(key)
                written = marshal.loads(
                    kept if kept is not None else marshal.dumps(dicts, _VERSION)
                )
                return cast(_T, written)
            if dicts is None:
                dicts = gen.shared[key] = marshal.loads(gen.images[key])
            return cast(_T, dicts)

        return remembered

    def _put(self, key: int, msg: Message, image: bytes | None, dicts: Any) -> None:
        size = (
            held_bytes(msg)
            + (len(image) if image is not None else 0)
            + (_WRITTEN_DICT_BYTES if dicts is not None else 0)
        )
        if size > self.limit:
            return
        with self._lock:
            if self._current.bytes + size > self.limit:
                self._previous, self._current = self._current, _Generation()
            gen = self._current
            if image is not None:
                gen.images[key] = image
            if dicts is not None:
                gen.shared[key] = dicts
            gen.messages[key] = msg  # last: a reader that finds it finds the rest
            gen.bytes += size

    def clear(self) -> None:
        with self._lock:
            self._current, self._previous = _Generation(), _Generation()


#: What the dicts written for a message cost beyond the strings they share with it.
_WRITTEN_DICT_BYTES = 400


def _anchor(messages: Sequence[Any], lead: int) -> int:
    """How many leading messages name the conversation: up to its first user message."""
    for i, m in enumerate(messages[:_ANCHOR_SCAN]):
        if type(m) is dict and m.get("role") == "user":
            return lead + i + 1
    return lead + 1
