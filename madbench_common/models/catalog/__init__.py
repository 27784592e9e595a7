"""The model catalog: one card per model, ``models/catalog/<slug>.yaml``.

A card is the one hand-written place for what MADBench knows about a model without
importing it: role, adapter target, image, paper name and section, evaluation group, its
place in the graphs (its slot or QC role) and its GPU figures. The registry, each model's
stages (:func:`stage_cards`, :func:`stage_name`, :func:`qc_cards`, :func:`demo_params`),
the GPU table, the release card's licences and the README's image table are derived from
the cards. Cards are plain YAML so every image (Python 3.9 included) reads them without a
model library. ``README.md`` in this folder is the recipe for adding a model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from functools import cache
from importlib import resources
from typing import Any

import yaml

from madbench_common.core.errors import ConfigError

__all__ = ["ARCH_KEYS", "DTYPES", "LIST_STAGES", "MODEL_STAGES", "QC_ROLES", "ROLES",
           "UNAVAILABLE", "Card", "Slot", "cards", "demo_params", "gpu_batch", "load_card",
           "model_cards", "model_name", "qc_cards", "stage_card", "stage_cards", "stage_name"]

ROLES = ("separator", "vad", "asr", "audio_tagger", "audio_text_scorer", "speaker_embedder",
         "scene_labeller", "speech_generator", "env_generator", "encoder", "detector",
         "face_cropper", "omni", "emotional_tts", "voice_tts")
"""Every role a card may name (the protocols of ``models/roles.py``)."""

DTYPES = ("bfloat16", "float16", "float32")
"""The values of a card's ``dtype`` (torch's names)."""
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML has it: all 80 cards load in ~30 ms, not ~130 ms."""
_GROUPS = ("", "av_detector", "av_encoder", "audio_encoder", "audio_detector", "omni")
_FRAME_KEYS = frozenset({"fps", "frame_size", "max_frames"})
_GPU_KEYS = ("model", "params_m", "step_params_m", "bytes_per_param", "steps", "passes",
             "frames", "status", "gpu_mem_gb", "gpu_s_per_item", "source", "basis", "batch",
             "measured")
_GPU_REQUIRED = frozenset(_GPU_KEYS) - {"gpu_mem_gb", "gpu_s_per_item", "basis", "batch",
                                        "measured"}
"""``basis``: what a figure rests on where it is not the size rule (a measurement of the
same backbone elsewhere). ``batch``: items per GPU call of the stage (1 unless set).
``measured``: how ``madbench gpu-bench`` measured it (device, torch, CUDA, dtype, batch,
commit, date); only with ``status: measured``."""
_MEASURED_KEYS = frozenset({"device", "torch", "cuda", "dtype", "batch", "commit", "date",
                            "runs"})
ARCH_KEYS = ("repo", "file", "commit", "args", "builder", "config", "reason", "note")
"""A card's ``arch``: where the release's own configuration (``config.json``, or the
upstream constructor's arguments) is, at which commit; ``args``, the shape-setting values
read there, and ``builder``, the ``module:function`` that writes a full-size random
checkpoint from them (``madbench gpu-bench``). Where the configuration cannot be read
offline, ``config: unavailable offline`` and the ``reason``. ``repo: self`` is this
repository (a CPU reference is its own architecture; no commit). ``note``: how the values
were read where not from the file itself."""
UNAVAILABLE = "unavailable offline"
MODEL_STAGES = {"features": "", "scores": "", "omni": "omni-", "answer": "deaf-"}
"""The stage families made one per model: ``<prefix>_<name>``, where the name is the slug
without the word that repeats the family (``omni-``, ``deaf-``), its hyphens as
underscores and its dots dropped (:func:`stage_name`). A card's slot names its own stage;
a detector's ``scores_<name>`` follows its ``features_<name>``."""
LIST_STAGES = ("features_references",)
"""Stages that run a list of models (their ``models`` parameter): any number of cards name
them, each at its slot's ``order``."""
QC_ROLES = {"vad": "vad", "asr": "asr", "speaker": "speaker_embedder",
            "tagger": "audio_tagger", "prompt_model": "audio_text_scorer"}
"""QC role (the parameter of the QC stages ``source_qc`` / ``component_qc`` that names the
model; ``split`` runs the ``speaker``) → the card role it needs."""


