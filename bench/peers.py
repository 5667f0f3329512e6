"""Peers on the same histories and budgets: latency, validity, lost task, tokens kept.

Every peer gets the same history (converted to its own message types outside the timed
region) and the same budget: the warden's trigger for the window (``Budget.for_model``:
``min(window - reserve, 0.75 * window)``). Every output goes back to OpenAI dicts and through
``contextwarden.formats.validate_openai`` (orphan tool calls/results and other shape problems),
is checked for the task (the first user message's text, verbatim) and counted by the same
exact counter.

Peers (each skipped, with the reason recorded, when its package is missing):

* ``trim_messages``: LangChain's ``trim_messages`` as its docs recommend for chat history
  (``strategy="last", include_system=True, start_on="human", end_on=("human", "tool")``), with
  an exact tiktoken o200k counter framed like ours (same numbers);
* ``trim_messages (cached counter)``: the same, with that counter memoised per message object
  and already warm from the previous call (what an agent keeping its LangChain messages would
  get: the fairest warm-to-warm comparison);
* ``trim_messages (no start_on)``: ``strategy="last", include_system=True`` only;
* ``ClearToolUsesEdit``: LangChain v1's ``ContextEditingMiddleware`` with
  ``ClearToolUsesEdit(trigger=budget)`` (defaults otherwise: keep 3), run through its
  ``wrap_model_call``;
* ``SummarizationMiddleware``: LangChain v1's, ``trigger=("tokens", budget)``,
  ``keep=("tokens", target)``, summaries from a fake chat model (a fixed sentence: it measures
  the mechanism's cost and what it keeps verbatim, not a real model's summary);
* ``HeadAndTail``: AutoGen's ``HeadAndTailChatCompletionContext(head_size=1, tail_size=20)``
  (message counts: AutoGen's context has no token budget);
* ``contextwarden``: ``Warden(WardenConfig())`` (lossless layers + window), cold (new warden)
  and warm; ``contextwarden full``: with the compaction engine (``make_warden``), warm.

Warm rows (contextwarden, and trim_messages with the memoised counter) time the agent's last
steps up to the history one after another on one primed instance (21 steps; 4 for the
compaction engine past 1,000 messages): the steady state, including the occasional call that
re-plans the window, rather than one call that may or may not be such a call.

Three sweeps: **latency** on real and generated histories of 100..3,000 messages at a 32k
window; **validity** on the context of the last call of every real recording at 8k..64k;
**billed**: every real recording replayed as an agent loop through raw, ``Warden()`` and each
peer of ``bench/_senders.py`` (LangChain ``ClearToolUsesEdit`` with and without
``clear_at_least``, ``trim_messages`` with and without ``start_on``, pydantic-ai-harness
``SlidingWindowCompaction`` and ``TieredCompaction``) at gpt-4o's own window and 32k, billed
with prompt caching (``bench/_sweep.py``).
"""

from __future__ import annotations

import asyncio
import functools
import gc
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from contextwarden._budget import Budget
from contextwarden._config import WardenConfig
from contextwarden._exceptions import ContextOverflowError
from contextwarden._messages import Message
from contextwarden._tokens import REPLY_PRIMING_TOKENS, ExactCounter
from contextwarden._warden import Warden
from contextwarden.formats import from_openai, to_openai, validate_openai

from ._common import MODEL, Options, stats_ms, time_call, write_result
from ._convert import (
    autogen_to_openai,
    lc_to_openai,
    openai_to_autogen,
    openai_to_lc,
    task_text,
    text_of,
    tiktoken_message_counter,
)
from ._data import fresh_copy, have_real_data, real_trajectories
from .counting import tiktoken_encoding
from .overhead import boundaries, histories, new_warden

__all__ = ["PEERS", "Peer", "available_peers", "budget_for", "check_output", "last_context", "run"]

LATENCY_WINDOW = 32_000
#: Stop repeating a slow cell once it has used this many seconds, set-up included (at least
#: one sample).
CELL_SECONDS = 6.0
#: Peers left out of the validity sweep: their output is another row's (deterministic
#: warden: cold = warm; the cached counter gives trim_messages the same counts).
SAME_OUTPUT = {
    "contextwarden (cold)": "contextwarden (warm)",
    "trim_messages": "trim_messages (cached counter)",
}


