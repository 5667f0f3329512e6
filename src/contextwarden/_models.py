"""Model registry: context window, output limit, tokenizer, list and cache prices per model.

A :class:`ModelRegistry` is what one warden (a replay, the proxy) holds: the embedded tables
plus the models added to it (:meth:`ModelRegistry.register`, a config's ``models:`` section).
Nothing here changes after import. Lookup (:func:`find_model`) tries the added models (or an
``overrides`` table), the built-in table, the price snapshot's catalog (exactly or without a
date suffix), then the longest known name that prefixes the query followed by ``-``, ``:``,
``@`` or ``_`` (``claude-sonnet-4-5-20250929`` -> ``claude-sonnet-4-5``; ``gpt-4.5-preview``
is not ``gpt-4``). Names are lower-cased and stripped of provider routing (``openai/``,
``anthropic.``, ``us.meta.``); Claude's dotted versions are dashed. :func:`assume_model` never
fails: an unknown model is taken to be like its family, else an unpriced model, and it says
what it assumed.

Prices, cache rules and windows, and where each comes from: docs/prices.md.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, get_args

from ._exceptions import ConfigError, UnknownModelError

__all__ = [
    "PRICES_AS_OF",
    "ModelInfo",
    "ModelRegistry",
    "assume_model",
    "context_window",
    "find_model",
    "known_models",
    "local_server",
    "model_info",
    "normalise_model_name",
]

Encoding = Literal["o200k_base", "cl100k_base"]
Provider = Literal["openai", "anthropic", "google", "deepseek", "qwen", "meta", "mistral", "other"]
Caching = Literal["automatic", "breakpoints", "none"]

_ENCODINGS: tuple[str, ...] = get_args(Encoding)
_PROVIDERS: tuple[str, ...] = get_args(Provider)
_CACHING: tuple[str, ...] = get_args(Caching)
_PRICE_FIELDS: tuple[str, ...] = (
    "input_price_per_mtok",
    "output_price_per_mtok",
    "cache_read_price_per_mtok",
    "cache_write_price_per_mtok",
    "cache_write_1h_price_per_mtok",
)


@dataclass(frozen=True)
class ModelInfo:
    """What contextwarden knows about one model.

    ``encoding``: the BPE its tokens are counted with (exact for OpenAI models, an approximation
    for the others: ``docs/token-counting.md``). Prices: USD per million tokens, ``None`` when
    unknown; cache reads, cache writes (Anthropic's 5-minute write, 1.25x input; the input
    price where writes cost nothing extra) and Anthropic's 1-hour write (2x input).
    ``caching``: ``"automatic"`` (every request), ``"breakpoints"`` (up to a ``cache_control``
    mark) or ``"none"``. ``cache_ttl_s``: how long an unused prefix lives (``None`` without
    caching); ``min_cacheable_tokens``: the shortest prefix cached (0: none known). ``source``
    and ``as_of``: where the figures come from and their date.
    """

    name: str
    provider: Provider
    context_window: int
    max_output_tokens: int
    encoding: Encoding = "o200k_base"
    input_price_per_mtok: float | None = None
    output_price_per_mtok: float | None = None
    cache_read_price_per_mtok: float | None = None
    cache_write_price_per_mtok: float | None = None
    cache_write_1h_price_per_mtok: float | None = None
    cache_ttl_s: float | None = None
    min_cacheable_tokens: int = 0
    caching: Caching = "none"
    source: str = ""
    as_of: str = ""

    def __post_init__(self) -> None:
        where = f"ModelInfo({self.name!r})"
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError(f"ModelInfo.name must be a non-empty string, got {self.name!r}")
        for f, ok, want in (
            ("provider", self.provider in _PROVIDERS, f"one of {_PROVIDERS}"),
            ("context_window", is_count(self.context_window, 1), "a positive int"),
            ("max_output_tokens", is_count(self.max_output_tokens, 0), "an int >= 0"),
            ("encoding", self.encoding in _ENCODINGS, f"one of {_ENCODINGS}"),
            *((f, is_amount(getattr(self, f)), "a number >= 0 or None") for f in _PRICE_FIELDS),
            ("cache_ttl_s", is_amount(self.cache_ttl_s, above=0), "a number > 0 or None"),
            ("min_cacheable_tokens", is_count(self.min_cacheable_tokens, 0), "an int >= 0"),
            ("caching", self.caching in _CACHING, f"one of {_CACHING}"),
            ("source", isinstance(self.source, str), "a string"),
            ("as_of", isinstance(self.as_of, str), "a string"),
        ):
            if not ok:
                raise ConfigError(f"{where}.{f} must be {want}, got {getattr(self, f)!r}")

    def cost(self, input_tokens: int, output_tokens: int = 0) -> float | None:
        """List-price cost in USD of a call, or ``None`` when a price it needs is unknown (the
        output price only matters when there are output tokens)."""
        if self.input_price_per_mtok is None:
            return None
        total = input_tokens * self.input_price_per_mtok
        if output_tokens:
            if self.output_price_per_mtok is None:
                return None
            total += output_tokens * self.output_price_per_mtok
        return total / 1_000_000

    @property
    def cache_read_ratio(self) -> float | None:
        """Cache read price / input price (Anthropic 0.1, gpt-4o 0.5), ``None`` when unknown."""
        return _ratio(self.cache_read_price_per_mtok, self.input_price_per_mtok)

    @property
    def cache_write_ratio(self) -> float | None:
        """Cache write price / input price (Anthropic 1.25, 1.0 where writes cost nothing
        extra), ``None`` when unknown."""
        return _ratio(self.cache_write_price_per_mtok, self.input_price_per_mtok)

    def cached_cost(
        self,
        cached_tokens: int,
        written_tokens: int,
        uncached_tokens: int = 0,
        output_tokens: int = 0,
    ) -> float | None:
        """What a call is billed in USD once prompt caching is counted: ``cached_tokens`` read
        from the cache, ``written_tokens`` written to it, ``uncached_tokens`` at the input
        price, ``output_tokens`` at the output price.

        A model without caching bills cached and written tokens at the input price (nothing
        is cached). ``None`` when a price with a non-zero count is unknown.
        """
        counts = (cached_tokens, written_tokens, uncached_tokens, output_tokens)
        names = ("cached_tokens", "written_tokens", "uncached_tokens", "output_tokens")
        for label, count in zip(names, counts, strict=True):
            if not is_count(count, 0):
                raise ValueError(f"cached_cost(): {label} must be an int >= 0, got {count!r}")
        read, write = self.cache_read_price_per_mtok, self.cache_write_price_per_mtok
        if self.caching == "none":
            read = write = self.input_price_per_mtok
        total = 0.0
        for count, price in (
            (cached_tokens, read),
            (written_tokens, write),
            (uncached_tokens, self.input_price_per_mtok),
            (output_tokens, self.output_price_per_mtok),
        ):
            if count:
                if price is None:
                    return None
                total += count * price
        return total / 1_000_000


def is_count(value: object, least: int) -> bool:
    """An int (not a bool) of at least ``least``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def is_amount(value: object, *, above: float | None = None) -> bool:
    """None, or a number >= 0 (> ``above`` when given)."""
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return value > above if above is not None else value >= 0


