"""Model registry: slug → lazy ``module:Class`` target, so the orchestrator never imports torch.

Every model enters from its catalog card (``models/catalog/<slug>.yaml``): the paper's
models in their own images, the CPU references (``ref-…``) and the tiny checkpoints
alike. Loaded models are cached per process, so each worker loads weights once.
"""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from madbench_common.core.errors import ConfigError, EnvironmentMissing, MadbenchError

__all__ = ["GROUPS", "REGISTRY", "ModelSpec", "load_model", "load_model_with", "model_args",
           "register", "specs_for_role"]


@dataclass(frozen=True)
class ModelSpec:
    """What the registry knows about one model without importing it."""

    slug: str
    role: str
    target: str
    reference: bool
    image: str
    description: str
    paper_model: str = ""
    """For references: the paper's model whose role this stands in for. For real
    models: the paper's name of this model (``F5-TTS``, ``PE-AV Base``)."""
    group: str = ""
    """Evaluation group as the paper's tables order rows: ``av_detector``,
    ``av_encoder``, ``audio_encoder``, ``audio_detector``, ``omni`` (``""`` elsewhere)."""
    in_paper: bool = True
    """``False`` for optional extra slots the paper does not use (say so in reports)."""


REGISTRY: dict[str, ModelSpec] = {}
GROUPS = ("av_detector", "av_encoder", "audio_encoder", "audio_detector", "omni")
"""Evaluation groups in the order of the paper's Tables 2–5."""


def register(spec: ModelSpec) -> ModelSpec:
    if spec.slug in REGISTRY and REGISTRY[spec.slug] != spec:
        raise ConfigError(f"model slug {spec.slug!r} registered twice")
    REGISTRY[spec.slug] = spec
    return spec


def specs_for_role(role: str) -> list[ModelSpec]:
    return sorted((s for s in REGISTRY.values() if s.role == role), key=lambda s: s.slug)


def model_args(value: Mapping[str, Any] | str | None) -> dict[str, Any]:
    """Constructor arguments from a mapping or its JSON text (``""``: none), as a stage's
    ``model_args`` parameter carries them (a workflow parameter is text)."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except json.JSONDecodeError as exc:
            raise ConfigError(f"model_args: not JSON ({exc})") from None
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"model_args: expected a JSON object, got {value!r}")
    return dict(value)


def load_model_with(slug: str, args: Mapping[str, Any] | str | None) -> Any:
    """:func:`load_model` with the constructor arguments of a stage's ``model_args``
    (scalars only: the instance is cached per argument set)."""
    kwargs = model_args(args)
    for key, value in kwargs.items():
        try:
            hash(value)
        except TypeError:
            raise ConfigError(f"model_args.{key} of model {slug!r}: a number, string or "
                              f"boolean is expected, got {value!r}") from None
    if kwargs and slug in REGISTRY:
        module, _, name = REGISTRY[slug].target.partition(":")
        try:
            inspect.signature(getattr(importlib.import_module(module), name)).bind_partial(
                **kwargs)
        except TypeError as exc:
            raise ConfigError(f"model_args of model {slug!r}: {exc}") from None
        except ImportError:
            pass  # load_model names the missing module
    return load_model(slug, **kwargs)


@cache
def load_model(slug: str, **kwargs: Any) -> Any:
    """Instantiate (once per process) the model registered under ``slug``."""
    try:
        spec = REGISTRY[slug]
    except KeyError:
        known = ", ".join(sorted(REGISTRY))
        raise ConfigError(f"unknown model slug {slug!r}; known: {known}") from None
    module, _, name = spec.target.partition(":")
    try:
        cls = getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as exc:
        raise EnvironmentMissing(f"model {slug!r} needs the Python module {exc.name!r}, which "
                                 f"this environment lacks (it belongs in image {spec.image!r})"
                                 ) from None
    try:
        return cls(**kwargs)
    except MadbenchError:
        raise
    except Exception as exc:  # a model that cannot load fails its stage (exit 3), never an item
        raise EnvironmentMissing(f"model {slug!r} could not be loaded ({type(exc).__name__}: "
                                 f"{exc}); check its weights, modules and writable paths "
                                 f"(image {spec.image!r})") from exc


def _register_cards() -> None:
    """Every catalog card (``models/catalog/<slug>.yaml``) enters the registry."""
    from madbench_common.models.catalog import cards

    for card in cards().values():
        register(ModelSpec(card.slug, card.role, f"madbench_common.{card.target}",
                           card.reference, card.image, card.description, card.paper,
                           card.group, card.in_paper))


_register_cards()
