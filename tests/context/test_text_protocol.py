"""Agents that write their command in a fenced block and get its output back as a user message
(mini-swe-agent's default text protocol: ``<returncode>N</returncode>`` then ``<output>``) have
their old outputs masked like tool results, by the same mask edits and decisions; the user's
own words never are, and the masked request stays valid. So do Cline's and Roo Code's results
given back as text when the model writes its tool uses as XML."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shared_data import SHARED_DATA, trajectory_files

from contextwarden import Warden, load_transcript, to_openai
from contextwarden.analysis.actions import reads_as_output, xml_command
from contextwarden.formats import validate_openai

Msg = dict[str, Any]

MARKER = re.compile(
    r"\[\.\.\. \d+ lines, \d+ characters omitted; recall (cw:[0-9a-f]{16}) \.\.\.\]"
)
TASK = "Fix the failing parser test in src/parse.py. Do not touch the docs folder."


def _output(k: int, lines: int) -> str:
    body = "\n".join(
        f"{n}\tdef step_{k}_{n}(value): return value * {n}  # padding" for n in range(lines)
    )
    return f"<returncode>0</returncode>\n<output>\n{body}\n</output>"


def text_run(
    steps: int, lines: int = 80, instruction_at: int | None = None, fence: str = "bash"
) -> list[Msg]:
    """A text-protocol session: each step an assistant message with one bash block, answered
    by its output as a user message; ``instruction_at``: a long instruction of the user's own
    after that step (it answers a bash block too, but is no output)."""
    out: list[Msg] = [
        {"role": "system", "content": "You are an agent. Reply with one ```bash block."},
        {"role": "user", "content": TASK},
    ]
    for k in range(steps):
        command = f"cat -n src/module_{k}.py"
        out.append(
            {"role": "assistant", "content": f"THOUGHT: read {k}.\n\n```{fence}\n{command}\n```"}
        )
        out.append({"role": "user", "content": _output(k, lines)})
        if k == instruction_at:
            words = " ".join(f"Please keep helper_{n} as it is." for n in range(200))
            out.append({"role": "assistant", "content": "THOUGHT: next.\n\n```bash\nls\n```"})
            out.append({"role": "user", "content": f"Stop listing. {words}"})
    return out


def as_tool_calls(messages: list[Msg]) -> list[Msg]:
    """The same session with each command a ``bash`` tool call and each output its result."""
    out: list[Msg] = []
    for m in messages:
        text = m.get("content") or ""
        if (
            m["role"] == "user"
            and text.startswith("<returncode>")
            and out[-1]["role"] == "assistant"
        ):
            call_id = f"call_{len(out)}"
            command = re.findall(r"```bash\n(.*?)```", out[-1]["content"], re.DOTALL)[0]
            arguments = json.dumps({"command": command})
            out[-1] = {
                **out[-1],
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "bash", "arguments": arguments},
                    }
                ],
            }
            out.append({"role": "tool", "tool_call_id": call_id, "content": text})
        else:
            out.append(m)
    return out


@pytest.mark.parametrize("fence", ["bash", "mswea_bash_command"])  # mini-swe-agent 1 and 2
def test_old_outputs_are_masked_the_users_words_never_and_the_request_stays_valid(
    fence: str,
) -> None:
    history = text_run(12, instruction_at=3, fence=fence)
    snapshot = copy.deepcopy(history)
    warden = Warden()
    sent, result = warden.transform_openai(history, model="gpt-4o")
    assert history == snapshot  # the caller's history is not touched
    assert validate_openai(sent) == [] and len(sent) == len(history)
    outputs = [i for i, m in enumerate(history) if m["content"].startswith("<returncode>")]
    masked = [i for i in outputs if MARKER.search(sent[i]["content"])]
    keep = warden.config.mask.keep_recent
    assert masked == outputs[:-keep]  # the newest keep_recent stay whole, every older one masked
    for i in outputs[-keep:]:
        assert sent[i] == history[i]
    for i, m in enumerate(history):  # the task and the later instruction: verbatim
        if m["role"] == "user" and i not in outputs:
            assert sent[i] == m
    for i in masked:  # the head and tail framing survive; the recall brings the output back
        text = sent[i]["content"]
        assert text.startswith("<returncode>0</returncode>\n<output>") and text.endswith(
            "</output>"
        )
        ref = MARKER.search(text).group(1)  # type: ignore[union-attr]
        assert to_openai(warden.recall(result.conversation, ref)) == [history[i]]


def test_an_output_is_masked_as_its_tool_call_twin_is() -> None:
    history = text_run(12)
    text, _ = Warden().transform_openai(history, model="gpt-4o")
    tools, _ = Warden().transform_openai(as_tool_calls(history), model="gpt-4o")
    assert len(text) == len(tools)
    plain = [MARKER.sub("", m["content"]) for m in text if m["role"] == "user"][1:]
    twins = [MARKER.sub("", m["content"]) for m in tools if m["role"] == "tool"]
    assert plain == twins and any(MARKER.search(m["content"]) for m in text)


def test_only_an_answer_to_one_fenced_command_that_reads_as_output_is_masked() -> None:
    long = _output(0, 200)
    history: list[Msg] = [
        {"role": "user", "content": TASK},
        # the user pastes an output themselves: no command before it
        {"role": "assistant", "content": "Could you show me the log?"},
        {"role": "user", "content": long},
        # two blocks: no single command it answers
        {"role": "assistant", "content": "```bash\nls\n```\n```bash\npwd\n```"},
        {"role": "user", "content": long},
        # an answer to a command, in the user's words
        {"role": "assistant", "content": "```bash\nmake test\n```"},
        {"role": "user", "content": "Do not run that. " + long},
    ]
    for k in range(10):  # enough newer outputs that the ones above are old
        history.append({"role": "assistant", "content": f"```bash\ncat f{k}.py\n```"})
        history.append({"role": "user", "content": _output(k + 1, 60)})
    sent, _ = Warden().transform_openai(history, model="gpt-4o")
    assert sent[:7] == history[:7]
    assert MARKER.search(sent[8]["content"])


def test_the_output_of_a_command_that_timed_out_is_masked_too() -> None:
    # mini-swe-agent's note on a command it killed names it before the output
    history = text_run(12)
    body = history[5]["content"].split("<output>\n", 1)[1]
    history[5] = {
        "role": "user",
        "content": "The last command <command>cat -n src/module_1.py</command> timed out and "
        f"has been killed.\nThe output of the command was:\n <output>\n{body}\n"
        "Please try another command and make sure to avoid those requiring interactive input.",
    }
    warden = Warden()
    sent, result = warden.transform_openai(history, model="gpt-4o")
    ref = MARKER.search(sent[5]["content"])
    assert ref is not None and sent[5]["content"].startswith("The last command <command>cat")
    assert to_openai(warden.recall(result.conversation, ref.group(1))) == [history[5]]


_SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(
    st.lists(
        st.tuples(st.sampled_from(["output", "words", "marked_words"]), st.integers(0, 150)),
        min_size=1,
        max_size=16,
    ),
    st.sampled_from([None, 32_000]),
)
def test_user_words_are_never_changed_and_every_request_is_valid(
    steps: list[tuple[str, int]], window: int | None
) -> None:
    history: list[Msg] = [{"role": "user", "content": TASK}]
    words: list[int] = [0]
    for k, (kind, lines) in enumerate(steps):
        if kind == "marked_words":  # reads like an output but answers no command
            history.append({"role": "assistant", "content": "Shall I go on?"})
        else:
            history.append({"role": "assistant", "content": f"```bash\ncat f{k}.py\n```"})
        body = _output(k, lines)
        if kind == "words":
            body = f"Please look at this. {body}"
        if kind != "output":
            words.append(len(history))
        history.append({"role": "user", "content": body})
    sent, result = Warden().transform_openai(history, model="gpt-4o", window=window)
    assert validate_openai(sent) == []
    if result.compaction is None and len(sent) == len(history):
        for i in words:
            assert sent[i] == history[i]
        for a, b in zip(sent, history, strict=True):
            assert a == b or MARKER.search(a["content"]) and len(a["content"]) < len(b["content"])


def _text_protocol(messages: list[Msg]) -> list[Msg]:
    """A real tool-call session of mini-swe-agent as its default text protocol writes it: each
    ``bash`` call a fenced block in the assistant's text, each result the next user message."""
    out: list[Msg] = []
    for m in messages:
        if m["role"] == "assistant" and m.get("tool_calls"):
            (call,) = m["tool_calls"]
            command = json.loads(call["function"]["arguments"])["command"]
            text = (m.get("content") or "").strip()
            out.append({"role": "assistant", "content": f"{text}\n\n```bash\n{command}\n```"})
        elif m["role"] == "tool":
            out.append({"role": "user", "content": m["content"]})
        else:
            out.append({k: v for k, v in m.items() if k in ("role", "content")})
    return out


