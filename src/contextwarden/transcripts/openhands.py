"""OpenHands runs: evaluation output.jsonl, web UI exports and V1 SDK events (docs/sessions.md)."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._messages import (
    Block,
    ImageBlock,
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    freeze,
)
from ..formats._media import anthropic_image_cost
from ._common import (
    AgentCompaction,
    Loc,
    Record,
    Transcript,
    as_str,
    lead_with_prompt,
    pair_calls,
    parse_json,
    place_marks,
    read_text,
    skipped,
)

__all__ = [
    "is_conversation_folder",
    "is_openhands",
    "is_openhands_events",
    "parse_openhands",
    "parse_openhands_events",
    "read_conversation_folder",
]

#: ``args`` keys that are OpenHands bookkeeping, not tool arguments (left out of synthesised
#: calls).
_BOOKKEEPING = frozenset(
    {"thought", "hidden", "confirmation_state", "security_risk", "is_confirmed", "blocking"}
)
_META_KEYS = ("instance_id", "metadata", "error", "test_result", "metrics", "instance")
#: OpenHands' default ``LLMConfig.max_message_chars``: the longest observation it sends whole.
MAX_MESSAGE_CHARS = 30_000
#: The line OpenHands puts where it cut an observation's middle out.
TRUNCATED_LINE = "\n[... Observation truncated due to length ...]\n"


def is_openhands(value: Any) -> bool:
    """Whether one JSONL record (or a JSON object) looks like an OpenHands run, or an event of
    an OpenHands (V1 SDK) conversation."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("history"), list)
        and ("instance_id" in value or "instruction" in value or "metadata" in value)
    ) or _is_v1_event(value)


def _is_v1_event(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("kind"), str)
        and value["kind"].endswith(("Event", "Observation", "Condensation"))
        and "id" in value
        and "source" in value
    )


@dataclass
class _Turn:
    """An assistant message being built (its calls arrive one action at a time), with the id
    and time of the event that started it."""

    ev: dict[str, Any]
    text: list[Block] = field(default_factory=list)
    calls: list[ToolCallBlock] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def is_openhands_events(doc: Any) -> bool:
    """Whether a JSON list is an OpenHands UI export: events with ``action`` / ``observation``
    (or the SDK's events, tagged by ``kind``)."""
    return (
        isinstance(doc, list)
        and bool(doc)
        and all(
            isinstance(e, dict) and ("action" in e or "observation" in e or _is_v1_event(e))
            for e in doc
        )
    )


def parse_openhands(records: Sequence[Record], path: Path, shown: str) -> list[Transcript]:
    """Every run of an OpenHands ``output.jsonl``, in file order; or the one conversation of a
    file of the SDK's events, one a line."""
    if records and _is_v1_event(records[0].value):
        events = [r.value for r in records]
        return [_events(events, Loc(shown), {}, path, None, 1, 1, MAX_MESSAGE_CHARS)]
    out: list[Transcript] = []
    for number, rec in enumerate(records, 1):
        loc = Loc(shown, line=rec.line)
        run = loc.check(rec.value, dict, "")
        history = loc.get(run, "history", list, "")
        meta: dict[str, Any] = {k: run[k] for k in _META_KEYS if k in run}
        llm = (run.get("metadata") or {}).get("llm_config") or {}
        fallback = as_str(llm.get("model"))
        limit = llm.get("max_message_chars", MAX_MESSAGE_CHARS)
        if limit is None:  # set to none: OpenHands sends every observation whole
            limit = -1
        elif isinstance(limit, bool) or not isinstance(limit, int):
            limit = MAX_MESSAGE_CHARS
        out.append(_events(history, loc, meta, path, fallback, number, len(records), limit))
    return out


#: The SDK's event files: ``events/event-<index>-<event id>.json`` (``persistence_const.py``).
_EVENT_FILE = re.compile(r"^event-(?P<index>\d{5,})-[0-9a-fA-F-]{8,}\.json$")


def is_conversation_folder(path: Path) -> bool:
    """Whether ``path`` is an OpenHands SDK conversation folder (``~/.openhands/conversations/
    <id>/``, holding ``events/``) or its ``events`` folder."""
    events = path if path.name == "events" else path / "events"
    return events.is_dir() and any(_EVENT_FILE.match(f.name) for f in events.iterdir())


def read_conversation_folder(path: Path, shown: str) -> Transcript:
    """An OpenHands SDK conversation as it persists it: one JSON file per event, in order of
    their index, and the agent's settings (the model) in ``base_state.json``."""
    events_dir = path if path.name == "events" else path / "events"
    files = sorted(
        (int(m.group("index")), f)
        for f in events_dir.iterdir()
        if (m := _EVENT_FILE.match(f.name)) is not None
    )
    events = [parse_json(read_text(f, str(f)), str(f)) for _, f in files]
    t = parse_openhands_events(events, path, shown)
    state = events_dir.parent / "base_state.json"
    try:
        llm = json.loads(state.read_text("utf-8"))["agent"]["llm"]
    except (OSError, ValueError, KeyError, TypeError):
        return t
    model = llm.get("model") if isinstance(llm, dict) else None
    return dataclasses.replace(t, model=model) if isinstance(model, str) else t


