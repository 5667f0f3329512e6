"""LangChain ``SummarizationMiddleware``'s shape for :mod:`.langchain`: summaries written by a
chat model the user passes, and ``trigger`` / ``keep`` sizes in LangChain's units."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from .. import SummarizerError, WardenConfig
from ..analysis.sections import parse_summary
from ..summarizers import LLMSummarizer
from ..summarizers._prompt import SYSTEM_PROMPT
from ._common import model_name, require

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
else:  # the framework, imported with a message naming the extra when it is missing
    BaseChatModel = require("langchain_core.language_models", "langchain").BaseChatModel
    _lc_messages = require("langchain_core.messages", "langchain")
    AIMessage, HumanMessage = _lc_messages.AIMessage, _lc_messages.HumanMessage
    SystemMessage = _lc_messages.SystemMessage

__all__ = ["ChatModelSummarizer", "ContextSize", "keeping", "model_name", "trigger_clauses"]

#: ``SummarizationMiddleware``'s unit of a context size: tokens, messages or a share of the window
ContextSize: TypeAlias = tuple[Literal["tokens", "messages", "fraction"], int | float]
_UNITS = ("tokens", "messages", "fraction")


class ChatModelSummarizer(LLMSummarizer):
    """Summaries written by a LangChain chat model: the prompts, chunking of long spans and
    must-keep facts of :class:`~contextwarden.summarizers.LLMSummarizer`, each completion made
    with ``model.ainvoke`` (a model without async support runs ``invoke`` in a thread). A reply
    without the four sections, or a model that raises, is a
    :class:`~contextwarden.SummarizerError` (the compaction then uses the extractive summary). ``options`` are :class:`LLMSummarizer`'s (``max_chars``, ``timeout``,
    ``input_token_budget``...)."""

    def __init__(self, model: BaseChatModel, **options: Any) -> None:
        name = model_name(model) or type(model).__name__
        options.setdefault("max_retries", 0)  # a chat model retries with its own settings
        super().__init__(model=name, key_from_env=False, **options)
        self.chat_model = model
        self.name = f"langchain:{name}"

    @property
    def config_id(self) -> str:
        return f"langchain:{type(self.chat_model).__name__}:{super().config_id}"

    def _messages(self, call: Any) -> list[Any]:
        system = SYSTEM_PROMPT.format(max_chars=call.max_chars)
        return [SystemMessage(system), HumanMessage(call.user)]

    def _reply(self, reply: Any) -> str:
        text = str(reply.text) if isinstance(reply, AIMessage) else str(reply)
        try:
            return parse_summary(text).render()
        except Exception as exc:  # the parser names the missing section
            raise SummarizerError(f"{self.name}: the reply is not a summary: {exc}") from exc

    async def _complete(
        self, client: Any, call: Any, deadline: float, meter: Any, sleep: Any
    ) -> str:
        # both summarize() and asummarize() come here (the blocking one in its own event loop)
        if not call.user:
            return ""
        try:
            reply = await self.chat_model.ainvoke(self._messages(call))
        except Exception as exc:
            raise SummarizerError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        return self._reply(reply)


def trigger_clauses(trigger: Any) -> list[dict[str, float]]:
    """``trigger`` as clauses (each met when all its thresholds are), any one of which fires."""
    if trigger is None:
        return []
    items = trigger if isinstance(trigger, list) else [trigger]
    clauses: list[dict[str, float]] = []
    for i, item in enumerate(items):
        where = f"trigger[{i}]" if isinstance(trigger, list) else "trigger"
        pairs = list(item.items()) if isinstance(item, Mapping) else [item]
        clause = dict(_context_size(pair, where) for pair in pairs)
        if not clause:
            raise ValueError(f"{where}: an empty clause")
        clauses.append(clause)
    return clauses


def _context_size(size: Any, where: str) -> tuple[str, float]:
    """A checked ``(unit, value)``: tokens and messages a whole number > 0, a fraction in
    (0, 1]."""
    if not isinstance(size, tuple) or len(size) != 2 or size[0] not in _UNITS:
        raise ValueError(
            f"{where} must be ('tokens', N), ('messages', N) or ('fraction', f), got {size!r}"
        )
    unit, value = size
    if unit == "fraction":
        ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= 1
    else:
        ok = type(value) is int and value > 0
    if not ok:
        want = "in (0, 1]" if unit == "fraction" else "a whole number > 0"
        raise ValueError(f"{where}: {unit} must be {want}, got {value!r}")
    return unit, float(value)


def keeping(config: WardenConfig | None, keep: Any) -> WardenConfig | None:
    """``config`` with its compaction keeping what ``keep`` asks."""
    if keep is None:
        return config
    unit, value = _context_size(keep, "keep")
    base = config if isinstance(config, WardenConfig) else WardenConfig.model_validate({})
    if unit == "messages":
        compaction = base.compaction.model_copy(update={"sliding_window_size": int(value)})
        return base.model_copy(update={"compaction": compaction})
    if unit == "tokens":  # the target is raised to N tokens (up to 0.4 of the window)
        return base.model_copy(update={"target_ratio": 0.01, "min_target_tokens": int(value)})
    if value > base.trigger_ratio:
        raise ValueError(
            f"keep: ('fraction', {value}) is above the trigger_ratio {base.trigger_ratio}: a "
            "compaction would end above the point that starts it"
        )
    return base.model_copy(update={"target_ratio": value, "min_target_tokens": 0})