def test_a_real_session_in_the_text_protocol_has_its_outputs_masked_and_recalled() -> None:
    files = [
        p for p in trajectory_files() if "mini-swe-agent" in str(p) and "marshmallow-1343" in str(p)
    ]
    if not files:
        pytest.skip(f"no mini-swe-agent recording under {SHARED_DATA}")
    real = to_openai(load_transcript(Path(files[0])).messages)
    if any(m["role"] == "assistant" and len(m.get("tool_calls") or ()) > 1 for m in real):
        pytest.skip("a recording with parallel calls has no text-protocol form")
    history = _text_protocol(real)
    warden = Warden()
    masked_seen = 0
    for k in range(2, len(history) + 1):
        if k < len(history) and history[k]["role"] != "assistant":
            continue  # the model is called before each answer
        sent, result = warden.transform_openai(history[:k], model="gpt-4o", window=32_000)
        assert validate_openai(sent) == []
        assert history[1] in sent  # the task, verbatim
        for m in sent:
            found = MARKER.search(m["content"] or "") if m["role"] == "user" else None
            if found:
                masked_seen += 1
                (original,) = to_openai(warden.recall(result.conversation, found.group(1)))
                assert original["content"].startswith("<returncode>")
    assert masked_seen > 0


# Cline and Roo Code, when the model writes its tool uses as XML in its reply, give each result
# back as a user message headed ``[tool for 'arg'] Result:``, with ``<environment_details>``.
def _cline_result(tool: str, arg: str, body: str, k: int) -> str:
    details = f"<environment_details>\n# Current Time\n{k}\n</environment_details>"
    return f"[{tool} for '{arg}'] Result:\n{body}\n\n{details}"


