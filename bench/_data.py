"""The histories every benchmark runs on: the real recorded trajectories, real histories of a
chosen length (recordings concatenated), and generated agent histories.

* :func:`real_trajectories` loads every file under the data folder with
  :func:`contextwarden._transcripts.load_transcript` (default ``../shared/data/trajectories``
  beside the repository; ``CONTEXTWARDEN_SHARED_DATA`` overrides it, as in the tests).
* :func:`real_history` reaches ``n`` messages by replaying the mini-swe-agent recordings one
  after another: the first recording's system prompt and task, then the tool loop of every
  recording in turn (cycling when they run out). Each replayed copy gets fresh tool-call ids
  (``~r2``, ``~r3``...) so no two messages are identical: a copy would otherwise be a free
  cache hit for the counter and flatter a cold measurement.
* :func:`generated_history` is a deterministic synthetic agent session (system, task, then
  assistant tool calls and tool results of log-normal size, some with thinking), for when the
  real data are absent and to check that the figures are not an artefact of one corpus.

Every history ends on a tool result (what an agent holds just before its next call) and is
valid for the OpenAI validator. Histories are built once per process and memoised; callers
must not mutate them (Message objects are immutable anyway).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from contextwarden._messages import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)

__all__ = [
    "DATA_DIR",
    "LENGTHS",
    "RealTrajectory",
    "fresh_copy",
    "generated_history",
    "have_real_data",
    "real_history",
    "real_trajectories",
    "units",
]

#: The real trajectories (read-only, outside the repository).
DATA_DIR = Path(
    os.environ.get(
        "CONTEXTWARDEN_SHARED_DATA",
        Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories",
    )
)
#: History lengths (messages) the overhead and peer benchmarks sweep.
LENGTHS: tuple[int, ...] = (100, 300, 1_000, 3_000)


@dataclass(frozen=True)
class RealTrajectory:
    """One recording: a short ``name`` (file stem), its ``source`` folder (the agent), the
    model that ran it, its transcript format and its messages."""

    name: str
    source: str
    model: str | None
    format: str
    messages: tuple[Message, ...]
    path: Path


def have_real_data() -> bool:
    """True when the real trajectories folder exists and holds files."""
    return DATA_DIR.is_dir() and any(p.is_file() for p in DATA_DIR.rglob("*"))


@functools.cache
def real_trajectories() -> tuple[RealTrajectory, ...]:
    """Every recording under :data:`DATA_DIR`, sorted by source then name (empty when absent)."""
    from contextwarden._exceptions import TranscriptError
    from contextwarden._transcripts import load_transcript

    if not DATA_DIR.is_dir():
        return ()
    out: list[RealTrajectory] = []
    for path in sorted(p for p in DATA_DIR.rglob("*") if p.is_file()):
        if path.name.lower().startswith("readme"):
            continue
        name = path.name.split(".")[0]
        try:
            tr = load_transcript(path)
        except TranscriptError:
            # a format only the bench reads (Codex rollouts, aider logs, SWE-agent .traj,
            # OpenHands UI exports, pi excerpts): bench/_recordings.py's plain chat list
            from contextwarden.formats import from_openai

            from ._recordings import load_recording

            msgs = tuple(from_openai(list(load_recording(path).messages)))
            out.append(RealTrajectory(name, path.parent.name, None, "bench", msgs, path))
            continue
        out.append(
            RealTrajectory(name, path.parent.name, tr.model, tr.format, tuple(tr.messages), path)
        )
    return tuple(out)


def units(messages: Sequence[Message]) -> list[tuple[Message, ...]]:
    """The complete tool-loop units of ``messages`` after its task: an assistant message and the
    tool messages answering it, or a lone user/assistant message. A unit whose calls are not
    all answered (the final ``submit`` call of a recording) is left out."""
    start = next((i + 1 for i, m in enumerate(messages) if m.role == "user"), 0)
    out: list[tuple[Message, ...]] = []
    i = start
    while i < len(messages):
        msg = messages[i]
        unit = [msg]
        i += 1
        while i < len(messages) and messages[i].role == "tool":
            unit.append(messages[i])
            i += 1
        wanted = {c.id for c in msg.tool_calls}
        answered = {r.tool_call_id for m in unit[1:] for r in m.tool_results}
        if msg.role == "tool" or wanted - answered:
            continue
        out.append(tuple(unit))
    return out


def _rename(message: Message, suffix: str) -> Message:
    """``message`` with every tool-call id suffixed (a distinct copy with the same text)."""
    if not suffix:
        return message
    blocks = []
    for b in message.content:
        if isinstance(b, ToolCallBlock):
            b = dataclasses.replace(b, id=b.id + suffix)
        elif isinstance(b, ToolResultBlock):
            b = dataclasses.replace(b, tool_call_id=b.tool_call_id + suffix)
        blocks.append(b)
    return message.replace(content=tuple(blocks))


def fresh_copy(messages: Sequence[Message]) -> list[Message]:
    """New Message objects equal to ``messages`` (no cached counts or fingerprints on them), so
    a cold measurement pays for everything a first sight costs."""
    return [m.replace() for m in messages]


@functools.cache
def _real_pool() -> tuple[tuple[Message, ...], tuple[tuple[Message, ...], ...]]:
    """The head (system + task) of the first mini-swe-agent recording and every recording's
    complete units, in order."""
    trajs = [t for t in real_trajectories() if t.format == "mini-swe-agent"]
    if not trajs:
        raise FileNotFoundError(f"no mini-swe-agent recordings under {DATA_DIR}")
    first = trajs[0].messages
    task = next(i for i, m in enumerate(first) if m.role == "user")
    head = tuple(first[: task + 1])
    pool = tuple(tuple(units(t.messages)) for t in trajs)
    return head, tuple(u for group in pool for u in group)


@functools.cache
def real_history(n: int) -> tuple[Message, ...]:
    """A real history of exactly ``n`` messages (see the module docstring), ending on a tool
    result. Raises :class:`FileNotFoundError` without the real data."""
    head, pool = _real_pool()
    out: list[Message] = list(head)
    lap = 0
    while len(out) < n:
        lap += 1
        suffix = "" if lap == 1 else f"~r{lap}"
        for unit in pool:
            if len(out) >= n:
                break
            out.extend(_rename(m, suffix) for m in unit)
    return _fit(out, n)


def _fit(messages: list[Message], n: int) -> tuple[Message, ...]:
    """``messages`` cut to exactly ``n``: cut, step back to the end of a complete unit, then pad
    with short ``ls`` call/result pairs (and one user nudge when a single slot is left)."""
    out = messages[:n]
    while out and (out[-1].role != "tool" or _open_calls(out)):
        out.pop()
    k = 0
    while len(out) < n:
        k += 1
        if n - len(out) >= 2:
            cid = f"pad-{n}-{k}"
            call = ToolCallBlock(cid, "bash", json.dumps({"command": "ls"}))
            out.append(Message("assistant", (call,)))
            out.append(Message("tool", (ToolResultBlock(cid, "README.md\nsetup.py\nsrc"),)))
        else:
            out.append(Message("user", (TextBlock("Continue with the next step."),)))
    return tuple(out)


def _open_calls(messages: Sequence[Message]) -> bool:
    """True when the last assistant message has calls not answered after it."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "assistant":
            wanted = {c.id for c in messages[i].tool_calls}
            got = {r.tool_call_id for m in messages[i + 1 :] for r in m.tool_results}
            return bool(wanted - got)
    return False


