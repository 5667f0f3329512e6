"""A digest of every request contextwarden's defaults send on every recording, to show that a
refactor left them byte-identical.

    PYTHONPATH=src .venv/bin/python -m bench.request_digests out/after.json
    PYTHONPATH=<old checkout>/src .venv/bin/python -m bench.request_digests out/before.json
    .venv/bin/python -m bench.request_digests --compare out/before.json out/after.json

Each recording (``bench/_recordings.py``) is replayed as the judges' measures replay it (before
the k-th assistant message the sender gets the messages before it) through one
``Warden().transform_openai(..., model="gpt-4o", window=W)`` per recording and window (16k and
gpt-4o's 128k); each request is hashed as sorted-key JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import contextwarden as cw

from ._recordings import recordings

WINDOWS = (16_000, 128_000)


def digests() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for rec in recordings():
        msgs = [dict(m) for m in rec.messages]
        calls = [k for k, m in enumerate(msgs) if m["role"] == "assistant"]
        for window in WINDOWS:
            warden, seen = cw.Warden(), []
            try:
                for k in calls:
                    request = warden.transform_openai(msgs[:k], model="gpt-4o", window=window)[0]
                    text = json.dumps(request, sort_keys=True, ensure_ascii=False)
                    seen.append(hashlib.sha256(text.encode()).hexdigest()[:16])
            except Exception as exc:  # a refusal is part of what is compared
                seen.append(f"error {type(exc).__name__}")
            out[f"{rec.source}/{rec.name}@{window}"] = seen
    return out


def compare(before: dict[str, list[str]], after: dict[str, list[str]]) -> int:
    differing = 0
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key, []), after.get(key, [])
        n = sum(x != y for x, y in zip(a, b, strict=False)) + abs(len(a) - len(b))
        if n:
            first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
            print(f"{key}: {n} of {max(len(a), len(b))} differ (first at call {first})")
        differing += n
    total = sum(len(v) for v in before.values())
    print(f"{len(before)} runs, {total} requests, {differing} differing")
    return 1 if differing else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", help="where to write the digests (JSON)")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args()
    if args.compare:
        before, after = (json.loads(Path(p).read_text()) for p in args.compare)
        sys.exit(compare(before, after))
    if not args.out:
        ap.error("give a file to write, or --compare BEFORE AFTER")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(digests(), indent=0))


if __name__ == "__main__":
    main()
