"""``contextwarden compact FILE -o OUT [--model M] [--window N]``: write the compacted history,
in the file's own format for a provider file, else as the request an agent's log amounts to
(see ``--output``)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from .._replay import compact_history
from .._transcripts import WRITABLE, TranscriptFormat, output_format, save_transcript
from ._common import (
    ConfigOption,
    FileArgument,
    FormatOption,
    JsonOption,
    ModelOption,
    SummarizerOption,
    WindowOption,
    check_output_path,
    fail,
    guarded,
    out,
    plural,
    progress,
    read_session,
    require_file,
)
from ._tables import pct

__all__ = ["compact"]

#: What each written format is, for the closing line.
WRITTEN_AS: dict[TranscriptFormat, str] = {
    "openai": "OpenAI chat messages, JSON",
    "openai-jsonl": "OpenAI chat messages, JSONL: one message a line",
    "anthropic": "Anthropic messages, JSON {system, messages}",
    "mini-swe-agent": "mini-swe-agent trajectory JSON",
}


@guarded
def compact(
    file: FileArgument,
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            metavar="OUT",
            help="Where to write the compacted history. Provider files keep their format; an "
            "agent's log (pi, Claude Code, OpenHands...) is written as OpenAI JSONL when OUT "
            "ends in .jsonl, else as Anthropic (pi, Claude Code, Cline) or OpenAI JSON.",
            show_default=False,
        ),
    ],
    model: ModelOption = None,
    window: WindowOption = None,
    config: ConfigOption = None,
    summarizer: SummarizerOption = None,
    fmt: FormatOption = None,
    run: Annotated[
        int | None,
        typer.Option(
            "--run",
            min=1,
            metavar="N",
            help="Which run of a file holding several to compact (default: the last).",
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Compact even when the history is under the trigger.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Compact a recorded history into the window and write it (see --output for the format).

    Runs the warden as before the next LLM call: lossless layers, then compaction when over the
    trigger (the embedded extractive summarizer unless the config or --summarizer names an
    LLM), then the window. The model and window are settled as for count, inspect and replay.
    """
    require_file(file, sessions=True)
    output = check_output_path(output, inputs=(file,), suffix=None, option="-o")
    readings = read_session(
        file, config, model=model, window=window, fmt=fmt, run=run, summarizer=summarizer
    )
    r = readings[-1]
    transcript = r.transcript
    with progress(f"compacting {len(transcript.messages):,} messages", None):
        result = compact_history(
            transcript.messages,
            model=r.model,
            window=r.window,
            config=r.config,
            tools=transcript.tools or None,
            force=force,
        )
    fmt_out = output_format(transcript.format, jsonl=output.suffix.lower() == ".jsonl")
    compacted = dataclasses.replace(transcript, messages=result.messages)
    try:
        written = save_transcript(compacted, output, format=fmt_out)
    except OSError as exc:  # the disk filled up, the folder went away meanwhile...
        raise fail(f"-o {output}: cannot write it ({exc.strerror or exc})") from None
    before, after = result.tokens_before, result.tokens_after
    kind = WRITTEN_AS[fmt_out]
    if transcript.format not in WRITABLE:
        kind += f"; {transcript.format} sessions are not written back: this is their request"
    if as_json:
        data = {
            **r.as_json(),
            "messages_before": len(transcript.messages),
            "messages_after": len(result.messages),
            "tokens_before": before,
            "tokens_after": after,
            "compaction": result.compaction.strategy if result.compaction else None,
            "summarised": result.compaction.compacted_count if result.compaction else 0,
            "newest_truncated": result.newest_truncated,
            "output": str(written),
            "output_format": fmt_out,
        }
        sys.stdout.write(json.dumps(data) + "\n")
        return
    how = (
        f"compacted by {result.compaction.strategy}, "
        f"{plural(result.compaction.compacted_count, 'message')} summarised"
        if result.compaction is not None
        else "no compaction needed (lossless layers only)"
    )
    out.print(r.title())
    if len(readings) > 1 or transcript.runs > 1:
        out.print(f"run {transcript.run} of {transcript.runs} compacted (--run N for another)")
    out.print(
        f"{plural(len(transcript.messages), 'message')}, {before:,} tokens -> "
        f"{plural(len(result.messages), 'message')}, {after:,} tokens "
        f"({pct(before - after, before)} saved); {how}"
    )
    if result.newest_truncated:
        out.print("[yellow]the newest message alone was over the budget and was cut[/yellow]")
    out.print(f"written to {escape(str(written))} ({kind})")