def _ratio(price: float | None, base: float | None) -> float | None:
    if price is None or not base:
        return None
    # rounded so that 0.3 / 3.0 reads 0.1, not 0.09999999999999999
    return round(price / base, 9)


# Cache behaviour per provider (sources and the lifetimes taken: docs/prices.md). A model whose
# snapshot entry has no cache-read price has no caching: reads and writes at the input price.


class _CacheRules(NamedTuple):
    caching: Caching
    ttl_s: float
    min_tokens: int
    url: str


# fmt: off
_CACHE_RULES: dict[str, _CacheRules] = {
    "openai": _CacheRules("automatic", 300.0, 1024, "https://developers.openai.com/api/docs/guides/prompt-caching"),  # noqa: E501
    "anthropic": _CacheRules("breakpoints", 300.0, 1024, "https://platform.claude.com/docs/en/build-with-claude/prompt-caching"),  # noqa: E501
    "google": _CacheRules("automatic", 300.0, 2048, "https://ai.google.dev/gemini-api/docs/caching"),  # noqa: E501
    "deepseek": _CacheRules("automatic", 3600.0, 64, "https://api-docs.deepseek.com/guides/kv_cache"),  # noqa: E501
    "mistral": _CacheRules("automatic", 300.0, 0, "https://docs.mistral.ai/studio-api/conversations/advanced/prompt-caching"),  # noqa: E501
}
# fmt: on