@dataclass(frozen=True)
class Peer:
    """A context manager under test. ``prepare(history, budget)`` does the untimed set-up
    (conversion, warming) and returns the call to time; ``finish`` turns that call's result
    into OpenAI dicts. ``timed=False``: run for validity only (its cost equals another row's).
    """

    name: str
    requires: str
    prepare: Callable[[Sequence[Message], Budget], Callable[[], Any]]
    finish: Callable[[Any], list[dict[str, Any]]]
    timed: bool = True
    #: For stateful peers: ``steps(history, budget, k)`` primes a fresh instance and returns
    #: the calls of the last ``k`` agent steps up to ``history`` (the last is ``history``),
    #: timed in order: the steady-state warm cost, not one possibly unlucky call.
    steps: Callable[[Sequence[Message], Budget, int], list[Callable[[], Any]]] | None = None


def budget_for(window: int) -> Budget:
    """The warden's budget for ``window`` with the default config."""
    budget = Warden(WardenConfig.model_validate({})).budget_for(MODEL, window)
    assert budget is not None
    return budget


def previous_step(messages: Sequence[Message]) -> int:
    """Length of the history one agent step before ``messages`` (for warm calls)."""
    return step_ends(messages, 1)[0]


def step_ends(messages: Sequence[Message], k: int) -> list[int]:
    """``[prime, e1, ..., ek]``: the history lengths of the last ``k`` agent steps up to
    ``messages`` (``ek == len(messages)``) and the one before them."""
    ends = [e for e in boundaries(messages) if e < len(messages)]
    seq = [*ends[-(k + 1) :], len(messages)]
    if len(seq) < k + 1:  # a short history: start from its first boundary
        seq = [seq[0], *seq]
    return seq[-(k + 1) :]


# -- contextwarden ------------------------------------------------------------------------------
def _cw(setup: str, warm: bool) -> tuple[Callable[..., Callable[[], Any]], Callable[[Any], Any]]:
    def prepare(history: Sequence[Message], budget: Budget) -> Callable[[], Any]:
        warden = new_warden(setup)
        msgs = fresh_copy(history)
        if warm:
            warden.transform(msgs[: previous_step(msgs)], model=MODEL, window=budget.window)
        return lambda: warden.transform(msgs, model=MODEL, window=budget.window)

    def finish(result: Any) -> list[dict[str, Any]]:
        return to_openai(list(result.messages))

    return prepare, finish


def _cw_steps(setup: str) -> Callable[[Sequence[Message], Budget, int], list[Callable[[], Any]]]:
    def steps(history: Sequence[Message], budget: Budget, k: int) -> list[Callable[[], Any]]:
        warden = new_warden(setup)
        msgs = fresh_copy(history)
        prime, *ends = step_ends(msgs, k)
        warden.transform(msgs[:prime], model=MODEL, window=budget.window)
        return [
            functools.partial(warden.transform, msgs[:e], model=MODEL, window=budget.window)
            for e in ends
        ]

    return steps


# -- LangChain ------------------------------------------------------------------------------------
def _lc_counter() -> Callable[[Any], int]:
    return tiktoken_message_counter(tiktoken_encoding("o200k_base"))  # type: ignore[no-any-return]


def _per_message(counter: Callable[[Any], int]) -> Callable[..., int]:
    """``counter`` annotated so trim_messages calls it one message at a time (it inspects the
    first parameter's annotation; string annotations would make it a list counter)."""
    from langchain_core.messages import BaseMessage

    def count(message: BaseMessage) -> int:
        return counter(message)

    count.__annotations__["message"] = BaseMessage
    return count


def _cached(counter: Callable[[Any], int]) -> Callable[..., int]:
    """``counter`` memoised per message object (the annotation tells trim_messages it counts
    one message at a time)."""
    from langchain_core.messages import BaseMessage

    memo: dict[int, tuple[Any, int]] = {}

    def count(message: BaseMessage) -> int:
        hit = memo.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        n = counter(message)
        memo[id(message)] = (message, n)
        return n

    count.__annotations__["message"] = BaseMessage
    return count


def _list_counter(per_message: Callable[[Any], int]) -> Callable[[Iterable[Any]], int]:
    return lambda messages: sum(per_message(m) for m in messages)


def _trim_kwargs(start_on: bool, cached: bool, budget: Budget) -> dict[str, Any]:
    base = _lc_counter()
    kwargs: dict[str, Any] = {
        "max_tokens": budget.trigger - REPLY_PRIMING_TOKENS,
        "token_counter": _cached(base) if cached else _per_message(base),
        "strategy": "last",
        "include_system": True,
    }
    if start_on:
        kwargs.update(start_on="human", end_on=("human", "tool"))
    return kwargs


