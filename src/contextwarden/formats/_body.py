"""Reading the JSON body of a chat request without parsing again the messages the previous request
of its conversation already had.

How it works: docs/formats.md (`contextwarden.formats._body`).
"""

from __future__ import annotations

import json
import marshal
import re
import threading
from collections import OrderedDict
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

from ._prefix import ImagedList, image_digest

__all__ = ["BodyRead", "BodyReader", "Restored", "Search"]

#: What a message dict costs beyond its bytes in the body (the dict and its keys' slots, the
#: digests kept of it).
DICT_BYTES = 400

#: How many of a body's newest messages may follow the newest message of the history it trims:
#: the client's own messages since its last request, which the proxy did not take.
TRIM_SCAN = 64
#: How many of the remembered history's newest messages, at least, a trimmed history must keep
#: in a row for it to be taken as that history going on.
TRIM_RUN = 2

_WS = re.compile(r"[ \t\n\r]*")
_VERSION = 2
_INFINITY = float("inf")


class BodyRead:
    """A body read: ``body`` as :func:`json.loads` gives it (``body["messages"]`` an
    :class:`ImagedList`), ``finite`` when it holds no NaN or infinity, and how many messages were
    reused from the previous body of the conversation. ``has(pattern, width)`` looks for a
    pattern in its bytes, only in those the previous body did not have when that one was looked
    in (:class:`Search`; the list of messages carries it too)."""

    __slots__ = ("_base", "_entry", "body", "finite", "has", "memo", "reused")

    def __init__(
        self,
        body: dict[str, Any],
        finite: bool,
        reused: int,
        raw: bytes = b"",
        shared: int = 0,
        prior: dict[re.Pattern[bytes], int] | None = None,
    ) -> None:
        self.body = body
        self.finite = finite
        self.reused = reused
        self.has = Search(raw, shared, prior or {})
        self._entry: _Entry | None = None  # what the reader remembers of this body
        self._base: _Entry | None = None  # the remembered body it went on from, if any
        #: what the checks of the conversation's bodies remember between requests (one dict
        #: handed on from body to body; see :func:`~.validate.validate_anthropic`)
        self.memo: dict[str, Any] = {}


class Search:
    """Whether a pattern (whose matches are at most ``width`` bytes long) matches a body's
    bytes, remembered per pattern (``found``: where it first matched, -1 nowhere). Where the
    previous body of the conversation had its first match (or none) is known (``prior``), only
    the bytes after the ``shared`` leading bytes the two have alike are searched. It holds the
    bytes and nothing that holds it: the request's list of messages may carry it without a
    reference cycle keeping a body of megabytes alive until the collector comes round."""

    __slots__ = ("found", "prior", "raw", "shared")

    def __init__(self, raw: bytes, shared: int, prior: dict[re.Pattern[bytes], int]) -> None:
        self.raw, self.shared, self.prior = raw, shared, prior
        self.found: dict[re.Pattern[bytes], int] = {}

    def __call__(self, pattern: re.Pattern[bytes], width: int) -> bool:
        at = self.found.get(pattern)
        if at is None:
            before = self.prior.get(pattern)
            shared = self.shared
            if before is not None and 0 <= before and before + width <= shared:
                at = before
            else:
                start = 0 if before is None else max(min(before, shared) - width + 1, 0)
                if before is not None and before < 0:
                    start = max(shared - width + 1, 0)
                match = pattern.search(self.raw, start)
                at = match.start() if match is not None else -1
            self.found[pattern] = at
        return at >= 0


