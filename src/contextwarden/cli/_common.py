"""What the commands share: consoles, the error boundary, loading files and config.

The boundary turns every :class:`ContextWardenError` (a bad config, a malformed file, an unknown
model) into one red line per problem on stderr and exit status 1, never a traceback.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from .._config import WardenConfig, load_config
from .._exceptions import ContextWardenError
from .._transcripts import Transcript, load_transcript
from ..summarizers.config import parse_summarizer_spec

__all__ = [
    "ConfigOption",
    "EXIT_BAD_INPUT",
    "EXIT_USAGE",
    "FileArgument",
    "ModelOption",
    "SummarizerOption",
    "WindowOption",
    "check_output_path",
    "config_for",
    "err",
    "fail",
    "guarded",
    "load_recording",
    "out",
    "progress",
    "read_recording",
    "recorded_model",
    "require_file",
]

P = ParamSpec("P")
R = TypeVar("R")

#: Exit status for a bad config, a malformed file or an unknown model.
EXIT_BAD_INPUT = 1
#: Exit status for a usage problem (a missing file), as click uses for bad options.
EXIT_USAGE = 2

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

#: The width tables are laid out to when the output is not a terminal (a pipe, a file): wide
#: enough that no table wraps or breaks a word, as a reader of the file would expect.
PIPE_WIDTH = 200


def _fit_consoles() -> None:
    """Lay output out for where it goes: a terminal's own width; $COLUMNS when set (as if a
    terminal that wide); otherwise, in a pipe or a file, PIPE_WIDTH with lines never wrapped."""
    columns = os.environ.get("COLUMNS", "")
    for console in (out, err):
        if console.is_terminal:
            continue
        if columns.isdigit() and int(columns) > 0:
            console.width = int(columns)
            console.soft_wrap = False
        else:
            console.width = PIPE_WIDTH
            console.soft_wrap = True


@contextmanager
def progress(description: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr while a step runs: yields ``advance(n)``. With ``total`` it shows
    done/total, the time spent and an estimate of the time left; with ``None`` a spinner and the
    time spent. Shown only when both stdout and stderr are terminals (silent in a pipe or a
    test), and erased when the step ends."""
    shown = out.is_terminal and err.is_terminal
    columns = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn(), TextColumn("eta"), TimeRemainingColumn()]
    columns.append(TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True, disable=not shown) as bar:
        task = bar.add_task(description, total=total)

        def advance(n: int = 1) -> None:
            bar.advance(task, n)

        yield advance


FileArgument = Annotated[
    Path,
    typer.Argument(
        help="A recorded session: OpenAI JSON/JSONL, mini-swe-agent .traj.json, pi or Claude Code "
        "session JSONL, OpenHands output.jsonl.",
        show_default=False,
        metavar="FILE",
    ),
]
ModelOption = Annotated[
    str | None,
    typer.Option("--model", "-m", help="Model name: picks the tokenizer, window and price."),
]
WindowOption = Annotated[
    int | None,
    typer.Option("--window", "-w", min=1, help="Context window in tokens (overrides the model's)."),
]
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="A contextwarden.yaml (default: $CONTEXTWARDEN_CONFIG, else ./contextwarden.yaml).",
    ),
]


SummarizerOption = Annotated[
    str | None,
    typer.Option(
        "--summarizer",
        help="Who writes compaction summaries, as PROVIDER:MODEL (openai:gpt-4o-mini, "
        "anthropic:claude-haiku-4-5) or extractive; overrides the config's summarizer.",
    ),
]


def fail(message: str, code: int = EXIT_BAD_INPUT) -> typer.Exit:
    """Print ``message`` as red lines on stderr; return the Exit to raise."""
    for line in message.splitlines() or [message]:
        err.print(f"[red]error:[/red] {escape(line)}", soft_wrap=True)
    return typer.Exit(code)


