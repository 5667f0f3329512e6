"""The sessions agents keep on this machine: where they are (:func:`find_session_files`) and
what each cost (:func:`summarize_file`, :func:`summarize_files`: in worker processes, with a
cache of the files unchanged since the last run). What the figures mean is told in
docs/sessions.md: the recorded usage when every call has one, else the estimated bill of what
the agent sent, and optionally what contextwarden would have billed (a full replay).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._billing import CachePricing, PromptRequest, bill_after
from .._budget import Budget, reply_tokens
from .._config import WardenConfig
from .._exceptions import ContextWardenError
from .._model_overrides import registry_for
from .._replay import (
    ResolvedModel,
    epoch_seconds,
    prompt_request,
    recorded_usage,
    replay,
    resolve_model,
    sent_context,
)
from .._tokens import get_counter
from .._transcripts import load_transcripts, provider_for
from ._common import Transcript, TranscriptFormat
from .openhands import is_conversation_folder

__all__ = [
    "AGENT_FOLDERS",
    "SessionSummary",
    "find_session_files",
    "summarize_file",
    "summarize_files",
]

#: VS Code-family editors whose ``globalStorage`` may hold Cline / Roo Code tasks, relative to
#: the user's config folder (Linux ``~/.config``, macOS ``~/Library/Application Support``,
#: Windows ``%APPDATA%``), and the extensions' ids.
_EDITORS = ("Code", "Code - Insiders", "VSCodium", "Cursor", "Windsurf")
_CLINE_IDS = ("saoudrizwan.claude-dev", "rooveterinaryinc.roo-cline")

#: Where each agent keeps its sessions, relative to the home folder, with the file pattern
#: (``**`` walks sub-folders).
AGENT_FOLDERS: Mapping[str, tuple[tuple[str, str], ...]] = {
    "claude-code": (
        (".claude/projects", "*/*.jsonl"),
        (".claude/projects", "*/*/subagents/*.jsonl"),
    ),
    "codex": ((".codex/sessions", "**/rollout-*.jsonl"),),
    "gemini-cli": (
        (".gemini/tmp", "*/chats/session-*.json*"),
        (".gemini/tmp", "*/checkpoint-*.json"),
    ),
    "pi": ((".pi/agent/sessions", "**/*.jsonl"),),
    "openhands": ((".openhands/conversations", "*"),),  # a folder per conversation
    "cline": ((".cline/data/sessions", "*/*.messages.json"),)
    + tuple(
        (f"{base}/{editor}/User/globalStorage/{ext}/tasks", "*/api_conversation_history.json")
        for base in (".config", "Library/Application Support", "AppData/Roaming")
        for editor in _EDITORS
        for ext in _CLINE_IDS
    )
    + tuple(
        (f".vscode-server/data/User/globalStorage/{ext}/tasks", "*/api_conversation_history.json")
        for ext in _CLINE_IDS
    ),
}

#: In a folder given by hand: the files that may be sessions (the rest is left alone).
_SESSION_SUFFIXES = (".jsonl", ".json", ".traj", ".md")
#: Files an agent keeps beside its sessions that are not sessions.
_NOT_SESSIONS = frozenset(
    "ui_messages.json task_metadata.json settings.json logs.json package.json base_state.json".split()
)


def find_session_files(
    folders: Sequence[str | os.PathLike[str]] = (), *, home: str | os.PathLike[str] | None = None
) -> list[Path]:
    """The session files under ``folders`` or, when none are given, where the agents keep
    them under ``home`` (default: the user's home folder; see :data:`AGENT_FOLDERS`). Sorted,
    without duplicates. A folder given by hand is walked whole for ``.jsonl``, ``.json``,
    ``.traj`` files and aider's ``.aider.chat.history.md`` (an OpenHands conversation folder is
    one session); a file given is taken as is."""
    found: set[Path] = set()
    if folders:
        for folder in folders:
            root = Path(folder)
            if root.is_file():
                found.add(root)
                continue
            for path in root.rglob("*"):
                if path.parent.name == "events" and is_conversation_folder(path.parent):
                    found.add(path.parent.parent)  # an OpenHands conversation: one session
                elif path.is_file() and _may_be_session(path):
                    found.add(path)
        return sorted(found)
    base = Path(home) if home is not None else Path.home()
    for places in AGENT_FOLDERS.values():
        for folder, pattern in places:
            root = base / folder
            if root.is_dir():
                found.update(
                    p for p in root.glob(pattern) if p.is_file() or is_conversation_folder(p)
                )
    return sorted(found)


def _may_be_session(path: Path) -> bool:
    name = path.name
    if name in _NOT_SESSIONS or name.startswith("."):
        return name.endswith(".aider.chat.history.md")
    if name.endswith(".md"):
        return name.endswith("aider.chat.history.md")
    return name.endswith(_SESSION_SUFFIXES)


@dataclass(frozen=True)
class SessionSummary:
    """One session (one run of a file): ``agent`` (the format read), ``started`` (ISO 8601 of
    its first timestamp, else the file's time), ``tokens`` (prompt tokens over all calls),
    ``billed`` (USD; ``None`` without a price) on ``billed_basis`` (``"recorded-usage"`` or
    ``"estimated"``), ``contextwarden`` (USD, on the same baseline; ``None`` when not estimated
    or without a price), ``assumed`` about the model, the reader's ``warnings``; or ``error``
    when the file could not be read."""

    path: str
    run: int = 1
    runs: int = 1
    agent: str = "?"
    model: str | None = None
    started: str | None = None
    calls: int = 0
    tokens: int = 0
    billed: float | None = None
    billed_basis: str = "estimated"
    contextwarden: float | None = None
    window: int | None = None
    assumed: str | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)
    error: str | None = None

    @property
    def day(self) -> str:
        """The day the session started (``YYYY-MM-DD``), ``"?"`` when unknown."""
        return self.started[:10] if self.started else "?"

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["warnings"] = list(self.warnings)
        data["day"] = self.day
        return data


def summarize_file(
    path: str | os.PathLike[str],
    *,
    estimate: bool = True,
    model: str | None = None,
    window: int | None = None,
    format: TranscriptFormat | None = None,
) -> list[SessionSummary]:
    """Every run of ``path`` summarized (see :class:`SessionSummary`); one summary holding
    the error when the file cannot be read. ``estimate`` runs the contextwarden replay too.
    ``model``, ``window`` and ``format`` are the command's options, settled as every command
    settles them (:func:`~contextwarden._replay.resolve_model`)."""
    shown = os.fspath(path)
    try:
        runs = load_transcripts(path, format=format)
    except ContextWardenError as exc:
        return [SessionSummary(shown, error=str(exc))]
    except (OSError, RecursionError, MemoryError) as exc:  # pragma: no cover - the OS's
        return [SessionSummary(shown, error=f"{shown}: {exc}")]
    config = WardenConfig.model_validate(
        {k: v for k, v in (("model", model), ("context_window", window)) if v is not None}
    )
    out: list[SessionSummary] = []
    for t in runs:
        try:
            out.append(_summarize(t, shown, estimate, resolve_model(config, t.model, t.window)))
        except ContextWardenError as exc:
            out.append(SessionSummary(shown, t.run, t.runs, t.format, t.model, error=str(exc)))
    return out


def _summarize(t: Transcript, shown: str, estimate: bool, r: ResolvedModel) -> SessionSummary:
    info, models = r.info, registry_for(r.config)
    replies = [i for i, m in enumerate(t.messages) if m.role == "assistant"]
    prices = CachePricing.for_model(r.name, models)
    usage = [u for i in replies if (u := recorded_usage(t.messages[i].usage)) is not None]
    billed: float | None = None
    if replies and len(usage) == len(replies):
        basis, tokens = "recorded-usage", sum(u[0] for u in usage)
        if prices is not None:
            billed = sum(
                prices.cost(read, wrote, max(0, n - read - wrote)) for n, read, wrote in usage
            )
    else:
        basis, tokens, cost, longest = "estimated", 0, 0.0, 0
        counter = get_counter(r.name, models=models)
        rules = prices or CachePricing.ratios(0.0)
        tools = list(t.tools) or None
        prefix = json.dumps(tools, sort_keys=True, ensure_ascii=False, default=str)
        overhead = counter.count_messages([], tools=tools)
        # payable when it leaves its reply the room the warden would (replay's rule), in the
        # warden's own default budget for this model at its window
        budget = Budget.for_model(info.name, info.context_window, overrides={info.name: info})
        previous: PromptRequest | None = None
        for i in replies:
            reply = t.messages[i]
            longest = max(longest, reply_tokens(counter.count_message(reply), reply.usage))
            request = prompt_request(
                sent_context(t.messages, t.compactions, i), counter, prefix, overhead, None
            )
            bill, previous = bill_after(previous, request, rules), request
            tokens += request.total
            if request.total <= budget.for_reply(longest).limit:
                cost += bill.cost
        billed = cost if prices is not None else None
    contextwarden = None
    if estimate and replies and prices is not None:
        report = replay(
            t.messages,
            model=r.name,
            window=r.window,
            config=r.config,
            tools=t.tools or None,
            provider=provider_for(t.format),
            compactions=t.compactions,
            validate=False,  # the bill is wanted, not the requests' validity
        )
        contextwarden = report.totals.billed_cost_with_on_payable
        if basis == "estimated":  # both columns from the one replay: the same calls, alike
            billed = report.totals.payable_billed_cost_without
    return SessionSummary(
        path=shown,
        run=t.run,
        runs=t.runs,
        agent=t.format,
        model=r.name if r.name != "unknown" else None,
        started=_started(t, shown),
        calls=len(replies),
        tokens=tokens,
        billed=billed,
        billed_basis=basis,
        contextwarden=contextwarden,
        window=info.context_window,
        assumed="; ".join(r.notes) or None,
        warnings=t.warnings,
    )


def _started(t: Transcript, shown: str) -> str | None:
    for m in t.messages:
        at = epoch_seconds(m.timestamp)
        if at is not None:
            return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")
        if isinstance(m.timestamp, str) and len(m.timestamp) >= 10:
            return m.timestamp  # a local time of unknown zone (aider): its date still holds
    try:
        return datetime.fromtimestamp(Path(shown).stat().st_mtime, UTC).isoformat(
            timespec="seconds"
        )
    except OSError:
        return None


# -- many files: workers and an incremental cache ---------------------------------------------
#: Bumped when a summary's meaning changes: cached figures of another version are not reused.
CACHE_VERSION = 3


def _key(path: Path, estimate: bool, options: Mapping[str, Any]) -> str | None:
    try:  # a conversation folder changes when its events folder gets a file
        st = (path / "events").stat() if path.is_dir() else path.stat()
    except OSError:
        return None
    given = ",".join(f"{k}={v}" for k, v in sorted(options.items()) if v is not None)
    return f"{CACHE_VERSION}|{estimate}|{given}|{path}|{st.st_size}|{st.st_mtime_ns}"


def summarize_files(
    paths: Iterable[Path],
    *,
    estimate: bool = True,
    workers: int | None = None,
    cache: str | os.PathLike[str] | None = None,
    on_done: Callable[[Path, list[SessionSummary]], None] | None = None,
    model: str | None = None,
    window: int | None = None,
    format: TranscriptFormat | None = None,
) -> list[SessionSummary]:
    """:func:`summarize_file` over ``paths`` (in their order), in ``workers`` processes
    (default: one per CPU; 1 works in this process). ``cache``: a JSON file of earlier
    summaries, keyed by path, size, modification time and the options; unchanged files are not
    read again, and the file is rewritten with this run's summaries. ``on_done(path,
    summaries)`` is called as each file is done (for a progress bar)."""
    options: dict[str, Any] = {"model": model, "window": window, "format": format}
    files = list(paths)
    cached = _read_cache(cache)
    fresh: dict[str, list[dict[str, Any]]] = {}
    results: dict[Path, list[SessionSummary]] = {}
    todo: list[Path] = []
    for path in files:
        key = _key(path, estimate, options)
        if key is not None and key in cached:
            results[path] = [_from_dict(d) for d in cached[key]]
            fresh[key] = cached[key]
            if on_done is not None:
                on_done(path, results[path])
        else:
            todo.append(path)
    for path, summaries in _run(todo, estimate, workers, options):
        results[path] = summaries
        key = _key(path, estimate, options)
        if key is not None:
            fresh[key] = [s.as_dict() for s in summaries]
        if on_done is not None:
            on_done(path, summaries)
    if cache is not None:
        _write_cache(cache, fresh)
    return [s for path in files for s in results.get(path, [])]


def _run(
    todo: list[Path], estimate: bool, workers: int | None, options: Mapping[str, Any]
) -> Iterator[tuple[Path, list[SessionSummary]]]:
    count = workers if workers is not None else (os.cpu_count() or 1)
    if count <= 1 or len(todo) <= 1:
        for path in todo:
            yield path, summarize_file(path, estimate=estimate, **options)
        return
    # Large files first: the pool stays busy to the end.
    order = sorted(todo, key=lambda p: -_size(p))
    with ProcessPoolExecutor(max_workers=count) as pool:
        futures = {
            pool.submit(summarize_file, path, estimate=estimate, **options): path for path in order
        }
        for future in as_completed(futures):
            yield futures[future], future.result()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_cache(cache: str | os.PathLike[str] | None) -> dict[str, list[dict[str, Any]]]:
    if cache is None:
        return {}
    try:
        data = json.loads(Path(cache).read_text("utf-8"))
    except (OSError, ValueError):
        return {}  # no cache yet, or a damaged one: everything is read again
    return data if isinstance(data, dict) else {}


def _write_cache(cache: str | os.PathLike[str], data: dict[str, list[dict[str, Any]]]) -> None:
    target = Path(cache)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(json.dumps(data), "utf-8")
        tmp.replace(target)
    except OSError:
        pass  # a cache that cannot be written only costs time next run


def _from_dict(d: Mapping[str, Any]) -> SessionSummary:
    fields = {k: v for k, v in d.items() if k in SessionSummary.__dataclass_fields__}
    fields["warnings"] = tuple(fields.get("warnings") or ())
    return SessionSummary(**fields)