class _Entry:
    __slots__ = (
        "ends",
        "finite",
        "found",
        "head",
        "head_end",
        "images",
        "memo",
        "messages",
        "prefix",
        "restored",
        "size",
    )

    def __init__(
        self,
        raw: bytes,
        head_end: int,
        ends: list[int],
        messages: ImagedList,
        head: bytes,
        finite: list[bool],
    ) -> None:
        # its bytes up to the end of its last message: a view of the body, not a copy (what
        # follows the messages is a few bytes, and a copy of a body of megabytes takes one)
        self.prefix = memoryview(raw)[: ends[-1] if ends else head_end]
        self.head_end = head_end  # where its first message starts
        self.ends = ends  # where each message ends
        self.messages = tuple(messages)  # the message dicts (a copy of the caller's list)
        self.images = tuple(messages.images)  # and the digests of their images
        self.head = head  # marshal image of the members before ``messages``, finiteness first
        self.finite = finite  # per message: it and every message before it hold no NaN/infinity
        self.found: dict[re.Pattern[bytes], int] = {}  # BodyRead.has's, of this body
        self.restored: Restored | None = None  # the history it trims, when it trims one
        self.memo: dict[str, Any] = {}  # BodyRead.memo, handed on
        end = ends[-1] if ends else head_end
        self.size = end - head_end + len(ends) * DICT_BYTES + len(head) + len(self.prefix)

    def history(self) -> tuple[tuple[Any, ...], tuple[bytes, ...]]:
        """Its messages and their images, with the messages its client dropped put back."""
        r = self.restored
        if r is None:
            return self.messages, self.images
        return (*r.messages, *self.messages[r.kept :]), (*r.images, *self.images[r.kept :])

    def common(self, raw: bytes, beat: int = 0) -> int:
        """How many leading messages the new body ``raw`` has byte for byte as this body had
        them (0 when what comes before the first message differs), when that is more than
        ``beat``; else any number up to ``beat`` (the caller has a body that shares ``beat``
        already). One comparison of bytes when the new body goes on from this one (an agent's
        next call), message by message when it does not."""
        start, ends, prefix = self.head_end, self.ends, self.prefix
        if beat >= len(ends):
            return 0
        if raw.startswith(prefix):
            return len(ends)
        if raw[:start] != prefix[:start]:
            return 0
        if beat and raw[ends[beat - 1] : ends[beat]] != prefix[ends[beat - 1] : ends[beat]]:
            # sharing more than ``beat`` messages needs message ``beat`` at the same place
            # (several agents on one job: their bodies share long prefixes, and a full walk
            # of each would cost more than reading the body)
            return 0
        for k, end in enumerate(ends):
            if raw[start:end] != prefix[start:end]:
                return k
            start = end
        return len(ends)


class _Walk:
    """One walk over (part of) a body, with the scanner json.loads uses. The scanner's hooks
    hold a flag of their own, not the walk: no reference cycle keeps the body's text alive
    until the garbage collector comes round (a proxy process collects seldom)."""

    def __init__(self, text: str) -> None:
        self.text = text
        seen = self._seen = [True]  # [no NaN or infinity met so far]

        def constant(name: str) -> float:
            seen[0] = False
            return {"NaN": float("nan"), "Infinity": _INFINITY, "-Infinity": -_INFINITY}[name]

        def parse_float(literal: str) -> float:
            value = float(literal)
            if value == _INFINITY or value == -_INFINITY:
                seen[0] = False
            return value

        decoder = json.JSONDecoder(parse_constant=constant, parse_float=parse_float)
        self.scan = decoder.scan_once  # type: ignore[attr-defined]

    @property
    def finite(self) -> bool:
        """No NaN or infinity met so far."""
        return self._seen[0]

    def ws(self, i: int) -> int:
        m = _WS.match(self.text, i)
        assert m is not None
        return m.end()

    def expect(self, i: int, char: str) -> int:
        if self.text[i : i + 1] != char:
            raise ValueError(f"expected {char!r} at {i}")
        return i + 1

    def value(self, i: int) -> tuple[Any, int]:
        try:
            return self.scan(self.text, i)  # type: ignore[no-any-return]
        except StopIteration:
            raise ValueError(f"expected a value at {i}") from None

    def key(self, i: int) -> tuple[str, int]:
        i = self.expect(i, '"')
        key, i = scanstring(self.text, i)
        i = self.expect(self.ws(i), ":")
        return key, self.ws(i)

    def members(self, i: int, pairs: list[tuple[str, Any]]) -> int:
        """The object members from ``i`` (after a ``{`` or a ``,``-less position before one),
        up to and including the ``}``; returns the position after it."""
        while True:
            i = self.ws(i)
            if self.text[i : i + 1] == "}":
                return i + 1
            key, i = self.key(i)
            value, i = self.value(i)
            pairs.append((key, value))
            i = self.ws(i)
            if self.text[i : i + 1] == ",":
                i = self.ws(i + 1)
                if self.text[i : i + 1] == "}":
                    raise ValueError("trailing comma")
                continue
            return self.expect(i, "}")

    def end(self, i: int) -> None:
        if self.ws(i) != len(self.text):
            raise ValueError("extra data")


