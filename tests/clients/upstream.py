"""A scripted LLM upstream on loopback that speaks three wire formats.

* ``POST /v1/messages`` (Anthropic Messages; streaming events, thinking blocks with signatures,
  ``usage`` with ``cache_creation_input_tokens`` / ``cache_read_input_tokens`` computed from the
  request's own ``cache_control`` breakpoints), ``POST /v1/messages/count_tokens``;
* ``POST /v1/chat/completions`` (OpenAI chat; streaming chunks, ``usage`` with
  ``prompt_tokens_details.cached_tokens`` from the longest prefix seen before);
* ``POST /v1/responses`` (OpenAI Responses; streaming events, reasoning items),
  ``POST /v1/responses/compact``;
* ``POST /v1beta/models/{model}:generateContent`` and ``:streamGenerateContent?alt=sse``
  (Gemini; ``functionCall`` parts with a ``thoughtSignature`` on the first, ``thought`` parts,
  ``usageMetadata`` with ``cachedContentTokenCount``), ``:countTokens``;
* ``GET /v1/models``.

It does what the providers do with their own context management. Anthropic server-side
compaction: a request whose ``context_management`` asks for ``compact_20260112`` and whose input
is over the edit's trigger gets a ``compaction`` block first in its reply (a ``compaction_delta``
when streamed; with ``pause_after_compaction``, alone, with ``stop_reason: "compaction"``) and
``usage.iterations``; a request holding a compaction block is read, counted and billed from that
block on, as the server ignores what precedes it. OpenAI: ``context_management`` with a
``compact_threshold`` puts a ``compaction`` item before the reply's items; a request whose last
input item is ``{"type": "compaction_trigger"}`` (Codex's remote compaction) is answered by
exactly one ``compaction`` item; ``/v1/responses/compact`` answers a compaction of the input; the
items before the last compaction item are not counted. Every compaction it hands out is kept
(:attr:`Upstream.compactions`), so the suite can check that the client sent it back unchanged.

It plays an agent that works through ``steps`` tool steps and then gives a final answer. Each
step's tool call is built from the tools the client itself declared in the request (Claude
Code's ``Bash``/``Read``/``Write``, Codex's ``shell``/``exec_command``/``apply_patch``, any
tool with a ``command`` property) or, for a client without tools, written in the text format
the client parses (mini-swe-agent's bash block, aider's whole-file edit). Which step comes next
is read from the request itself: every call id and reply carries ``cw-step-N``, so the newest
assistant turn in the request says where the agent is, whatever was cut from the history.

Through the proxy, a Responses request that offers the proxy's ``contextwarden_recall`` tool and
shows a ``cw:`` reference gets a call of it instead of its step, at most ``RECALLS`` times a run:
the proxy answers it and asks again, and the client must never see the call.

A request is a *summary call* when its system prompt is contextwarden's summariser prompt (or it
comes without tools from plain httpx, as the proxy's summariser sends it); it gets a
four-section summary that quotes the ``<task>`` it was given. Requests are recorded
(path, headers, JSON body, kind, usage) for the suite's checks.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import upstream_wire as wire

SUMMARY_SYSTEM_MARK = "You condense the working history of an autonomous agent"
FINAL_MARK = "CW-FINAL-ANSWER"
STEP_RE = re.compile(r"cw-step-(\d+)")
# mini-swe-agent ends a run when a command's output starts with this line
MINI_SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
RECALL_TOOL = "contextwarden_recall"
REF_RE = re.compile(r"cw:[0-9a-f]{16}")
#: the recall calls a run makes at most (each costs the proxy one more upstream round)
RECALLS = 2
#: the call ids of those calls begin with this (no step marker: the proxy's round is no step)
RECALL_CALL = "call_cw_recall_"


@dataclass
class Recorded:
    """One request the upstream received."""

    api: str  # "anthropic" | "openai" | "responses" | "count_tokens" | "other"
    path: str
    headers: dict[str, str]
    body: Any
    # "main" (an agent step), "summary" (contextwarden's), "side", "compaction" (asked of the
    # provider: a compaction_trigger or /responses/compact)
    kind: str = "main"
    usage: dict[str, Any] = field(default_factory=dict)
    step: int = 0  # the step this request answered (0: none)
    compacted: bool = False  # the upstream compacted this request's history itself


def approx_tokens(text: str) -> int:
    """About four characters a token: the same measure for direct and proxied runs."""
    return (len(text) + 3) // 4


def _canon(value: Any) -> str:
    """A value's JSON text without ``cache_control`` (where a breakpoint sits is not content)."""

    def strip(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k != "cache_control"}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    return json.dumps(strip(value), sort_keys=True, ensure_ascii=False)


