"""Model registry: context window, output limit, tokenizer and list price per model.

Lookup (:func:`model_info`) tries, in order:

1. models registered at run time with :func:`register_model` (they override built-ins);
2. the built-in table, by exact name;
3. the longest registered name that is a prefix of the query, followed by ``-``, ``:``, ``@``
   or ``_`` (so dated snapshots resolve: ``claude-sonnet-4-5-20250929`` -> ``claude-sonnet-4-5``,
   ``gpt-4o-mini-2024-07-18`` -> ``gpt-4o-mini``). A ``.`` does not count as a separator, so
   an unknown ``gpt-4.5-preview`` is *not* mistaken for ``gpt-4``.

Before matching, the name is lower-cased and provider routing is stripped: everything up to
the last ``/`` (``openai/gpt-4o``, ``openrouter/anthropic/claude-3.5-sonnet``,
``models/gemini-2.5-pro``) and Bedrock-style ``anthropic.`` / ``us.meta.`` prefixes. Claude
names written with dots (``claude-3.5-sonnet``, ``claude-sonnet-4.5``) are normalised to
Anthropic's dashed ids.

Figures come from the providers' public model and pricing pages, as listed in November 2025
(:data:`PRICES_AS_OF`). Prices are US dollars per million tokens at the standard (not batch,
not cached) rate; models with tiered pricing list their lowest-context tier. Open-weight
models (Qwen, Llama) have no single list price (hosts differ), so their prices are ``None``;
their ``max_output_tokens`` is a typical host limit, not a property of the weights. Windows
are the provider's default (Claude Sonnet 4/4.5 offer 1M tokens behind a beta flag: pass
``window=1_000_000`` to use it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ._exceptions import ConfigError, UnknownModelError

__all__ = [
    "ModelInfo",
    "context_window",
    "known_models",
    "model_info",
    "register_model",
    "unregister_model",
]

Encoding = Literal["o200k_base", "cl100k_base"]
Provider = Literal["openai", "anthropic", "google", "deepseek", "qwen", "meta", "mistral", "other"]

#: When the built-in prices and limits were last checked against the providers' pages.
PRICES_AS_OF = "2025-11"

_ENCODINGS: tuple[str, ...] = ("o200k_base", "cl100k_base")


@dataclass(frozen=True)
class ModelInfo:
    """What contextwarden knows about one model.

    ``encoding`` is the BPE used to count its tokens: exact for OpenAI models, an
    approximation for everyone else (see ``docs/token-counting.md``). Prices are USD per
    million tokens, ``None`` when there is no single list price.
    """

    name: str
    provider: Provider
    context_window: int
    max_output_tokens: int
    encoding: Encoding = "o200k_base"
    input_price_per_mtok: float | None = None
    output_price_per_mtok: float | None = None

    def __post_init__(self) -> None:
        where = f"ModelInfo({self.name!r})"
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError(f"ModelInfo.name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.context_window, int) or self.context_window <= 0:
            raise ConfigError(
                f"{where}.context_window must be a positive int, got {self.context_window!r}"
            )
        if not isinstance(self.max_output_tokens, int) or self.max_output_tokens < 0:
            raise ConfigError(
                f"{where}.max_output_tokens must be an int >= 0, got {self.max_output_tokens!r}"
            )
        if self.encoding not in _ENCODINGS:
            raise ConfigError(
                f"{where}.encoding must be one of {_ENCODINGS}, got {self.encoding!r}"
            )
        for field in ("input_price_per_mtok", "output_price_per_mtok"):
            price = getattr(self, field)
            if price is not None and (not isinstance(price, int | float) or price < 0):
                raise ConfigError(f"{where}.{field} must be a number >= 0 or None, got {price!r}")

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


def _m(
    name: str,
    provider: Provider,
    window: int,
    max_out: int,
    price_in: float | None = None,
    price_out: float | None = None,
    encoding: Encoding = "o200k_base",
) -> ModelInfo:
    return ModelInfo(name, provider, window, max_out, encoding, price_in, price_out)


_K = 1_000
_M = 1_048_576  # Google's and OpenAI's "1M" windows are 2**20 tokens

# fmt: off
_BUILTIN: dict[str, ModelInfo] = {m.name: m for m in (
    # -- OpenAI -------------------------------------------------------------------------------
    _m("gpt-5", "openai", 400_000, 128_000, 1.25, 10.0),
    _m("gpt-5-mini", "openai", 400_000, 128_000, 0.25, 2.0),
    _m("gpt-5-nano", "openai", 400_000, 128_000, 0.05, 0.40),
    _m("gpt-5-pro", "openai", 400_000, 272_000, 15.0, 120.0),
    _m("gpt-5-codex", "openai", 400_000, 128_000, 1.25, 10.0),
    _m("gpt-5-chat-latest", "openai", 128_000, 16_384, 1.25, 10.0),
    _m("gpt-5.1", "openai", 400_000, 128_000, 1.25, 10.0),
    _m("gpt-5.1-codex", "openai", 400_000, 128_000, 1.25, 10.0),
    _m("gpt-5.1-codex-mini", "openai", 400_000, 128_000, 0.25, 2.0),
    _m("gpt-5.1-chat-latest", "openai", 128_000, 16_384, 1.25, 10.0),
    _m("gpt-4.1", "openai", 1_047_576, 32_768, 2.0, 8.0),
    _m("gpt-4.1-mini", "openai", 1_047_576, 32_768, 0.40, 1.60),
    _m("gpt-4.1-nano", "openai", 1_047_576, 32_768, 0.10, 0.40),
    _m("gpt-4o", "openai", 128_000, 16_384, 2.50, 10.0),
    _m("gpt-4o-2024-05-13", "openai", 128_000, 4_096, 5.0, 15.0),
    _m("gpt-4o-mini", "openai", 128_000, 16_384, 0.15, 0.60),
    _m("chatgpt-4o-latest", "openai", 128_000, 16_384, 5.0, 15.0),
    _m("o1", "openai", 200_000, 100_000, 15.0, 60.0),
    _m("o1-mini", "openai", 128_000, 65_536, 1.10, 4.40),
    _m("o1-pro", "openai", 200_000, 100_000, 150.0, 600.0),
    _m("o3", "openai", 200_000, 100_000, 2.0, 8.0),
    _m("o3-mini", "openai", 200_000, 100_000, 1.10, 4.40),
    _m("o3-pro", "openai", 200_000, 100_000, 20.0, 80.0),
    _m("o4-mini", "openai", 200_000, 100_000, 1.10, 4.40),
    _m("gpt-4-turbo", "openai", 128_000, 4_096, 10.0, 30.0, "cl100k_base"),
    _m("gpt-4", "openai", 8_192, 8_192, 30.0, 60.0, "cl100k_base"),
    _m("gpt-4-32k", "openai", 32_768, 8_192, 60.0, 120.0, "cl100k_base"),
    _m("gpt-3.5-turbo", "openai", 16_385, 4_096, 0.50, 1.50, "cl100k_base"),
    _m("text-embedding-3-small", "openai", 8_191, 0, 0.02, 0.0, "cl100k_base"),
    _m("text-embedding-3-large", "openai", 8_191, 0, 0.13, 0.0, "cl100k_base"),
    _m("text-embedding-ada-002", "openai", 8_191, 0, 0.10, 0.0, "cl100k_base"),
    # -- Anthropic (counted as o200k x a measured factor: see _tokens.py) -----------------------
    _m("claude-opus-4-5", "anthropic", 200_000, 64_000, 5.0, 25.0),
    _m("claude-opus-4-1", "anthropic", 200_000, 32_000, 15.0, 75.0),
    _m("claude-opus-4", "anthropic", 200_000, 32_000, 15.0, 75.0),
    _m("claude-sonnet-4-5", "anthropic", 200_000, 64_000, 3.0, 15.0),
    _m("claude-sonnet-4", "anthropic", 200_000, 64_000, 3.0, 15.0),
    _m("claude-haiku-4-5", "anthropic", 200_000, 64_000, 1.0, 5.0),
    _m("claude-3-7-sonnet", "anthropic", 200_000, 64_000, 3.0, 15.0),
    _m("claude-3-5-sonnet", "anthropic", 200_000, 8_192, 3.0, 15.0),
    _m("claude-3-5-haiku", "anthropic", 200_000, 8_192, 0.80, 4.0),
    _m("claude-3-opus", "anthropic", 200_000, 4_096, 15.0, 75.0),
    _m("claude-3-haiku", "anthropic", 200_000, 4_096, 0.25, 1.25),
    # -- Google ---------------------------------------------------------------------------------
    _m("gemini-3-pro-preview", "google", _M, 65_536, 2.0, 12.0),
    _m("gemini-2.5-pro", "google", _M, 65_536, 1.25, 10.0),
    _m("gemini-2.5-flash", "google", _M, 65_536, 0.30, 2.50),
    _m("gemini-2.5-flash-lite", "google", _M, 65_536, 0.10, 0.40),
    _m("gemini-2.0-flash", "google", _M, 8_192, 0.10, 0.40),
    _m("gemini-2.0-flash-lite", "google", _M, 8_192, 0.075, 0.30),
    _m("gemini-1.5-pro", "google", 2 * _M, 8_192, 1.25, 5.0),
    _m("gemini-1.5-flash", "google", _M, 8_192, 0.075, 0.30),
    # -- DeepSeek (V3.2-Exp behind both names since 2025-09-29) ---------------------------------
    _m("deepseek-chat", "deepseek", 128 * _K, 8 * _K, 0.28, 0.42),
    _m("deepseek-reasoner", "deepseek", 128 * _K, 64 * _K, 0.28, 0.42),
    # -- Qwen (open weights: prices depend on the host) -----------------------------------------
    _m("qwen2.5-72b-instruct", "qwen", 131_072, 8_192),
    _m("qwen2.5-32b-instruct", "qwen", 131_072, 8_192),
    _m("qwen2.5-7b-instruct", "qwen", 131_072, 8_192),
    _m("qwen2.5-coder-32b-instruct", "qwen", 131_072, 8_192),
    _m("qwen3-235b-a22b", "qwen", 131_072, 32_768),
    _m("qwen3-235b-a22b-instruct-2507", "qwen", 262_144, 32_768),
    _m("qwen3-235b-a22b-thinking-2507", "qwen", 262_144, 32_768),
    _m("qwen3-32b", "qwen", 131_072, 32_768),
    _m("qwen3-30b-a3b", "qwen", 131_072, 32_768),
    _m("qwen3-coder-480b-a35b-instruct", "qwen", 262_144, 65_536),
    _m("qwen3-coder-30b-a3b-instruct", "qwen", 262_144, 65_536),
    _m("qwen3-max", "qwen", 262_144, 65_536),
    # -- Meta Llama (open weights: prices depend on the host) -----------------------------------
    _m("llama-3.1-8b", "meta", 131_072, 8_192),
    _m("llama-3.1-70b", "meta", 131_072, 8_192),
    _m("llama-3.1-405b", "meta", 131_072, 8_192),
    _m("llama-3.3-70b", "meta", 131_072, 8_192),
    _m("llama-4-scout", "meta", 10 * _M, 8_192),
    _m("llama-4-maverick", "meta", _M, 8_192),
    # -- Mistral --------------------------------------------------------------------------------
    _m("mistral-large", "mistral", 131_072, 8_192, 2.0, 6.0),
    _m("mistral-medium", "mistral", 131_072, 8_192, 0.40, 2.0),
    _m("mistral-small", "mistral", 131_072, 8_192, 0.10, 0.30),
    _m("codestral", "mistral", 262_144, 8_192, 0.30, 0.90),
)}
# fmt: on

# Other spellings of built-in models (Ollama tags, family names).
_ALIASES: dict[str, str] = {
    "llama3.1": "llama-3.1-8b",
    "llama3.3": "llama-3.3-70b",
    "llama-3.1": "llama-3.1-8b",
    "llama-3.3": "llama-3.3-70b",
    "qwen2.5": "qwen2.5-7b-instruct",
    "qwen3": "qwen3-32b",
    "deepseek-v3": "deepseek-chat",
    "deepseek-r1": "deepseek-reasoner",
}

_USER: dict[str, ModelInfo] = {}

_SEPARATORS = ("-", ":", "@", "_")
_BEDROCK_PREFIX = re.compile(r"^(?:[a-z]{2}\.)?(?:anthropic|meta|mistral|deepseek|qwen)\.")
_CLAUDE_DOTS = re.compile(r"(?<=\d)\.(?=\d)")


def _normalise(model: str) -> str:
    name = model.strip().lower().rsplit("/", 1)[-1]
    name = _BEDROCK_PREFIX.sub("", name)
    if name.startswith("claude"):
        name = _CLAUDE_DOTS.sub("-", name)
    return name


def _find(model: str) -> ModelInfo | None:
    """The registered model ``model`` resolves to, or ``None``."""
    name = _normalise(model)
    for exact in (_USER, _BUILTIN):
        if name in exact:
            return exact[name]
    if name in _ALIASES:
        return _BUILTIN[_ALIASES[name]]
    best: ModelInfo | None = None
    best_len = 0
    tables: tuple[Mapping[str, ModelInfo | str], ...] = (_USER, _BUILTIN, _ALIASES)
    for table in tables:
        for key in table:
            if (
                len(key) > best_len
                and name.startswith(key)
                and name[len(key) : len(key) + 1] in _SEPARATORS
            ):
                value = table[key]
                best = _BUILTIN[value] if isinstance(value, str) else value
                best_len = len(key)
    return best


def model_info(model: str) -> ModelInfo:
    """The :class:`ModelInfo` for ``model`` (see the module docstring for how names resolve).

    Raises :class:`UnknownModelError` when nothing matches.
    """
    info = _find(model)
    if info is None:
        raise UnknownModelError(
            f"unknown model {model!r}: pass window=... or register it with register_model(...)"
        )
    return info


def context_window(model: str | None, override: int | None = None) -> int:
    """The context window to use: ``override`` when given, else the registry's figure.

    Raises :class:`ConfigError` for a non-positive override and :class:`UnknownModelError`
    when the model is unknown (or ``None``) and no override is given.
    """
    if override is not None:
        if isinstance(override, bool) or not isinstance(override, int) or override <= 0:
            raise ConfigError(f"window must be a positive int, got {override!r}")
        return override
    if model is None:
        raise UnknownModelError("no model given: pass window=... or a known model name")
    return model_info(model).context_window


def register_model(info: ModelInfo) -> ModelInfo:
    """Add ``info`` to the registry, or override a built-in of the same name.

    Later lookups of ``info.name`` (and of names it is a prefix of, e.g. dated snapshots)
    return it. The name is stored normalised (lower case, provider prefix stripped).
    """
    if not isinstance(info, ModelInfo):
        raise ConfigError(f"register_model() expects a ModelInfo, got {type(info).__name__}")
    _USER[_normalise(info.name)] = info
    return info


def unregister_model(name: str) -> None:
    """Remove a model added with :func:`register_model` (built-ins come back into view).

    Raises :class:`UnknownModelError` when no such user registration exists.
    """
    try:
        del _USER[_normalise(name)]
    except KeyError:
        raise UnknownModelError(
            f"model {name!r} was not registered with register_model()"
        ) from None


def known_models() -> list[str]:
    """Every registered model name (built-in and user), sorted."""
    return sorted({*_BUILTIN, *_USER})