#: Messages read: their values, where each ends (a character offset) and whether the walk met
#: no NaN or infinity up to its end.
_Got = tuple[list[Any], list[int], list[bool]]


def _none() -> _Got:
    return [], [], []


def _byte_ends(text: str, ends: list[int], base: int) -> list[int]:
    """Character offsets in ``text`` as byte offsets in the body (``text`` starts at ``base``)."""
    if text.isascii():
        return [base + e for e in ends]
    out, done, at = [], 0, base
    for e in ends:
        at += len(text[done:e].encode("utf-8", "surrogatepass"))
        done = e
        out.append(at)
    return out


class BodyReader:
    """Reads chat request bodies, parsing only what a conversation's previous body did not have
    (see docs/formats.md)."""

    def __init__(self, max_conversations: int = 64, max_bytes: int = 32 << 20) -> None:
        self.max_conversations = max_conversations
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self._bytes = 0
        self._next = 0

    def read(self, raw: bytes, key: str = "messages") -> BodyRead | None:
        """The body ``raw`` as :func:`json.loads` reads it, or None (see docs/formats.md);
        ``key`` names its history list (``messages``, ``input``, ``contents``)."""
        if type(raw) is not bytes or raw[:1] != b"{":
            return None
        with self._lock:
            entries = list(self._entries.items())
        best: tuple[int, _Entry] | None = None
        k = 0
        for slot, entry in reversed(entries):  # the most recent first
            n = entry.common(raw, k)
            if n > k:
                best, k = (slot, entry), n
                if n == len(entry.ends):
                    break
        try:
            read = self._resume(raw, best[1], k, key) if best is not None else self._whole(raw, key)
        except (ValueError, RecursionError):
            return None  # json.loads judges it (and says why)
        if read is None:
            return None
        result, entry = read
        result._entry, result._base = entry, best[1] if best is not None else None
        self._store(entry, best[0] if best is not None and k == len(best[1].ends) else None)
        return result

    def restore(self, read: BodyRead, key: str = "messages") -> int:
        """Put back into ``read.body[key]`` the oldest messages its client dropped from a
        history this reader remembers (see docs/formats.md); how many were put back (0:
        none, the body as it came)."""
        entry, base = read._entry, read._base
        if entry is None or not entry.ends:
            return 0
        restored: Restored | None = None
        if base is not None and base.restored is not None and read.reused >= base.restored.kept:
            restored = base.restored  # a later body of a history restored before
        elif base is None or read.reused < len(base.ends) // 2:  # no body it simply goes on
            with self._lock:
                others = [e for e in reversed(self._entries.values()) if e is not entry]
            restored = _trimmed(entry, others)
        if restored is None:
            return 0
        entry.restored = restored
        with self._lock:
            if any(e is entry for e in self._entries.values()):  # kept: count what it holds
                self._bytes += restored.size
            entry.size += restored.size
        messages = ImagedList([*restored.messages, *entry.messages[restored.kept :]])
        messages.images = [*restored.images, *entry.images[restored.kept :]]
        read.body[key] = messages
        read.finite = read.finite and restored.finite
        return len(restored.messages) - restored.kept

    @property
    def kept_bytes(self) -> int:
        """About how many bytes the remembered bodies keep alive (see docs/formats.md)."""
        return self._bytes

    # -- reading ---------------------------------------------------------------------------------
    def _whole(self, raw: bytes, key: str) -> tuple[BodyRead, _Entry] | None:
        text = raw.decode("utf-8", "surrogatepass")
        walk = _Walk(text)
        i = walk.ws(walk.expect(0, "{"))
        head: list[tuple[str, Any]] = []
        while True:  # the members before ``messages``
            if text[i : i + 1] == "}":
                return None  # no messages: nothing to follow
            name, i = walk.key(i)
            if name == key:
                break
            value, i = walk.value(i)
            head.append((name, value))
            i = walk.ws(walk.expect(walk.ws(i), ","))
        if text[i : i + 1] != "[":
            return None  # not a list: the caller reads it
        i = walk.ws(i + 1)
        head_end = len(text[:i].encode("utf-8", "surrogatepass")) if not text.isascii() else i
        head_finite = walk.finite
        if text[i : i + 1] == "]":
            i, got = i + 1, _none()
        else:
            i, got = self._messages(walk, i)
        return self._finish(raw, walk, i, head, head_finite, head_end, None, 0, got, 0, key)

    def _resume(
        self, raw: bytes, entry: _Entry, k: int, key: str
    ) -> tuple[BodyRead, _Entry] | None:
        start = entry.ends[k - 1]
        walk = _Walk(raw[start:].decode("utf-8", "surrogatepass"))
        i = walk.ws(0)
        if walk.text[i : i + 1] == ",":
            i, got = self._messages(walk, walk.ws(i + 1))
        else:
            i, got = walk.expect(i, "]"), _none()
        head_finite, head = marshal.loads(entry.head)
        return self._finish(
            raw, walk, i, head, head_finite, entry.head_end, entry, k, got, start, key
        )

    @staticmethod
    def _messages(walk: _Walk, i: int) -> tuple[int, _Got]:
        """The messages from ``i`` (at one) to the ``]``: each with where it ends and whether
        the walk met no NaN or infinity up to its end; and the position after the ``]``."""
        got = _none()
        values, ends, finite = got
        while True:
            value, i = walk.value(i)
            values.append(value)
            ends.append(i)
            finite.append(walk.finite)
            i = walk.ws(i)
            if walk.text[i : i + 1] == ",":
                i = walk.ws(i + 1)
                continue
            return walk.expect(i, "]"), got

    def _finish(
        self,
        raw: bytes,
        walk: _Walk,
        i: int,
        head: list[tuple[str, Any]],
        head_finite: bool,
        head_end: int,
        old: _Entry | None,
        k: int,
        got: _Got,
        base: int,
        key: str,
    ) -> tuple[BodyRead, _Entry] | None:
        """The members after the list, then the body read and the entry that remembers it
        (``old``'s first ``k`` messages kept; ``got`` read from ``walk``, whose text starts at
        byte ``base`` of ``raw``)."""
        values, ends, finite = got
        i = walk.ws(i)
        tail: list[tuple[str, Any]] = []
        if walk.text[i : i + 1] == ",":
            i = walk.ws(i + 1)
            if walk.text[i : i + 1] == "}":
                raise ValueError("trailing comma")
            i = walk.members(i, tail)
        else:
            i = walk.expect(i, "}")
        walk.end(i)
        keys = [name for name, _ in head] + [key] + [name for name, _ in tail]
        if len(set(keys)) != len(keys):
            return None  # json.loads keeps a repeated key's last value: the caller reads it
        try:
            images = [image_digest(v) for v in values]
        except ValueError:  # pragma: no cover - what json parses, marshal images
            return None
        kept = old.messages[:k] if old is not None else []
        prior = old.finite[k - 1] if old is not None else head_finite
        messages = ImagedList([*kept, *values])
        messages.images = [*(old.images[:k] if old is not None else ()), *images]
        cumulative = [*(old.finite[:k] if old is not None else ()), *(prior and f for f in finite)]
        all_ends = [*(old.ends[:k] if old is not None else ()), *_byte_ends(walk.text, ends, base)]
        body: dict[str, Any] = dict(head)
        body[key] = messages
        body.update(tail)
        shared = old.ends[k - 1] if old is not None and k else 0
        result = BodyRead(
            body, prior and walk.finite, k, raw, shared, old.found if old is not None else None
        )
        messages.has = result.has
        if not all(type(m) is dict for m in values):
            all_ends = []  # only objects end where their bytes do (a number may go on): not kept
        head_image = marshal.dumps((head_finite, head), _VERSION)
        entry = _Entry(raw, head_end, all_ends, messages, head_image, cumulative)
        entry.found = result.has.found  # filled as the request is looked at, for the next one
        if old is not None:
            entry.memo = old.memo
        result.memo = entry.memo
        return result, entry

    # -- the table -------------------------------------------------------------------------------
    def _store(self, entry: _Entry, replaces: int | None) -> None:
        if not entry.ends or entry.size > self.max_bytes:
            return
        with self._lock:
            if replaces is not None:
                old = self._entries.pop(replaces, None)
                if old is not None:
                    self._bytes -= old.size
            self._next += 1
            self._entries[self._next] = entry
            self._bytes += entry.size
            while self._entries and (
                len(self._entries) > self.max_conversations or self._bytes > self.max_bytes
            ):
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= dropped.size

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