def _trim_steps(history: Sequence[Message], budget: Budget, k: int) -> list[Callable[[], Any]]:
    """The docs recipe with the memoised counter, warm: the agent keeps its LangChain
    messages, so earlier steps' messages are already counted."""
    from langchain_core.messages import trim_messages

    lc = openai_to_lc(to_openai(list(history)))
    kwargs = _trim_kwargs(True, True, budget)
    prime, *ends = step_ends(history, k)
    trim_messages(lc[:prime], **kwargs)
    return [functools.partial(trim_messages, lc[:e], **kwargs) for e in ends]


def _trim(start_on: bool, cached: bool, warm: bool) -> Callable[..., Callable[[], Any]]:
    def prepare(history: Sequence[Message], budget: Budget) -> Callable[[], Any]:
        from langchain_core.messages import trim_messages

        lc = openai_to_lc(to_openai(list(history)))
        kwargs = _trim_kwargs(start_on, cached, budget)
        if warm:  # the previous step's messages are already counted
            trim_messages(lc[: previous_step(history)], **kwargs)
        return lambda: trim_messages(lc, **kwargs)

    return prepare


def _split_system(lc: list[Any]) -> tuple[Any, list[Any]]:
    from langchain_core.messages import SystemMessage

    if lc and isinstance(lc[0], SystemMessage):
        return lc[0], lc[1:]
    return None, lc


def _fake_model() -> Any:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    return FakeListChatModel(
        responses=["The agent explored the repository, ran commands and edited files."]
    )


def _context_editing(history: Sequence[Message], budget: Budget) -> Callable[[], Any]:
    from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware
    from langchain.agents.middleware.types import ModelRequest
    from langchain_core.messages import AIMessage

    system, rest = _split_system(openai_to_lc(to_openai(list(history))))
    middleware = ContextEditingMiddleware(
        edits=[ClearToolUsesEdit(trigger=budget.trigger - REPLY_PRIMING_TOKENS)],
        token_counter=_list_counter(_lc_counter()),
    )
    request = ModelRequest(model=_fake_model(), messages=rest, system_message=system)

    def call() -> list[Any]:
        seen: list[Any] = []

        def handler(req: Any) -> Any:
            seen.extend(req.messages)
            return AIMessage(content="ok")

        middleware.wrap_model_call(request, handler)
        return [system, *seen] if system is not None else seen

    return call


def _summarization(history: Sequence[Message], budget: Budget) -> Callable[[], Any]:
    from langchain.agents.middleware import SummarizationMiddleware

    system, rest = _split_system(openai_to_lc(to_openai(list(history))))
    middleware = SummarizationMiddleware(
        model=_fake_model(),
        trigger=("tokens", budget.trigger - REPLY_PRIMING_TOKENS),
        keep=("tokens", budget.target),
        token_counter=_list_counter(_lc_counter()),
    )

    def call() -> list[Any]:
        update = middleware.before_model({"messages": rest}, None)  # type: ignore[arg-type]
        kept = rest if update is None else list(update["messages"])
        return [system, *kept] if system is not None else kept

    return call


def _lc_finish(result: Any) -> list[dict[str, Any]]:
    return lc_to_openai(result)