class PromptCache:
    """A model of prompt caching: a prefix is cached once written, and read back by any later
    request that starts with it. ``boundaries`` are the running hashes and token counts of a
    request's prefix after each block."""

    def __init__(self) -> None:
        self._written: set[str] = set()
        self._lock = threading.Lock()

    @staticmethod
    def boundaries(blocks: list[str]) -> list[tuple[str, int]]:
        h = hashlib.sha256()
        out = []
        tokens = 0
        for b in blocks:
            h.update(b.encode("utf-8", "surrogatepass"))
            h.update(b"\x00")
            tokens += approx_tokens(b)
            out.append((h.hexdigest(), tokens))
        return out

    def use(self, bounds: list[tuple[str, int]], write_at: list[int]) -> tuple[int, int]:
        """``(read, written)`` tokens for a request whose prefix boundaries are ``bounds``,
        writing the prefixes that end at the indexes ``write_at``."""
        with self._lock:
            read = 0
            for digest, tokens in reversed(bounds):
                if digest in self._written:
                    read = tokens
                    break
            last = max(write_at, default=-1)
            written = max(bounds[last][1] - read, 0) if last >= 0 else 0
            for i in write_at:
                self._written.add(bounds[i][0])
        return read, written


# -- reading a request ---------------------------------------------------------------------------
def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for b in content:
            if isinstance(b, dict):
                for k in ("text", "content", "input", "arguments", "output", "id", "call_id"):
                    v = b.get(k)
                    if isinstance(v, str):
                        parts.append(v)
                    elif isinstance(v, list | dict):
                        parts.append(json.dumps(v))
        return "\n".join(parts)
    return ""


def last_step(body: dict[str, Any], api: str) -> int:
    """The step the newest assistant turn of the request stands at (0 before the first)."""
    if api == "responses":
        items = body.get("input")
        if not isinstance(items, list):
            return 0
        for item in reversed(items):
            if not isinstance(item, dict):
                continue
            if item.get("type") in (
                "function_call",
                "custom_tool_call",
                "reasoning",
                "compaction",
            ) or (item.get("role") == "assistant"):
                found = STEP_RE.findall(json.dumps(item))
                if found:
                    return max(int(x) for x in found)
        return 0
    if api == "gemini":
        for c in reversed(body.get("contents") or []):
            if isinstance(c, dict) and c.get("role") == "model":
                found = STEP_RE.findall(json.dumps(c))
                if found:
                    return max(int(x) for x in found)
        return 0
    for m in reversed(body.get("messages") or []):
        if isinstance(m, dict) and m.get("role") == "assistant":
            blob = json.dumps(m)
            found = STEP_RE.findall(blob)
            if found:
                return max(int(x) for x in found)
    return 0


def _gemini_text(content: Any) -> str:
    parts = content.get("parts") if isinstance(content, dict) else None
    out = []
    for p in parts if isinstance(parts, list) else []:
        if isinstance(p, dict):
            if isinstance(p.get("text"), str):
                out.append(p["text"])
            for k in ("functionCall", "functionResponse"):
                if isinstance(p.get(k), dict):
                    out.append(json.dumps(p[k]))
    return "\n".join(out)


def system_text(body: dict[str, Any], api: str) -> str:
    if api == "anthropic":
        return _text_of(body.get("system"))
    if api == "gemini":
        return _gemini_text(body.get("systemInstruction"))
    if api == "responses":
        return str(body.get("instructions") or "")
    msgs = body.get("messages") or []
    return "\n".join(
        _text_of(m.get("content"))
        for m in msgs
        if isinstance(m, dict) and m.get("role") in ("system", "developer")
    )


def last_user_text(body: dict[str, Any], api: str) -> str:
    if api == "gemini":
        for c in reversed(body.get("contents") or []):
            if isinstance(c, dict) and c.get("role") == "user":
                return _gemini_text(c)
        return ""
    seq = body.get("input") if api == "responses" else body.get("messages")
    if isinstance(seq, str):
        return seq
    for m in reversed(seq or []):
        if isinstance(m, dict) and m.get("role") == "user":
            return _text_of(m.get("content"))
    return ""


def tools_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    tools = body.get("tools")
    if not isinstance(tools, list):
        return []
    out = []
    for t in tools:
        if isinstance(t, dict) and isinstance(t.get("functionDeclarations"), list):
            # Gemini: one tool holds the function declarations
            for d in t["functionDeclarations"]:
                if isinstance(d, dict):
                    params = d.get("parametersJsonSchema") or d.get("parameters") or {}
                    out.append({"name": d.get("name", ""), "parameters": params})
        elif isinstance(t, dict):
            out.append(t)
    return out