class Restored:
    """What a trimmed history lacks: the remembered history's ``messages`` (and their
    ``images``) up to where the trimmed one goes on with it, which stand for its first
    ``kept`` messages (those it kept of them: a system prompt, the task)."""

    __slots__ = ("finite", "images", "kept", "messages", "size")

    def __init__(
        self, kept: int, messages: tuple[Any, ...], images: tuple[bytes, ...], finite: bool
    ) -> None:
        self.kept = kept
        self.messages = messages
        self.images = images
        self.finite = finite
        self.size = len(messages) * (8 + 16 + 33)  # list slots and digests: the dicts are shared


def _plain(message: Any) -> bytes:
    """The digest of ``message`` as the provider reads it: without ``cache_control`` on the
    message or its content blocks."""
    if type(message) is dict and (
        "cache_control" in message or type(message.get("content")) is list
    ):
        content = message.get("content")
        if type(content) is list and any(type(b) is dict and "cache_control" in b for b in content):
            content = [
                {k: v for k, v in b.items() if k != "cache_control"} if type(b) is dict else b
                for b in content
            ]
            message = {**message, "content": content}
        if "cache_control" in message:
            message = {k: v for k, v in message.items() if k != "cache_control"}
    try:
        return image_digest(message)
    except (ValueError, TypeError):  # pragma: no cover - what json parses, marshal images
        return b""


