"""The long-range reference measure, for summaries: of the file paths and code identifiers an
agent's *next* action uses, that it first saw more than ``gap`` messages earlier (and not in
the system prompt or the task), how many does the summary of the elided span hold?

The span is everything between the task and the last ``gap`` messages before the action: what
a compaction at that point would replace. Used by the tests (with a threshold) and runnable as
a script to print the figures::

    python tests/summarizers/reference_recall.py [TRAJECTORY ...]
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from contextwarden import Message
from contextwarden.summarizers import ExtractiveSummarizer, SummaryRequest

__all__ = ["Recall", "action_references", "measure"]

_EXT = r"(?:py|pyi|js|jsx|ts|tsx|json|ya?ml|toml|cfg|ini|txt|md|rst|c|h|cc|cpp|hpp|go|rs|java|sh)"
_PATH = re.compile(rf"(?<![\w/.-])(?:[\w.-]+/)+[\w.-]+|(?<![\w/.-])[\w-]+(?:\.[\w-]+)*\.{_EXT}\b")
_WORD = re.compile(r"(?<![\w.-])[A-Za-z_][A-Za-z0-9_]*(?![\w-])")
#: Shell and Python words that look like identifiers but name nothing the agent discovered.
_COMMON = frozenset(
    {
        "__init__",
        "__main__",
        "__name__",
        "print_function",
        "sys_path",
        "dev_null",
        "python_path",
        "PYTHONPATH",
        "DEBUG_MODE",
        "exit_code",
    }
)


def _is_identifier(word: str) -> bool:
    """Code-like names: with an underscore, or with an inner capital (camelCase, PascalCase
    with two humps), at least 4 characters. Plain words ("print", "Schema") are left out: they
    cannot be told from prose."""
    if len(word) < 4 or word in _COMMON or word.isupper():
        return False
    inner_capital = any(c.isupper() for c in word[1:]) and any(c.islower() for c in word)
    return "_" in word.strip("_") or inner_capital


def _action_text(message: Message) -> str:
    """What an assistant message does: its tool calls' arguments, or (mini-swe-agent's text
    protocol) the bash block of its text."""
    if message.tool_calls:
        return "\n".join(_strings(call.input) for call in message.tool_calls)
    blocks = re.findall(r"```(?:bash|sh)?\s*\n(.*?)```", message.text, re.DOTALL)
    return "\n".join(blocks)


def _strings(value: object) -> str:
    """The string values of a parsed tool-call input, joined (the JSON text would turn every
    newline of a script into a literal ``\\n`` glued to the next word)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(_strings(v) for v in value.values())
    if isinstance(value, list):
        return "\n".join(_strings(v) for v in value)
    return ""


def action_references(message: Message) -> set[str]:
    """The file paths and code identifiers an action names."""
    text = _action_text(message)
    refs = {p.rstrip(".") for p in _PATH.findall(text) if not p.startswith("-")}
    # "a/x.py" and "b/x.py" are a diff's two sides of x.py, not paths the agent typed
    refs = {p for p in refs if ("/" in p or "." in p) and not p.startswith(("a/", "b/"))}
    refs |= {w for w in _WORD.findall(text) if _is_identifier(w)}
    return {r for r in refs if len(r) >= 4}


def _message_text(message: Message) -> str:
    parts = [message.text]
    parts += [call.arguments for call in message.tool_calls]
    parts += [r.text for r in message.tool_results]
    return "\n".join(parts)


@dataclass(frozen=True)
class Recall:
    """How many long-range references a summary held: ``held`` of ``total`` over ``actions``
    actions; ``summary_chars`` the mean length of the summaries."""

    held: int
    total: int
    actions: int
    summary_chars: float

    @property
    def ratio(self) -> float:
        return self.held / self.total if self.total else 1.0