#: The price snapshot shipped in the package (see ``scripts/refresh_prices.py``).
PRICES_FILE = "data/prices.json"
MODELS_FILE = "data/models.json"


def _shipped(name: str) -> Any:
    """A data file shipped beside this module, read as JSON (importlib.resources would cost the
    import zipfile and tempfile, pathlib urllib)."""
    with open(os.path.join(os.path.dirname(__file__), name), encoding="utf-8") as f:
        return json.load(f)


#: The snapshot, read once as this module is imported; never changed.
_PRICES: Mapping[str, Any] = MappingProxyType(_shipped(PRICES_FILE))
#: The snapshot's date (ISO).
PRICES_AS_OF: str = _PRICES["as_of"]


class _Spec(NamedTuple):
    """One built-in model as written by hand: what the price source does not carry."""

    name: str
    provider: Provider
    window: int
    max_out: int
    encoding: Encoding = "o200k_base"
    ref: str | None = None  # the model's id in the price source, when it is not ``name``
    min_cacheable: int | None = None  # when it differs from the provider's (pages above)
    implicit_cache: bool = True  # Gemini models older than 2.5 have none
    aliases: Sequence[str] = ()  # other spellings (Ollama tags, family names, shorthands)


def _build(spec: _Spec) -> ModelInfo:
    """The registry entry for ``spec``: its prices from the snapshot, its cache behaviour from
    the provider's rules."""
    entry: Mapping[str, Any] | None = _PRICES["models"].get(spec.name)
    rules = _CACHE_RULES.get(spec.provider)
    if entry is None or rules is None:
        # open weights: no single list price, nothing cached that we could price
        return ModelInfo(
            spec.name,
            spec.provider,
            spec.window,
            spec.max_out,
            spec.encoding,
            source="open weights: no single list price (hosts differ); window from the model card",
            as_of=_PRICES["as_of"],
        )
    caching: Caching = rules.caching
    if entry["cache_read"] is None or not spec.implicit_cache:
        caching = "none"
        cache_note = "no prompt caching for this model: reads and writes at the input price"
    else:
        cache_note = f"cache rules: {rules.url}"
    min_tokens = spec.min_cacheable or rules.min_tokens
    return _priced(
        spec, entry, rules, caching, min_tokens, f"prices: {entry['source']}; {cache_note}"
    )


def _priced(
    spec: _Spec,
    entry: Mapping[str, Any],
    rules: _CacheRules,
    caching: Caching,
    min_tokens: int,
    source: str,
) -> ModelInfo:
    """``spec`` priced from a snapshot ``entry``; without caching, reads and writes cost the
    input price; automatic caching bills no write premium."""
    price_in = entry["input"]
    read, write = entry["cache_read"], entry["cache_write"]
    cached = caching != "none"
    if not cached:
        read = write = price_in
    elif write is None:
        write = price_in
    return ModelInfo(
        name=spec.name,
        provider=spec.provider,
        context_window=spec.window,
        max_output_tokens=spec.max_out,
        encoding=spec.encoding,
        input_price_per_mtok=price_in,
        output_price_per_mtok=entry["output"],
        cache_read_price_per_mtok=read,
        cache_write_price_per_mtok=write,
        cache_write_1h_price_per_mtok=entry.get("cache_write_1h") if cached else None,
        cache_ttl_s=rules.ttl_s if cached else None,
        min_cacheable_tokens=min_tokens if cached else 0,
        caching=caching,
        source=source,
        as_of=entry["as_of"],
    )


