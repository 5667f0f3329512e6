"""``contextwarden count FILE [--model M]``: tokens by role and by block kind."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from .._breakdown import token_breakdown
from .._exceptions import UnknownModelError
from .._models import model_info
from .._tokens import get_counter
from ._common import FileArgument, ModelOption, err, guarded, out, progress, read_recording
from ._tables import breakdown_tables, header

__all__ = ["count"]


@guarded
def count(
    file: FileArgument,
    model: ModelOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of tables.")
    ] = False,
) -> None:
    """Count a recorded session's tokens, by role and by block kind.

    The model picks the tokenizer (default: the recording's model, else o200k_base). A model
    the registry does not know is counted with o200k_base, with a warning.
    """
    transcript = read_recording(file)
    counter = get_counter(model or transcript.model)
    if model is not None:
        try:
            model_info(model)
        except UnknownModelError:
            err.print(
                f"[yellow]warning:[/yellow] --model {model}: not a model the registry knows; "
                f"counting with {counter.name}",
                soft_wrap=True,
            )
    with progress("counting tokens", len(transcript.messages)) as advance:
        b = token_breakdown(
            transcript.messages, counter, tools=transcript.tools or None, on_message=advance
        )
    if as_json:
        data: dict[str, Any] = {"file": str(file), "format": transcript.format}
        data |= {"tokenizer": counter.name, "messages": len(transcript.messages), **b.as_dict()}
        sys.stdout.write(json.dumps(data) + "\n")
        return
    out.print(header(transcript, counter.name))
    for table in breakdown_tables(b):
        out.print(table)