_WORDS = (
    "the file function test error value return import class self module path line config "
    "patch diff python django query model field migration assert expected actual result "
    "traceback raise exception settings request response handler parser token buffer index "
    "cache lookup schema table column row filter order group count sum default option"
).split()


def _prose(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _output(rng: random.Random, chars: int) -> str:
    """Tool output of about ``chars`` characters, in lines like a shell's."""
    lines: list[str] = []
    size = 0
    while size < chars:
        kind = rng.random()
        if kind < 0.5:
            line = f"{rng.randint(1, 999):>4}    {_prose(rng, rng.randint(3, 12))}"
        elif kind < 0.8:
            line = f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py:{rng.randint(1, 900)}: {_prose(rng, 5)}"
        else:
            line = f"    {rng.choice(_WORDS)}({rng.randint(0, 99)}, '{rng.choice(_WORDS)}') = {rng.random():.4f}"
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


@functools.cache
def generated_history(n: int, seed: int = 7) -> tuple[Message, ...]:
    """A synthetic agent session of exactly ``n`` messages (``n >= 3``), deterministic in
    ``seed``: system prompt, task, then units of an assistant message (a short thought, a
    ``bash`` call; one in four with a thinking block) and its tool result (log-normal size,
    median ~1,200 characters, capped at 20,000), a user follow-up every ~40 units."""
    if n < 3:
        raise ValueError(f"generated_history needs n >= 3, got {n}")
    rng = random.Random(seed * 1_000_003 + n)
    out: list[Message] = [
        Message("system", (TextBlock("You are a careful software engineer. " + _prose(rng, 80)),)),
        Message("user", (TextBlock("Fix the bug described below.\n" + _prose(rng, 150)),)),
    ]
    k = 0
    while len(out) < n:
        k += 1
        if k % 40 == 0 and n - len(out) >= 3:
            out.append(Message("user", (TextBlock("Also check: " + _prose(rng, 25)),)))
        cid = f"call_{seed}_{k}"
        blocks: list[TextBlock | ThinkingBlock | ToolCallBlock] = []
        if rng.random() < 0.25:
            blocks.append(ThinkingBlock(_prose(rng, rng.randint(40, 300))))
        blocks.append(TextBlock(_prose(rng, rng.randint(8, 60))))
        command = (
            f"grep -rn '{rng.choice(_WORDS)}' src/{rng.choice(_WORDS)} | head -{rng.randint(5, 80)}"
        )
        blocks.append(ToolCallBlock(cid, "bash", json.dumps({"command": command})))
        out.append(Message("assistant", tuple(blocks)))
        chars = min(20_000, int(rng.lognormvariate(7.1, 1.0)))
        out.append(Message("tool", (ToolResultBlock(cid, _output(rng, chars)),)))
    return _fit(out, n)
