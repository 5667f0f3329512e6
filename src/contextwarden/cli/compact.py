"""``contextwarden compact FILE --model M [--window N] -o OUT``: write the compacted history in
the input's format (OpenAI JSON list in, OpenAI JSON list out)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from .._replay import compact_history, provider_for
from .._transcripts import save_transcript
from ._common import (
    ConfigOption,
    FileArgument,
    ModelOption,
    SummarizerOption,
    WindowOption,
    check_output_path,
    fail,
    guarded,
    out,
    recorded_model,
    require_file,
)
from ._tables import pct

__all__ = ["compact"]

#: Formats save_transcript writes as plain provider messages (agent logs are read-only).
REWRITTEN = frozenset({"pi", "claude-code", "openhands"})


@guarded
def compact(
    file: FileArgument,
    output: Annotated[
        Path,
        typer.Option(
            "--output", "-o", help="Where to write the compacted history.", show_default=False
        ),
    ],
    model: ModelOption = None,
    window: WindowOption = None,
    config: ConfigOption = None,
    summarizer: SummarizerOption = None,
    force: Annotated[
        bool, typer.Option("--force", help="Compact even when the history is under the trigger.")
    ] = False,
) -> None:
    """Compact a recorded history into the window and write it in the input's format.

    Runs the warden as before the next LLM call: lossless layers, then compaction when over the
    trigger (the embedded extractive summarizer unless the config or --summarizer names an
    LLM), then the window.
    """
    require_file(file)
    output = check_output_path(output, inputs=(file,), suffix=None, option="-o")
    transcript, cfg, name = recorded_model(
        file, config, model=model, window=window, summarizer=summarizer
    )
    result = compact_history(
        transcript.messages,
        model=name,
        window=cfg.context_window,
        config=cfg,
        tools=transcript.tools or None,
        force=force,
    )
    try:
        written = save_transcript(dataclasses.replace(transcript, messages=result.messages), output)
    except OSError as exc:  # the disk filled up, the folder went away meanwhile...
        raise fail(f"-o {output}: cannot write it ({exc.strerror or exc})") from None
    before, after = result.tokens_before, result.tokens_after
    how = (
        f"compacted by {result.compaction.strategy}, {result.compaction.compacted_count} "
        "messages summarised"
        if result.compaction is not None
        else "no compaction needed (lossless layers only)"
    )
    out.print(
        f"{len(transcript.messages):,} messages, {before:,} tokens -> "
        f"{len(result.messages):,} messages, {after:,} tokens "
        f"({pct(before - after, before)} saved); {how}"
    )
    if result.newest_truncated:
        out.print("[yellow]the newest message alone was over the budget and was cut[/yellow]")
    fmt: str = transcript.format
    if fmt in REWRITTEN:  # agent logs are written as the provider request they amount to
        fmt = f"{provider_for(fmt)} messages; {fmt} logs are not written back"
    out.print(f"written to {written} ({fmt})")
