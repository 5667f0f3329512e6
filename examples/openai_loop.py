"""An OpenAI Chat Completions agent loop with contextwarden.

The agent keeps its full history; before every call the warden returns a trimmed copy that
fits the window (old tool output masked, compaction when needed), and that copy is sent.
Runs offline against a scripted fake model; ``--live`` calls the real API
(``pip install openai``, ``OPENAI_API_KEY``).

    python examples/openai_loop.py
"""

from __future__ import annotations

import json
import sys

from _fake_provider import TOOLS_OPENAI, openai_chat, run_tool

from contextwarden import Compactor, Warden

MODEL = "gpt-4o-mini"


def chat(request: list[dict]) -> dict:
    if "--live" not in sys.argv:
        return openai_chat(request)
    from openai import OpenAI

    reply = OpenAI().chat.completions.create(model=MODEL, messages=request, tools=TOOLS_OPENAI)
    return reply.choices[0].message.model_dump(exclude_none=True)


# --- the library in an agent loop ---------------------------------------------------------
warden = Warden(compactor=Compactor())
events: list[str] = []  # what the warden did, call by call
sent = saved = 0
history = [
    {"role": "system", "content": "You are a coding agent. Use read_file."},
    {"role": "user", "content": "List every TODO in src/."},
]
for _step in range(100):  # a real loop would also cap its steps
    request, result = warden.transform_openai(
        history, model=MODEL, window=16_000, tools=TOOLS_OPENAI
    )
    sent += result.tokens_after
    saved += result.saved_tokens
    for event in result.events:
        events.append(f"call {_step + 1}: {event.describe()}")
        print(events[-1])
    reply = chat(request)
    history.append(reply)
    for call in reply.get("tool_calls") or []:
        output = run_tool(call["function"]["name"], json.loads(call["function"]["arguments"]))
        history.append({"role": "tool", "tool_call_id": call["id"], "content": output})
    if not reply.get("tool_calls"):
        break
# --------------------------------------------------------------------------------------------

print(
    f"{len(history)} messages in the agent's history, {_step + 1} calls: {sent:,} tokens sent "
    f"({saved:,} saved, {len(events)} warden events)."
)
print("answer:", history[-1]["content"])
