"""The config's ``models:`` section: :class:`ModelOverride` (one entry) and
:func:`apply_model_overrides` (the registry entries it describes); apart from :mod:`._models`
so that the registry's lookups do not pay for importing pydantic."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ._exceptions import ConfigError
from ._models import (
    Caching,
    Encoding,
    ModelInfo,
    ModelRegistry,
    Provider,
    find_model,
    normalise_model_name,
)

__all__ = ["ModelOverride", "apply_model_overrides", "registry_for"]


class ModelOverride(BaseModel):
    """One entry of the config's ``models:`` section: the figures to change for a model the
    registry knows (its name, or a name that resolves to it), or every figure of a new one
    (then ``context_window`` is required). Unset fields keep the registry's value."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    provider: Provider | None = Field(
        None, description="Who serves the model. Default: the registry's, else other."
    )
    context_window: int | None = Field(
        None,
        ge=1,
        description="Context window in tokens. Default: the registry's (required "
        "for a model the registry does not know).",
    )
    max_output_tokens: int | None = Field(
        None,
        ge=0,
        description="Output limit in tokens (it caps the output reserve). Default: the "
        "registry's; for a new model its context_window (no cap).",
    )
    encoding: Encoding | None = Field(
        None, description="BPE used to count tokens. Default: the registry's, else o200k_base."
    )
    input_price_per_mtok: float | None = Field(
        None, ge=0, description="USD per million input tokens. Default: the registry's."
    )
    output_price_per_mtok: float | None = Field(
        None, ge=0, description="USD per million output tokens. Default: the registry's."
    )
    cache_read_price_per_mtok: float | None = Field(
        None, ge=0, description="USD per million cached tokens read. Default: the registry's."
    )
    cache_write_price_per_mtok: float | None = Field(
        None,
        ge=0,
        description="USD per million tokens written to the cache (5-minute write). Default: "
        "the registry's.",
    )
    cache_write_1h_price_per_mtok: float | None = Field(
        None,
        ge=0,
        description="USD per million tokens written to the 1-hour cache. Default: the registry's.",
    )
    cache_ttl_s: float | None = Field(
        None, gt=0, description="Seconds an unused cached prefix lives. Default: the registry's."
    )
    min_cacheable_tokens: int | None = Field(
        None, ge=0, description="Shortest prefix the provider caches. Default: the registry's."
    )
    caching: Caching | None = Field(
        None,
        description="automatic, breakpoints (cache_control) or none. Default: the registry's, "
        "else none.",
    )


def apply_model_overrides(
    config: Mapping[str, ModelOverride | Mapping[str, Any]] | Any,
    base: Mapping[str, ModelInfo] | None = None,
) -> dict[str, ModelInfo]:
    """The registry entries a ``models:`` section describes (``config``: the mapping, or a
    configuration holding it), keyed by normalised name: each the registry's model (``base``'s
    first) with the given fields replaced, or a new model. Pass the result as ``overrides`` to
    :func:`~contextwarden.model_info` / :func:`~contextwarden.context_window`, or build a registry
    with :func:`registry_for`. Raises :class:`ConfigError` naming ``models.<name>.<field>`` for a
    bad value or a new model without ``context_window``."""
    models = getattr(config, "models", config)
    if not isinstance(models, Mapping):
        raise ConfigError(f"models: expected a mapping of model name to settings, got {models!r}")
    out: dict[str, ModelInfo] = {}
    for name, raw in models.items():
        where = f"models.{name}"
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"models: a model name must be a non-empty string, got {name!r}")
        try:
            entry = raw if isinstance(raw, ModelOverride) else ModelOverride.model_validate(raw)
        except ValidationError as exc:
            problems = []
            for err in exc.errors():
                at = ".".join([where, *(str(p) for p in err["loc"])])
                problems.append(f"{at}: {err['msg']}, got {err.get('input')!r}")
            raise ConfigError("\n".join(problems)) from None
        changes = entry.model_dump(exclude_none=True)
        given = sorted(changes)
        found = find_model(name, base)
        if found is None:
            if "context_window" not in changes:
                raise ConfigError(
                    f"{where}.context_window: required for a model the registry does not know"
                )
            window = changes.pop("context_window")
            # no output limit known: the window, so the reserve setting alone decides
            found = ModelInfo(name.strip(), "other", window, window)
        else:
            found = replace(found, name=normalise_model_name(name))
        source = f"config {where}: {', '.join(given)}" if given else found.source
        try:
            info = replace(found, **changes, source=source)
        except ConfigError as exc:  # ModelInfo's own checks (kept in one place)
            raise ConfigError(f"{where}: {exc}") from None
        out[normalise_model_name(name)] = info
    return out


def registry_for(config: Any, base: ModelRegistry | None = None) -> ModelRegistry:
    """A new :class:`~contextwarden.ModelRegistry`: ``base``'s models (none when not given)
    with the config's ``models:`` section applied on top (see :func:`apply_model_overrides`).
    ``base`` itself is left as it is."""
    registry = ModelRegistry(base.values() if base is not None else ())
    for info in apply_model_overrides(config, registry).values():
        registry.register(info)
    return registry
