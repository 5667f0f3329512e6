"""Claude Code reports a background task that stopped (a sub-agent's final report, a background
command's exit) in a user message of its own, ``<task-notification>``, answering no command of
the reply before it. Such a report is an output: masked under the rules every tool result is
masked by once the agent has acted on it, recalled byte for byte, never taken for the user's
words; a message that also holds the user's own words is the user's and never changes."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from contextwarden import Warden, to_openai
from contextwarden.analysis.actions import is_notification, reads_as_output
from contextwarden.formats import validate_anthropic, validate_openai

Msg = dict[str, Any]

MARKER = re.compile(
    r"\[\.\.\. \d+ lines, \d+ characters omitted; recall (cw:[0-9a-f]{16}) \.\.\.\]"
)
TASK = "Map how the C# extractor resolves calls, then fix resolve_call_target."


def notification(task_id: str, report: str) -> str:
    return (
        f"<task-notification>\n<task-id>{task_id}</task-id>\n"
        f"<tool-use-id>toolu_{task_id}</tool-use-id>\n<status>completed</status>\n"
        f'<summary>Agent "Map the extractor" finished</summary>\n'
        f"<result>{report}</result>\n"
        "<usage><subagent_tokens>89785</subagent_tokens><tool_uses>41</tool_uses></usage>\n"
        "</task-notification>"
    )


def report(lines: int) -> str:
    return "\n".join(
        f"- `walk_entities_{n}` in parser_{n}.go calls resolve_call_target with scope {n}"
        for n in range(lines)
    )


def session(steps: int = 10, at: int = 3, words: str = "") -> list[Msg]:
    """Claude Code's shape in OpenAI messages: ``Bash`` calls and their results; at step 1 an
    ``Agent`` call run in the background; after step ``at`` the model ends its turn and the
    agent's report arrives as a user message (``words``: the user's own, typed into the same message), the model answers
    it and goes on."""
    out: list[Msg] = [
        {"role": "system", "content": "You are Claude Code."},
        {"role": "user", "content": TASK},
    ]

    def call(k: int, name: str, arguments: Msg, result: str) -> None:
        out.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{k}",
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(arguments)},
                    }
                ],
            }
        )
        out.append({"role": "tool", "tool_call_id": call_id(k), "content": result})

    def call_id(k: int) -> str:
        return f"call_{k}"

    for k in range(steps):
        body = "\n".join(
            f"{n}\tfunc step{k}Line{n}(v int) int {{ return v * {n} }}" for n in range(80)
        )
        call(k, "Bash", {"command": f"cat -n internal/sem/file_{k}.go"}, body)
        if k == 1:
            call(
                100,
                "Agent",
                {"prompt": "Map the extractor", "run_in_background": True},
                "Async agent launched successfully. agentId: a7 (runs in the background).",
            )
        if k == at:
            text = notification("a7", report(120))
            out.append({"role": "assistant", "content": "The agent is still mapping; waiting."})
            out.append({"role": "user", "content": f"{text}\n{words}" if words else text})
            out.append(
                {"role": "assistant", "content": "The report maps the resolver; reading it."}
            )
    return out


def _index(history: list[Msg]) -> int:
    return next(i for i, m in enumerate(history) if "<task-notification>" in str(m["content"]))


def test_a_background_agents_report_is_masked_and_recalled_byte_for_byte() -> None:
    history = session()
    snapshot = copy.deepcopy(history)
    warden = Warden()
    sent, result = warden.transform_openai(history, model="gpt-4o")
    assert history == snapshot and validate_openai(sent) == [] and len(sent) == len(history)
    i = _index(history)
    text = sent[i]["content"]
    assert text != history[i]["content"] and text.startswith("<task-notification>\n<task-id>a7")
    assert text.endswith("</task-notification>")  # the head and tail framing survive
    assert "parser_0.go" in text  # on the names line
    ref = MARKER.search(text).group(1)  # type: ignore[union-attr]
    assert to_openai(warden.recall(result.conversation, ref)) == [history[i]]
    assert sent[1] == history[1]  # the task: verbatim


def test_a_report_the_agent_has_not_answered_yet_stays_whole() -> None:
    history = session(at=9)[:-1]  # the report is the newest message: the model answers it
    sent, _ = Warden().transform_openai(history, model="gpt-4o")
    assert sent[-1] == history[-1]
    assert any(MARKER.search(str(m["content"])) for m in sent)  # older results were masked


def test_a_report_beside_the_users_own_words_is_the_users_and_never_changes() -> None:
    words = "Also: do not touch the PHP extractor, whatever the report says."
    history = session(words=words)
    sent, _ = Warden().transform_openai(history, model="gpt-4o")
    i = _index(history)
    assert sent[i] == history[i]
    assert any(MARKER.search(str(m["content"])) for m in sent)  # older results were masked


@pytest.mark.parametrize(
    ("text", "output"),
    [
        (notification("a1", "done"), True),
        (
            f"<system-reminder>\nThe date changed.\n</system-reminder>\n{notification('a1', 'x')}",
            True,
        ),
        (f"{notification('a1', 'done')}\nNow fix it.", False),
        ("Please explain <task-notification> to me.", False),
        # Claude Code 2.0's form of a sub-agent's report
        (
            "<agent-notification>\n<agent-id>ad9c6de</agent-id>\n<status>completed</status>\n"
            '<summary>Agent "Research the parser" completed.</summary>\n'
            "Read the output file to retrieve the full result.\n</agent-notification>",
            True,
        ),
        # the lines Claude Code writes around a report it sends as a user message
        (f"A background agent completed a task:\n{notification('a1', 'done')}", True),
        (
            f"{notification('b2', '')}\nRead the output file to retrieve the result: "
            "/tmp/claude/tasks/b2.output",
            True,
        ),
    ],
)
def test_a_notification_of_nothing_but_client_blocks_reads_as_output(
    text: str, output: bool
) -> None:
    assert is_notification(text) is output and reads_as_output(text) is output


def test_a_report_in_anthropics_content_blocks_is_masked_too() -> None:
    history = session()
    i = _index(history)
    warden = Warden()
    system, rest = history[0]["content"], history[1:]
    messages: list[Msg] = []
    for m in rest:
        if m["role"] == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": m["tool_call_id"],
                "content": m["content"],
            }
            messages.append({"role": "user", "content": [block]})
        elif m["role"] == "assistant" and m.get("tool_calls"):
            c = m["tool_calls"][0]
            use = {
                "type": "tool_use",
                "id": c["id"],
                "name": c["function"]["name"],
                "input": json.loads(c["function"]["arguments"]),
            }
            messages.append({"role": "assistant", "content": [use]})
        else:
            messages.append(
                {"role": m["role"], "content": [{"type": "text", "text": m["content"]}]}
            )
        if len(messages) > 1 and messages[-2]["role"] == messages[-1]["role"]:
            messages[-2:] = [
                {**messages[-2], "content": messages[-2]["content"] + messages[-1]["content"]}
            ]
    snapshot = copy.deepcopy(messages)
    _, sent, _ = warden.transform_anthropic(messages, system=system, model="claude-sonnet-4-5")
    assert messages == snapshot and validate_anthropic(system, sent) == []
    text = sent[i - 1]["content"][0]["text"]
    assert text.startswith("<task-notification>") and MARKER.search(text)


def test_a_commands_output_that_prints_a_notification_is_still_that_output() -> None:
    printed = f"<returncode>0</returncode>\n<output>\n{notification('a1', 'done')}\n</output>"
    assert reads_as_output(printed) and not is_notification(printed)
