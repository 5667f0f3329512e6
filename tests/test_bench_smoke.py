"""The benchmark harness still runs: ``python -m bench --quick --only overhead`` on small
histories writes a well-formed ``overhead.json``. Speed is never asserted here (see bench/)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quick_overhead_run_writes_results(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--quick",
            "--only",
            "overhead",
            "--lengths",
            "40,80",
            "--out",
            str(tmp_path),
            "--no-report",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads((tmp_path / "overhead.json").read_text())
    assert data["quick"] is True
    rows = data["rows"]
    kinds = {r["kind"] for r in rows}
    assert "generated" in kinds
    # every history kind x setup x length was measured
    assert len(rows) == len(kinds) * len(data["setups"]) * 2
    for row in rows:
        assert row["messages"] in (40, 80)
        assert row["cold"]["n"] >= 1 and row["cold"]["p50_ms"] > 0
        assert row["warm"]["n"] >= 1 and row["warm"]["p50_ms"] > 0
        # the warden never adds tokens, and always returns a non-empty request
        assert 0 < row["tokens_after"] <= row["tokens_before"]
        assert row["messages_after"] >= 2
    assert {s["setup"] for s in data["scaling_exponents"]} == set(data["setups"])
