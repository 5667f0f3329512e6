"""``contextwarden replay`` and ``compact`` through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextwarden._tokens import get_counter
from contextwarden._transcripts import load_transcript
from contextwarden.cli import app

DEMO = Path(__file__).resolve().parents[2] / "examples" / "data" / "demo-session.traj.json"

runner = CliRunner()

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_json_is_exactly_one_object(openai_file: Path) -> None:
    result = runner.invoke(
        app, ["replay", str(openai_file), "--model", "gpt-4o", "--window", "16000", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)  # fails on anything but one JSON document
    assert result.stdout.count("\n") == 1
    totals = data["totals"]
    assert {"input_tokens_without", "input_tokens_with", "saved_ratio"} <= set(totals)
    assert {"compactions", "invalid_requests"} <= set(totals)
    assert len(data["calls"]) == 31 and totals["invalid_requests"] == 0
    assert totals["input_tokens_with"] < totals["input_tokens_without"]
    assert sum(c["tokens_with"] for c in data["calls"]) == totals["input_tokens_with"]
    # Billed, cache-aware, beside the list price: per call and in total.
    billed = {"billed_cost_without", "billed_cost_with", "billed_saved_ratio"}
    assert billed | {"cache_hit_ratio_without", "cache_hit_ratio_with", "cost_with"} <= set(totals)
    for key in ("cached_without", "written_without", "cached_with", "written_with"):
        assert all(isinstance(c[key], int) for c in data["calls"])
    assert sum(c["billed_cost_with"] for c in data["calls"]) == pytest.approx(
        totals["billed_cost_with"]
    )
    assert data["pricing"] == "model" and data["cache_pricing"]["input_per_mtok"] == 2.5


def test_table_and_plot_in_a_new_folder(openai_file: Path, tmp_path: Path) -> None:
    plot = tmp_path / "new" / "deeper" / "replay.png"
    result = runner.invoke(
        app,
        ["replay", str(openai_file), "-m", "gpt-4o", "-w", "16000", "--plot", str(plot)],
    )
    assert result.exit_code == 0, result.output
    assert "Totals" in result.stdout and "fewer input tokens" in result.stdout
    assert "billed input cost" in result.stdout and "cache hit ratio" in result.stdout
    assert plot.read_bytes()[:8] == PNG_MAGIC
    assert png_height(plot) > png_height_of_a_one_panel_plot(openai_file, tmp_path)


def png_height(path: Path) -> int:
    return int.from_bytes(path.read_bytes()[20:24], "big")  # IHDR: width, then height


def png_height_of_a_one_panel_plot(openai_file: Path, tmp_path: Path) -> int:
    """A model without a price has no billed-cost panel: the plot is one panel tall."""
    plot = tmp_path / "one.png"
    args = ["replay", str(openai_file), "-m", "no-such-model", "-w", "16000", "--plot", str(plot)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return png_height(plot)


def test_the_headline_says_what_contextwarden_did_with_the_figures_of_the_json(
    openai_file: Path,
) -> None:
    args = ["replay", str(openai_file), "-m", "gpt-4o", "-w", "16000"]
    result = runner.invoke(app, [*args, "--json"])
    t = json.loads(result.stdout)["totals"]
    table = runner.invoke(app, args)
    assert table.exit_code == 0, table.output
    last = table.stdout.strip().splitlines()[-1]  # one line in a pipe, never wrapped
    assert t["not_payable_without"] > 0 and t["not_payable_with"] == 0
    made, payable = t["not_payable_without"], t["calls"] - t["not_payable_without"]
    assert last.startswith(
        f"contextwarden made {made} of the {t['calls']} calls fit the 16,000-token window "
        "that did not fit without it; "
    ), last
    paid, ours = t["payable_billed_cost_without"], t["billed_cost_with_on_payable"]
    assert f"on the {payable} calls that fit without it, it bills " in last
    assert f"(${paid:,.4f} -> ${ours:,.4f})" in last
    whole, whole_with = t["billed_cost_without"], t["billed_cost_with"]
    assert f"the whole session costs ${whole_with:,.4f} with it (${whole:,.4f} had" in last
    assert "cache-aware at gpt-4o's prices" in last
    assert f"{t['saved_ratio']:.1%} fewer input tokens" in last
    # the table states the same figures, once each
    rows = {line.split("│")[1].strip(): line for line in table.stdout.splitlines() if "│" in line}
    fit = rows["calls that do not fit the 16,000-token window with room for the reply"]
    assert fit.split("│")[2].strip() == str(made) and fit.split("│")[3].strip() == "0"
    assert f"${whole:,.4f}" in rows["billed input cost, whole session (cache-aware)"]
    assert (
        f"${paid:,.4f}"
        in rows[f"billed input cost, the {payable} calls that fit without contextwarden"]
    )
    assert not any("over the" in name for name in rows)


def test_pricing_anthropic(openai_file: Path) -> None:
    base = ["replay", str(openai_file), "-m", "gpt-4o", "-w", "16000", "--json"]
    own = json.loads(runner.invoke(app, base).stdout)
    result = runner.invoke(app, [*base, "--pricing", "anthropic"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["pricing"] == "anthropic"
    assert data["cache_pricing"]["read_per_mtok"] == pytest.approx(0.25)  # 0.1 x $2.50
    assert data["cache_pricing"]["write_per_mtok"] == pytest.approx(3.125)  # 1.25 x $2.50
    assert data["totals"]["input_tokens_with"] == own["totals"]["input_tokens_with"]
    bad = runner.invoke(app, [*base, "--pricing", "cheap"])
    assert bad.exit_code == 2 and "cheap" in bad.stderr


def test_anthropic_file(anthropic_file: Path) -> None:
    args = ["replay", str(anthropic_file), "-m", "claude-sonnet-4-5", "-w", "16000", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["provider"] == "anthropic" and data["totals"]["invalid_requests"] == 0


def test_config_switches_compaction_off(openai_file: Path) -> None:
    Path("cw.yaml").write_text("compaction: {enabled: false}\n")
    args = ["replay", str(openai_file), "-m", "gpt-4o", "-w", "16000", "--json", "-c", "cw.yaml"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["totals"]["compactions"] == 0


def test_compact_writes_the_input_format(openai_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "compacted" / "session.json"
    args = ["compact", str(openai_file), "-m", "gpt-4o", "-w", "16000", "-o", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    before = load_transcript(openai_file)
    after = load_transcript(out)
    assert after.format == before.format == "openai"
    assert isinstance(json.loads(out.read_text()), list)  # a JSON list in, a JSON list out
    counter = get_counter("gpt-4o")
    assert counter.count_messages(after.messages) <= 16000 < counter.count_messages(before.messages)
    assert after.messages[0] == before.messages[0]


def test_compact_refuses_to_overwrite_its_input(openai_file: Path) -> None:
    args = ["compact", str(openai_file), "-m", "gpt-4o", "-o", str(openai_file)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "overwrite" in result.stderr


@pytest.mark.skipif(not DEMO.is_file(), reason="examples/data/demo-session.traj.json not present")
def test_the_readme_demo(tmp_path: Path) -> None:
    """What `make demo` runs, on the shipped recording: every call fits with contextwarden, no
    request is invalid, and the headline says so in the figures the JSON holds."""
    plot = tmp_path / "out" / "demo.png"
    args = ["replay", str(DEMO), "--model", "deepseek-v4-flash", "--window", "32000"]
    result = runner.invoke(app, [*args, "--plot", str(plot), "--json"])
    assert result.exit_code == 0, result.output
    t = json.loads(result.stdout)["totals"]
    assert t["invalid_requests"] == 0 and t["saved_ratio"] > 0 and t["not_payable_with"] == 0
    assert t["billed_cost_with"] is not None and t["billed_saved_ratio"] is not None
    assert plot.read_bytes()[:8] == PNG_MAGIC
    last = runner.invoke(app, args).stdout.strip().splitlines()[-1]
    assert last.startswith(
        f"contextwarden made {t['not_payable_without']} of the {t['calls']} calls fit the "
        "32,000-token window"
    )
    assert "cache-aware at deepseek-v4-flash's prices" in last
    assert "saves 0.0%" not in last


@pytest.mark.parametrize("columns", [80, 120])
def test_the_table_fits_the_terminal_without_clipping(openai_file: Path, columns: int) -> None:
    args = ["replay", str(openai_file), "-m", "gpt-4o", "-w", "16000", "--every", "5"]
    result = runner.invoke(app, args, env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= columns
    assert "…" not in result.stdout  # no number or label cut short
    header = "\n".join(lines[:8])
    assert "billed" in header and "written" in header
    assert ("saved" in header) is (columns >= 100)


# -- agents' own files: the recorded window, an unknown model, several runs ----------------------
def test_a_model_missing_from_the_registry_replays_with_the_window_the_file_records(
    shared_data: Path, tmp_path: Path
) -> None:
    source = shared_data / "codex" / "raze-codex-session.jsonl"
    renamed = tmp_path / "rollout.jsonl"
    renamed.write_text(
        source.read_text(encoding="utf-8").replace('"gpt-5.4"', '"gpt-5.9"'),
        encoding="utf-8",
    )
    result = runner.invoke(app, ["replay", str(renamed), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["model"] == "gpt-5.9" and data["window"] == 258_400
    assert data["totals"]["invalid_requests"] == 0
    assert "not in the registry: assumed to be like gpt-5" in data["assumed"][0]
    assert data["totals"]["billed_cost_with"] is not None  # priced as its family
    assert data["assumed"] == [
        "model 'gpt-5.9' is not in the registry: assumed to be like gpt-5 (its prices)"
    ]
    text = runner.invoke(app, ["replay", str(renamed)], env={"COLUMNS": "200"})
    assert text.exit_code == 0 and "assumed:" in text.stderr
    assert "register_model" not in text.output


def test_a_recording_without_a_model_is_replayed_on_an_assumption(shared_data: Path) -> None:
    result = runner.invoke(
        app, ["replay", str(shared_data / "swe-agent/pydicom-1458.traj"), "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["format"] == "swe-agent" and data["totals"]["calls"] == 12
    assert data["assumed"][0].startswith("the recording names no model")


def test_every_run_of_a_file_is_replayed_or_the_one_asked_for(
    shared_data: Path, tmp_path: Path
) -> None:
    run = json.loads((shared_data / "openhands/fastjson2-2775.output.jsonl").read_text("utf-8"))
    short = {**run, "instance_id": "short-1", "history": run["history"][:12]}
    path = tmp_path / "output.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (run, short)), encoding="utf-8")
    both = json.loads(runner.invoke(app, ["replay", str(path), "--json"]).stdout)
    assert [r["run"] for r in both["runs"]] == [1, 2]
    assert both["runs"][0]["totals"]["calls"] > both["runs"][1]["totals"]["calls"] > 0
    second = json.loads(runner.invoke(app, ["replay", str(path), "--run", "2", "--json"]).stdout)
    assert second["totals"] == both["runs"][1]["totals"]
    missing = runner.invoke(app, ["replay", str(path), "--run", "3"])
    assert missing.exit_code == 2 and f"--run 3: {path} holds 2 runs" in missing.stderr


def test_the_report_names_its_baseline(shared_data: Path) -> None:
    path = shared_data / "pi-based/gjc-youtube-transcript.jsonl"  # its 155 replies carry usage
    data = json.loads(runner.invoke(app, ["replay", str(path), "--json"]).stdout)
    totals = data["totals"]
    assert totals["baseline"] == "recorded-usage" and totals["recorded_calls"] == totals["calls"]
    assert totals["payable_billed_cost_without"] == pytest.approx(totals["recorded_billed_cost"])
    assert totals["invalid_requests"] == 0


def test_reader_warnings_go_to_stderr(shared_data: Path) -> None:
    path = shared_data / "pi-based/gjc-youtube-transcript.jsonl"
    result = runner.invoke(app, ["replay", str(path), "--json", "--window", "32000"])
    assert result.exit_code == 0, result.output
    assert "warning:" in result.stderr and "line 60: not valid JSON" in result.stderr
    assert json.loads(result.stdout)["warnings"]