def parse_openhands_events(doc: Any, path: Path, shown: str) -> Transcript:
    """An OpenHands UI trajectory export (a JSON list of events)."""
    loc = Loc(shown)
    return _events(loc.check(doc, list, "document"), loc, {}, path, None, 1, 1, MAX_MESSAGE_CHARS)


def _events(
    history: list[Any],
    loc: Loc,
    meta: dict[str, Any],
    path: Path,
    fallback: str | None,
    run: int,
    runs: int,
    max_chars: int,
) -> Transcript:
    b = _Builder(loc, meta, max_chars)
    for i, event in enumerate(history):
        b.event(loc.check(event, dict, f"history[{i}]"), f"history[{i}]")
    messages, compactions = b.finish()
    tools, model = tuple(b.tools), b.model or fallback
    return Transcript(
        messages, "openhands", str(path), model, tools, freeze(meta), None, compactions, run, runs
    )


class _Builder:
    def __init__(self, loc: Loc, meta: dict[str, Any], max_chars: int) -> None:
        self.loc = loc
        self.meta = meta
        self.max_chars = max_chars  # OpenHands' max_message_chars (below 0: no limit)
        self.slots: list[Message | _Turn] = []
        self.turns: dict[str, _Turn] = {}  # model_response id -> its message
        self.synthetic: dict[Any, str] = {}  # action event id -> synthesised call id
        self.model: str | None = None
        self.tools: list[dict[str, Any]] = []
        self.slot_of: dict[Any, int] = {}  # SDK event id -> its slot
        self.condensations: list[tuple[int, set[int], str]] = []  # (slot, forgotten, summary)

    def say(self, role: Role, blocks: Sequence[Block], ev: dict[str, Any]) -> None:
        """A message made from the event ``ev`` (its id and time)."""
        self.slots.append(_message(role, blocks, ev))

    def start(self, ev: dict[str, Any], rid: str | None = None) -> _Turn:
        """A new assistant message, begun by ``ev`` (``rid``: its LLM response's id)."""
        turn = _Turn(ev)
        if rid is not None:
            self.turns[rid] = turn
        self.slots.append(turn)
        return turn

    # -- events ----------------------------------------------------------------------------
    def event(self, ev: dict[str, Any], where: str) -> None:
        loc = self.loc
        if _is_v1_event(ev):
            self.v1_event(ev, where)
        elif "action" in ev:
            action = loc.get(ev, "action", str, where)
            args = loc.opt(ev, "args", dict, where) or {}
            self.action(ev, action, args, where)
        elif "observation" in ev:
            self.observation(ev, loc.get(ev, "observation", str, where), where)
        else:
            loc.fail(where, "an event needs an 'action' or an 'observation'")

    def action(self, ev: dict[str, Any], action: str, args: dict[str, Any], where: str) -> None:
        loc = self.loc
        tcm = loc.opt(ev, "tool_call_metadata", dict, where)
        if action == "system":
            self.say("system", [TextBlock(loc.get(args, "content", str, f"{where}.args"))], ev)
            tools = loc.opt(args, "tools", list, f"{where}.args")
            if tools:
                self.tools = [loc.check(t, dict, f"{where}.args.tools") for t in tools]
        elif action == "message" and tcm is None:
            text = loc.get(args, "content", str, f"{where}.args")
            if ev.get("source") == "user":
                urls = loc.opt(args, "image_urls", list, f"{where}.args") or ()
                self.say("user", [TextBlock(text), *map(_image, urls)], ev)
            elif text:
                self.say("assistant", [TextBlock(text)], ev)
        elif action == "finish":
            recorded = _response_message((tcm or {}).get("model_response") or {})
            parts = [t for t in map(as_str, (args.get("final_thought"), args.get("thought"))) if t]
            content = as_str((recorded or {}).get("content"))
            if content and content not in parts:
                parts.append(content)
            if not parts and as_str(ev.get("message")):
                parts.append(ev["message"])
            if parts:
                self.say("assistant", [TextBlock("\n".join(parts))], ev)
        elif tcm is not None:
            self.tool_action(ev, action, args, tcm, f"{where}.tool_call_metadata")
        elif action in ("recall", "condensation", "change_agent_state", "null"):
            skipped(self.meta, f"action {action!r}")
        else:
            call_id = f"oh-{_str_id(ev.get('id'))}"
            self.synthetic[ev.get("id")] = call_id
            turn = self.start(ev)
            if as_str(args.get("thought")):
                turn.text.append(TextBlock(args["thought"]))
            turn.calls.append(ToolCallBlock(call_id, action, _arguments(args)))

    def tool_action(
        self, ev: dict[str, Any], action: str, args: dict[str, Any], tcm: dict[str, Any], at: str
    ) -> None:
        loc = self.loc
        call_id = loc.get(tcm, "tool_call_id", str, at)
        name = loc.opt(tcm, "function_name", str, at) or action
        response = loc.opt(tcm, "model_response", dict, at) or {}
        rid = as_str(response.get("id"))
        recorded = _response_message(response)
        turn = self.turns.get(rid) if rid is not None else None
        if turn is None:
            turn = self.start(ev, rid)
            if recorded is not None:
                if as_str(recorded.get("reasoning_content")):
                    turn.text.append(ThinkingBlock(recorded["reasoning_content"]))
                if as_str(recorded.get("content")):
                    turn.text.append(TextBlock(recorded["content"]))
            elif as_str(args.get("thought")):
                turn.text.append(TextBlock(args["thought"]))
            if isinstance(response.get("usage"), dict):
                turn.usage = response["usage"]
            if isinstance(response.get("model"), str):
                self.model = turn.extra["model"] = response["model"]
        arguments = _recorded_arguments(recorded, call_id)
        if arguments is None:
            arguments = _arguments(args)
        turn.calls.append(ToolCallBlock(call_id, name, arguments))

    def observation(self, ev: dict[str, Any], kind: str, where: str) -> None:
        loc = self.loc
        tcm = loc.opt(ev, "tool_call_metadata", dict, where)
        call_id: str | None = None
        if tcm is not None:
            call_id = loc.get(tcm, "tool_call_id", str, f"{where}.tool_call_metadata")
        elif ev.get("cause") in self.synthetic:
            call_id = self.synthetic[ev["cause"]]
        content = self._as_sent(loc.opt(ev, "content", str, where) or "")
        if call_id is not None:
            self.say("tool", [ToolResultBlock(call_id, content, is_error=kind == "error")], ev)
        elif kind == "error" and content:
            self.say("user", [TextBlock(content)], ev)
        else:
            skipped(self.meta, f"observation {kind!r} answering no call")

    def v1_event(self, ev: dict[str, Any], where: str) -> None:
        """An event of the OpenHands SDK (V1), turned into what its ``to_llm_message`` sends
        (``openhands/sdk/event/llm_convertible``); the actions of one LLM response are one
        assistant message, as ``events_to_messages`` joins them."""
        loc, kind = self.loc, ev["kind"]
        slot = len(self.slots)
        if kind == "SystemPromptEvent":
            parts = [_v1_text(ev.get("system_prompt")), _v1_text(ev.get("dynamic_context"))]
            self.say("system", [TextBlock(t) for t in parts if t], ev)
            if isinstance(ev.get("tools"), list):
                self.tools = [t for t in ev["tools"] if isinstance(t, dict)]
        elif kind == "MessageEvent":
            msg = loc.get(ev, "llm_message", dict, where)
            blocks = _v1_blocks([*(msg.get("content") or ()), *(ev.get("extended_content") or ())])
            role: Role = "user" if msg.get("role") == "user" else "assistant"
            if role == "assistant" and as_str(msg.get("reasoning_content")):
                blocks.insert(0, ThinkingBlock(msg["reasoning_content"]))
            if blocks:
                self.say(role, blocks, ev)
        elif kind == "ActionEvent":
            call = loc.get(ev, "tool_call", dict, where)
            rid = as_str(ev.get("llm_response_id"))
            turn = self.turns.get(rid) if rid is not None else None
            if turn is None or self.slots[-1] is not turn:
                turn = self.start(ev, rid)
                if as_str(ev.get("reasoning_content")):
                    turn.text.append(ThinkingBlock(ev["reasoning_content"]))
            else:
                slot = len(self.slots) - 1
            turn.text.extend(_v1_blocks(ev.get("thought") or ()))
            arguments = call.get("arguments")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments or {}, ensure_ascii=False)
            call_id = loc.get(call, "id", str, f"{where}.tool_call")
            name = loc.get(call, "name", str, f"{where}.tool_call")
            turn.calls.append(ToolCallBlock(call_id, name, arguments))
        elif kind in ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation"):
            call_id = loc.get(ev, "tool_call_id", str, where)
            if kind == "ObservationEvent":
                observation = loc.get(ev, "observation", dict, where)
                content = [*(observation.get("content") or ()), *(ev.get("extended_content") or ())]
                text = "\n".join(b.text for b in _v1_blocks(content) if isinstance(b, TextBlock))
                is_error = observation.get("is_error") is True
            elif kind == "AgentErrorEvent":
                text, is_error = str(ev.get("error") or ""), True
            else:
                text, is_error = f"Action rejected: {ev.get('rejection_reason')}", False
            self.say("tool", [ToolResultBlock(call_id, self._as_sent(text), is_error=is_error)], ev)
        elif kind == "Condensation":
            forgotten = {
                self.slot_of[e] for e in ev.get("forgotten_event_ids") or () if e in self.slot_of
            }
            if forgotten:
                summary = as_str(ev.get("summary")) or ""
                self.condensations.append((len(self.slots), forgotten, summary))
            return
        else:  # state updates, pauses, hook and token events: nothing for the model
            if kind == "ConversationStateUpdateEvent" and ev.get("key") == "stats":
                metrics = ((ev.get("value") or {}).get("usage_to_metrics") or {}).get("default")
                if isinstance(metrics, dict) and isinstance(metrics.get("model_name"), str):
                    self.model = metrics["model_name"]
            skipped(self.meta, f"event {kind!r}")
            return
        self.slot_of[ev.get("id")] = slot

    def _as_sent(self, content: str) -> str:
        """``content`` as OpenHands sends it: whole up to ``max_chars``, else its first and last
        halves of that length around :data:`TRUNCATED_LINE`."""
        if self.max_chars < 0 or len(content) <= self.max_chars:
            return content
        self.meta["truncated"] = self.meta.get("truncated", 0) + 1
        half = self.max_chars // 2
        return content[:half] + TRUNCATED_LINE + content[len(content) - half :]

    # -- result ----------------------------------------------------------------------------
    def finish(self) -> tuple[tuple[Message, ...], tuple[AgentCompaction, ...]]:
        out: list[Message] = []
        at_slot: list[int] = []  # slot index -> index in ``out`` of the next message
        for slot in self.slots:
            at_slot.append(len(out))
            if isinstance(slot, Message):
                out.append(slot)
            elif slot.text or slot.calls:
                turn = _message("assistant", [*slot.text, *slot.calls], slot.ev)
                out.append(turn.replace(usage=slot.usage, extra=freeze(slot.extra)))
        at_slot.append(len(out))
        kept = lead_with_prompt(pair_calls(out, self.meta), self.meta, "its first event")
        # A condensation forgets events: from then on OpenHands sent the ones before the first
        # forgotten (its head), the summary, then what came after the last forgotten.
        ends = place_marks(out, kept, [at_slot[max(f) + 1] for _, f, _ in self.condensations])
        starts = place_marks(out, kept, [at_slot[min(f)] for _, f, _ in self.condensations])
        compactions = tuple(
            AgentCompaction(
                end,
                (
                    *(m for m in kept[:start] if m.role != "system"),
                    *((Message("user", (TextBlock(summary),)),) if summary else ()),
                ),
            )
            for end, start, (_, _, summary) in zip(ends, starts, self.condensations, strict=True)
        )
        return kept, compactions


