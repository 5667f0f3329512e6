"""Digests of every request ``Warden()`` sends for every recording: a refactor's byte check.

    .venv/bin/python bench/requests_digest.py --out before.json
    .venv/bin/python bench/requests_digest.py --compare before.json

Every recording under the shared data folder (``bench._data.DATA_DIR``) and the repository's
own (``tests/data/recordings``; a file equal to a shared one is replayed once) is read as a
plain OpenAI chat list (:func:`bench._recordings.load_recording`) and replayed call by call
(the context of call *k* is every message before the *k*-th assistant message,
:func:`bench._agent.agent_calls`) through one fresh ``Warden()`` per recording and window, with
the defaults: at a 16k window and at the model's own window. The calls are one second apart
(``now=``), so the cache never goes cold and the replay does not depend on the clock.

Each request (``transform_openai``'s messages) is written as canonical JSON (sorted keys) and
hashed with SHA-256; per recording and window the list of digests and one digest of them all
are kept. ``--compare`` prints where two runs differ (first differing call).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._agent import agent_calls  # noqa: E402
from bench._data import DATA_DIR  # noqa: E402
from bench._recordings import Recording, recordings  # noqa: E402
from contextwarden import Warden  # noqa: E402

#: The model each source's recordings are replayed with (its window is "the model's").
MODELS = {
    "mini-swe-agent": "deepseek-chat",
    "claude-code": "claude-sonnet-4-5",
    "pi": "claude-sonnet-4-5",
}
DEFAULT_MODEL = "gpt-4o"
SMALL_WINDOW = 16_000


def _all_recordings() -> list[Recording]:
    seen: set[bytes] = set()
    out: list[Recording] = []
    for root in (DATA_DIR, ROOT / "tests" / "data" / "recordings"):
        for rec in recordings(root):
            raw = hashlib.sha256(rec.path.read_bytes()).digest()
            if raw in seen:
                continue
            seen.add(raw)
            out.append(rec)
    return out


def replay(rec: Recording, window: int | None) -> dict[str, Any]:
    """The digests of every request of ``rec`` at ``window`` (None: the model's)."""
    model = MODELS.get(rec.source, DEFAULT_MODEL)
    warden = Warden()
    history = list(rec.messages)
    digests: list[str] = []
    errors = 0
    for n, k in enumerate(agent_calls(history)):
        try:
            out, _ = warden.transform_openai(
                history[:k], model=model, window=window, now=1_000_000.0 + n
            )
            body = json.dumps(out, sort_keys=True, ensure_ascii=False).encode()
        except Exception as exc:  # an error is part of the answer: digest its text
            errors += 1
            body = f"{type(exc).__name__}: {exc}".encode()
        digests.append(hashlib.sha256(body).hexdigest())
    whole = hashlib.sha256("".join(digests).encode()).hexdigest()
    return {
        "model": model,
        "calls": len(digests),
        "errors": errors,
        "all": whole,
        "calls_sha": digests,
    }


def run() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for rec in _all_recordings():
        where = "shared" if rec.path.is_relative_to(DATA_DIR) else "tests"
        for label, window in (("16k", SMALL_WINDOW), ("model", None)):
            t0 = time.perf_counter()
            row = replay(rec, window)
            key = f"{where}:{rec.source}/{rec.name}@{label}"
            out[key] = row
            print(
                f"{key:<95} {row['calls']:>4} calls  {row['all'][:16]}  "
                f"{time.perf_counter() - t0:6.1f} s",
                flush=True,
            )
    return out


def compare(before: dict[str, Any], after: dict[str, Any]) -> int:
    differ = 0
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if a is None or b is None:
            print(f"{key}: only in {'after' if a is None else 'before'}")
            differ += 1
            continue
        if a["all"] == b["all"]:
            continue
        differ += 1
        first = next(
            (
                i
                for i, (x, y) in enumerate(zip(a["calls_sha"], b["calls_sha"], strict=False))
                if x != y
            ),
            min(len(a["calls_sha"]), len(b["calls_sha"])),
        )
        print(f"{key}: differs from call {first} of {a['calls']}")
    print(f"{len(before)} replays before, {len(after)} after, {differ} differ")
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="write the digests here")
    parser.add_argument("--compare", type=Path, default=None, help="compare with this run")
    args = parser.parse_args(argv)
    figures = run()
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1))
    if args.compare:
        return compare(json.loads(args.compare.read_text()), figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
