"""Putting edits in the log, and the view rebuilt from the history and the log.

Only this module writes the log: :func:`note` appends a record and extends what the log
reaches; :func:`commit` does that for the edits a step chose and makes the view again
(:func:`~contextwarden._log.apply`), counting only the messages that changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from .._log import Compaction, Edit, Mask, Repair, StripThinking, WindowCut, apply
from .._messages import held_bytes
from .call import Call
from .render import marked, mask, strip
from .state import State

__all__ = ["commit", "note", "reach"]


def reach(edit: Edit) -> tuple[int, int]:
    """``(touched, anchored)``: the last history position ``edit`` changes or removes, and the
    last position a message it inserts is anchored before (-1 for none)."""
    if isinstance(edit, Mask):
        return max([edit.upto, *(p for p, _, _ in edit.superseded)]), -1
    if isinstance(edit, StripThinking):
        return edit.upto, -1
    touched = max((end - 1 for _, end in edit.removed), default=-1)
    if isinstance(edit, WindowCut):
        return touched, -1
    anchored = max((a for a, _ in edit.inserted), default=-1)
    if isinstance(edit, Compaction):
        touched = max([touched, *(p for p, _ in edit.replaced)])
    else:  # a repair's synthetic results close calls of the message before the anchor
        touched = max(touched, anchored)
    return touched, anchored


def note(s: State, edit: Edit) -> None:
    """Put ``edit`` in the log and extend what the log reaches."""
    s.edits.append(edit)
    if isinstance(edit, Mask):
        s.mask_upto = max(s.mask_upto, edit.upto)
    elif isinstance(edit, StripThinking):
        s.strip_upto = max(s.strip_upto, edit.upto)
    elif isinstance(edit, Compaction):
        s.bytes += sum(held_bytes(m) for _, m in (*edit.inserted, *edit.replaced))
    elif isinstance(edit, Repair):
        s.bytes += sum(held_bytes(m) for _, m in edit.inserted)
    touched, anchored = reach(edit)
    s.touched = max(s.touched, touched)
    s.anchored = max(s.anchored, anchored)


def commit(
    s: State, call: Call, edits: Sequence[Edit], first: int = 0, *, replay: bool = False
) -> None:
    """Append ``edits`` to the log and rebuild the view from the history and the log
    (token counts are reused before ``first``, the first view position they may change).
    Each record is stamped with the request's tokens before and after it; ``replay`` puts
    records made earlier back as they are."""
    before = s.total
    ctx = call.ctx
    if any(isinstance(e, Mask) for e in edits):
        for e in edits:
            if isinstance(e, Mask):
                s.held.update(
                    rid
                    for pos in (s.undecided(e.start) if e.start else ())
                    for rid in s.index.ids[pos]
                    if rid not in s.fate
                )
                s.fate = marked(s, e)
        s.kept = {r: None for r, f in s.fate.items() if f == "keep"}
        s.open_superseded = {r: None for r in s.open_superseded if s.fate.get(r) in (None, "keep")}
    # masks and strips change nothing before ``first``: the view up to it stays as it is and
    # only the rest is made again, so a call costs what it changes, not the whole history
    keep = first if all(isinstance(e, Mask | StripThinking) for e in edits) else 0
    at = s.sources[keep] if 0 < keep < len(s.sources) else None
    if not isinstance(at, int) or at == 0:
        keep, at = 0, 0
    view, sources = apply(
        s.base,
        [*s.edits, *edits],
        mask=lambda i, m: mask(s, ctx, i, m),
        strip=lambda i, m: strip(s, ctx, i, m),
        start=at,
    )
    if keep:
        view, sources = s.view[:keep] + view, s.sources[:keep] + sources
    count = ctx.counter.count_message
    old_view, old_tokens = s.view, s.tokens
    same = 0
    limit = min(first, len(view), len(old_view))
    while same < limit and view[same] is old_view[same]:
        same += 1
    known = {id(m): t for m, t in zip(old_view[same:], old_tokens[same:], strict=True)}
    if not replay:  # the ledger: where this call's request stops being the cached one
        kept = sum(old_tokens[:same]) + call.overhead
        cut = s.ledger.cut_from
        s.ledger = replace(s.ledger, cut_from=kept if cut is None else min(cut, kept))
    s.view, s.sources = view, sources
    s.tokens = old_tokens[:same] + [
        t if (t := known.get(id(m))) is not None else count(m) for m in view[same:]
    ]
    s.positions = None
    s.total = sum(s.tokens) + call.overhead
    s.new_start = len(view)
    if not replay:
        edits = [replace(e, tokens_before=before, tokens_after=s.total) for e in edits]
        call.out.edits.extend(edits)
    for e in edits:
        note(s, e)
