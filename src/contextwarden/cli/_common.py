"""What the commands share: consoles, the error boundary, loading files and config.

The boundary turns every :class:`ContextWardenError` (a bad config, a malformed file, an unknown
model) into one red line per problem on stderr and exit status 1, never a traceback.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
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
from .._replay import ResolvedModel, resolve_model
from .._transcripts import Transcript, load_transcripts
from ..summarizers.config import parse_summarizer_spec
from ..transcripts._common import FORMATS
from ..transcripts.openhands import is_conversation_folder

__all__ = [
    "HELP_LAYOUT",
    "ConfigOption",
    "EXIT_BAD_INPUT",
    "EXIT_USAGE",
    "FileArgument",
    "FormatOption",
    "JsonOption",
    "ModelOption",
    "Reading",
    "RunOption",
    "SummarizerOption",
    "WindowOption",
    "check_format",
    "check_output_path",
    "config_for",
    "err",
    "fail",
    "guarded",
    "one_or_runs",
    "out",
    "plural",
    "progress",
    "read_session",
    "require_file",
    "warn_about",
]

P = ParamSpec("P")
R = TypeVar("R")

#: Exit status for a bad config, a malformed file or an unknown model.
EXIT_BAD_INPUT = 1
#: Exit status for a usage problem (a missing file), as click uses for bad options.
EXIT_USAGE = 2

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

#: How help is laid out: click's plain layout, which reflows each paragraph to the terminal's
#: width (as wide as it is; 80 columns in a pipe unless $COLUMNS says otherwise) and shows a
#: flag as a flag and an option with its metavar (``--model MODEL``), not typer's typed columns.
HELP_LAYOUT: dict[str, Any] = {
    "rich_markup_mode": None,
    "context_settings": {"max_content_width": 10_000},
}

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
        help="A recorded session in any of these formats, detected from its content: "
        + ", ".join(FORMATS)
        + " (--format forces one).",
        show_default=False,
        metavar="FILE",
    ),
]
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        metavar="MODEL",
        help="Model name: picks the tokenizer, window and price (default: the recording's; "
        "an unknown model is counted with o200k at 128,000 tokens, with no bill, and said so).",
    ),
]
WindowOption = Annotated[
    int | None,
    typer.Option(
        "--window",
        "-w",
        min=1,
        metavar="TOKENS",
        help="Context window in tokens (default: the window the recording states, else the "
        "model's).",
    ),
]
FormatOption = Annotated[
    str | None,
    typer.Option(
        "--format",
        metavar="FORMAT",
        help="Read the file as this format instead of detecting it: " + ", ".join(FORMATS) + ".",
    ),
]
RunOption = Annotated[
    int | None,
    typer.Option(
        "--run",
        min=1,
        metavar="N",
        help="Only run N of a file holding several (aider chats, OpenHands runs); default: "
        "every run.",
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print exactly one JSON object instead of tables.")
]
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        metavar="FILE",
        help="A contextwarden.yaml (default: $CONTEXTWARDEN_CONFIG, else ./contextwarden.yaml).",
    ),
]


SummarizerOption = Annotated[
    str | None,
    typer.Option(
        "--summarizer",
        metavar="PROVIDER:MODEL",
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
    if suffix is not None and not path.suffix and not path.is_dir():
        path = path.with_name(path.name + suffix)

    def refuse(why: str) -> typer.Exit:
        return fail(f"{option} {path}: {why}", EXIT_USAGE)

    if path.is_dir():
        raise refuse("is a directory; give a file name")
    if suffix is not None and path.suffix.lower() != suffix:
        raise refuse(f"the file name must end in {suffix}")
    for source in inputs:
        if path.exists() and source.exists() and os.path.samefile(path, source):
            raise refuse(f"is the input file {source}; writing would overwrite it")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise refuse(f"cannot create its folder ({exc.strerror})") from None
    if not os.access(path if path.exists() else path.parent, os.W_OK):
        raise refuse("not writable (permission denied)")
    if not path.exists():  # permissions are not the whole story (root, /proc, a full disk)
        try:
            path.open("xb").close()
        except OSError as exc:
            raise refuse(f"cannot write it ({exc.strerror or exc})") from None
        path.unlink()
    return path


def check_format(fmt: str | None) -> None:
    """A usage error (exit status 2) for a ``--format`` no reader knows."""
    if fmt is not None and fmt not in FORMATS:
        raise fail(f"--format {fmt}: unknown format; known: {', '.join(FORMATS)}", EXIT_USAGE)


def require_file(path: Path, *, sessions: bool = False) -> Path:
    """``path`` if it is a readable file (with ``sessions``, or a folder a reader takes as one
    session: an OpenHands conversation folder); else a one-line usage error (exit status 2)."""
    if not path.exists():
        raise fail(f"{path}: no such file", EXIT_USAGE)
    if not path.is_file() and not (sessions and is_conversation_folder(path)):
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
    given = {"model": model, "context_window": window}
    overrides: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    if summarizer is not None:
        overrides["summarizer"] = parse_summarizer_spec(summarizer)
    if config is not None:
        require_file(config)
    return load_config(config, **overrides)


@dataclass(frozen=True)
class Reading:
    """One run of a recorded session as every command reads it: the transcript and the model
    and window it is counted, replayed and billed with (see
    :func:`~contextwarden._replay.resolve_model`)."""

    file: Path
    transcript: Transcript
    resolved: ResolvedModel

    @property
    def config(self) -> WardenConfig:
        return self.resolved.config

    @property
    def model(self) -> str:
        return self.resolved.name

    @property
    def window(self) -> int:
        return self.resolved.window

    def title(self) -> str:
        """``FILE (run 2 of 3): FORMAT, N messages, model M, window W`` (markup escaped)."""
        t = self.transcript
        which = f" (run {t.run} of {t.runs})" if t.runs > 1 else ""
        return (
            f"[bold]{escape(str(self.file))}[/bold]{which}: {t.format}, "
            f"{plural(len(t.messages), 'message')}, model {escape(self.model)}, "
            f"window {self.window:,}"
        )

    def as_json(self) -> dict[str, Any]:
        """What every command's JSON says about the run it read."""
        t = self.transcript
        data: dict[str, Any] = {"file": str(self.file), "format": t.format}
        if t.runs > 1:
            data |= {"run": t.run, "runs": t.runs}
        data |= {"model": self.model, "window": self.window, "priced": self.resolved.priced}
        data |= {"assumed": list(self.resolved.notes), "warnings": list(t.warnings)}
        return data


