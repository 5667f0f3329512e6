"""``contextwarden compact FILE --model M [--window N] -o OUT``: write the compacted history.

A provider file keeps its format (OpenAI JSON list in, OpenAI JSON list out; likewise OpenAI
JSONL, Anthropic and mini-swe-agent files). An agent's own log (pi, Claude Code, OpenHands and
the other session formats) is written as the request it amounts to: OpenAI JSONL, one message a
line, when OUT ends in ``.jsonl``; otherwise Anthropic JSON for pi and Claude Code sessions and
OpenAI JSON for the others. The command says which it wrote."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, cast

import typer

from .._replay import compact_history, provider_for
from .._transcripts import TranscriptFormat, save_transcript
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
    progress,
    recorded_model,
    require_file,
)
from ._tables import pct

__all__ = ["compact"]

#: Formats written back as they were read; any other (an agent's log) becomes provider messages.
KEPT = frozenset({"openai", "openai-jsonl", "anthropic", "mini-swe-agent"})

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
            help="Where to write the compacted history. Provider files keep their format; an "
            "agent's log (pi, Claude Code, OpenHands...) is written as OpenAI JSONL when OUT "
            "ends in .jsonl, else as Anthropic (pi, Claude Code) or OpenAI JSON.",
            show_default=False,
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
    """Compact a recorded history into the window and write it (see --output for the format).

    Runs the warden as before the next LLM call: lossless layers, then compaction when over the
    trigger (the embedded extractive summarizer unless the config or --summarizer names an
    LLM), then the window.
    """
    require_file(file)
    output = check_output_path(output, inputs=(file,), suffix=None, option="-o")
    transcript, cfg, name = recorded_model(
        file, config, model=model, window=window, summarizer=summarizer
    )
    with progress(f"compacting {len(transcript.messages):,} messages", None):
        result = compact_history(
            transcript.messages,
            model=name,
            window=cfg.context_window,
            config=cfg,
            tools=transcript.tools or None,
            force=force,
        )
    fmt = _output_format(transcript.format, output)
    compacted = dataclasses.replace(transcript, messages=result.messages)
    try:
        written = save_transcript(compacted, output, format=fmt)
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
    kind = WRITTEN_AS[fmt]
    if transcript.format not in KEPT:
        kind += f"; {transcript.format} sessions are not written back: this is their request"
    out.print(f"written to {written} ({kind})")


def _output_format(read: str, output: Path) -> TranscriptFormat:
    """The format to write: the input's for a provider file; for an agent's log, OpenAI JSONL
    when ``output`` ends in ``.jsonl``, else its provider's JSON."""
    if read in KEPT:
        return cast(TranscriptFormat, read)
    if output.suffix.lower() == ".jsonl":
        return "openai-jsonl"
    return "anthropic" if provider_for(read) == "anthropic" else "openai"
