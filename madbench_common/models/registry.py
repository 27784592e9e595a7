"""Model registry: slug → lazy ``module:Class`` target, so the orchestrator never imports torch.

Every model enters from its catalog card (``models/catalog/<slug>.yaml``): the paper's
models in their own images, the CPU references (``ref-…``) and the tiny checkpoints
alike. Loaded models are cached per process, so each worker loads weights once.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from typing import Any

from madbench_common.core.errors import ConfigError, EnvironmentMissing, MadbenchError

__all__ = ["GROUPS", "REGISTRY", "ModelSpec", "load_model", "register", "specs_for_role"]


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