# -- AutoGen -------------------------------------------------------------------------------------
def _run_sync(coro: Any) -> Any:
    """Run a coroutine that never awaits anything pending (AutoGen's contexts) without an
    event loop's overhead; fall back to asyncio when it does await."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise RuntimeError("coroutine suspended")


def _head_and_tail(history: Sequence[Message], budget: Budget) -> Callable[[], Any]:
    from autogen_core.model_context import HeadAndTailChatCompletionContext

    system, msgs = openai_to_autogen(to_openai(list(history)))
    context = HeadAndTailChatCompletionContext(head_size=1, tail_size=20, initial_messages=msgs)

    def call() -> tuple[str | None, list[Any]]:
        try:
            return system, _run_sync(context.get_messages())
        except RuntimeError:
            return system, asyncio.run(context.get_messages())

    return call


def _autogen_finish(result: Any) -> list[dict[str, Any]]:
    return autogen_to_openai(*result)


_cw_cold = _cw("lossless+window", warm=False)
_cw_warm = _cw("lossless+window", warm=True)
_cw_full = _cw("full", warm=True)

PEERS: tuple[Peer, ...] = (
    Peer("contextwarden (cold)", "contextwarden", _cw_cold[0], _cw_cold[1]),
    Peer(
        "contextwarden (warm)",
        "contextwarden",
        _cw_warm[0],
        _cw_warm[1],
        steps=_cw_steps("lossless+window"),
    ),
    Peer(
        "contextwarden full (warm)",
        "contextwarden",
        _cw_full[0],
        _cw_full[1],
        steps=_cw_steps("full"),
    ),
    Peer("trim_messages", "langchain_core", _trim(True, False, False), _lc_finish),
    Peer(
        "trim_messages (cached counter)",
        "langchain_core",
        _trim(True, True, True),
        _lc_finish,
        steps=_trim_steps,
    ),
    # validity only; its counter is memoised (same counts, same output, less waiting)
    Peer(
        "trim_messages (no start_on)",
        "langchain_core",
        _trim(False, True, False),
        _lc_finish,
        False,
    ),
    Peer("ClearToolUsesEdit", "langchain", _context_editing, _lc_finish),
    Peer("SummarizationMiddleware", "langchain", _summarization, _lc_finish),
    Peer("HeadAndTail", "autogen_core", _head_and_tail, _autogen_finish),
)


def available_peers() -> tuple[list[Peer], dict[str, str]]:
    """The peers whose packages import, and why the others were skipped."""
    import importlib

    ok: list[Peer] = []
    skipped: dict[str, str] = {}
    for peer in PEERS:
        try:
            importlib.import_module(peer.requires)
            if peer.requires == "langchain":
                importlib.import_module("langchain.agents.middleware")
        except ImportError as exc:
            skipped[peer.name] = f"{peer.requires} not importable: {exc}"
            continue
        ok.append(peer)
    return ok, skipped


def check_output(
    dicts: list[dict[str, Any]], task: str, budget: Budget, counter: ExactCounter
) -> dict[str, Any]:
    """Validity, orphans, task kept, tokens and budget fit of one peer output."""
    problems = validate_openai(dicts)
    orphans = [p for p in problems if "tool" in p]
    kept_task = bool(task) and any(
        d.get("role") == "user" and task in text_of(d.get("content")) for d in dicts
    )
    try:
        tokens = counter.count_messages(from_openai(dicts))
    except Exception:  # an output our adapter refuses is counted as invalid already
        tokens = -1
    return {
        "valid": not problems,
        "orphans": len(orphans),
        "problems": problems[:3],
        "task_kept": kept_task,
        "tokens": tokens,
        "within_budget": 0 <= tokens <= budget.trigger,
        "within_window": 0 <= tokens <= budget.window,
        "messages_out": len(dicts),
        "roles_head": [d.get("role") for d in dicts[:4]],
    }


def last_context(messages: Sequence[Message]) -> tuple[Message, ...]:
    """The context of a recording's last call: everything before its last assistant message."""
    last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=len(messages))
    return tuple(messages[:last])


def _time_peer(
    peer: Peer, history: Sequence[Message], budget: Budget, max_reps: int
) -> tuple[list[float], Any]:
    samples: list[float] = []
    result: Any = None
    if peer.steps is not None:
        k = max_reps * 3
        if peer.name.startswith("contextwarden full") and len(history) > 1_000:
            k = min(k, 4)
        calls = peer.steps(history, budget, k)
        gc.collect()  # once: collecting between steps would also flush the CPU caches
        for call in calls:
            dt, result = time_call(call)
            samples.append(dt)
        return samples, result
    spent = 0.0
    while len(samples) < max_reps and (not samples or spent < CELL_SECONDS):
        setup, call = time_call(peer.prepare, history, budget)
        gc.collect()
        dt, result = time_call(call)
        samples.append(dt)
        spent += setup + dt
    return samples, result


