"""Cline (and Roo Code) when the model writes its tool uses as XML: through the proxy on the
Anthropic wire format, the results Cline gives back as text (``[read_file for 'p'] Result:``
and its ``<environment_details>``) reach the upstream masked once old, the user's words and
the feedback on a tool use verbatim, and every request valid."""

from __future__ import annotations

import re
from typing import Any

from fake_upstream import FakeUpstream
from proxy_doubles import anthropic_text, send_anthropic

from contextwarden.formats import validate_anthropic

SYSTEM = "You are Cline, a highly skilled software engineer. Use one XML tool per message."
TASK = "<task>\nThe parser drops the last field of src/parse.py; fix it.\n</task>"
MASKED = re.compile(r"omitted; recall cw:[0-9a-f]{16}")
FEEDBACK = "<feedback>\nRead src/fields.py before you edit anything.\n</feedback>"


def _details(k: int) -> dict[str, str]:
    text = f"<environment_details>\n# VSCode Visible Files\nsrc/parse.py\n\n# Step\n{k}\n"
    return {"type": "text", "text": text + "</environment_details>"}


def cline_history(steps: int) -> list[dict[str, Any]]:
    """Anthropic messages as Cline sends them: each reply one ``read_file`` use in XML, each
    result a user turn of text blocks (header, the file's lines, the environment details);
    the result at step 3 carries the user's feedback instead."""
    out: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": TASK}, _details(0)]}
    ]
    for k in range(steps):
        path = f"src/module_{k}.py"
        use = f"<read_file>\n<path>{path}</path>\n</read_file>"
        out.append({"role": "assistant", "content": [{"type": "text", "text": f"Next.\n{use}"}]})
        body = "\n".join(f"{n} | def field_{k}_{n}(row): return row[{n}]" for n in range(150))
        if k == 3:
            body = (
                f"The user denied this operation and provided the following feedback:\n{FEEDBACK}"
            )
        header = {"type": "text", "text": f"[read_file for '{path}'] Result:"}
        out.append(
            {"role": "user", "content": [header, {"type": "text", "text": body}, _details(k)]}
        )
    return out


def test_a_resumed_cline_session_reaches_the_upstream_with_its_old_results_masked(
    upstream: tuple[FakeUpstream, str], start_proxy: Any
) -> None:
    fake, url = upstream
    history = cline_history(14)
    send_anthropic(
        start_proxy(url), SYSTEM, history
    )  # a first call: nothing is cached, masks are free
    sent = fake.requests[-1].json["messages"]
    assert validate_anthropic(SYSTEM, sent) == [] and len(sent) == len(history)
    assert sent[0] == history[0]  # the task
    assert FEEDBACK in anthropic_text(
        sent[8]
    )  # the feedback on a tool use: the user's words, whole
    masked = [i for i, m in enumerate(sent) if MASKED.search(anthropic_text(m))]
    assert len(masked) >= 5 and 8 not in masked and len(history) - 1 not in masked
    for i in masked:  # each a result, its header kept
        assert history[i]["role"] == "user" and anthropic_text(sent[i]).startswith(
            "[read_file for '"
        )


def test_a_cline_session_compacted_through_the_proxy_keeps_the_users_words_only(
    upstream: tuple[FakeUpstream, str], start_proxy: Any
) -> None:
    fake, url = upstream
    proxy = start_proxy(url, window=36_000)
    history = cline_history(14)
    for end in range(1, len(history) + 1, 2):  # the model is called after each user turn
        send_anthropic(proxy, SYSTEM, history[:end])
    sent = [r.json for r in fake.requests if r.json.get("messages")]
    assert all(validate_anthropic(r["system"], r["messages"]) == [] for r in sent)
    last = sent[-1]["messages"]
    assert len(last) < len(history)  # compacted at the window
    summary = next(anthropic_text(m) for m in last if "<completed>" in anthropic_text(m))
    instructions = summary.split("</remaining>", 1)[0].split("<remaining>", 1)[1]
    assert "Read src/fields.py before you edit anything." in instructions
    assert instructions.count("Result:") == 1  # the feedback's; no result is an instruction
    assert "src/module_2.py" in summary.split("</completed>", 1)[0]  # a read, done