@dataclass(frozen=True)
class Slot:
    """Where a model runs in the paper's graph (its ``full`` profile) and its pod."""

    stages: tuple[str, ...]
    """The stages it runs in: its own ``features_<slug>``, ``omni_<name>`` or
    ``answer_<name>`` (:func:`stage_name`), or a stage it fills (``separate``, ``scene``,
    ``speech_*``, ``env_*``…): as their ``full`` model (a paper card) or their default, which
    every profile runs unless a paper card fills the stage (a ``reference`` card); or a
    list stage (:data:`LIST_STAGES`)."""
    order: int = 0
    """Its row in the paper's table, for the stages made one per model, or its place in a
    list stage's ``models`` (0: neither)."""
    demo: bool = True
    """``False``: ``make demo`` leaves it out of its list stage (:func:`demo_params`)."""
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
    """A CPU stand-in or a tiny random checkpoint, never the paper's model. It decides what
    the slot and ``qc`` mean: the default of those stages (reference) or their ``full``
    model (paper)."""
    in_paper: bool = True
    licence: dict[str, str] = field(default_factory=dict)
    """``spdx`` and ``source``; where absent, the licence of the model's image
    (``images/<image>/image.yaml``)."""
    slot: Slot | None = None
    qc: str = ""
    """Its QC role (:data:`QC_ROLES`): the QC stages' model for that role, in the ``full``
    profile (a paper card) or by default (a ``reference`` card)."""
    dtype: str = ""
    """The dtype its adapter loads the weights in on a GPU, as the cluster runs it
    (:data:`DTYPES`; on the CPU every adapter uses float32). ``make adapter-test
    DEVICE=cuda`` checks the loaded model against it. Empty: not declared."""
    gpu: tuple[dict[str, Any], ...] = ()
    """GPU figures read by ``madbench plan``, one block per set of stages (``stages``: the
    slot's unless the block names them; a QC card names them): the model's, or, in a stage
    that runs several models, the stage's."""
    arch: dict[str, Any] = field(default_factory=dict)
    """The full-size architecture's source (:data:`ARCH_KEYS`): what ``madbench gpu-bench``
    builds with random weights, or why it cannot offline."""


_CARD_KEYS = tuple(f.name for f in fields(Card))
_SLOT_KEYS = tuple(f.name for f in fields(Slot))
_CARD_REQUIRED = ("slug", "role", "target", "image", "paper", "section", "description")


def _refuse(where: str, what: str, keys: set[str], valid: tuple[str, ...]) -> None:
    if keys - set(valid):
        raise ConfigError(f"{where}: unknown {what} key(s) {sorted(keys - set(valid))}; "
                          f"valid: {', '.join(valid)}")


_REFERENCE_SLOT_KEYS = ("stages", "order", "demo")
"""A reference card's slot: where it is the default; the pod is the stage's."""
_STAGE = re.compile(r"^[a-z][a-z0-9_]{0,40}$")


def model_name(prefix: str, slug: str) -> str:
    """The name in a per-model stage of family ``prefix`` (:data:`MODEL_STAGES`):
    ``deaf-gemini-2.5-flash`` → ``gemini_25_flash``."""
    return slug.removeprefix(MODEL_STAGES[prefix]).replace(".", "").replace("-", "_")


def stage_name(prefix: str, slug: str) -> str:
    """The per-model stage of ``slug`` in family ``prefix``: ``features_det_xlsr_mamba``,
    ``scores_det_xlsr_mamba``, ``omni_qwen25omni``, ``answer_gemini_25_flash``."""
    return f"{prefix}_{model_name(prefix, slug)}"


def _slot(raw: Any, where: str, slug: str, reference: bool) -> Slot:
    if not isinstance(raw, dict) or not raw.get("stages"):
        raise ConfigError(f"{where}: slot must be a mapping with a non-empty 'stages' list")
    _refuse(where, "slot", set(raw), _REFERENCE_SLOT_KEYS if reference else _SLOT_KEYS)
    frames = dict(raw.get("frames") or {})
    _refuse(where, "slot.frames", set(frames), tuple(sorted(_FRAME_KEYS)))
    stages = tuple(str(s) for s in raw["stages"])
    for stage in stages:
        prefix, per_model, _ = stage.partition("_")
        if not _STAGE.match(stage):
            raise ConfigError(f"{where}: slot stage {stage!r} is not a stage name")
        if per_model and prefix in MODEL_STAGES and stage not in LIST_STAGES and (
                reference or stage != stage_name(prefix, slug)):
            raise ConfigError(f"{where}: slot stage {stage!r}: a {prefix}_ stage is made per "
                              f"paper model and named after it: {stage_name(prefix, slug)!r}")
    if not isinstance(raw.get("demo", True), bool):
        raise ConfigError(f"{where}: slot.demo is true or false")
    if "demo" in raw and not set(stages) & set(LIST_STAGES):
        raise ConfigError(f"{where}: slot.demo narrows a list stage's models "
                          f"({', '.join(LIST_STAGES)}); this slot names none")
    return Slot(stages=stages, order=int(raw.get("order", 0)),
                modes=tuple(raw.get("modes") or ()), frames=frames,
                memory=str(raw.get("memory", "")), gpu=int(raw.get("gpu", 0)),
                timeout=int(raw.get("timeout", 0)),
                gpu_memory_gib=int(raw.get("gpu_memory_gib", 0)),
                secrets=tuple(raw.get("secrets") or ()), demo=raw.get("demo", True))


