"""The facts every compaction must keep somewhere in the history it returns: each
modified file path and the last unresolved error, checked on the whole history, so that a fact an
earlier summary carried survives the next summary too."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from .._memo import Memo
from .._messages import Message
from ..analysis.facts import walk_facts
from ..layers.mask import UNMASKED

__all__ = ["held_facts", "must_keep"]

_CLIP_MARK = " [...]"  # what summarizers append to a clipped error line


def held_facts(messages: Sequence[Message], facts: Iterable[str]) -> tuple[str, ...]:
    """The ``facts`` that the words of ``messages`` (text, tool results, call arguments) hold,
    each with its whitespace collapsed, in order: what a history must still hold of
    :func:`must_keep`. A fact is looked up in the texts joined, not in the texts with their
    whitespace collapsed (which costs a string per word): its words in a row, any whitespace
    between them."""
    parts: list[str] = []
    for m in messages:
        parts.append(m.text)
        parts.extend(r.text for r in m.tool_results)
        parts.extend(c.arguments for c in m.tool_calls)
    joined = " ".join(parts)
    out: dict[str, None] = {}
    for fact in facts:
        words = fact.split()
        if not words:
            continue
        if len(words) == 1:
            held = words[0] in joined  # a word holds no whitespace: it lies in one text
        else:
            held = re.search(r"\s+".join(map(re.escape, words)), joined) is not None
        if held:
            out[" ".join(words)] = None
    return tuple(out)


def must_keep(messages: Sequence[Message], *, memo: Memo | None = None) -> tuple[str, ...]:
    """The facts of ``messages`` every compaction of them must still hold somewhere (in a kept
    message or a summary): each modified file path and the signature of the last unresolved
    error, as found by :func:`~contextwarden.analysis.facts.extract_facts`, limited to those
    spelled out in ``messages`` themselves (:func:`held_facts`). The facts are read from what
    the agent saw (a masked result's original, which summaries are written from too), so the
    lines a mask kept or wrote are not taken for an error. ``memo``: the compactor's."""
    facts = walk_facts([m.hints.get(UNMASKED, m) for m in messages], memo=memo, commands=False)
    wanted = list(facts.changed_files)
    error = facts.last_unresolved_error
    if error is not None:
        wanted.append(error.key.removesuffix(_CLIP_MARK).strip())
    return held_facts(messages, wanted)
