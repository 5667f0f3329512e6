"""An Anthropic Messages agent loop with contextwarden.

Same idea as ``openai_loop.py``, in Anthropic's format: ``tool_use`` blocks, ``tool_result``
blocks inside user messages, the system prompt apart. Runs offline against a scripted fake
model; ``--live`` calls the real API (``pip install anthropic``, ``ANTHROPIC_API_KEY``).

    python examples/anthropic_loop.py
"""

from __future__ import annotations

import sys

from _fake_provider import TOOLS_ANTHROPIC, anthropic_messages, run_tool

from contextwarden import Compactor, Warden

MODEL = "claude-sonnet-4-6"


def create(system: str, messages: list[dict]) -> dict:
    if "--live" not in sys.argv:
        return anthropic_messages(system, messages)
    from anthropic import Anthropic

    reply = Anthropic().messages.create(
        model=MODEL, system=system, messages=messages, tools=TOOLS_ANTHROPIC, max_tokens=2048
    )
    return reply.model_dump(include={"role", "content", "stop_reason"}, exclude_none=True)


def tool_result(use: dict) -> dict:
    output = run_tool(use["name"], use["input"])
    return {"type": "tool_result", "tool_use_id": use["id"], "content": output}


# --- the library in an agent loop ---------------------------------------------------------
warden = Warden(compactor=Compactor())
events: list[str] = []  # what the warden did, call by call
sent = saved = 0
system = "You are a coding agent. Use read_file."
history = [{"role": "user", "content": "List every TODO in src/."}]
for _step in range(100):  # a real loop would also cap its steps
    sent_system, request, result = warden.transform_anthropic(
        history, system=system, model=MODEL, window=16_000, tools=TOOLS_ANTHROPIC
    )
    sent += result.tokens_after
    saved += result.saved_tokens
    for event in result.events:
        events.append(f"call {_step + 1}: {event.describe()}")
        print(events[-1])
    reply = create(sent_system, request)
    history.append({"role": "assistant", "content": reply["content"]})
    uses = [b for b in reply["content"] if b["type"] == "tool_use"]
    if not uses:
        break
    history.append({"role": "user", "content": [tool_result(b) for b in uses]})
# --------------------------------------------------------------------------------------------

print(
    f"{len(history)} messages in the agent's history, {_step + 1} calls: {sent:,} tokens sent "
    f"({saved:,} saved, {len(events)} warden events)."
)
print("answer:", history[-1]["content"][0]["text"])