#: What OpenAI's 400k-token GPT-5 models take as input: 400k less the 128k kept for the output
#: (the GPT-5 launch post; the API refuses more, whatever the request's output limit).
GPT5_INPUT_WINDOW = 272_000
_GPT5_ADVERTISED = 400_000

#: The built-in models' windows, output limits and cache exceptions, by provider, written by
#: hand beside the price snapshot (``encoding`` defaults to o200k_base; ``ref``: the model's id
#: in the price source). Anthropic models are counted as o200k x a measured factor (see
#: _tokens.py); Qwen and Llama are open weights, priced by their hosts; gpt-5-pro gives 272k of
#: its 400k to the output; deepseek-chat / -reasoner (DeepSeek-V3.2 from 2025-09-29) were
#: retired on 2026-07-24 and recordings still carry them; Google's and OpenAI's "1M" windows
#: are 2**20 tokens.
_SPECS: tuple[_Spec, ...] = tuple(
    _Spec(name, provider, **fields)
    for provider, models in _shipped(MODELS_FILE).items()
    for name, fields in models.items()
)


#: The built-in table, by name (built as this module is imported; never changed).
_BUILTIN: Mapping[str, ModelInfo] = MappingProxyType({spec.name: _build(spec) for spec in _SPECS})


def _catalog_entry(name: str) -> ModelInfo | None:
    """A model of the snapshot's catalog (the maintained source's models beyond our table),
    built when asked for (about 20 microseconds; lookups that reach the catalog are rare)."""
    entry = _PRICES.get("catalog", {}).get(name)
    if entry is None:
        return None
    provider: Provider = entry["provider"] if entry["provider"] in _PROVIDERS else "other"
    window = entry.get("window")
    note = ""
    if not isinstance(window, int) or window <= 0:
        window, note = _DEFAULT_WINDOW, f"; no window in the source: {_DEFAULT_WINDOW:,} assumed"
    elif provider == "openai" and window == _GPT5_ADVERTISED:
        window, note = GPT5_INPUT_WINDOW, "; 400k window, of which 128k for the output"
    spec = _Spec(name, provider, window, min(window, 128_000))
    rules = _CACHE_RULES.get(provider, _OTHER_CACHE)
    caching: Caching = rules.caching if entry["cache_read"] is not None else "none"
    return _priced(
        spec, entry, rules, caching, rules.min_tokens, f"prices: {entry['source']}{note}"
    )


#: The window assumed for a model the sources give none for (the most common size of
#: current windows; a smaller guess errs towards compacting early, never towards overflow).
_DEFAULT_WINDOW = 128_000
#: Cache rules for providers without a page above: automatic prefix caching at the listed
#: read price, no write fee, 5 minutes (the common case among them).
_OTHER_CACHE = _CacheRules("automatic", 300.0, 1024, "assumed: automatic prefix caching")

#: Other spellings of built-in models: Ollama tags, family names, GPT-4 Turbo's previews (128k,
#: not gpt-4's 8k) and SWE-agent's shorthands for them (its OpenAIModel.SHORTCUTS: gpt4 is
#: gpt-4-1106-preview, gpt3 gpt-3.5-turbo-1106).
_ALIASES: dict[str, str] = {alias: spec.name for spec in _SPECS for alias in spec.aliases}

_SEPARATORS = ("-", ":", "@", "_")
_BEDROCK_PREFIX = re.compile(r"^(?:[a-z]{2}\.)?(?:anthropic|meta|mistral|deepseek|qwen)\.")
_CLAUDE_DOTS = re.compile(r"(?<=\d)\.(?=\d)")


