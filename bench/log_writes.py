"""Bytes the conversation log store writes per call: the whole record rewritten on every call (as
the store did) against the store's appends (what each call adds, and the small header).

    PYTHONPATH=src .venv/bin/python -m bench.log_writes [--steps 200]

A synthetic session of ``--steps`` calls (a bash call and a large result each, as
``tests/context/test_continuity.openai_steps`` makes them) and every real recording, each at
``--window`` (the windows' edits come in too: a compaction's summary is written once). The
whole-record figure is the size of the JSON record the previous store wrote on each call
(``Conversation.record()``), the append figure the bytes the SQLite store was asked to write.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from contextwarden import Warden
from contextwarden.store.logs import SQLiteLogStore, dumps

from ._recordings import recordings

# the synthetic session is the tests' own (tests/context/test_continuity.py)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "context"))
from test_continuity import openai_steps  # noqa: E402


def measure(histories: list[list[dict[str, Any]]], window: int) -> tuple[int, int, int, int]:
    """(calls, whole-record bytes, appended bytes, last call's whole record) over ``histories``."""
    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteLogStore(Path(folder) / "logs.db")
        warden = Warden(log_store=store)
        whole = last = 0
        for history in histories:
            _, result = warden.transform_openai(history, model="gpt-4o", window=window)
            conv = warden._table._conversations[result.conversation]  # noqa: SLF001 (a measure)
            last = len(dumps(conv.record()))
            whole += last
        return len(histories), whole, store.sqlite.bytes_written, last


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--window", type=int, default=32_000)
    args = ap.parse_args()
    runs = {"synthetic": openai_steps("Fix the failing test", args.steps)[1:]}
    for rec in recordings():
        msgs = [dict(m) for m in rec.messages]
        runs[rec.name] = [msgs[:k] for k, m in enumerate(msgs) if m["role"] == "assistant"]
    print(f"{'session':58} {'calls':>5} {'whole/call':>11} {'append/call':>11} {'ratio':>6}")
    for name, histories in runs.items():
        try:
            calls, whole, appended, last = measure(histories, args.window)
        except Exception as exc:  # a recording the warden refuses at this window
            print(f"{name[:58]:58} not measured: {type(exc).__name__}")
            continue
        print(
            f"{name[:58]:58} {calls:5d} {whole / calls:11.0f} {appended / calls:11.0f} "
            f"{whole / max(appended, 1):6.1f}"
        )


if __name__ == "__main__":
    main()