def as_cline(messages: list[Msg]) -> list[Msg]:
    """:func:`text_run`'s session as Cline's XML protocol writes it: each ``cat -n PATH`` a
    ``read_file`` use, each output the result Cline gives back."""
    out: list[Msg] = []
    for m in messages:
        text = m["content"]
        read = re.search(r"```\w*\ncat -n (\S+)\n```", text) if m["role"] == "assistant" else None
        if read:
            use = f"<read_file>\n<path>{read.group(1)}</path>\n</read_file>"
            out.append({"role": "assistant", "content": f"I'll read it.\n\n{use}"})
        elif m["role"] == "user" and text.startswith("<returncode>"):
            path = re.search(r"<path>(\S+)</path>", out[-1]["content"]).group(1)  # type: ignore[union-attr]
            body = text.split("<output>\n", 1)[1].rsplit("\n</output>", 1)[0]
            out.append(
                {"role": "user", "content": _cline_result("read_file", path, body, len(out))}
            )
        else:
            out.append(m)
    return out


def test_clines_xml_results_are_masked_as_the_text_protocols_outputs_are() -> None:
    history = text_run(12)
    text, _ = Warden().transform_openai(history, model="gpt-4o")
    cline = as_cline(history)
    snapshot = copy.deepcopy(cline)
    warden = Warden()
    sent, result = warden.transform_openai(cline, model="gpt-4o")
    assert cline == snapshot and validate_openai(sent) == []
    masked = [i for i, m in enumerate(sent) if MARKER.search(m["content"] or "")]
    assert masked and masked == [i for i, m in enumerate(text) if MARKER.search(m["content"])]
    for i in masked:
        assert sent[i]["content"].startswith("[read_file for 'src/module_")
        ref = MARKER.search(sent[i]["content"]).group(1)  # type: ignore[union-attr]
        assert to_openai(warden.recall(result.conversation, ref)) == [cline[i]]


def test_a_cline_result_with_the_users_feedback_is_the_users_words() -> None:
    history = as_cline(text_run(12))
    feedback = "The user denied this operation and provided the following feedback:"
    note = f"{feedback}\n<feedback>\nDo not read module 2, read src/parse.py instead.\n</feedback>"
    history[7] = {"role": "user", "content": _cline_result("read_file", "src/module_2.py", note, 7)}
    sent, _ = Warden().transform_openai(history, model="gpt-4o")
    assert sent[7] == history[7]  # never masked, though older results around it are
    assert MARKER.search(sent[5]["content"]) and MARKER.search(sent[9]["content"])