def _gpu(raw: Any, where: str, slot: Slot | None, qc: str) -> tuple[dict[str, Any], ...]:
    """The ``gpu`` blocks: one mapping, or a list of them, each with its ``stages``."""
    blocks = raw if isinstance(raw, list) else [raw] if raw else []
    out = []
    for block in blocks:
        if not isinstance(block, dict):
            raise ConfigError(f"{where}: gpu is a mapping or a list of mappings")
        gpu = dict(block)
        _refuse(where, "gpu", set(gpu), (*_GPU_KEYS, "stages"))
        if missing := sorted(_GPU_REQUIRED - set(gpu)):
            raise ConfigError(f"{where}: gpu needs {missing}")
        batch = gpu.get("batch", 1)
        if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
            raise ConfigError(f"{where}: gpu batch is a whole number of inputs >= 1, got "
                              f"{batch!r}")
        stages = tuple(gpu.pop("stages", None) or (slot.stages if slot else ()))
        if not stages:
            raise ConfigError(f"{where}: gpu figures need the stages they apply to (a slot, "
                              "or `stages` in the block)")
        if gpu.get("status") == "measured" and not isinstance(gpu.get("measured"), dict):
            raise ConfigError(f"{where}: a measured gpu block says how (`measured`: "
                              f"{', '.join(sorted(_MEASURED_KEYS))}); gpu-bench writes it")
        if "measured" in gpu and (gpu.get("status") != "measured" or not isinstance(
                gpu["measured"], dict) or set(gpu["measured"]) - _MEASURED_KEYS):
            raise ConfigError(f"{where}: gpu.measured goes with status: measured and takes "
                              f"{', '.join(sorted(_MEASURED_KEYS))}")
        if int(gpu.get("batch", 1)) < 1:
            raise ConfigError(f"{where}: gpu.batch is a positive number of items")
        if (slot and not set(stages) <= set(slot.stages)) or (not slot and not qc):
            raise ConfigError(f"{where}: gpu stages {list(stages)} are not stages the model "
                              f"runs in (its slot's, or a QC card's QC stages)")
        out.append({**gpu, "stages": stages})
    if len(blocks) > 1 and len({s for b in out for s in b["stages"]}) != \
            sum(len(b["stages"]) for b in out):
        raise ConfigError(f"{where}: two gpu blocks name one stage")
    return tuple(out)


