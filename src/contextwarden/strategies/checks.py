"""The facts every compaction must keep somewhere in the history it returns: each
modified file path and the last unresolved error, checked on the whole history, so that a fact an
earlier summary carried survives the next summary too."""

from __future__ import annotations

from collections.abc import Sequence

from .._memo import Memo
from .._messages import Message
from ..analysis.facts import walk_facts
from ..layers.mask import UNMASKED

__all__ = ["flatten", "must_keep"]

_CLIP_MARK = " [...]"  # what summarizers append to a clipped error line


def flatten(messages: Sequence[Message]) -> str:
    """The words of ``messages`` (text, tool results, call arguments), whitespace collapsed:
    what :func:`must_keep` facts are looked up in."""
    parts: list[str] = []
    for m in messages:
        parts.append(m.text)
        parts.extend(r.text for r in m.tool_results)
        parts.extend(c.arguments for c in m.tool_calls)
    return " ".join(" ".join(parts).split())


def must_keep(messages: Sequence[Message], *, memo: Memo | None = None) -> tuple[str, ...]:
    """The facts of ``messages`` every compaction of them must still hold somewhere (in a kept
    message or a summary): each modified file path and the signature of the last unresolved
    error, as found by :func:`~contextwarden.analysis.facts.extract_facts`, limited to those
    spelled out in ``messages`` themselves (whitespace collapsed). The facts are read from what
    the agent saw (a masked result's original, which summaries are written from too), so the
    lines a mask kept or wrote are not taken for an error. ``memo``: the compactor's."""
    facts = walk_facts([m.hints.get(UNMASKED, m) for m in messages], memo=memo, commands=False)
    wanted = list(facts.changed_files)
    error = facts.last_unresolved_error
    if error is not None:
        wanted.append(error.key.removesuffix(_CLIP_MARK).strip())
    flat = flatten(messages)
    out = (" ".join(w.split()) for w in wanted)
    return tuple(dict.fromkeys(w for w in out if w and w in flat))