def _cases(messages: Sequence[Message], gap: int, step: int) -> Iterator[tuple[int, set[str]]]:
    """(index of the action, its long-range references) for every ``step``-th action."""
    texts = [_message_text(m) for m in messages]
    task_end = next(i for i, m in enumerate(messages) if m.role == "user") + 1
    given = "\n".join(texts[:task_end])
    seen = 0
    for k, message in enumerate(messages):
        if message.role != "assistant" or k - gap <= task_end:
            continue
        seen += 1
        if seen % step:
            continue
        long_range = set()
        for ref in action_references(message):
            if ref in given:
                continue
            first = next((i for i in range(task_end, k) if ref in texts[i]), None)
            if first is not None and first < k - gap:
                long_range.add(ref)
        if long_range:
            yield k, long_range


def measure(
    messages: Sequence[Message],
    summarize: Callable[[SummaryRequest], str] | None = None,
    *,
    gap: int = 10,
    step: int = 1,
    max_chars: int = 4000,
) -> Recall:
    """The measure over one history. ``summarize`` defaults to the extractive summarizer."""
    summarize = summarize or ExtractiveSummarizer().summarize
    task_end = next(i for i, m in enumerate(messages) if m.role == "user") + 1
    task = messages[task_end - 1].text
    held = total = actions = chars = 0
    for k, refs in _cases(messages, gap, step):
        span = tuple(messages[task_end : k - gap])
        summary = summarize(SummaryRequest(span, task=task, max_chars=max_chars))
        actions += 1
        chars += len(summary)
        total += len(refs)
        held += sum(1 for r in refs if r in summary)
    return Recall(held, total, actions, chars / actions if actions else 0.0)


def _main(paths: Sequence[str]) -> None:
    from shared_data import SHARED_DATA
    from summarizer_loaders import load_messages

    files = [Path(p) for p in paths] or sorted((SHARED_DATA / "mini-swe-agent").glob("*.json"))
    held = total = 0
    for path in files:
        r = measure(load_messages(path))
        held, total = held + r.held, total + r.total
        print(
            f"{path.name[:70]:70} {r.held:4}/{r.total:<4} {r.ratio:6.1%}  "
            f"{r.actions:3} actions, summaries {r.summary_chars:5.0f} chars"
        )
    print(f"{'all':70} {held:4}/{total:<4} {held / max(total, 1):6.1%}")


if __name__ == "__main__":
    sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1])]
    _main(sys.argv[1:])


@dataclass(frozen=True)
class ContextRecall:
    """The measure over what a warden actually sends: ``held`` of ``total`` long-range
    references were in the request sent before the action that used them; ``sent`` and
    ``raw`` are the tokens sent and the tokens of the full histories, summed over calls."""

    held: int
    total: int
    sent: int
    raw: int

    @property
    def ratio(self) -> float:
        return self.held / self.total if self.total else 1.0

    @property
    def sent_share(self) -> float:
        return self.sent / self.raw if self.raw else 1.0


def context_recall(
    messages: Sequence[Message],
    warden: object,
    *,
    window: int,
    model: str = "gpt-4o",
    gap: int = 10,
) -> ContextRecall:
    """The issue's measure for a whole warden: replay ``messages`` call by call through
    ``warden.transform_openai`` (one warden per conversation, as an agent loop would), and for
    each action check the request sent just before it."""
    from contextwarden import to_openai

    wanted = dict(_cases(messages, gap, 1))
    held = total = sent = raw = 0
    for k, message in enumerate(messages):
        if message.role != "assistant":
            continue
        request, result = warden.transform_openai(  # type: ignore[attr-defined]
            to_openai(messages[:k]), model=model, window=window
        )
        sent += result.tokens_after
        raw += result.tokens_before
        refs = wanted.get(k)
        if refs:
            text = "\n".join(
                str(m.get("content")) + str(m.get("tool_calls") or "") for m in request
            )
            total += len(refs)
            held += sum(1 for r in refs if r in text)
    return ContextRecall(held, total, sent, raw)
