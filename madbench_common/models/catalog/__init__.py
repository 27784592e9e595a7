"""The model catalog: one card per model, ``models/catalog/<slug>.yaml``.

A card is the one hand-written place for what MADBench knows about a model without
importing it: its role, adapter target, image, the paper's name and section, its
evaluation group, where it runs in the paper's graph (its *slot*: stages, pod
resources, frame sampling, order in the paper's tables) and its GPU figures. Everything
else is derived from the cards:

- the registry (:data:`madbench_common.models.registry.REGISTRY`);
- the role rows of the graphs: the evaluation models (``benchmarks/madbench/eval_models``),
  the omni models (``benchmarks/madbench/omni_models``), the generator, separator and scene
  models of the ``full`` profile (``benchmarks/madbench/graph``) and DEAF's answer models
  (``benchmarks/deaf/graph``);
- the GPU table that ``madbench plan`` reads (``pipeline/gpuplan``; only stages that run
  several models, the QC stages, keep a row in ``data/gpu_models.csv``);
- the reference models' licences in an exported dataset card (``benchmarks/madbench/release/card``);
- the README's image table (``make dockerfiles``).

``tests/test_catalog.py`` checks the cards against the images (``image.yaml``'s
``models``) and the graphs. ``README.md`` in this folder is the recipe for adding a model.

Cards are plain YAML so that the orchestrator, every image (Python 3.9 included) and
tools outside Python read them without importing a model library.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cache
from importlib import resources
from typing import Any

import yaml

from madbench_common.core.errors import ConfigError

__all__ = ["ROLES", "Card", "Slot", "card_for_stage", "cards", "load_card", "slot_cards"]

ROLES = ("separator", "vad", "asr", "audio_tagger", "audio_text_scorer", "speaker_embedder",
         "scene_labeller", "speech_generator", "env_generator", "encoder", "detector",
         "face_cropper", "omni", "emotional_tts", "voice_tts")
"""Every role a card may name (the protocols of ``models/roles.py``)."""

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML has it: all 80 cards load in ~30 ms, not ~130 ms."""
_GROUPS = ("", "av_detector", "av_encoder", "audio_encoder", "audio_detector", "omni")
_FRAME_KEYS = frozenset({"fps", "frame_size", "max_frames"})
_GPU_KEYS = ("model", "params_m", "step_params_m", "bytes_per_param", "steps", "passes",
             "frames", "status", "gpu_mem_gb", "gpu_s_per_item", "source")
_GPU_REQUIRED = frozenset(_GPU_KEYS) - {"gpu_mem_gb", "gpu_s_per_item"}


@dataclass(frozen=True)
class Slot:
    """Where a model runs in the paper's graph (its ``full`` profile) and its pod."""

    stages: tuple[str, ...]
    """The stages it runs in: ``features_<slug>``, ``omni_<name>``, ``answer_<name>``, or
    the generator / ``separate`` / ``scene`` stage it fills."""
    order: int = 0
    """Its row in the paper's table, for the stages made one per model (0: not one)."""
    modes: tuple[str, ...] = ()
    """Input modes of an evaluation model: ``A``, ``AV``."""
    frames: dict[str, Any] = field(default_factory=dict)
    """Video input contract: ``fps``, ``frame_size`` (shorter side), ``max_frames``."""
    memory: str = ""
    gpu: int = 0
    timeout: int = 0
    gpu_memory_gib: int = 0
    """A GPU of more than this many GiB (node affinity); 0: any."""
    secrets: tuple[str, ...] = ()
    """Environment variables a hosted API model reads from the cluster's secret."""


@dataclass(frozen=True)
class Card:
    """One model's catalog card (see the module docstring)."""

    slug: str
    role: str
    target: str
    """``module:Class`` under ``madbench_common`` (``models.f5tts:F5SameTTS``)."""
    image: str
    paper: str
    """The paper's name of this model; for a reference, of the model it stands in for."""
    section: str
    """Where the paper names it (``MADBench §4.2``, ``DEAF §3.1``)."""
    description: str
    group: str = ""
    """Evaluation group in the order of the paper's Tables 2–5 (``""`` elsewhere)."""
    reference: bool = False
    """A CPU stand-in or a tiny random checkpoint, never the paper's model."""
    in_paper: bool = True
    licence: dict[str, str] = field(default_factory=dict)
    """``spdx`` and ``source``; where absent, the licence of the model's image
    (``images/<image>/image.yaml``)."""
    slot: Slot | None = None
    gpu: dict[str, Any] = field(default_factory=dict)
    """GPU figures of the model in its slot's stages (the columns of
    ``data/gpu_models.csv`` but ``stages``); read by ``madbench plan``."""


