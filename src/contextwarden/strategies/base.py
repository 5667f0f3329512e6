"""What a compaction strategy gets (:class:`StrategyContext`) and returns
(:class:`StrategyOutcome`), and the layout helpers that keep every output a valid request.

A strategy is a pure function ``(messages, ctx) -> StrategyOutcome | None``: it says which
messages it elides and what to summarise; the :class:`~contextwarden._compaction.Compactor`
runs the summarizer, checks the summary and assembles the history (:func:`assemble`), so one
strategy serves ``compact`` and ``acompact`` and is tested without a summarizer. Every outcome
(checked by :func:`check_outcome`) cuts only at unit boundaries (a message with the tool results
that follow it: calls and results go together), never elides system messages, the task (and
what precedes it) or pinned units, and passes an elided earlier summary on as
``previous_summary``."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._config import CompactionConfig, TaskType
from .._log import make_ref
from .._memo import Memo
from .._messages import Message, TextBlock
from .._task import task_index, task_text
from ..analysis.mentions import words_of, words_size
from ..layers.mask import UNMASKED
from ..layers.units import index_of
from ..summarizers.base import TARGET_SUMMARY_RATIO, Summarizer, SummaryRequest

if TYPE_CHECKING:
    from .._budget import Budget
    from .._tokens import TokenCounter

__all__ = [
    "HINT_RE",
    "SUMMARY_PREFIX",
    "Layout",
    "Section",
    "Strategy",
    "StrategyContext",
    "StrategyOutcome",
    "assemble",
    "check_outcome",
    "elide_except_recent",
    "is_summary_message",
    "make_ref",
    "summary_header",
    "summarize_units",
    "summary_request",
]

#: Every summary message starts with this, so a later compaction recognises it.
SUMMARY_PREFIX = "[Context summary: "
_SUMMARY_RE = re.compile(r"^\[Context summary: [^\]]*\]\n?")
#: The hint the full summary folds into the system message, recognised on re-compaction.
HINT_RE = re.compile(
    r"\n*\[contextwarden: the earlier history of this session was compacted[^\]]*\]\s*$"
)


@dataclass(frozen=True)
class StrategyContext:
    """What a strategy may read. ``cache`` maps :func:`summary_cache_key` to summaries (shared
    with the compactor); ``task_type`` is the detected type of the history being compacted;
    ``memo`` keeps what is read from the messages (facts, command effects) for the strategies,
    the summarizer and the checks (the compactor's own); ``unsummarized``: what window cuts took
    out since the last summary, which no summary stands for (:func:`summary_request`)."""

    budget: Budget
    counter: TokenCounter
    summarizer: Summarizer
    config: CompactionConfig = field(default_factory=lambda: CompactionConfig.model_validate({}))
    tools: Sequence[Mapping[str, Any]] | None = None
    focus: str | None = None
    cache: MutableMapping[str, str] = field(default_factory=dict)
    task_type: TaskType = "unknown"
    memo: Memo = field(default_factory=Memo, compare=False, repr=False)
    unsummarized: tuple[Message, ...] = ()


#: A titled list of lines the summary message carries verbatim (see ``StrategyOutcome.appendix``).
Section = tuple[str, tuple[str, ...]]


@dataclass(frozen=True)
class StrategyOutcome:
    """A strategy's plan: elide the messages at ``elided`` (sorted indices, whole units) into ONE
    summary message where the first of them was. ``requests`` are summarised in order, each after
    the first updating the previous result; ``summary``, when set, is one the strategy wrote (no
    summarizer runs). ``rebuild`` (the full summary) folds a hint into the first system message;
    ``appendix``: titled sections of lines the summary message carries verbatim (a line the
    summary holds is not repeated); ``reset_turns`` asks the caller to reset its turn counter."""

    strategy: str
    elided: tuple[int, ...]
    requests: tuple[SummaryRequest, ...] = ()
    summary: str | None = None
    rebuild: bool = False
    appendix: tuple[Section, ...] = ()
    reset_turns: bool = False
    detail: str = ""


#: The signature of a strategy (built-in or your own; see :mod:`contextwarden.strategies`).
Strategy = Callable[[Sequence[Message], StrategyContext], "StrategyOutcome | None"]


# -- layout ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Layout:
    """The structure of one history: its units, the task, and what must never be elided."""

    messages: tuple[Message, ...]
    units: tuple[tuple[int, int], ...]  # (start, end) half-open, in order, covering everything
    task: int | None  # index of the user's task (see contextwarden._task)
    protected: frozenset[int]  # unit starts that are never elided

    @classmethod
    def of(cls, messages: Sequence[Message]) -> Layout:
        """The layout of ``messages``, read from their :class:`HistoryIndex` (the one unit
        model every layer, window and strategy shares)."""
        msgs = tuple(messages)
        index = index_of(msgs, keep_results=0, keep_thinking=0)
        units = tuple(index.spans())
        protected = frozenset(
            s for (s, _), keep in zip(units, index.unit_keep, strict=True) if keep
        )
        return cls(msgs, units, index.task, protected)

    def body(
        self, tail_start: int | None = None, *, keep_last: bool = True
    ) -> list[tuple[int, int]]:
        """Elidable units before ``tail_start`` (a unit boundary; default: the end). The last
        unit (the newest message and its partners) is never elidable unless ``keep_last`` is
        false: the model must see what it is answering."""
        stop = len(self.messages) if tail_start is None else tail_start
        if keep_last and self.units:
            stop = min(stop, self.units[-1][0])
        return [(s, e) for s, e in self.units if e <= stop and s not in self.protected]

    def tail_from_end(self, n_assistant: int, n_other: int) -> int:
        """The boundary that keeps the fewest whole final units holding at least ``n_assistant``
        assistant messages and ``n_other`` user/tool messages, or more than ``n_assistant +
        n_other`` messages of any mix (a run of one role, parallel calls), or everything."""
        got_a = got_o = 0
        for start, end in reversed(self.units):
            for m in self.messages[start:end]:
                if m.role == "assistant":
                    got_a += 1
                elif m.role in ("user", "tool"):
                    got_o += 1
            if got_a >= n_assistant and got_o >= n_other:
                return start
            if got_a + got_o > n_assistant + n_other:
                return start
        return 0

    def indices(self, units: Sequence[tuple[int, int]]) -> tuple[int, ...]:
        return tuple(i for s, e in units for i in range(s, e))


def is_summary_message(message: Message) -> bool:
    """A summary message written by an earlier compaction."""
    return message.role == "user" and message.text.startswith(SUMMARY_PREFIX)


def summary_header(count: int, ref: str) -> str:
    noun = "message was" if count == 1 else "messages were"
    return f"{SUMMARY_PREFIX}{count} earlier {noun} compacted; ref {ref}]"


def summary_request(
    messages: Sequence[Message], elided: Sequence[int], ctx: StrategyContext
) -> SummaryRequest:
    """The request summarizing ``messages[elided]``: earlier summary messages among them become
    ``previous_summary`` (incremental update) and the task rides along. ``pinned`` stays empty:
    pinned units are never elided, so their text is in the history verbatim already. What window
    cuts took out after the earlier summary (``ctx.unsummarized``) came between it and the
    span: a request that updates that summary, or starts at the first message after the task,
    summarises it too, so each message the agent saw is summarised once before it is gone."""
    at = task_index(messages)
    span: list[Message] = []
    previous: list[str] = []
    cap = ctx.config.summary_max_chars
    sent = 0  # characters of the span as the request holds it
    unmasked = False
    for i in elided:
        m = messages[i]
        sent += m.char_count  # a summary of earlier ones replaces them too
        if is_summary_message(m):
            previous.append(_SUMMARY_RE.sub("", m.text, count=1))  # without its header
        else:
            # a masked tool result is summarised from what it masks (what the agent saw)
            original = m.hints.get(UNMASKED, m)
            unmasked = unmasked or original is not m
            span.append(original)
    first = next((i for i, m in enumerate(messages) if _body(m) and (at is None or i > at)), None)
    if ctx.unsummarized and (previous or first in elided):
        span[:0] = ctx.unsummarized
    if unmasked:
        # the summary stays clearly smaller than what it replaces in the request, masked
        cap = min(cap, max(int(sent * TARGET_SUMMARY_RATIO), 1))
    return SummaryRequest(
        messages=tuple(span),
        task=task_text(messages[at]) if at is not None else "",
        previous_summary="\n\n".join(previous) if previous else None,
        focus=ctx.focus,
        max_chars=cap,
        memo=ctx.memo,
        held=held_names(messages, elided, ctx.memo),
        task_held=at is not None and at not in set(elided),
    )


def _body(m: Message) -> bool:
    return m.role != "system" and not is_summary_message(m)


def held_names(messages: Sequence[Message], elided: Sequence[int], memo: Memo) -> frozenset[str]:
    """The paths and code names the messages kept beside a summary of ``messages[elided]``
    hold (the system prompt, the task, the kept tail; not earlier summaries, which the new one
    replaces): what the summary's names index need not repeat. ``memo``: the compaction's (the
    masks of the same call read the agent's prose already)."""

    gone = set(elided)
    out: set[str] = set()
    for i, m in enumerate(messages):
        if i in gone or is_summary_message(m):
            continue
        texts = [m.text, *(c.arguments for c in m.tool_calls), *(r.text for r in m.tool_results)]
        for text in texts:
            if text:
                paths, names = memo(words_of, text, words_size)
                out.update(paths)
                out.update(names)
    return frozenset(out)


def summarize_units(
    strategy: str,
    messages: Sequence[Message],
    layout: Layout,
    units: Sequence[tuple[int, int]],
    ctx: StrategyContext,
    detail: str,
    **options: Any,
) -> StrategyOutcome | None:
    """Plan to summarize ``units`` (elidable units of ``layout``) in one request; None when
    there are none or all are earlier summary messages. ``options``: more
    :class:`StrategyOutcome` fields."""
    if not units or all(is_summary_message(messages[s]) for s, _ in units):
        return None
    elided = layout.indices(units)
    request = summary_request(messages, elided, ctx)
    return StrategyOutcome(strategy, elided, (request,), detail=detail, **options)


def elide_except_recent(
    strategy: str,
    messages: Sequence[Message],
    layout: Layout,
    units: Sequence[tuple[int, int]],
    ctx: StrategyContext,
    detail: Callable[[int], str],
) -> StrategyOutcome | None:
    """:func:`summarize_units` of ``units`` except the newest of them holding the last
    ``ctx.config.keep_recent_low`` messages (widened to whole units); ``detail`` gets the
    number of units elided and returns the outcome's detail text."""
    rest = list(units)
    kept = 0
    while rest and kept < ctx.config.keep_recent_low:
        s, e = rest.pop()
        kept += e - s
    return summarize_units(strategy, messages, layout, rest, ctx, detail(len(rest)))


# -- assembly ----------------------------------------------------------------------------------
def hint_text(ref: str) -> str:
    """The hint the full summary folds into the system prompt."""
    return (
        "[contextwarden: the earlier history of this session was compacted into the summary "
        f"message after the task ({ref}). Continue the original task from that summary; do not "
        "repeat steps it lists as completed.]"
    )


def _with_hint(message: Message, hint: str) -> Message:
    blocks = list(message.content)
    for k in range(len(blocks) - 1, -1, -1):
        block = blocks[k]
        if isinstance(block, TextBlock):
            base = HINT_RE.sub("", block.text)
            blocks[k] = TextBlock(f"{base}\n\n{hint}" if base else hint, extra=block.extra)
            return message.replace(content=tuple(blocks))
    return message.replace(content=(*blocks, TextBlock(hint)))


def assemble(
    messages: Sequence[Message], outcome: StrategyOutcome, summary: str, ref: str
) -> tuple[Message, ...]:
    """The new history: ``messages`` without ``outcome.elided``, plus one summary message (a
    ``user`` message headed by :func:`summary_header`) where the first elided message was; for
    a ``rebuild``, the hint is folded into the first system message as well."""
    elided = set(outcome.elided)
    text = summary_header(len(elided), ref) + "\n" + summary.strip()
    flat = " ".join(summary.split())
    for title, lines in outcome.appendix:
        fresh = [ln for ln in lines if " ".join(ln.split()) not in flat]
        if fresh:
            text += f"\n\n{title}:\n" + "\n".join(f"- {ln}" for ln in fresh)
    note = Message("user", (TextBlock(text),))
    first = min(elided)
    out: list[Message] = []
    hinted = False
    for i, m in enumerate(messages):
        if i == first:
            out.append(note)
        if i in elided:
            continue
        if outcome.rebuild and not hinted and m.role == "system":
            m = _with_hint(m, hint_text(ref))
            hinted = True
        out.append(m)
    return tuple(out)


def check_outcome(messages: Sequence[Message], outcome: StrategyOutcome) -> str | None:
    """Why ``outcome`` would break the layout rules (None when it is fine). The compactor calls
    this on every outcome, built-in or not, and skips a strategy that fails it."""
    if not outcome.elided:
        return "elides nothing"
    if list(outcome.elided) != sorted(set(outcome.elided)):
        return "elided indices are not sorted and unique"
    if outcome.elided[0] < 0 or outcome.elided[-1] >= len(messages):
        return "elided index out of range"
    if not outcome.requests and outcome.summary is None:
        return "neither a summary nor a request to write one"
    layout = Layout.of(messages)
    elided = set(outcome.elided)
    for start, end in layout.units:
        inside = [i in elided for i in range(start, end)]
        if any(inside) and not all(inside):
            return f"cuts the unit of messages {start}..{end - 1} (a tool call and its results)"
        if inside and inside[0] and start in layout.protected:
            return f"elides protected message {start} (system, task or pinned)"
    return None
