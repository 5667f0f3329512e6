"""A scripted upstream for the recall tests: :class:`FakeUpstream` (every API, streamed or not)
with its own script. It records what it gets and, when the request offers ``contextwarden_recall``,
calls it for the first ``cw:`` reference the request shows; once the request carries the tool's
answer, it answers with text quoting the ``SECRET-nnnn`` the answer holds. ``mode`` varies the
script:

* ``recall``: as above; ``mixed``: the recall call comes with a call of the client's ``run`` tool
  (on the Responses API, before it);
* ``always``: calls the tool whenever it is offered (the round limit ends it);
* ``unknown``: asks for a reference nobody keeps; ``fail_second``: answers every later round
  (a request carrying a recall answer) ``fail_status`` (429).

``reasoning``: each Responses reply begins with a reasoning item carrying encrypted content.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import httpx
import upstream_wire as wire
from fake_upstream import FakeUpstream, Recorded
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

RECALL = "contextwarden_recall"
REF = re.compile(r"cw:[0-9a-f]{16}")
SECRET = re.compile(r"SECRET-\d{4}")
USAGE_IN, USAGE_OUT = 100, 7


def tool_output(i: int) -> str:
    """Call ``i``'s tool output in the recall tests: 75 lines, then its ``SECRET-nnnn``."""
    lines = "\n".join(f"line {j} of file{i}: value_{i}_{j} = compute({j})" for j in range(75))
    return f"{lines}\nSECRET-{i:04d}"


def proxy_stats(proxy: str) -> dict[str, Any]:
    """The proxy's ``/stats``."""
    return httpx.get(proxy + "/stats").json()


def tool_names(body: dict[str, Any]) -> list[str]:
    """The names of a request's tools, whatever the API's shape of a tool."""
    names = []
    for t in body.get("tools") or []:
        if "functionDeclarations" in t:
            names += [d["name"] for d in t["functionDeclarations"]]
        else:
            names.append(t.get("name") or t["function"]["name"])
    return names


class RecallUpstream(FakeUpstream):
    """The recall script on :class:`FakeUpstream` (its recording, its ``then`` behaviours and
    its wire formats); ``bodies`` are the JSON bodies it received, oldest first."""

    def __init__(self, mode: str = "recall") -> None:
        super().__init__()
        self.mode = mode
        self.fail_status = 429
        self.reasoning = False

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.json for r in self.requests]

    def _plan(self, body: dict[str, Any], api: str) -> tuple[str, list[tuple[str, str, Any]]]:
        """The reply's text and tool calls (id, name, input) for ``body``."""
        offered = any(_name(t) == RECALL for t in body.get("tools") or []) and body.get(
            "tool_choice"
        ) not in ("none", {"type": "none"})
        if api == "gemini":
            mode = ((body.get("toolConfig") or {}).get("functionCallingConfig") or {}).get("mode")
            offered = RECALL in tool_names(body) and mode != "NONE"
        history = _history(body, api)
        answered = _recall_answers(history, api)
        rounds = len(self.requests)
        if answered and not (self.mode == "always" and offered):
            found = SECRET.findall(answered[-1])
            return f"quoted: {found[-1] if found else 'nothing'}", []
        refs = REF.findall(json.dumps(history))
        if not offered or not (refs or self.mode == "unknown"):
            return "plain answer", []
        ref = "cw:0000000000000000" if self.mode == "unknown" else refs[0]
        calls: list[tuple[str, str, Any]] = [(f"call_recall_{rounds}", RECALL, {"ref": ref})]
        if self.mode == "mixed":
            run = (f"call_run_{rounds}", "run", {"cmd": "ls"})
            calls = [run, *calls] if api == "responses" else [*calls, run]
        return "Let me look. ", calls

    async def _answer(self, request: Request, api: str) -> Response:
        rec, b = await self._record(request)
        body = rec.json
        if self.mode == "fail_second" and _recall_answers(_history(body, api), api):
            kind = "rate_limit_error" if self.fail_status == 429 else "server_error"
            error = {"type": kind, "message": "slow down"}
            payload = {"type": "error", "error": error} if api == "anthropic" else {"error": error}
            return JSONResponse(payload, status_code=self.fail_status)
        return self._send(api, rec, b, self._reply(api, body, rec), wire.halves)

    def _reply(self, api: str, body: dict[str, Any], rec: Recorded) -> dict[str, Any]:
        text, calls = self._plan(body, api)
        n, model = len(self.requests), body.get("model", "?")
        if api == "openai":
            usage = wire.chat_usage(USAGE_IN, USAGE_OUT)
            return wire.chat_reply(text, model=model, usage=usage, calls=calls, id=f"chatcmpl-{n}")
        if api == "anthropic":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
            blocks += [{"type": "tool_use", "id": i, "name": c, "input": a} for i, c, a in calls]
            usage = wire.messages_usage(USAGE_IN, USAGE_OUT, cache_read=10)
            return wire.messages_reply(blocks, model=model, usage=usage, id=f"msg_{n}")
        if api == "gemini":
            parts: list[dict[str, Any]] = [
                {"text": text, "thoughtSignature": signature(f"text-{n}")}
            ]
            # as Gemini 3 does: no call id, the signature on the first call of the turn
            parts += [
                {"functionCall": {"name": c, "args": a}}
                | ({} if k else {"thoughtSignature": signature(i)})
                for k, (i, c, a) in enumerate(calls)
            ]
            return wire.gemini_reply(parts, wire.gemini_usage(USAGE_IN, USAGE_OUT, cached=10))
        output: list[dict[str, Any]] = []
        if self.reasoning:
            output.append(wire.reasoning_item(f"Thinking {n}.", f"enc-{n}", f"rs_{n}"))
        output.append(wire.message_item(text, f"msg_{n}"))
        output += [wire.function_call_item(i, c, a, f"fc_{i}") for i, c, a in calls]
        return wire.responses_reply(
            output,
            model=model,
            usage=wire.responses_usage(USAGE_IN, USAGE_OUT, cached=10, reasoning=3),
            id=f"resp_{n}",
            parallel_tool_calls=True,
            tool_choice=body.get("tool_choice", "auto"),
            tools=body.get("tools", []),
        )


def signature(what: str) -> str:
    """A thought signature as Gemini sends one (base64; opaque to everyone but the model)."""
    return base64.b64encode(f"sig-{what}".encode()).decode()


def _history(body: dict[str, Any], api: str) -> list[dict[str, Any]]:
    if api == "gemini":
        return list(body["contents"])
    return list(body["input"] if api == "responses" else body["messages"])


def _name(tool: dict[str, Any]) -> Any:
    return tool.get("name") or (tool.get("function") or {}).get("name")


def _recall_answers(messages: list[dict[str, Any]], api: str) -> list[str]:
    """The texts of the recall answers the request carries (calls named call_recall_*; on
    the Gemini API, which has no call ids, responses of the tool's name)."""
    if api == "gemini":
        return [
            p["functionResponse"]["response"].get("output", "")
            for c in messages
            for p in c["parts"]
            if p.get("functionResponse", {}).get("name") == RECALL
        ]
    if api == "responses":
        return [
            m["output"]
            for m in messages
            if m.get("type") == "function_call_output" and m["call_id"].startswith("call_recall_")
        ]
    if api == "openai":
        return [
            m["content"]
            for m in messages
            if m["role"] == "tool" and m["tool_call_id"].startswith("call_recall_")
        ]
    return [
        b["content"]
        for m in messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result" and b["tool_use_id"].startswith("call_recall_")
    ]