def guarded(command: Callable[P, R]) -> Callable[P, R]:
    """Run ``command`` behind the error boundary: contextwarden errors become red lines and
    exit status 1; an interrupt exits 130 quietly."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        _fit_consoles()
        try:
            return command(*args, **kwargs)
        except ContextWardenError as exc:
            raise fail(str(exc)) from None
        except KeyboardInterrupt:
            raise typer.Exit(130) from None

    return wrapper


def check_output_path(
    path: Path, *, inputs: Sequence[Path] = (), suffix: str | None = ".png", option: str = "--plot"
) -> Path:
    """The file to write for ``option``, checked before any work is done; else one red line
    (exit status 2).

    With ``suffix``, a name without one gets it (``--plot out`` writes and reports ``out.png``)
    and any other suffix is refused. Refused too: an existing directory, one of ``inputs`` (or a
    hard or symbolic link to it), a folder that cannot be created or written to.
    """
    if path.is_dir():
        raise fail(f"{option} {path}: is a directory; give a file name", EXIT_USAGE)
    if suffix is not None:
        if not path.suffix:
            path = path.with_name(path.name + suffix)
            if path.is_dir():
                raise fail(f"{option} {path}: is a directory; give a file name", EXIT_USAGE)
        elif path.suffix.lower() != suffix:
            raise fail(f"{option} {path}: the file name must end in {suffix}", EXIT_USAGE)
    for source in inputs:
        if path.exists() and source.exists() and os.path.samefile(path, source):
            raise fail(
                f"{option} {path}: is the input file {source}; writing would overwrite it",
                EXIT_USAGE,
            )
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise fail(
            f"{option} {path}: cannot create its folder ({exc.strerror})", EXIT_USAGE
        ) from None
    target = path if path.exists() else folder
    if not os.access(target, os.W_OK):
        raise fail(f"{option} {path}: not writable (permission denied)", EXIT_USAGE)
    if not path.exists():  # permissions are not the whole story (root, /proc, a full disk)
        try:
            path.open("xb").close()
        except OSError as exc:
            raise fail(
                f"{option} {path}: cannot write it ({exc.strerror or exc})", EXIT_USAGE
            ) from None
        path.unlink()
    return path


def require_file(path: Path) -> Path:
    """``path`` if it is a readable file; else a one-line usage error (exit status 2)."""
    if not path.exists():
        raise fail(f"{path}: no such file", EXIT_USAGE)
    if not path.is_file():
        raise fail(f"{path}: not a file", EXIT_USAGE)
    return path


def config_for(
    config: Path | None,
    *,
    model: str | None = None,
    window: int | None = None,
    summarizer: str | None = None,
) -> WardenConfig:
    """The effective config: the file (or the default lookup), the environment, then the
    command-line ``--model``/``--window``/``--summarizer``, which win."""
    overrides: dict[str, Any] = {}
    if summarizer is not None:
        overrides["summarizer"] = parse_summarizer_spec(summarizer)
    if model is not None:
        overrides["model"] = model
    if window is not None:
        overrides["context_window"] = window
    if config is not None:
        require_file(config)
    return load_config(config, **overrides)


def read_recording(file: Path) -> Transcript:
    """Load ``file`` (a usage error when it is not a file) behind a spinner: a large session
    takes seconds to read."""
    require_file(file)
    size = file.stat().st_size
    with progress(f"reading {file.name} ({size / 1e6:,.1f} MB)", None):
        transcript = load_transcript(file)
    if not transcript.messages:
        err.print(
            f"[yellow]warning:[/yellow] {escape(str(file))}: no messages in this "
            f"{transcript.format} file",
            soft_wrap=True,
        )
    return transcript


def load_recording(
    file: Path,
    config: Path | None,
    *,
    model: str | None,
    window: int | None,
    summarizer: str | None = None,
) -> tuple[Transcript, WardenConfig, str | None]:
    """Load ``file`` (a usage error when it is not a file), then the effective config (see
    :func:`config_for`); also the model to use: ``--model``/the config's, else the recording's,
    else None."""
    transcript = read_recording(file)
    cfg = config_for(config, model=model, window=window, summarizer=summarizer)
    return transcript, cfg, cfg.model or transcript.model


def recorded_model(
    file: Path,
    config: Path | None,
    *,
    model: str | None,
    window: int | None,
    summarizer: str | None = None,
) -> tuple[Transcript, WardenConfig, str]:
    """:func:`load_recording` for a command that needs a model: an error telling the user to
    give --model when neither the options, the config nor the recording name one."""
    transcript, cfg, name = load_recording(
        file, config, model=model, window=window, summarizer=summarizer
    )
    if name is None:
        raise fail(f"{file}: the recording names no model; give --model")
    return transcript, cfg, name