def run(opts: Options) -> dict[str, Any]:
    """Run both sweeps; write ``peers.json``; return its payload."""
    peers, skipped = available_peers()
    counter = ExactCounter("o200k_base")
    counter.count_text("warm up")
    latency: list[dict[str, Any]] = []
    budget = budget_for(LATENCY_WINDOW)
    max_reps = opts.reps(7, 1)
    for kind, make in histories(opts).items():
        for n in opts.lengths:
            history = make(n)
            task = task_text(history)
            for peer in peers:
                if not peer.timed:
                    continue
                samples, result = _time_peer(peer, history, budget, max_reps)
                row = {
                    "kind": kind,
                    "messages": n,
                    "peer": peer.name,
                    "latency": stats_ms(samples),
                    **check_output(peer.finish(result), task, budget, counter),
                }
                latency.append(row)
                print(
                    f"  peers {kind:9} {n:>5} {peer.name:32} p50 {row['latency']['p50_ms']:10.3f} ms"
                    f"  valid={row['valid']} task={row['task_kept']} tokens={row['tokens']}",
                    flush=True,
                )
    # ratios against contextwarden (warm) per cell
    for row in latency:
        ref = next(
            r
            for r in latency
            if r["kind"] == row["kind"]
            and r["messages"] == row["messages"]
            and r["peer"] == "contextwarden (warm)"
        )
        row["ratio_vs_warm"] = row["latency"]["p50_ms"] / ref["latency"]["p50_ms"]

    validity: list[dict[str, Any]] = []
    # (recording, window) where what is never cut (system prompt, tools, task) alone is over
    # the window: contextwarden says so (ContextOverflowError), and no peer has a case to meet
    overflow: list[dict[str, Any]] = []
    if have_real_data():
        trajs = real_trajectories()
        if opts.quick:
            trajs = trajs[:2]
        for traj in trajs:
            history = last_context(traj.messages)
            task = task_text(history)
            for window in opts.windows:
                wbudget = budget_for(window)
                cells: list[dict[str, Any]] = []
                try:
                    outputs = [
                        (peer, peer.finish(peer.prepare(history, wbudget)()))
                        for peer in peers
                        if peer.name not in SAME_OUTPUT
                    ]
                except ContextOverflowError as exc:
                    overflow.append({"trajectory": traj.name, "window": window, "error": str(exc)})
                    continue
                for peer, out in outputs:
                    cells.append(
                        {
                            "trajectory": traj.name,
                            "source": traj.source,
                            "window": window,
                            "peer": peer.name,
                            **check_output(out, task, wbudget, counter),
                        }
                    )
                validity.extend(cells)
            print(f"  peers validity: {traj.name}", flush=True)
    summary: list[dict[str, Any]] = []
    for peer in peers:
        cells = [v for v in validity if v["peer"] == peer.name]
        if not cells:
            continue
        summary.append(
            {
                "peer": peer.name,
                "cases": len(cells),
                "valid_rate": sum(c["valid"] for c in cells) / len(cells),
                "task_kept_rate": sum(c["task_kept"] for c in cells) / len(cells),
                "within_budget_rate": sum(c["within_budget"] for c in cells) / len(cells),
                "within_window_rate": sum(c["within_window"] for c in cells) / len(cells),
                "mean_tokens": sum(c["tokens"] for c in cells) / len(cells),
            }
        )
    billed_rows, billed_totals, billed_skipped = _billed(opts) if have_real_data() else ([], [], {})
    payload = {
        "model": MODEL,
        "latency_window": LATENCY_WINDOW,
        "budget": {"window": budget.window, "trigger": budget.trigger, "target": budget.target},
        "skipped": skipped,
        "latency": latency,
        "validity": validity,
        "validity_overflow": overflow,
        "validity_summary": summary,
        "validity_same_output": SAME_OUTPUT,
        "billed": billed_rows,
        "billed_totals": billed_totals,
        "billed_skipped": billed_skipped,
    }
    write_result(opts, "peers", payload)
    return payload


def _billed(
    opts: Options,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, str]]:
    """The billed sweep: raw, ``Warden()`` and every importable peer, per recording and window."""
    from contextwarden._models import model_info

    from ._senders import available, warden_sender
    from ._sweep import JUDGED_SOURCE, REPLAY_MODEL, aggregate, sweep, target_lines

    peers, skipped = available()
    factories: dict[str, Callable[[str, int], Any]] = {
        "Warden()": lambda model, window: warden_sender(model, window)
    }
    factories.update({p.name: p.make for p in peers})
    rows = sweep(opts, factories, "peers billed")
    totals = aggregate(rows, JUDGED_SOURCE) + aggregate(rows, None)
    own = model_info(REPLAY_MODEL).context_window
    for t in totals:
        if t["source"] == JUDGED_SOURCE:
            print(
                f"  billed {JUDGED_SOURCE} @{t['window'] // 1000}k {t['sender']:36}"
                f" tokens x{t['tokens_ratio']:.3f} billed x{t['judged_ratio']:.3f}"
                f" invalid {t['invalid']} over {t['over_window']} task lost {t['task_lost']}",
                flush=True,
            )
    judged = [t for t in totals if t["source"] == JUDGED_SOURCE]
    print("\n".join(target_lines(judged, "Warden()", own)), flush=True)
    for r in rows:
        if "error" in r:
            skipped[f"{r['sender']} @ {r['trajectory']}"] = r["error"]
    return rows, totals, skipped
