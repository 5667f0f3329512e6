"""EXPERIMENT (not a product, not a result of contextwarden): what masking that knows what a
tool result is could gain, measured before the core calls
:func:`contextwarden.layers.mask.mask_plan` itself.

Each sender here runs ``Warden()`` defaults exactly as ``bench/measures_run.py`` does and then
edits the warden's request the way a mask edit of the core would have if it had asked
``mask_plan(history)`` when it masked: the first time a tool result shows up masked, the plan
of the history of that call decides its fate for the rest of the conversation:

* ``protected`` (the latest read of a file the agent works on): the original text is put back;
  over the warden's trigger the oldest spared results are masked again for good (in one batch,
  down to halfway between the trigger and the warden's target), but only on a call where the
  warden rewrote its request anyway (its cache breaks there) or when the request would not fit
  the window;
* ``superseded`` (a later read, run or identical output replaced it): the warden's marker
  becomes :func:`~contextwarden.layers.mask.superseded_text`'s one-line marker.

Rows: ``experiment: protect reads`` (the first rule), ``experiment: protect + supersede`` (both).
Messages the warden dropped or summarised stay dropped: the experiment only measures the mask
edit's part, so it understates what a core that also ranks protected results in its window
cut would hold. Run with ``python -m bench.measures_run --experiment``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ._agent import Sender

__all__ = ["EXPERIMENTS"]

_REF = re.compile(r"recall (cw:[0-9a-f]+)")


def _make(supersede: bool) -> Callable[[str, int], Sender]:
    def make(model: str, window: int) -> Sender:
        from contextwarden import Warden
        from contextwarden._tokens import ExactCounter
        from contextwarden.formats import from_openai
        from contextwarden.layers.mask import (
            MASK_MARKER_RE,
            SUPERSEDED_MARKER_RE,
            mask_plan,
            superseded_text,
        )

        warden = Warden()
        budget = warden.budget_for(model, window)
        assert budget is not None
        counter = ExactCounter("o200k_base")
        fate: dict[str, tuple[str, str | None]] = {}  # id -> (spare | supersede | mask, by)
        stats = {"spared": 0, "superseded": 0, "respilled": 0}
        previous: list[str] = []

        def send(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
            request, _ = warden.transform_openai(history, model=model, window=window)
            originals = {
                m["tool_call_id"]: m.get("content")
                for m in history
                if m.get("role") == "tool" and isinstance(m.get("content"), str)
            }
            masked = [
                m["tool_call_id"]
                for m in request
                if m.get("role") == "tool"
                and isinstance(m.get("content"), str)
                and MASK_MARKER_RE.search(m["content"])
                and not MASK_MARKER_RE.search(originals.get(m["tool_call_id"]) or "")
            ]
            new = [i for i in masked if i not in fate]
            if new:
                plan = mask_plan(from_openai(history))
                for i in new:
                    if i in plan.protected:
                        fate[i] = ("spare", None)
                    elif supersede and i in plan.superseded:
                        fate[i] = ("supersede", plan.superseded[i])
                    else:
                        fate[i] = ("mask", None)
            out = [dict(m) for m in request]
            spared: list[int] = []
            for k, m in enumerate(out):
                tid = m.get("tool_call_id")
                if tid not in masked:
                    continue
                kind, by = fate[tid]
                original = originals.get(tid) or ""
                if kind == "spare":
                    m["content"] = original
                    spared.append(k)
                elif kind == "supersede":
                    ref = _REF.search(m["content"])
                    short = superseded_text(original, ref.group(1) if ref else None, by)
                    if SUPERSEDED_MARKER_RE.search(short) and len(short) < len(m["content"]):
                        m["content"] = short
                        stats["superseded"] += 1
            # over the warden's trigger, spared results are masked again (oldest first) only
            # when the warden rewrote its own request this call (the cache breaks anyway) or
            # when the request would not fit the window; otherwise they ride along
            key = [str(sorted(m.items())) for m in request]
            rewrote = key[: len(previous)] != previous
            previous[:] = key
            total = counter.count_messages(from_openai(out))
            limit = budget.trigger if rewrote else budget.window - budget.reserve
            # once over, cut well under (halfway to the warden's target), in one batch, so the
            # next calls only append
            goal = (limit + budget.target) // 2 if total > limit else limit
            for k in spared:
                if total <= goal:
                    break
                tid = out[k]["tool_call_id"]
                masked_text = next(m["content"] for m in request if m.get("tool_call_id") == tid)
                total -= counter.count_text(out[k]["content"]) - counter.count_text(masked_text)
                out[k]["content"] = masked_text
                fate[tid] = ("mask", None)
                stats["respilled"] += 1
            stats["spared"] += sum(
                1 for k in spared if MASK_MARKER_RE.search(out[k]["content"]) is None
            )
            return out

        return send

    return make


#: Row name -> ``make(model, window) -> Sender``.
EXPERIMENTS: dict[str, Callable[[str, int], Sender]] = {
    "experiment: protect reads": _make(False),
    "experiment: protect + supersede": _make(True),
}