def live(body: dict[str, Any], api: str) -> dict[str, Any]:
    """``body`` as the provider reads it: from its last compaction block (Anthropic: the
    blocks before it in its message dropped too) or compaction item (Responses) on."""
    if api == "anthropic":
        msgs = body.get("messages")
        if not isinstance(msgs, list):
            return body
        for i in range(len(msgs) - 1, -1, -1):
            content = msgs[i].get("content") if isinstance(msgs[i], dict) else None
            if not isinstance(content, list):
                continue
            at = [
                j
                for j, b in enumerate(content)
                if isinstance(b, dict) and b.get("type") == "compaction" and b.get("content")
            ]
            if at:
                first = dict(msgs[i], content=content[at[-1] :])
                return dict(body, messages=[first, *msgs[i + 1 :]])
        return body
    if api == "responses" and isinstance(body.get("input"), list):
        items = body["input"]
        for i in range(len(items) - 1, -1, -1):
            if isinstance(items[i], dict) and items[i].get("type") == "compaction":
                return dict(body, input=items[i:])
    return body


def server_compaction(body: dict[str, Any], api: str) -> tuple[int, bool] | None:
    """``(trigger in tokens, pause after)`` when the request asks the provider to compact."""
    cm = body.get("context_management")
    if api == "anthropic" and isinstance(cm, dict):
        for edit in cm.get("edits") or []:
            if isinstance(edit, dict) and edit.get("type") == "compact_20260112":
                trigger = edit.get("trigger") or {}
                value = trigger.get("value") if isinstance(trigger, dict) else None
                return int(value or 150_000), bool(edit.get("pause_after_compaction"))
    if api == "responses" and isinstance(cm, list):
        for entry in cm:
            if isinstance(entry, dict) and entry.get("type") == "compaction":
                return int(entry.get("compact_threshold") or 200_000), False
    return None


def compaction_trigger(body: dict[str, Any]) -> bool:
    items = body.get("input")
    return (
        isinstance(items, list)
        and bool(items)
        and isinstance(items[-1], dict)
        and items[-1].get("type") == "compaction_trigger"
    )


# -- the agent's moves ----------------------------------------------------------------------------
@dataclass
class Move:
    """What the scripted agent does at one step: a tool call, or text (final or text-format)."""

    step: int
    text: str = ""
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    custom_input: str | None = None  # a Responses freeform (custom) tool's input
    call_id: str = ""
    final: bool = False


def shell_command(step: int, big_files: int) -> str:
    """The shell command of a step: most read a large file, some list or grep."""
    if step % 3 == 2:
        return f"echo cw-step-{step} && ls -la data | head -20"
    return f"echo cw-step-{step} && cat data/big_{step % big_files:02d}.txt"


def _tool_name(t: dict[str, Any]) -> str:
    if t.get("type") == "function" and isinstance(t.get("function"), dict):
        return str(t["function"].get("name", ""))
    return str(t.get("name", ""))


def _tool_params(t: dict[str, Any]) -> dict[str, Any]:
    if isinstance(t.get("function"), dict):
        p = t["function"].get("parameters")
    else:
        p = t.get("input_schema") or t.get("parameters")
    return p if isinstance(p, dict) else {}


