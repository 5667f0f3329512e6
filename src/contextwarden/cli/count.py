"""``contextwarden count FILE``: tokens by role and by block kind."""

from __future__ import annotations

import json
import sys
from typing import Any

from .._breakdown import Breakdown, token_breakdown
from .._model_overrides import registry_for
from .._tokens import TokenCounter, get_counter
from ._common import (
    ConfigOption,
    FileArgument,
    FormatOption,
    JsonOption,
    ModelOption,
    Reading,
    RunOption,
    WindowOption,
    guarded,
    one_or_runs,
    out,
    progress,
    read_session,
)
from ._tables import breakdown_tables

__all__ = ["count", "counted"]


def counted(r: Reading) -> tuple[TokenCounter, Breakdown]:
    """The counter for ``r``'s model (as the config and registry know it) and the breakdown
    of its messages, behind a progress bar."""
    cfg = r.config
    counter = get_counter(r.model, kind=cfg.counter, models=registry_for(cfg))
    t = r.transcript
    with progress("counting tokens", len(t.messages)) as advance:
        b = token_breakdown(t.messages, counter, tools=t.tools or None, on_message=advance)
    return counter, b


@guarded
def count(
    file: FileArgument,
    model: ModelOption = None,
    window: WindowOption = None,
    config: ConfigOption = None,
    fmt: FormatOption = None,
    run: RunOption = None,
    as_json: JsonOption = False,
) -> None:
    """Count a recorded session's tokens, by role and by block kind.

    The model picks the tokenizer: --model, else the recording's; a model the registry does
    not know is counted with o200k_base, with a warning (the same model, window and warnings
    as inspect, replay and compact give for the file).
    """
    readings = read_session(file, config, model=model, window=window, fmt=fmt, run=run)
    items: list[dict[str, Any]] = []
    for r in readings:
        counter, b = counted(r)
        if as_json:
            items.append(
                {**r.as_json(), "tokenizer": counter.name, "messages": len(r.transcript.messages)}
                | b.as_dict()
            )
            continue
        out.print(f"{r.title()}; tokens counted with {counter.name}")
        for table in breakdown_tables(b):
            out.print(table)
    if as_json:
        sys.stdout.write(json.dumps(one_or_runs(file, items)) + "\n")
