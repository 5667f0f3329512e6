"""How a history message shows in the view under the log's mask and strip edits.

The mask edits decide, result by result, a *fate* (``mask``, ``keep`` whole, or ``by:<id>``:
superseded by that later result); :func:`masked` renders a message under a fate map and
:func:`strip` without its thinking. Both are pure in what they return and remembered per
message, so rebuilding the view reuses what an earlier call made.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .._log import Mask, make_ref
from .._memo import Memo
from .._messages import Message, held_bytes
from ..analysis.actions import prints_file, text_actions
from ..analysis.mentions import words_of, words_size
from ..layers.base import LayerContext
from ..layers.mask import mask_message, never_masked
from ..layers.mask_plan import MaskPlan
from ..layers.thinking import strip_message
from .state import State

__all__ = ["fates", "marked", "mask", "masked", "strip"]

#: The fates that leave a result whole.
_WHOLE = frozenset({"keep", "whole"})


def mask(s: State, ctx: LayerContext, i: int, m: Message) -> Message:
    """History message ``i`` (``m`` as it entered the view) with its tool results as the
    mask edits so far decided (:attr:`State.fate`)."""
    return masked(s, ctx, i, m, s.fate)


def masked(s: State, ctx: LayerContext, i: int, m: Message, fate: Mapping[str, str]) -> Message:
    """History message ``i`` with its tool results as ``fate`` says: masked, kept whole,
    or reduced to the superseded marker (a result ``fate`` does not name stays whole)."""
    names = s.index.names[i]
    if not names or m.is_pinned or not s.config.mask.enabled:
        return m
    index = s.index
    # the history's own message: its result ids are the index's (no output block read again)
    ids = index.ids[i] if m is s.base[i] else [r.tool_call_id for r in index.results_in(i, m)]
    key = tuple([fate.get(r, "whole") for r in ids])
    done = s.masked.get((i, key))
    if done is None:
        results = index.results_in(i, m)
        cfg = s.config.mask
        if all(isinstance(r.content, str) and never_masked(r.content, cfg) for r in results):
            s.masked[(i, key)] = m  # nothing to render
            return m
        # the marker names the reference the original is kept under (elided)
        ref = make_ref((s.inputs[i],))
        whole = frozenset(r.tool_call_id for r, f in zip(results, key, strict=True) if f in _WHOLE)
        by = {r.tool_call_id: f[3:] for r, f in zip(results, key, strict=True) if f[:3] == "by:"}
        plan = MaskPlan(whole, by)
        held, reads = _Held(_typed(s, i, ctx.memo), i), _reads(s, i, m)
        output = None if m.tool_results else results[0]
        done = mask_message(
            m, (len(names), names), ctx, ref, plan=plan, held=held, reads=reads, output=output
        )[0]
        if done is not m:
            s.bytes += held_bytes(done)
        s.masked[(i, key)] = done
    return done


def marked(s: State, edit: Mask) -> dict[str, str]:
    """:attr:`State.fate` once mask edit ``edit`` is made: its superseded results get the
    marker; the other results at or before its ``upto`` are masked unless it keeps them (a
    result masked or superseded before stays so)."""
    return {**s.fate, **fates(s, edit)}


def fates(s: State, edit: Mask) -> dict[str, str]:
    """The results whose fate mask edit ``edit`` changes, with their new fate: its superseded
    results, and the results at or before its ``upto`` no mask edit reached yet or kept
    whole (every older one was decided by an earlier edit)."""
    out: dict[str, str] = {}
    fate = s.fate
    for _, rid, by in edit.superseded:
        if fate.get(rid) in (None, "keep"):
            out[rid] = "by:" + by
    keep = set(edit.keep)
    for pos in s.open_results(edit.upto):
        for rid in s.index.ids[pos]:
            if out.get(rid, fate.get(rid)) in (None, "keep"):
                out[rid] = "keep" if rid in keep else "mask"
    return {rid: f for rid, f in out.items() if f != fate.get(rid)}


def strip(s: State, ctx: LayerContext, i: int, m: Message) -> Message:
    """History message ``i`` without its thinking."""
    done = s.stripped.get(i)
    if done is None:
        if m.role != "assistant" or m.is_pinned or not s.config.thinking.enabled:
            done = m
        else:
            done = strip_message(m, ctx)[0]
            if done is not m:
                s.bytes += held_bytes(done)
        s.stripped[i] = done
    return done


def _typed(s: State, i: int, memo: Memo | None) -> dict[str, int]:
    """:attr:`State.typed` with history messages up to ``i`` read (when a mask first needs
    them): the paths and code names each wrote outside tool results, at its first position.
    ``memo``: the call's (a compaction in the same call reads the agent's prose again)."""
    outputs = s.index.outputs
    for j in range(s.typed_upto, i):
        m = s.base[j]
        words = m.role != "tool" and j not in outputs
        for text in (m.text, *(c.arguments for c in m.tool_calls)) if words else ():
            if not text:
                continue
            paths, names = memo(words_of, text, words_size) if memo is not None else words_of(text)
            for w in (*paths, *names):
                s.typed.setdefault(w, j)
    s.typed_upto = max(s.typed_upto, i)
    return s.typed


@dataclass(frozen=True)
class _Held:
    """The names the request holds anyway beside history message ``i``'s results: what a
    message before ``i`` wrote outside the tool results (the agent, its calls' arguments among
    them, or the user: a summary of it lists what was written first). Asked name by name, so a
    result's text is not read for names twice."""

    typed: Mapping[str, int]
    i: int

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.typed.get(name, self.i) < self.i


def _reads(s: State, i: int, m: Message) -> frozenset[str]:
    """The ids of history message ``i``'s results that print a file's lines (their call is
    a read): as the mask plan found them when it made the call's action, else read now; a
    command's output sent as a user message, when the command it answers is a read."""
    if i in s.index.outputs:
        acts = s.actions.get(("", i - 1)) or text_actions(s.base[i - 1], i - 1, s.base)
        return frozenset(a.id for a in acts if a.kind == "read")
    out: set[str] = set()
    for r in m.tool_results:  # the calls they answer, as the history holds them
        at = s.index.call_at.get(r.tool_call_id)
        calls = s.base[at].tool_calls if at is not None else ()
        for c in (c for c in calls if c.id == r.tool_call_id):
            known = s.actions.get((c.id, i))
            if (known[0].kind == "read") if known else prints_file(c):
                out.add(c.id)
    return frozenset(out)