def _trimmed(new: _Entry, olds: list[_Entry]) -> Restored | None:
    """The history of ``olds`` (the most recent first) that ``new`` trims, if one: ``new``'s
    first ``h`` messages come, in order, from that history's first ``p`` messages, then it has
    the rest of that history (at least :data:`TRIM_RUN` messages), then at most
    :data:`TRIM_SCAN` new ones."""
    msgs = new.messages
    plain: dict[int, bytes] = {}

    def mine(i: int) -> bytes:
        if i not in plain:
            plain[i] = _plain(msgs[i])
        return plain[i]

    newest = {mine(i): i for i in range(max(len(msgs) - TRIM_SCAN, 0), len(msgs))}
    for old in olds:
        history, images = old.history()
        if len(history) <= TRIM_RUN:
            continue
        q = newest.get(_plain(history[-1]))
        if q is None:
            continue
        run = 1
        while run <= q and run < len(history) and mine(q - run) == _plain(history[-1 - run]):
            run += 1
        p, h = len(history) - run, q - run + 1
        if run < TRIM_RUN or p <= h:
            continue  # too short to tell, or nothing dropped
        kept = iter(_plain(m) for m in history[:p])
        if all(any(mine(i) == d for d in kept) for i in range(h)):  # in order, in what it lacks
            finite = old.finite[-1] if old.finite else True
            if old.restored is not None:
                finite = finite and old.restored.finite
            return Restored(h, history[:p], images[:p], finite)
    return None