def normalise_model_name(model: str) -> str:
    """``model`` as the registry keys it: lower case, without provider routing (``openai/``,
    ``anthropic.``, ``us.meta.``), Claude's dotted versions dashed (``claude-3.5-sonnet`` ->
    ``claude-3-5-sonnet``)."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    name = _BEDROCK_PREFIX.sub("", name)
    if name.startswith("claude"):
        name = _CLAUDE_DOTS.sub("-", name)
    return name


def find_model(model: str, overrides: Mapping[str, ModelInfo] | None = None) -> ModelInfo | None:
    """The model ``model`` resolves to, or ``None`` (see the module docstring): ``overrides``
    (keyed by normalised name: a :class:`ModelRegistry`, or what
    :func:`~contextwarden.apply_model_overrides` returns) before the built-in tables."""
    name = normalise_model_name(model)
    builtin = _BUILTIN
    first: tuple[Mapping[str, ModelInfo], ...] = (overrides or {}, builtin)
    for exact in first:
        if name in exact:
            return exact[name]
    if name in _ALIASES:
        return builtin[_ALIASES[name]]
    listed = _catalog(name)
    if listed is not None:
        return listed
    best: ModelInfo | None = None
    best_len = 0
    tables: tuple[Mapping[str, ModelInfo | str], ...] = (*first, _ALIASES)
    for table in tables:
        for key in table:
            if (
                len(key) > best_len
                and name.startswith(key)
                and name[len(key) : len(key) + 1] in _SEPARATORS
                and not _is_minor_version(key, name[len(key) :])
            ):
                value = table[key]
                best = builtin[value] if isinstance(value, str) else value
                best_len = len(key)
    return best


# The patterns of the look-ups past the tables, compiled (and kept by ``re``) on first use: a
# known model's lookup needs none of them.
_CLAUDE_STEM = r"^claude-(?:opus|sonnet|haiku)-\d+$"
_MINOR = r"^-[1-9]\d?(?:-\d{8})?$"  # "-0" is the family itself


def _is_minor_version(key: str, rest: str) -> bool:
    """Whether ``rest`` makes ``key`` (a Claude family, ``claude-opus-4``) a newer minor
    version (``-9``) rather than a dated snapshot of it: a different model, left to
    :func:`assume_model`'s family rule."""
    return re.match(_CLAUDE_STEM, key) is not None and re.match(_MINOR, rest) is not None


_DATED = r"(?:-\d{8}|-\d{4}-\d{2}-\d{2}|-v\d+(?::\d+)?|-latest|-preview)$"


def _catalog(name: str) -> ModelInfo | None:
    """``name`` in the catalog, exactly or without a date/version suffix."""
    while True:
        info = _catalog_entry(name)
        if info is not None:
            return info
        shorter = re.sub(_DATED, "", name)
        if shorter == name:
            return None
        name = shorter


_GPT_MINOR = r"^(gpt-\d+)\.\d+(.*)$"
_CLAUDE_FAMILY = r"^(claude-(?:opus|sonnet|haiku)-\d+)(?:-\d+)?(?:-\d{8})?$"
_TRAILING_VERSION = r"^(.*?)[.-]\d+$"


def _family(model: str, overrides: Mapping[str, ModelInfo] | None) -> ModelInfo | None:
    """The model ``model`` most likely behaves like when no table knows it: its family (a
    ``gpt-5.x`` is a ``gpt-5``; a ``claude-opus-4-8`` is the newest ``claude-opus-4`` known),
    else the name without its last version number (``glm-5.9`` -> ``glm-5``)."""
    name = normalise_model_name(model)
    gpt = re.match(_GPT_MINOR, name)
    if gpt is not None:
        for candidate in (gpt.group(1) + gpt.group(2), gpt.group(1)):
            found = find_model(candidate, overrides)
            if found is not None:
                return found
    claude = re.match(_CLAUDE_FAMILY, name)
    if claude is not None:
        stem = claude.group(1)
        members = [k for k in (*_BUILTIN, *_PRICES.get("catalog", {})) if k.startswith(stem)]
        members = [k for k in members if re.match(_CLAUDE_FAMILY, k)]
        if members:
            newest = max(members, key=lambda k: [int(x) for x in re.findall(r"\d+", k)])
            return find_model(newest, overrides)
    while (match := re.match(_TRAILING_VERSION, name)) is not None:
        name = match.group(1)
        found = find_model(name, overrides)
        if found is not None:
            return found
    return None