def _v1_text(block: Any) -> str:
    return str(block.get("text") or "") if isinstance(block, dict) else ""


def _v1_blocks(content: Any) -> list[Block]:
    """The SDK's content parts (``text``, ``image`` with ``image_urls``) as canonical blocks."""
    out: list[Block] = []
    for part in content if isinstance(content, list | tuple) else ():
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and part.get("text"):
            out.append(TextBlock(str(part["text"])))
        elif part.get("type") == "image":
            out.extend(map(_image, part.get("image_urls") or ()))
    return out


def _image(url: Any) -> ImageBlock:
    source = {"type": "url", "url": url}
    return ImageBlock(source, token_cost=anthropic_image_cost(source))


def _message(role: Role, blocks: Sequence[Block], ev: dict[str, Any]) -> Message:
    """A message made from the event ``ev``: its id and time carried over."""
    return Message(role, tuple(blocks), id=_str_id(ev.get("id")), timestamp=ev.get("timestamp"))


def _arguments(args: dict[str, Any]) -> str:
    """An action's ``args`` as the arguments of a tool call (bookkeeping left out)."""
    return json.dumps({k: v for k, v in args.items() if k not in _BOOKKEEPING}, ensure_ascii=False)


def _str_id(value: Any) -> str | None:
    return None if value is None else str(value)


def _response_message(response: dict[str, Any]) -> dict[str, Any] | None:
    """The assistant message of a recorded chat-completion response, if it has one."""
    choices = response.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    return message if isinstance(message, dict) else None


def _recorded_arguments(message: dict[str, Any] | None, call_id: str) -> str | None:
    """The arguments text the model wrote for ``call_id``, as recorded in its response."""
    for call in (message or {}).get("tool_calls") or ():
        if isinstance(call, dict) and call.get("id") == call_id:
            fn = call.get("function")
            if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                return str(fn["arguments"])
    return None