_CARD_KEYS = tuple(f.name for f in fields(Card))
_SLOT_KEYS = tuple(f.name for f in fields(Slot))
_CARD_REQUIRED = ("slug", "role", "target", "image", "paper", "section", "description")


def _refuse(where: str, what: str, keys: set[str], valid: tuple[str, ...]) -> None:
    if keys - set(valid):
        raise ConfigError(f"{where}: unknown {what} key(s) {sorted(keys - set(valid))}; "
                          f"valid: {', '.join(valid)}")


def _slot(raw: Any, where: str) -> Slot:
    if not isinstance(raw, dict) or not raw.get("stages"):
        raise ConfigError(f"{where}: slot must be a mapping with a non-empty 'stages' list")
    _refuse(where, "slot", set(raw), _SLOT_KEYS)
    frames = dict(raw.get("frames") or {})
    _refuse(where, "slot.frames", set(frames), tuple(sorted(_FRAME_KEYS)))
    return Slot(stages=tuple(raw["stages"]), order=int(raw.get("order", 0)),
                modes=tuple(raw.get("modes") or ()), frames=frames,
                memory=str(raw.get("memory", "")), gpu=int(raw.get("gpu", 0)),
                timeout=int(raw.get("timeout", 0)),
                gpu_memory_gib=int(raw.get("gpu_memory_gib", 0)),
                secrets=tuple(raw.get("secrets") or ()))


def load_card(text: str, where: str) -> Card:
    """Parse and check one card; every error names ``where`` and the valid keys."""
    try:
        raw = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: not YAML ({exc})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a card is a YAML mapping")
    _refuse(where, "card", set(raw), _CARD_KEYS)
    if missing := [k for k in _CARD_REQUIRED if not raw.get(k)]:
        raise ConfigError(f"{where}: missing {missing}")
    if raw["role"] not in ROLES:
        raise ConfigError(f"{where}: role {raw['role']!r} is not one of {', '.join(ROLES)}")
    if raw.get("group", "") not in _GROUPS:
        raise ConfigError(f"{where}: group {raw['group']!r} is not one of {_GROUPS[1:]}")
    if ":" not in raw["target"]:
        raise ConfigError(f"{where}: target {raw['target']!r} is not module:Class")
    gpu = dict(raw.get("gpu") or {})
    _refuse(where, "gpu", set(gpu), _GPU_KEYS)
    if gpu and (missing := sorted(_GPU_REQUIRED - set(gpu))):
        raise ConfigError(f"{where}: gpu needs {missing}")
    if gpu and "slot" not in raw:
        raise ConfigError(f"{where}: gpu figures need a slot (the stages they apply to)")
    licence = dict(raw.get("licence") or {})
    if licence and set(licence) != {"spdx", "source"}:
        raise ConfigError(f"{where}: licence needs exactly 'spdx' and 'source'")
    return Card(slug=raw["slug"], role=raw["role"], target=raw["target"], image=raw["image"],
                paper=str(raw["paper"]), section=str(raw["section"]),
                description=str(raw["description"]), group=raw.get("group", ""),
                reference=bool(raw.get("reference", False)),
                in_paper=bool(raw.get("in_paper", True)), licence=licence,
                slot=_slot(raw["slot"], where) if "slot" in raw else None, gpu=gpu)


@cache
def cards() -> dict[str, Card]:
    """slug → card, every packaged card, in slug order."""
    folder = resources.files(__name__)
    out: dict[str, Card] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml"):
            continue
        where = f"madbench_common/models/catalog/{entry.name}"
        card = load_card(entry.read_text(encoding="utf-8"), where)
        if card.slug != entry.name.removesuffix(".yaml"):
            raise ConfigError(f"{where}: slug {card.slug!r} is not the file's name")
        out[card.slug] = card
    stages: dict[str, str] = {}
    for card in out.values():
        for stage in card.slot.stages if card.slot else ():
            if stage in stages:
                raise ConfigError(f"madbench_common/models/catalog: stage {stage!r} is in the "
                                  f"slots of both {stages[stage]!r} and {card.slug!r}")
            stages[stage] = card.slug
    return out


def slot_cards(prefix: str) -> list[Card]:
    """The cards whose slot stages start with ``prefix`` (``features_``, ``omni_``,
    ``answer_``, ``speech_``, ``env_``), in their table order, then slug order."""
    found = [c for c in cards().values()
             if c.slot and any(s.startswith(prefix) for s in c.slot.stages)]
    return sorted(found, key=lambda c: (c.slot.order if c.slot else 0, c.slug))


def card_for_stage(stage: str) -> Card | None:
    """The card whose slot names ``stage``, if any."""
    for card in cards().values():
        if card.slot and stage in card.slot.stages:
            return card
    return None