def plan_move(
    step: int, tools: list[dict[str, Any]], workdir: str, big_files: int, text_format: str
) -> Move:
    """The move for ``step`` (1-based) with the client's ``tools``."""
    cmd = shell_command(step, big_files)
    by_name = {_tool_name(t): t for t in tools}
    call_id = f"cw-step-{step}"
    # Claude Code
    if "Bash" in by_name:
        if step % 5 == 0 and "Read" in by_name:
            return Move(
                step,
                tool="Read",
                arguments={"file_path": f"{workdir}/data/big_{step % big_files:02d}.txt"},
                call_id=call_id,
            )
        if step == 3 and "Write" in by_name:
            return Move(
                step,
                tool="Write",
                arguments={
                    "file_path": f"{workdir}/notes.md",
                    "content": f"# notes\ncw-step-{step}: started\n",
                },
                call_id=call_id,
            )
        return Move(
            step,
            tool="Bash",
            arguments={"command": cmd, "description": f"Step {step}"},
            call_id=call_id,
        )
    # Codex
    if "apply_patch" in by_name and step == 3:
        t = by_name["apply_patch"]
        patch = (
            "*** Begin Patch\n*** Add File: notes.md\n"
            f"+# notes\n+cw-step-{step}: started\n*** End Patch\n"
        )
        if t.get("type") == "custom":
            return Move(step, tool="apply_patch", custom_input=patch, call_id=call_id)
        return Move(step, tool="apply_patch", arguments={"input": patch}, call_id=call_id)
    if "exec_command" in by_name:
        return Move(step, tool="exec_command", arguments={"cmd": cmd}, call_id=call_id)
    if "shell_command" in by_name:
        return Move(step, tool="shell_command", arguments={"command": cmd}, call_id=call_id)
    if "shell" in by_name:
        return Move(
            step,
            tool="shell",
            arguments={"command": ["bash", "-lc", cmd], "workdir": workdir},
            call_id=call_id,
        )
    # any tool with a command property (the SDK loops', mini-swe-agent's tool-calling model)
    for t in tools:
        props = _tool_params(t).get("properties") or {}
        if "command" in props:
            kind = (props["command"] or {}).get("type")
            value: Any = ["bash", "-lc", cmd] if kind == "array" else cmd
            return Move(step, tool=_tool_name(t), arguments={"command": value}, call_id=call_id)
    # no usable tool: the client reads actions from text
    if text_format == "aider":
        body = "\n".join(f"line {i} of step {step}: value {i * step}" for i in range(60))
        return Move(
            step,
            text=(
                f"Step cw-step-{step}: I update the notes file.\n\nnotes_{step % 4}.txt\n"
                f"```\n# cw-step-{step}\n{body}\n```\n"
            ),
        )
    return Move(
        step,
        text=(
            f"THOUGHT: step cw-step-{step}, I look at the data.\n\n"
            f"```mswea_bash_command\n{cmd}\n```\n"
        ),
    )


def final_move(step: int, tools: list[dict[str, Any]], text_format: str) -> Move:
    """The last move: a final answer, or for mini-swe-agent its submit command."""
    if text_format == "mini":
        cmd = f"echo {MINI_SUBMIT} && echo {FINAL_MARK}"
        for t in tools:
            if "command" in (_tool_params(t).get("properties") or {}):
                return Move(
                    step,
                    text=f"cw-step-{step}: all done, submitting.",
                    tool=_tool_name(t),
                    arguments={"command": cmd},
                    call_id=f"cw-step-{step}",
                    final=True,
                )
        return Move(
            step,
            text=f"THOUGHT: cw-step-{step} all done.\n\n```mswea_bash_command\n{cmd}\n```\n",
            final=True,
        )
    return Move(step, text=f"{FINAL_MARK}: finished after cw-step-{step - 1}.", final=True)


def summary_text(body: dict[str, Any], api: str) -> str:
    user = last_user_text(body, api)
    m = re.search(r"<task>\n(.*?)\n</task>", user, re.DOTALL)
    task = m.group(1) if m else "(no task given)"
    steps = sorted({int(x) for x in STEP_RE.findall(user)})
    done = ", ".join(f"cw-step-{s}" for s in steps[-12:]) or "nothing yet"
    return (
        f"<completed>\nRan {done}.\n</completed>\n<remaining>\nOriginal task: {task}\n"
        "Carry on with the next step.\n</remaining>\n<current_state>\ndata/ holds the big "
        "files; notes.md started.\n</current_state>\n<notes>\nnone\n</notes>"
    )