#: Servers that run a model on the user's own machine (the routing prefix litellm and aider
#: write, or the server's own name): no per-token price, so a bill of 0.
# fmt: off
_LOCAL_SERVERS = frozenset({
    "lm_studio", "lmstudio", "ollama", "ollama_chat", "llamacpp", "llama.cpp", "llama_cpp",
    "llamafile", "vllm", "hosted_vllm", "local",
})
# fmt: on
_CLAUDE_VERSION_FIRST = r"^claude-(\d+(?:-\d+)?)-(opus|sonnet|haiku)(-\d{8})?$"
_LETTER_DIGIT = r"(?<=[a-z])(?=\d)"


def local_server(model: str | None) -> str | None:
    """The local server ``model`` is routed to (``lm_studio/qwen3`` -> ``lm_studio``), or
    ``None`` for a model a provider serves."""
    if not model or "/" not in model:
        return None
    head = model.strip().lower().split("/", 1)[0]
    return head if head in _LOCAL_SERVERS else None


def _respelled(model: str, overrides: Mapping[str, ModelInfo] | None) -> ModelInfo | None:
    """A known model ``model`` is another spelling of: underscores for dashes, no dash
    between name and version (``gpt4`` -> ``gpt-4``), Claude's version before its family
    (``claude_4_5_opus`` -> ``claude-opus-4-5``)."""
    original = normalise_model_name(model)
    name = original.replace("_", "-")
    candidates = [name, re.sub(_LETTER_DIGIT, "-", name, count=1)]
    for candidate in list(candidates):
        claude = re.match(_CLAUDE_VERSION_FIRST, candidate)
        if claude is not None:
            version, family, date = claude.groups()
            candidates.append(f"claude-{family}-{version}{date or ''}")
    for candidate in dict.fromkeys(candidates):
        found = find_model(candidate, overrides) if candidate != original else None
        if found is not None:
            return found
    return None


def assume_model(
    model: str | None,
    window: int | None = None,
    overrides: Mapping[str, ModelInfo] | None = None,
) -> tuple[ModelInfo, str | None]:
    """The :class:`ModelInfo` to count, replay or bill ``model`` with, and what was assumed (``None``
    when nothing was); never raises. A known model is itself, another spelling of one (``gpt4``,
    ``claude_4_5_opus``) that model; else its family stands in (``gpt-5.9`` -> ``gpt-5``); else an
    unknown model (o200k tokens, ``window`` or 128,000 tokens, no price, so no bill). A model
    served locally (``lm_studio/``, ``ollama/``, ``vllm/``...) is priced at 0. ``window`` (the
    recording's or the user's) replaces the registry's figure."""
    info = find_model(model, overrides) if model else None
    notes: list[str] = []
    if info is None and model:
        found = _respelled(model, overrides)
        if found is not None:
            notes.append(f"model {model!r} read as {found.name}")
        else:
            found = _family(model, overrides)
            if found is not None:
                notes.append(
                    f"model {model!r} is not in the registry: assumed to be like {found.name} "
                    + ("(its prices and window)" if window is None else "(its prices)")
                )
        if found is not None:
            info = replace(found, name=normalise_model_name(model))
    server = local_server(model)
    if info is None:
        size = window or _DEFAULT_WINDOW
        info = ModelInfo(
            normalise_model_name(model) if model else "unknown",
            "other",
            size,
            min(size, 128_000),
            source="assumed: unknown model, no price",
            as_of="",
        )
        what = (
            f"model {model!r} is not in the registry" if model else "the recording names no model"
        )
        assumed = "counted with o200k_base" + ("" if window else f", window {size:,} assumed")
        notes.append(what + f": {assumed}" + ("" if server else ", no price: no bill"))
    if server is not None:
        free: dict[str, Any] = dict.fromkeys(_PRICE_FIELDS[:4], 0.0)  # every price 0, no cache
        free |= {"cache_write_1h_price_per_mtok": None, "cache_ttl_s": None, "caching": "none"}
        source = f"local model ({server}): no per-token price"
        info = replace(info, **free, provider="other", min_cacheable_tokens=0, source=source)
        who = "it" if notes else f"model {model!r}"
        notes.append(f"{who} runs locally ({server}): billed at $0")
    if window is not None and window != info.context_window:
        info = replace(
            info, context_window=window, max_output_tokens=min(info.max_output_tokens, window)
        )
    return info, "; ".join(notes) or None


