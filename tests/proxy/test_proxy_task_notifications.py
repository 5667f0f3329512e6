"""Claude Code through the proxy on the Anthropic wire format, with a sub-agent run in the
background: the report it sends when the sub-agent stops (a user turn of a
``<task-notification>``, here after a ``<system-reminder>``) reaches the upstream masked once
the model has answered it, with its framing and its recall reference; the task, and a report
the model has not answered yet, reach it whole; every request is valid."""

from __future__ import annotations

import re
from typing import Any

from fake_upstream import FakeUpstream
from proxy_doubles import anthropic_text, send_anthropic

from contextwarden.formats import validate_anthropic

SYSTEM = "You are Claude Code, Anthropic's official CLI for Claude."
TASK = "Map how the extractor resolves calls, then fix the resolver in internal/sem/resolve.go."
MASKED = re.compile(r"omitted; recall cw:[0-9a-f]{16}")


def _report(task_id: str) -> str:
    lines = "\n".join(
        f"- `walkEntities{n}` in internal/sem/parser_{n}.go resolves calls in scope {n}"
        for n in range(150)
    )
    return (
        f"<task-notification>\n<task-id>{task_id}</task-id>\n<status>completed</status>\n"
        f'<summary>Agent "Map the resolver" finished</summary>\n<result>{lines}</result>\n'
        "</task-notification>"
    )


def _reminder() -> dict[str, str]:
    text = "<system-reminder>\nThe date has changed. Today's date is now 2026-07-21.\n"
    return {"type": "text", "text": text + "</system-reminder>"}


def claude_code_history(steps: int, report_at: int) -> list[dict[str, Any]]:
    """Anthropic messages as Claude Code sends them: ``Bash`` tool uses and their results; at
    step 1 an ``Agent`` use run in the background; after step ``report_at`` the model ends its
    turn, the report arrives, and the model answers it and goes on."""
    out: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": TASK}]}]

    def use(k: int, name: str, args: dict[str, Any], result: str, text: str = "") -> None:
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        blocks.append({"type": "tool_use", "id": f"toolu_{k}", "name": name, "input": args})
        out.append({"role": "assistant", "content": blocks})
        block = {"type": "tool_result", "tool_use_id": f"toolu_{k}", "content": result}
        out.append({"role": "user", "content": [block]})

    lead = ""  # the model's answer to the report, written before its next tool use
    for k in range(steps):
        body = "\n".join(
            f"{n}\tfunc step{k}Line{n}(v int) int {{ return v * {n} }}" for n in range(90)
        )
        use(k, "Bash", {"command": f"cat -n internal/sem/file_{k}.go"}, body, lead)
        lead = ""
        if k == 1:
            launched = "Async agent launched successfully. agentId: a7"
            use(100, "Agent", {"prompt": "Map the resolver", "run_in_background": True}, launched)
        if k == report_at:
            out.append(
                {"role": "assistant", "content": [{"type": "text", "text": "Waiting for it."}]}
            )
            out.append(
                {"role": "user", "content": [_reminder(), {"type": "text", "text": _report("a7")}]}
            )
            lead = "The report maps the resolver; reading the files it names."
    return out


def _report_index(history: list[dict[str, Any]]) -> int:
    return next(i for i, m in enumerate(history) if "<task-notification>" in anthropic_text(m))


def test_an_answered_background_report_reaches_the_upstream_masked(
    upstream: tuple[FakeUpstream, str], start_proxy: Any
) -> None:
    fake, url = upstream
    history = claude_code_history(12, report_at=3)
    send_anthropic(
        start_proxy(url), SYSTEM, history
    )  # a resumed session's first call: masks are free
    sent = fake.requests[-1].json["messages"]
    assert validate_anthropic(SYSTEM, sent) == [] and len(sent) == len(history)
    assert sent[0] == history[0]  # the task
    i = _report_index(history)
    report = anthropic_text(sent[i])
    assert MASKED.search(report) and "<task-id>a7</task-id>" in report
    assert report.rstrip().endswith("</task-notification>")
    assert len(report) < len(anthropic_text(history[i])) / 4


def test_a_report_the_model_has_not_answered_reaches_the_upstream_whole(
    upstream: tuple[FakeUpstream, str], start_proxy: Any
) -> None:
    fake, url = upstream
    history = claude_code_history(12, report_at=11)  # the newest turn: the model answers it now
    send_anthropic(start_proxy(url), SYSTEM, history)
    sent = fake.requests[-1].json["messages"]
    assert validate_anthropic(SYSTEM, sent) == []
    assert anthropic_text(sent[-1]) == anthropic_text(
        history[-1]
    )  # (the proxy may add a cache breakpoint)
    assert any(MASKED.search(anthropic_text(m)) for m in sent)  # older results were masked