def test_a_compacted_cline_session_lists_the_reads_not_their_results_as_instructions() -> None:
    history = as_cline(text_run(60, lines=120))
    feedback = "<feedback>\nKeep the public names of src/parse.py as they are.\n</feedback>"
    history[21] = {"role": "user", "content": _cline_result("read_file", "x", feedback, 21)}
    write = "<write_to_file>\n<path>src/parse.py</path>\n<content>\nx = 1\n</content>\n"
    history[30] = {"role": "assistant", "content": f"Writing it.\n\n{write}</write_to_file>"}
    saved = "The content was successfully saved to src/parse.py."
    history[31] = {
        "role": "user",
        "content": _cline_result("write_to_file", "src/parse.py", saved, 31),
    }
    sent, result = Warden().transform_openai(history, model="gpt-4o", window=16_000)
    assert validate_openai(sent) == [] and result.tokens_after <= 16_000
    summary = next(m["content"] for m in sent if "<completed>" in (m["content"] or ""))
    instructions = summary.split("User instructions", 1)[1].split("</remaining>", 1)[0]
    assert "Keep the public names of src/parse.py" in instructions
    assert "Result:" in instructions and instructions.count("Result:") == 1  # the feedback's
    done = summary.split("</completed>", 1)[0]
    assert "src/module_57.py" in done  # read, in what was done
    assert re.search(r"(?i)(created|modified|edited)[^\n]*src/parse\.py", done)  # written
    names = " ".join(re.findall(r"^- names: (.*)$", summary, re.MULTILINE))
    assert "step_" in names and not re.search(r"read_file|write_to_file", names)  # no tag


@pytest.mark.parametrize(
    ("reply", "command"),
    [
        ("<execute_command>\n<command>pytest -x</command>\n</execute_command>", "pytest -x"),
        ("<list_files>\n<path>src</path>\n<recursive>true</recursive>\n</list_files>", "ls -R src"),
        (
            "<search_files>\n<path>src</path>\n<regex>def parse\\(</regex>\n"
            "<file_pattern>*.py</file_pattern>\n</search_files>",
            "grep -rn --include='*.py' -e 'def parse\\(' src",
        ),
        ("<read_file>\n<path>my file.py</path>\n</read_file>", "cat 'my file.py'"),
        (
            "<write_to_file>\n<path>a.py</path>\n<content>x</content>\n</write_to_file>",
            "cat > a.py",
        ),
        ("<replace_in_file>\n<path>a.py</path>\n<diff>\n</diff>\n</replace_in_file>", "patch a.py"),
        (  # Roo Code: several files in one read
            "<read_file>\n<args>\n<file>\n<path>a.py</path>\n</file>\n<file>\n<path>b.py</path>\n"
            "</file>\n</args>\n</read_file>",
            "cat a.py b.py",
        ),
        ("<apply_diff>\n<path>a.py</path>\n<diff>\n</diff>\n</apply_diff>", "patch a.py"),
        ("<ask_followup_question>\n<question>Which?</question>\n</ask_followup_question>", None),
        ("<read_file><path>a.py</path></read_file><read_file><path>b</path></read_file>", None),
    ],
)
def test_a_cline_tool_use_reads_as_the_command_it_amounts_to(reply: str, command: str) -> None:
    assert xml_command(f"Next step.\n\n{reply}") == command


@pytest.mark.parametrize(
    ("text", "output"),
    [
        ("[read_file for 'src/app.py'] Result:\n1 | import os", True),
        ("[execute_command for 'ls [a-z]*'] Result:\nCommand executed.", True),
        ("[read_file for 'a.md', 'b.md'] Result:\n<files>\n<file><path>a.md</path>", True),  # Roo
        (  # the user's answer to a finished task
            "[attempt_completion] Result:\nThe user has provided feedback on the results.\n"
            "<feedback>\nAlso update the README.\n</feedback>",
            False,
        ),
        (
            "[write_to_file for 'a.py'] Result:\nThe user denied this operation and provided "
            "the following feedback:\n<feedback>\nUse tabs.\n</feedback>",
            False,
        ),
        ("[urgent] Please stop and explain the Result: first.", False),
    ],
)
def test_clines_result_header_reads_as_output_and_feedback_as_words(
    text: str, output: bool
) -> None:
    assert reads_as_output(text) is output