def model_info(model: str, overrides: Mapping[str, ModelInfo] | None = None) -> ModelInfo:
    """The :class:`ModelInfo` for ``model`` (see the module docstring for how names resolve).

    ``overrides`` (a :class:`ModelRegistry`, or a table from
    :func:`~contextwarden.apply_model_overrides`) is consulted before the built-in tables.
    Raises :class:`UnknownModelError` when nothing matches.
    """
    info = find_model(model, overrides)
    if info is None:
        raise UnknownModelError(
            f"unknown model {model!r}: not in the registry nor its price snapshot; give its "
            "context window: pass window=... (--window on the command line, or a models: entry in "
            "the config)"
        )
    return info


def context_window(
    model: str | None,
    override: int | None = None,
    overrides: Mapping[str, ModelInfo] | None = None,
) -> int:
    """The context window to use: ``override`` when given, else the registry's figure
    (``overrides`` first, as in :func:`model_info`).

    Raises :class:`ConfigError` for a non-positive override and :class:`UnknownModelError`
    when the model is unknown (or ``None``) and no override is given.
    """
    if override is not None:
        if isinstance(override, bool) or not isinstance(override, int) or override <= 0:
            raise ConfigError(f"window must be a positive int, got {override!r}")
        return override
    if model is None:
        raise UnknownModelError("no model given: pass window=... or a known model name")
    return model_info(model, overrides).context_window


def known_models(overrides: Mapping[str, ModelInfo] | None = None) -> list[str]:
    """Every model name of the built-in table and of ``overrides``, sorted."""
    return sorted({*_BUILTIN, *(overrides or {})})


class ModelRegistry(Mapping[str, ModelInfo]):
    """The models one warden (a replay, the proxy) knows: the built-in tables of this module
    plus the models added to this registry, which win over built-ins of the same name.

    As a mapping it holds the added models only, keyed by normalised name (so it can be passed
    wherever an ``overrides`` table is taken); :meth:`find` and :meth:`info` look everywhere.
    ``Warden(models=registry)`` starts from it and adds the config's ``models:`` section.
    """

    def __init__(self, models: Iterable[ModelInfo] = ()) -> None:
        self._added: dict[str, ModelInfo] = {}
        for info in models:
            self.register(info)

    def __getitem__(self, name: str) -> ModelInfo:
        return self._added[normalise_model_name(name)]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and normalise_model_name(name) in self._added

    def __iter__(self) -> Iterator[str]:
        return iter(self._added)

    def __len__(self) -> int:
        return len(self._added)

    def __repr__(self) -> str:
        return f"ModelRegistry({list(self._added.values())!r})"

    def register(self, info: ModelInfo) -> ModelInfo:
        """Add ``info`` to this registry, or override a built-in of the same name.

        Later lookups of ``info.name`` (and of names it is a prefix of, e.g. dated snapshots)
        return it. The name is stored normalised (lower case, provider prefix stripped).
        """
        if not isinstance(info, ModelInfo):
            raise ConfigError(f"register() expects a ModelInfo, got {type(info).__name__}")
        self._added[normalise_model_name(info.name)] = info
        return info

    def unregister(self, name: str) -> None:
        """Remove a model added with :meth:`register` (a built-in of that name comes back into
        view). Raises :class:`UnknownModelError` when this registry holds no such model."""
        try:
            del self._added[normalise_model_name(name)]
        except KeyError:
            raise UnknownModelError(f"model {name!r} was not registered here") from None

    def find(self, model: str) -> ModelInfo | None:
        """The model ``model`` resolves to, or ``None`` (see the module docstring)."""
        return find_model(model, self._added)

    def info(self, model: str) -> ModelInfo:
        """:func:`model_info` in this registry."""
        return model_info(model, self._added)

    def context_window(self, model: str | None, override: int | None = None) -> int:
        """:func:`context_window` in this registry."""
        return context_window(model, override, self._added)

    def known(self) -> list[str]:
        """Every model name this registry resolves exactly (built-in and added), sorted."""
        return known_models(self._added)