# -- the server ----------------------------------------------------------------------------------
class Upstream:
    """The scripted upstream: ``start()`` it, point a client (or the proxy) at ``base_url``."""

    def __init__(
        self,
        *,
        steps: int = 40,
        workdir: str = "/tmp",
        big_files: int = 12,
        text_format: str = "mini",
        thinking: bool = True,
    ) -> None:
        self.steps = steps
        self.workdir = workdir
        self.big_files = big_files
        self.text_format = text_format
        self.thinking = thinking
        self.requests: list[Recorded] = []
        self.recalls = 0
        #: every compaction block / item handed out, as sent
        self.compactions: list[dict[str, Any]] = []
        self.cache = PromptCache()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Upstream:
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                upstream._get(self)

            def do_POST(self) -> None:  # noqa: N802
                upstream._post(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Upstream:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset(self) -> None:
        with self._lock:
            self.requests = []
            self.compactions = []
        self.cache = PromptCache()

    # -- HTTP ------------------------------------------------------------------------------------
    def _send_json(self, h: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        h.send_response(status)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _get(self, h: BaseHTTPRequestHandler) -> None:
        if h.path.rstrip("/").endswith("/models"):
            self._send_json(
                h,
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": "gpt-5-codex", "object": "model", "created": 0, "owned_by": "cw"},
                        {"id": "claude-sonnet-4-5", "type": "model", "display_name": "Sonnet"},
                    ],
                },
            )
            return
        self._send_json(h, 404, {"error": {"message": f"no route {h.path}"}})

    def _post(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("content-length") or 0)
        raw = h.rfile.read(length)
        path = h.path.split("?")[0]
        try:
            body = json.loads(raw)
        except ValueError:
            self._send_json(h, 400, {"error": {"message": "body is not JSON"}})
            return
        headers = {k.lower(): v for k, v in h.headers.items()}
        if path.endswith("/messages/count_tokens"):
            rec = Recorded("count_tokens", path, headers, body, kind="side")
            self._record(rec)
            self._send_json(h, 200, {"input_tokens": approx_tokens(_canon(body))})
            return
        if path.endswith("/responses/compact") and isinstance(body, dict):
            rec = Recorded("responses", path, headers, body, kind="compaction")
            item = self._compaction_item(body)
            rec.usage = self._usage(rec, Move(0, text=item["encrypted_content"]))
            self._record(rec)
            self._send_json(
                h,
                200,
                {
                    "id": f"resp_{_nonce()}",
                    "object": "response.compaction",
                    "created_at": int(time.time()),
                    "output": [item],
                    "usage": _responses_usage(rec.usage, False),
                },
            )
            return
        if ":countTokens" in path:
            rec = Recorded("count_tokens", path, headers, body, kind="side")
            self._record(rec)
            self._send_json(h, 200, {"totalTokens": approx_tokens(_canon(body))})
            return
        gemini_stream = ":streamGenerateContent" in path
        if path.endswith("/messages"):
            api = "anthropic"
        elif gemini_stream or ":generateContent" in path:
            api = "gemini"
        elif path.endswith("/chat/completions"):
            api = "openai"
        elif path.endswith("/responses"):
            api = "responses"
        else:
            self._record(Recorded("other", path, headers, body, kind="side"))
            self._send_json(h, 404, {"error": {"message": f"no route {path}"}})
            return
        if not isinstance(body, dict):
            self._send_json(h, 400, {"error": {"message": "body is not an object"}})
            return
        rec = Recorded(api, path, headers, body)
        reply = self._reply(rec)
        self._record(rec)
        stream = body.get("stream") is True or gemini_stream
        if not stream:
            self._send_json(h, 200, reply)
            return
        h.send_response(200)
        h.send_header("content-type", "text/event-stream")
        h.send_header("cache-control", "no-cache")
        h.send_header("connection", "close")
        h.end_headers()
        for chunk in wire.stream(api, reply, body):
            h.wfile.write(chunk)
        h.wfile.flush()
        h.close_connection = True

    def _record(self, rec: Recorded) -> None:
        with self._lock:
            self.requests.append(rec)

    # -- replies ---------------------------------------------------------------------------------
    def _reply(self, rec: Recorded) -> dict[str, Any]:
        body, api = rec.body, rec.api
        sys_text = system_text(body, api)
        tools = tools_of(body)
        # contextwarden's summary calls: its summariser's prompt, or a tool-less call from plain
        # httpx (the clients all send their own SDK's user agent)
        proxy_made = rec.headers.get("user-agent", "").startswith("python-httpx") and not tools
        if SUMMARY_SYSTEM_MARK in sys_text or proxy_made:
            rec.kind = "summary"
            move = Move(0, text=summary_text(body, api), final=True)
        elif _answer_schema(body) is not None:
            rec.kind = "side"  # a call for structured output (Gemini CLI's loop check...)
            move = Move(0, text=json.dumps(_schema_instance(_answer_schema(body))), final=True)
        elif not tools and self.text_format not in ("mini", "aider"):
            rec.kind = "side"  # a client's title / topic / quota call
            move = Move(0, text="ok", final=True)
        elif not tools and self.text_format == "aider" and not _aider_main(body):
            rec.kind = "side"  # aider's own history summary, commit message...
            move = Move(0, text="Summary of the chat so far: notes files were updated.")
        else:
            if self.text_format == "aider":
                # aider's history may be summarised away: its driver numbers the turns
                turn = re.search(r"Turn (\d+):", last_user_text(body, api))
                step = int(turn.group(1)) + 1 if turn else 1
            else:
                step = last_step(body, api) + 1
            rec.step = step
            recall = self._recall_move(body, api, tools, step)
            if recall is not None:
                move = recall
            elif step > self.steps:
                move = final_move(step, tools, self.text_format)
            else:
                move = plan_move(step, tools, self.workdir, self.big_files, self.text_format)
        if api == "responses" and compaction_trigger(body):
            rec.kind = "compaction"  # Codex asks for exactly one compaction item back
            item = self._compaction_item(body)
            rec.usage = self._usage(rec, Move(0, text=item["encrypted_content"]))
            return _responses_reply(body, [item], rec.usage, False)
        usage = self._usage(rec, move)
        rec.usage = usage
        thinking = self.thinking and rec.kind == "main" and _wants_thinking(body, api)
        asked = server_compaction(body, api) if rec.kind == "main" else None
        compaction: dict[str, Any] | None = None
        if asked is not None and _input_tokens(usage) > asked[0]:
            rec.compacted = True
            compaction = (
                self._compaction_block(body) if api == "anthropic" else self._compaction_item(body)
            )
            usage["iterations"] = [  # type: ignore[assignment]
                {
                    "type": "compaction",
                    "input_tokens": _input_tokens(usage),
                    "output_tokens": approx_tokens(json.dumps(compaction)),
                    "cache_read_input_tokens": 0,
                    "cache_creation_input_tokens": 0,
                },
                {"type": "message", "input_tokens": 200, "output_tokens": usage["output_tokens"]},
            ]
        if api == "anthropic":
            msg = _anthropic_message(body, move, usage, thinking)
            if compaction is not None:
                if asked is not None and asked[1]:  # pause_after_compaction
                    msg["content"], msg["stop_reason"] = [compaction], "compaction"
                else:
                    msg["content"] = [compaction, *msg["content"]]
            return msg
        if api == "openai":
            return _openai_completion(body, move, usage)
        if api == "gemini":
            return _gemini_response(body, move, usage, thinking)
        reply = _responses_response(body, move, usage, thinking)
        if compaction is not None:
            reply["output"] = [compaction, *reply["output"]]
        return reply

    def _compaction_block(self, body: dict[str, Any]) -> dict[str, Any]:
        """Anthropic's compaction block for ``body``: a summary naming the step reached."""
        step = last_step(body, "anthropic")
        block = {
            "type": "compaction",
            "content": summary_text({"messages": [{"role": "user", "content": ""}]}, "anthropic")
            + f"\nReached cw-step-{step}. Task: {_task_of(body)}",
            "signature": f"sig-compaction-{_nonce()}",
        }
        with self._lock:
            self.compactions.append(block)
        return block

    def _compaction_item(self, body: dict[str, Any]) -> dict[str, Any]:
        """OpenAI's encrypted compaction item for ``body`` (the step reached in clear, so that
        the step count survives the history it replaces)."""
        step = last_step(body, "responses")
        item = {
            "type": "compaction",
            "id": f"cmp_{_nonce()}",
            "encrypted_content": f"gAAAA-cw-step-{step}-"
            + hashlib.sha256(json.dumps(body.get("input"), sort_keys=True).encode()).hexdigest()
            * 4,
        }
        with self._lock:
            self.compactions.append(item)
        return item

    def _recall_move(
        self, body: dict[str, Any], api: str, tools: list[dict[str, Any]], step: int
    ) -> Move | None:
        """A call of the proxy's recall tool for the first ``cw:`` reference a Responses request
        shows, when the request offers the tool and carries no recall answer yet (at most
        ``RECALLS`` a run)."""
        if api != "responses" or RECALL_TOOL not in {_tool_name(t) for t in tools}:
            return None
        text = json.dumps(body.get("input"))
        refs = REF_RE.findall(text)
        if not refs or RECALL_CALL in text:
            return None
        with self._lock:
            if self.recalls >= RECALLS:
                return None
            self.recalls += 1
            n = self.recalls
        return Move(
            step,
            text="I read an earlier output back first.",
            tool=RECALL_TOOL,
            arguments={"ref": refs[0]},
            call_id=RECALL_CALL.removeprefix("call_") + str(n),
        )

    def _usage(self, rec: Recorded, move: Move) -> dict[str, Any]:
        api = rec.api
        body = live(rec.body, api)
        out_tokens = approx_tokens(move.text + json.dumps(move.arguments or {}))
        out_tokens += approx_tokens(move.custom_input or "") + 20
        if api == "anthropic":
            blocks, marks = _anthropic_blocks(body)
            bounds = self.cache.boundaries(blocks)
            read, written = self.cache.use(bounds, marks)
            total = bounds[-1][1] if bounds else 0
            return {
                "input_tokens": max(total - read - written, 0),
                "cache_creation_input_tokens": written,
                "cache_read_input_tokens": read,
                "output_tokens": out_tokens,
            }
        seq = {"openai": "messages", "gemini": "contents"}.get(api, "input")
        seq = body.get(seq)
        system = body.get("systemInstruction") if api == "gemini" else body.get("instructions")
        lead = [_canon(body.get("tools")), _canon(system)]
        blocks = lead + [_canon(m) for m in (seq if isinstance(seq, list) else [seq])]
        bounds = self.cache.boundaries(blocks)
        read, _ = self.cache.use(bounds, list(range(len(bounds))))
        total = bounds[-1][1]
        # OpenAI caches prefixes of 1024 tokens and more, in steps of 128
        cached = (read // 128) * 128 if read >= 1024 else 0
        return {"input_tokens": total, "cached_tokens": cached, "output_tokens": out_tokens}

    # -- figures ---------------------------------------------------------------------------------
    def of_kind(self, *kinds: str) -> list[Recorded]:
        return [r for r in self.requests if r.kind in kinds]


def _answer_schema(body: dict[str, Any]) -> Any:
    """The JSON schema the reply must follow (Gemini's ``responseJsonSchema`` /
    ``responseSchema``, OpenAI's ``response_format``), if the request sets one."""
    config = body.get("generationConfig")
    if isinstance(config, dict):
        return config.get("responseJsonSchema") or config.get("responseSchema")
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and isinstance(fmt.get("json_schema"), dict):
        return fmt["json_schema"].get("schema")
    return None


def _schema_instance(schema: Any) -> Any:
    """A small value that follows ``schema`` (its required properties, each the simplest value
    of its type): the side calls that want JSON get JSON."""
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    kind = (kind[0] if kind else None) if isinstance(kind, list) else kind
    if isinstance(kind, str):
        kind = kind.lower()
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {k: _schema_instance(props.get(k)) for k in schema.get("required") or list(props)}
    return {"array": [], "string": "", "number": 0, "integer": 0, "boolean": False}.get(
        str(kind), None
    )


def _input_tokens(usage: dict[str, Any]) -> int:
    return int(
        usage.get("input_tokens", 0)
        + usage.get("cache_creation_input_tokens", 0)
        + usage.get("cache_read_input_tokens", 0)
    )


def _task_of(body: dict[str, Any]) -> str:
    m = re.search(r"cw-task:[^\"\\]*", json.dumps(body, ensure_ascii=False))
    return m.group(0) if m else "(unknown)"


def _aider_main(body: dict[str, Any]) -> bool:
    """An aider coding turn (not its chat summariser nor its commit-message call)."""
    text = system_text(body, "openai")
    return "Act as an expert software developer" in text or "cw-task" in json.dumps(body)


def _wants_thinking(body: dict[str, Any], api: str) -> bool:
    if api == "gemini":
        config = body.get("generationConfig") or {}
        thinking = config.get("thinkingConfig") if isinstance(config, dict) else None
        return isinstance(thinking, dict) and bool(thinking.get("includeThoughts"))
    if api == "anthropic":
        t = body.get("thinking")
        return isinstance(t, dict) and t.get("type") in ("enabled", "adaptive")
    if api == "responses":
        return isinstance(body.get("reasoning"), dict)
    return False


def _anthropic_blocks(body: dict[str, Any]) -> tuple[list[str], list[int]]:
    """A request's blocks in cache order (tools, system, messages) and the indexes of those
    that carry a breakpoint."""
    blocks: list[str] = []
    marks: list[int] = []

    def add(value: Any, prefix: str = "") -> None:
        if isinstance(value, dict) and "cache_control" in value:
            marks.append(len(blocks))
        blocks.append(prefix + _canon(value))

    for t in tools_of(body):
        add(t)
    system = body.get("system")
    if isinstance(system, str):
        blocks.append(system)
    elif isinstance(system, list):
        for b in system:
            add(b)
    for m in body.get("messages") or []:
        if not isinstance(m, dict):
            continue
        c = m.get("content")
        role = f"[{m.get('role')}]"
        if isinstance(c, list) and c:
            for j, b in enumerate(c):
                add(b, role if j == 0 else "")
        else:
            blocks.append(role + _canon(c))
    return blocks, marks


# -- the move in each API's words ---------------------------------------------------------------
_SIGNATURE = "c2lnbmF0dXJlLW9mLWN3LXNjcmlwdGVkLXVwc3RyZWFt"
#: the signature Gemini 3 puts on the first function call of a turn (and wants back)
GEMINI_SIGNATURE = "Q3dTY3JpcHRlZFRob3VnaHRTaWduYXR1cmU="


def _anthropic_message(
    body: dict[str, Any], move: Move, usage: dict[str, int], thinking: bool
) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if thinking:
        planning = f"Planning cw-step-{move.step}."
        content.append({"type": "thinking", "thinking": planning, "signature": _SIGNATURE})
    if move.text:
        content.append({"type": "text", "text": move.text})
    if move.tool:
        if not move.final:
            content.append({"type": "text", "text": f"Running cw-step-{move.step}."})
        call_id = f"toolu_{move.call_id}_{_nonce()}"
        content.append(
            {"type": "tool_use", "id": call_id, "name": move.tool, "input": move.arguments or {}}
        )
    model = body.get("model", "claude")
    return wire.messages_reply(content, model=model, usage=usage, id=f"msg_{_nonce()}")


def _openai_usage(usage: dict[str, int]) -> dict[str, Any]:
    prompt, output = usage["input_tokens"], usage["output_tokens"]
    return wire.chat_usage(prompt, output, cached=usage["cached_tokens"])


def _openai_completion(body: dict[str, Any], move: Move, usage: dict[str, int]) -> dict[str, Any]:
    text: str | None = move.text or None
    calls: list[wire.Call] = []
    if move.tool:
        calls = [(f"call_{move.call_id}_{_nonce()}", move.tool, move.arguments or {})]
        text = f"Running cw-step-{move.step}."
    return wire.chat_reply(
        text,
        model=body.get("model", "gpt"),
        usage=_openai_usage(usage),
        calls=calls,
        id=f"chatcmpl-{_nonce()}",
        created=int(time.time()),
    )


def _responses_response(
    body: dict[str, Any], move: Move, usage: dict[str, int], thinking: bool
) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if thinking:
        # a recall is no step: its reasoning must not mark one
        what = "a recall" if move.tool == RECALL_TOOL else f"cw-step-{move.step}"
        encrypted = f"enc-{what.replace(' ', '-')}-{_nonce()}"
        output.append(wire.reasoning_item(f"Planning {what}.", encrypted, f"rs_{_nonce()}"))
    if move.text:
        output.append(wire.message_item(move.text, f"msg_{_nonce()}"))
    call_id = f"call_{move.call_id}_{_nonce()}"
    if move.tool and move.custom_input is not None:
        output.append(
            {
                "type": "custom_tool_call",
                "id": f"ctc_{_nonce()}",
                "status": "completed",
                "call_id": call_id,
                "name": move.tool,
                "input": move.custom_input,
            }
        )
    elif move.tool:
        args = move.arguments or {}
        output.append(wire.function_call_item(call_id, move.tool, args, f"fc_{_nonce()}"))
    return _responses_reply(body, output, usage, thinking)


def _responses_usage(usage: dict[str, Any], thinking: bool) -> dict[str, Any]:
    return wire.responses_usage(
        usage["input_tokens"],
        usage["output_tokens"],
        cached=usage["cached_tokens"],
        reasoning=8 if thinking else 0,
    )


def _responses_reply(
    body: dict[str, Any], output: list[dict[str, Any]], usage: dict[str, Any], thinking: bool
) -> dict[str, Any]:
    return wire.responses_reply(
        output,
        model=body.get("model", "gpt"),
        usage=_responses_usage(usage, thinking),
        id=f"resp_{_nonce()}",
        created_at=int(time.time()),
    )


def _gemini_response(
    body: dict[str, Any], move: Move, usage: dict[str, Any], thinking: bool
) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if thinking:
        parts.append({"text": f"Planning cw-step-{move.step}.", "thought": True})
    if move.tool:
        parts.append({"text": f"Running cw-step-{move.step}."})
        call = {"name": move.tool, "args": move.arguments or {}, "id": f"{move.call_id}-{_nonce()}"}
        parts.append({"functionCall": call, "thoughtSignature": GEMINI_SIGNATURE})
    elif move.text:
        parts.append({"text": move.text})
    figures = wire.gemini_usage(usage["input_tokens"], usage["output_tokens"])
    figures["cachedContentTokenCount"] = usage["cached_tokens"]  # a zero too, as Gemini sends it
    return wire.gemini_reply(parts, figures, model="gemini-scripted", responseId=f"gem-{_nonce()}")


_counter = 0
_counter_lock = threading.Lock()


def _nonce() -> str:
    global _counter
    with _counter_lock:
        _counter += 1
        return f"{_counter:06d}"