def one_or_runs(file: Path, items: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON of a command over a file: one run's object, or ``{"file", "runs": [...]}``."""
    return items[0] if len(items) == 1 else {"file": str(file), "runs": items}


def warn_about(file: Path, warnings: Iterable[str], assumed: Iterable[str] = ()) -> None:
    """What a reader warned about ``file`` and what was assumed about its model, on stderr,
    each once: the same lines from every command."""
    said: set[str] = set()
    for label, notes in (("warning", warnings), ("assumed", assumed)):
        for note in notes:
            if note not in said:
                said.add(note)
                err.print(
                    f"[yellow]{label}:[/yellow] {escape(str(file))}: {escape(note)}",
                    soft_wrap=True,
                )


def plural(n: int, noun: str) -> str:
    """``1 call``, ``2 calls``, ``1,024 messages``."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def read_session(
    file: Path,
    config: Path | None = None,
    *,
    model: str | None = None,
    window: int | None = None,
    fmt: str | None = None,
    run: int | None = None,
    summarizer: str | None = None,
) -> list[Reading]:
    """Read ``file`` (every run, or run ``run``) as every command reads it, behind a spinner
    (a large session takes seconds): the format detected or ``fmt``; the model and window
    settled by one rule (:func:`~contextwarden._replay.resolve_model`: the options,
    the config, the recording, then assumptions, each stated). What the reader warned about
    and what was assumed go to stderr, once each. Usage errors (exit status 2) for a missing
    file, an unknown format, a run the file does not hold."""
    require_file(file, sessions=True)
    check_format(fmt)
    cfg = config_for(config, model=model, window=window, summarizer=summarizer)
    size = file.stat().st_size
    with progress(f"reading {file.name} ({size / 1e6:,.1f} MB)", None):
        runs = load_transcripts(file, format=fmt)  # type: ignore[arg-type]
    if run is not None:
        if run > len(runs):
            raise fail(f"--run {run}: {file} holds {plural(len(runs), 'run')}", EXIT_USAGE)
        runs = [runs[run - 1]]
    readings = [Reading(file, t, resolve_model(cfg, t.model, t.window)) for t in runs]
    empty = [
        f"no messages in this {r.transcript.format} file"
        for r in readings
        if not r.transcript.messages
    ]
    warn_about(
        file,
        [*(w for r in readings for w in r.transcript.warnings), *empty],
        ["; ".join(r.resolved.notes) for r in readings if r.resolved.notes],
    )
    return readings