def _arch(raw: Any, where: str) -> dict[str, Any]:
    """The ``arch`` block: a complete source (repo, file and commit; ``repo: self`` without
    a commit), or ``config: unavailable offline`` with the ``reason``."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: arch is a mapping ({', '.join(ARCH_KEYS)})")
    _refuse(where, "arch", set(raw), ARCH_KEYS)
    arch = dict(raw)
    if "config" in arch and arch["config"] != UNAVAILABLE:
        raise ConfigError(f"{where}: arch.config is only ever {UNAVAILABLE!r} (with a reason)")
    if arch.get("config") == UNAVAILABLE and not str(arch.get("reason", "")).strip():
        raise ConfigError(f"{where}: arch.config: {UNAVAILABLE} needs the reason")
    sourced = bool(arch.get("repo") and arch.get("file")
                   and (arch.get("commit") or arch["repo"] == "self"))
    if not sourced and not str(arch.get("reason", "")).strip():
        raise ConfigError(f"{where}: arch needs its source (repo, file, commit) or a reason")
    if ("args" in arch or "builder" in arch) and (not sourced or "config" in arch):
        raise ConfigError(f"{where}: arch args and builder come from a source that was read")
    if "args" in arch and not isinstance(arch["args"], dict):
        raise ConfigError(f"{where}: arch.args is a mapping of the constructor's arguments")
    if "builder" in arch and ":" not in str(arch["builder"]):
        raise ConfigError(f"{where}: arch.builder is module:function under madbench_common")
    return arch


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
    reference = raw.get("reference", False)
    if not isinstance(reference, bool):
        raise ConfigError(f"{where}: reference is true or false")
    qc = str(raw.get("qc", ""))
    if qc and QC_ROLES.get(qc) != raw["role"]:
        raise ConfigError(f"{where}: qc {qc!r} is not a QC role of a {raw['role']} model; "
                          f"QC roles: " + ", ".join(f"{k} ({v})" for k, v in QC_ROLES.items()))
    slot = _slot(raw["slot"], where, raw["slug"], reference) if "slot" in raw else None
    gpu = _gpu(raw.get("gpu"), where, slot, qc)
    dtype = str(raw.get("dtype", ""))
    if dtype and dtype not in DTYPES:
        raise ConfigError(f"{where}: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    licence = dict(raw.get("licence") or {})
    if licence and set(licence) != {"spdx", "source"}:
        raise ConfigError(f"{where}: licence needs exactly 'spdx' and 'source'")
    return Card(slug=raw["slug"], role=raw["role"], target=raw["target"], image=raw["image"],
                paper=str(raw["paper"]), section=str(raw["section"]),
                description=str(raw["description"]), group=raw.get("group", ""),
                reference=reference, in_paper=bool(raw.get("in_paper", True)),
                licence=licence, slot=slot, qc=qc, dtype=dtype, gpu=gpu,
                arch=_arch(raw.get("arch"), where))


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
    taken: dict[tuple[str, bool], str] = {}
    for card in out.values():
        places = [*(card.slot.stages if card.slot else ()), *([f"qc:{card.qc}"] * bool(card.qc))]
        for place in places:
            key = (place, card.reference)
            if place not in LIST_STAGES and key in taken:
                what = "the QC role" if place.startswith("qc:") else "the stage"
                raise ConfigError(
                    f"madbench_common/models/catalog: {what} {place.removeprefix('qc:')!r} "
                    f"has two {'reference' if card.reference else 'paper'} cards: "
                    f"{taken[key]!r} and {card.slug!r}")
            taken[key] = card.slug
    return out


def _order(card: Card) -> tuple[int, str]:
    return (card.slot.order if card.slot else 0, card.slug)


def stage_cards(stage: str, reference: bool) -> list[Card]:
    """The reference cards (``reference``) or the paper cards whose slot names ``stage``,
    in their slots' order, then slug order: one for a stage they fill, any number for a
    list stage."""
    return sorted((c for c in cards().values()
                   if c.reference == reference and c.slot and stage in c.slot.stages),
                  key=_order)


def stage_card(stage: str, reference: bool) -> Card:
    """The one card that fills ``stage``: its default (``reference``) or its ``full`` model."""
    found = stage_cards(stage, reference)
    if len(found) != 1:
        kind = "reference" if reference else "paper"
        raise ConfigError(f"stage {stage!r} needs one {kind} card whose slot names it "
                          f"(madbench_common/models/catalog); found {[c.slug for c in found]}")
    return found[0]


def model_cards(prefix: str) -> list[Card]:
    """The paper cards with a per-model stage of family ``prefix`` (``features``, ``omni``,
    ``answer``), in their table order (``slot.order``), then slug order."""
    return sorted((c for c in cards().values() if not c.reference and c.slot
                   and stage_name(prefix, c.slug) in c.slot.stages), key=_order)


def qc_cards(reference: bool) -> dict[str, Card]:
    """QC role → the reference (``reference``) or paper card that has it."""
    return {c.qc: c for c in cards().values() if c.qc and c.reference == reference}


def gpu_batch(slug: str, stage: str) -> int:
    """Inputs per model call for model ``slug`` in ``stage``: the ``batch`` of the card's
    ``gpu`` block for that stage (its only block where none names it), else 1 (a card
    without a ``gpu`` block, or a model that is not a card's)."""
    card = cards().get(slug)
    blocks = card.gpu if card else ()
    block = next((b for b in blocks if stage in b["stages"]),
                 blocks[0] if len(blocks) == 1 else None)
    return int(block.get("batch", 1)) if block else 1


def demo_params() -> dict[str, dict[str, list[str]]]:
    """What ``make demo`` (and the tests that run its graph) sets: for each list stage with
    a card marked ``demo: false``, its ``models`` without those."""
    out = {}
    for stage in LIST_STAGES:
        found = stage_cards(stage, reference=True)
        if any(c.slot and not c.slot.demo for c in found):
            out[stage] = {"models": [c.slug for c in found if c.slot and c.slot.demo]}
    return out
