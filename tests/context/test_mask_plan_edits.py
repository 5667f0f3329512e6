"""Mask edits that know what a tool result is, recorded in the log: the latest read of a file the
agent edits by quoting it stays whole (``Edit.keep``), superseded outputs become a one-line
marker when asked (``Edit.superseded``), and a log replayed elsewhere gives the same request."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextwarden import Warden, WardenConfig
from contextwarden._exceptions import FormatError
from contextwarden._log import Compaction, Mask, edit_from_dict
from contextwarden._markers import MASK_MARKER_RE, SUPERSEDED_MARKER_RE
from contextwarden.store.logs import MemoryLogStore

#: masks as soon as 4k tokens can go (these tests are about what a mask keeps, not when)
EAGER: dict[str, Any] = {"policy": {"mode": "immediate"}}
FILE = "\n".join(f"    value_{i} = compute_value_{i}(config_entry)  # line {i}" for i in range(60))


def _call(cid: str, name: str, **args: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": cid,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ],
    }


def _result(cid: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": text}


def _history(edit: dict[str, Any], steps: int = 40) -> list[dict[str, Any]]:
    """A read of src/app.py, an edit of it, then many unrelated long outputs."""
    out: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the bug in src/app.py"},
        _call("read1", "Read", file_path="src/app.py"),
        _result("read1", FILE),
        _call("edit1", edit["name"], **edit["args"]),
        _result("edit1", "The file src/app.py has been updated."),
    ]
    for i in range(steps):
        out += [
            _call(f"run{i}", "Bash", command=f"python -m pytest tests/test_{i}.py -q"),
            _result(f"run{i}", "\n".join(f"test_{i}_{k} PASSED [{k}%]" for k in range(60))),
        ]
    out.append({"role": "assistant", "content": "Done."})
    return out


QUOTING = {
    "name": "Edit",
    "args": {"file_path": "src/app.py", "old_string": "value_3 =", "new_string": "value_3 :="},
}
SHELL = {"name": "Bash", "args": {"command": "sed -i 's/value_3 =/value_3 :=/' src/app.py"}}


def _run(history: list[dict[str, Any]], warden: Warden, window: int = 40_000) -> Any:
    out = None
    for k in range(3, len(history) + 1):
        if history[k - 1]["role"] == "assistant":
            out = warden.transform_openai(
                history[: k - 1], model="gpt-4o", window=window, conversation="c"
            )
    return out


def _contents(request: list[dict[str, Any]]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request if m["role"] == "tool"}


def test_the_read_of_a_file_edited_by_quoting_stays_whole() -> None:
    warden = Warden(WardenConfig.model_validate(EAGER))
    request, _ = _run(_history(QUOTING), warden)
    sent = _contents(request)
    masks = [e for e in warden.edit_log("c") if isinstance(e, Mask)]
    assert masks and all("read1" in e.keep for e in masks)
    assert sent["read1"] == FILE  # what the next Edit must quote is still there
    assert MASK_MARKER_RE.search(sent["run0"])  # the old test runs are masked


def test_an_edit_that_quotes_nothing_protects_nothing() -> None:
    warden = Warden(WardenConfig.model_validate(EAGER))
    request, _ = _run(_history(SHELL), warden)
    assert MASK_MARKER_RE.search(_contents(request)["read1"])
    assert all(not e.keep for e in warden.edit_log("c") if isinstance(e, Mask))


def test_without_the_plan_every_old_result_is_masked() -> None:
    warden = Warden(WardenConfig.model_validate({**EAGER, "mask": {"plan": False}}))
    request, _ = _run(_history(QUOTING), warden)
    assert MASK_MARKER_RE.search(_contents(request)["read1"])


def test_superseded_outputs_become_a_one_line_marker_when_asked() -> None:
    history = _history(QUOTING)
    # the same test run again, last: the earlier run is superseded
    again = [_call("again", "Bash", command="python -m pytest tests/test_39.py -q")]
    again.append(_result("again", "\n".join(f"test_39_{k} PASSED" for k in range(60))))
    more = _history(QUOTING, steps=60)[2 + 4 + 2 * 40 : -1]  # runs 40..59: a mask edit comes
    history = history[:-1] + again + more + [{"role": "assistant", "content": "Done."}]
    warden = Warden(WardenConfig.model_validate({**EAGER, "mask": {"supersede": True}}))
    request, _ = _run(history, warden)
    sent = _contents(request)
    assert SUPERSEDED_MARKER_RE.search(sent["run39"]) and "by again" in sent["run39"]
    recorded = {
        rid: by for e in warden.edit_log("c") if isinstance(e, Mask) for _, rid, by in e.superseded
    }
    assert recorded["run39"] == "again"


def test_the_plan_is_stored_and_a_restored_log_sends_the_same_request() -> None:
    store = MemoryLogStore()
    history = _history(QUOTING)
    first = Warden(WardenConfig.model_validate(EAGER), log_store=store)
    alone = Warden(WardenConfig.model_validate(EAGER))
    for k in range(3, len(history) + 1):
        if history[k - 1]["role"] != "assistant":
            continue
        part = history[: k - 1]
        # a fresh warden on the same store each call: the log is read back every time
        served, _ = Warden(WardenConfig.model_validate(EAGER), log_store=store).transform_openai(
            part, model="gpt-4o", window=40_000
        )
        expected, _ = alone.transform_openai(part, model="gpt-4o", window=40_000)
        assert served == expected
    del first
    edits = [edit_from_dict(e.as_dict()) for e in alone.edit_log(_key(alone))]
    assert any(isinstance(e, Mask) and e.keep for e in edits)


def _key(warden: Warden) -> str:
    return next(iter(warden._table._conversations))


def test_a_record_reads_back_as_the_edit_of_its_kind() -> None:
    raw = Mask(upto=7).as_dict()
    del raw["keep"], raw["superseded"]
    assert edit_from_dict(raw) == Mask(upto=7)
    planned = Mask(reason="pays", upto=9, keep=("a",), superseded=((4, "b", "c"),))
    assert edit_from_dict(json.loads(json.dumps(planned.as_dict()))) == planned
    cut = Compaction(removed=((2, 5),), ref="cw:x", summary="s", call=3)
    assert edit_from_dict(json.loads(json.dumps(cut.as_dict()))) == cut
    assert set(cut.as_dict()) >= {"kind", "removed", "summary"} and "upto" not in cut.as_dict()
    with pytest.raises(FormatError, match="edit kind"):
        edit_from_dict({"kind": "erase"})


def test_a_names_line_leaves_out_what_the_agent_wrote_before() -> None:
    # the agent's own command names compute_value_3 before the read: the request holds it there
    history = _history(SHELL)
    history[2:2] = [
        _call("grep0", "Bash", command="grep -n compute_value_3 src/app.py"),
        _result("grep0", "4:    value_3 = compute_value_3(config_entry)  # line 3"),
    ]
    request, _ = _run(history, Warden(WardenConfig.model_validate(EAGER)))
    read = _contents(request)["read1"]
    assert MASK_MARKER_RE.search(read)
    names_line = next(ln for ln in read.split("\n") if ln.startswith("[names in them: "))
    assert "compute_value_3" not in names_line
    assert "compute_value_4" in names_line
    assert "compute_value_3" in json.dumps(request)
