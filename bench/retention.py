"""Retention: unique facts planted at controlled depths in every real recording, and whether
each survives, verbatim, in the request of the last call, per configuration and per peer.

Four facts per recording, each carrying a token found nowhere else (``cw<kind><hash>``):

* ``task``: a constraint appended to the first user message (depth 0);
* ``early_edit``: a file path edited by a shell ``sed -i`` call inserted at 10% of the tool
  loop (the recording's own shell tool: ``bash``, ``Bash`` or ``execute_bash``);
* ``error``: a pytest failure inserted at 50%: the ``ValueError`` line sits in the middle of
  the output and again in pytest's short summary, second to last, as pytest prints it;
* ``pinned``: a user note wrapped in ``<Pin>...</Pin>`` inserted at 30%.

Survival is exact: the token is a substring of the final request (OpenAI dicts as JSON). Each
row also says whether that request is valid and fits the window (the lossless-only
configurations keep everything because they do not guard the window).
contextwarden configurations are the savings ablation (``bench.savings.CONFIGS``); with
summaries the whole session is replayed call by call with one warden (its summaries and
caches evolve as in a live agent; the 431-call pi session uses the last call alone, to keep
the run short: flagged ``method: last-call``); the others are stateless, so the last call
alone gives the same request. Peers (``bench.peers``) run on the last call's context; the
LangChain summarization peer's fake model writes a fixed sentence, so its figures show only
what it keeps verbatim. The summaries here are the embedded extractive summarizer's.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from typing import Any

from contextwarden._messages import Message, TextBlock, ToolCallBlock, ToolResultBlock
from contextwarden._replay import make_warden
from contextwarden.formats import to_openai

from ._common import Options, write_result
from ._convert import task_text
from ._data import have_real_data, real_trajectories
from .peers import available_peers, budget_for, check_output, last_context
from .savings import CONFIGS, config, model_for, run_cells

__all__ = ["FACTS", "plant", "run"]

FACTS = ("task", "early_edit", "error", "pinned")
_SHELLS = ("bash", "Bash", "execute_bash")
#: Peers whose output equals another row's (same trimming, other counter) or a config's.
_SKIP_PEERS = {
    "trim_messages (cached counter)",
    "contextwarden (cold)",
    "contextwarden (warm)",
    "contextwarden full (warm)",
}


def _token(name: str, kind: str) -> str:
    digest = hashlib.blake2b(f"{name}:{kind}".encode(), digest_size=5).hexdigest()
    return f"cw{kind.replace('_', '')}{digest}"


def _boundary_at(messages: Sequence[Message], fraction: float) -> int:
    """The index of a unit start (an assistant message right after a tool result or user
    message) nearest ``fraction`` of the way through, after the task."""
    task = next((i for i, m in enumerate(messages) if m.role == "user"), 0)
    starts = [
        i
        for i in range(task + 1, len(messages))
        if messages[i].role == "assistant" and messages[i - 1].role in ("tool", "user")
    ]
    if not starts:
        return len(messages)
    return starts[min(len(starts) - 1, int(fraction * len(starts)))]


def _shell(messages: Sequence[Message]) -> str:
    names = {b.name for m in messages for b in m.tool_calls}
    return next((s for s in _SHELLS if s in names), "bash")


def plant(name: str, messages: Sequence[Message]) -> tuple[tuple[Message, ...], dict[str, str]]:
    """``messages`` with the four facts planted, and the token of each fact."""
    facts = {kind: _token(name, kind) for kind in FACTS}
    shell = _shell(messages)
    out = list(messages)
    # insert from the deepest point back, so earlier indices stay valid
    inserts: list[tuple[int, list[Message]]] = []
    path = f"src/{facts['early_edit']}/settings.py"
    inserts.append(
        (
            _boundary_at(messages, 0.10),
            [
                Message(
                    "assistant",
                    (
                        TextBlock("Turn the debug flag off in the settings module."),
                        ToolCallBlock(
                            f"{facts['early_edit']}-call",
                            shell,
                            json.dumps(
                                {"command": f"sed -i 's/DEBUG = True/DEBUG = False/' {path}"}
                            ),
                        ),
                    ),
                ),
                Message("tool", (ToolResultBlock(f"{facts['early_edit']}-call", ""),)),
            ],
        )
    )
    inserts.append(
        (
            _boundary_at(messages, 0.30),
            [
                Message(
                    "user",
                    (
                        TextBlock(
                            f"<Pin>Note from the user: the staging database is {facts['pinned']}; "
                            "never drop it.</Pin>"
                        ),
                    ),
                )
            ],
        )
    )
    error = f"ValueError: {facts['error']}: invalid literal for field 'limit'"
    body = "\n".join(
        [
            "============================= test session starts ==============================",
            "collected 14 items",
            "",
            "tests/test_limits.py ......F",
            "",
            "=================================== FAILURES ===================================",
            "_______________________________ test_limit_parse _______________________________",
            *[f"    line {k}: value = parse_limit(raw[{k}])" for k in range(12)],
            f"E   {error}",
            *[f"    frame {k}: in parse_limit" for k in range(12)],
            "=========================== short test summary info ============================",
            f"FAILED tests/test_limits.py::test_limit_parse - {error}",
            "========================= 1 failed, 13 passed in 0.41s =========================",
        ]
    )
    inserts.append(
        (
            _boundary_at(messages, 0.50),
            [
                Message(
                    "assistant",
                    (
                        TextBlock("Run the limit tests."),
                        ToolCallBlock(
                            f"{facts['error']}-call",
                            shell,
                            json.dumps({"command": "python -m pytest tests/test_limits.py -x"}),
                        ),
                    ),
                ),
                Message("tool", (ToolResultBlock(f"{facts['error']}-call", body, is_error=True),)),
            ],
        )
    )
    for at, new in sorted(inserts, key=lambda x: x[0], reverse=True):
        out[at:at] = new
    task_at = next(i for i, m in enumerate(out) if m.role == "user")
    first = out[task_at]
    constraint = f"\n\nHard constraint: the public function name {facts['task']} must not change."
    out[task_at] = first.replace(content=(*first.content, TextBlock(constraint)))
    return tuple(out), facts


@functools.cache
def _planted(index: int) -> tuple[tuple[Message, ...], dict[str, str]]:
    traj = real_trajectories()[index]
    return plant(traj.name, traj.messages)


def _survival(dicts: list[dict[str, Any]], facts: dict[str, str]) -> dict[str, bool]:
    text = json.dumps(dicts, ensure_ascii=False)
    return {kind: token in text for kind, token in facts.items()}


def _final_request(index: int, window: int, name: str) -> tuple[list[dict[str, Any]], str, Any]:
    traj = real_trajectories()[index]
    messages, _ = _planted(index)
    model = model_for(traj)
    warden = make_warden(config(name))
    stateful = CONFIGS[name] == {} and traj.source != "pi"
    result: Any = None
    if stateful:
        for i, m in enumerate(messages):
            if m.role == "assistant":
                result = warden.transform(messages[:i], model=model, window=window)
    else:
        result = warden.transform(last_context(messages), model=model, window=window)
    method = "replay" if stateful else "last-call"
    return to_openai(list(result.messages)), method, result


def _one(task: tuple[int, int, str]) -> dict[str, Any]:
    index, window, who = task
    traj = real_trajectories()[index]
    messages, facts = _planted(index)
    budget = budget_for(window)
    if who in CONFIGS:
        dicts, method, _ = _final_request(index, window, who)
        kind = "contextwarden"
    else:
        peer = next(p for p in available_peers()[0] if p.name == who)
        dicts = peer.finish(peer.prepare(last_context(messages), budget)())
        method, kind = "last-call", "peer"
    from contextwarden._tokens import ExactCounter

    check = check_output(dicts, task_text(messages), budget, ExactCounter())
    return {
        "trajectory": traj.name,
        "source": traj.source,
        "window": window,
        "who": who,
        "kind": kind,
        "method": method,
        "survived": _survival(dicts, facts),
        "valid": check["valid"],
        "fits": check["within_window"],
        "tokens": check["tokens"],
    }


def run(opts: Options) -> dict[str, Any]:
    """Run the retention benchmark; write ``retention.json``; return its payload."""
    if not have_real_data():
        payload: dict[str, Any] = {"skipped": "real trajectories not present", "rows": []}
        write_result(opts, "retention", payload)
        return payload
    trajs = real_trajectories()
    index = list(range(len(trajs)))
    if opts.quick:
        index = [i for i in index if trajs[i].format == "mini-swe-agent"][:2]
    peers = [p.name for p in available_peers()[0] if p.name not in _SKIP_PEERS]
    whos = [*CONFIGS, *peers]
    tasks = [(i, w, who) for i in index for w in opts.windows for who in whos]
    tasks.sort(key=lambda t: (t[2] != "+summaries", -len(trajs[t[0]].messages)))
    rows = run_cells(opts, _one, tasks, "retention")
    rows.sort(key=lambda r: (r["trajectory"], r["window"], whos.index(r["who"])))
    summary: list[dict[str, Any]] = []
    for who in whos:
        for window in [*opts.windows, None]:
            cells = [
                r for r in rows if r["who"] == who and (window is None or r["window"] == window)
            ]
            if not cells:
                continue
            summary.append(
                {
                    "who": who,
                    "window": window or "all",
                    "cases": len(cells),
                    **{f: sum(c["survived"][f] for c in cells) / len(cells) for f in FACTS},
                    "valid_rate": sum(c["valid"] for c in cells) / len(cells),
                    "fits_rate": sum(c["fits"] for c in cells) / len(cells),
                }
            )
    payload = {
        "facts": list(FACTS),
        "windows": list(opts.windows),
        "who": whos,
        "rows": rows,
        "summary": summary,
    }
    write_result(opts, "retention", payload)
    for s in summary:
        if s["window"] == "all":
            print(
                f"  retention {s['who']:28} "
                + " ".join(f"{f}={s[f]:.0%}" for f in FACTS)
                + f" valid={s['valid_rate']:.0%}",
                flush=True,
            )
    return payload
