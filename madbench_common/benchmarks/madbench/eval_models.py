"""The paper's evaluation models as graph stages: one ``features_<slug>`` per model (§4.2).

Each frozen encoder and pretrained detector of paper §4.2 gets its own feature stage
(:class:`~madbench_common.benchmarks.madbench.stages.model_features.ModelFeatureStage`) on its own
image,
and each detector a ``scores_<slug>`` stage with its native binary scores. Their
defaults are empty (no model, ``reference-cpu``, no GPU): the embedded run and
``smoke.yaml`` keep the CPU reference ``features`` stage, and these stages plan
nothing there. The stages' ``full`` profile, which ``workflows/full.yaml`` runs, sets
the model, its image and a GPU.

Frame parameters (``fps``, ``frame_size`` = shorter side of the decoded frames,
``max_frames``) are per model: each adapter then resamples, crops and subsamples to its
own upstream recipe and records what it fed on every row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from madbench_common.models.catalog import model_cards, stage_cards, stage_name
from madbench_common.pipeline.graph import Stage

__all__ = ["EVAL_MODELS", "EvalModel", "eval_model_stages", "reference_models",
           "reference_stages"]


@dataclass(frozen=True)
class EvalModel:
    """One paper model's evaluation stages: slug, image, modes and frame parameters."""

    slug: str
    image: str
    modes: tuple[str, ...] = ("A",)
    detector: bool = False
    memory: str = "16Gi"
    frames: dict[str, Any] = field(default_factory=dict)
    timeout: int = 0
    """The card's shard timeout in seconds (0: the stage default)."""


def _from_cards() -> tuple[EvalModel, ...]:
    """Every catalog card with a ``features_<slug>`` slot, in its table order."""
    return tuple(EvalModel(c.slug, c.image, c.slot.modes or ("A",), c.role == "detector",
                           c.slot.memory or "16Gi", dict(c.slot.frames), c.slot.timeout)
                 for c in model_cards("features") if c.slot)


EVAL_MODELS: tuple[EvalModel, ...] = _from_cards()
"""In the order of the paper's tables (each card's ``slot.order``): A-V detectors, A-V
encoders, audio encoders, audio detectors. Models without a runnable adapter yet are not
listed (see the registry's unavailable slots). A-V detectors take audio and video together
(modes ``[AV]``: paper §5.4 ablates encoders only). PE-AV Base takes "all frames" of a
variable-length video (facebook/pe-av-base model card; only the -16-frame variants
subsample) and aligns them to the audio itself: its 30 fps keeps every frame of a ≤ 30 fps
source (AVSpeech), 360 = 12 s at 30 fps."""


def reference_models() -> tuple[str, ...]:
    """The CPU reference encoders and detector stand-ins a reference run evaluates beside the
    ``features`` stage's ``ref-av-stats`` (so that every group of Tables 2–5 has several
    rows): the reference cards whose slot names ``features_references``, in their slots'
    order. In the ``full`` profile the list is empty: the paper's models have their own
    stages."""
    return tuple(c.slug for c in stage_cards("features_references", reference=True))


def reference_stages(models: tuple[str, ...] | None = None) -> list[Stage]:
    """``features_references`` (every reference model in one stage, ``models`` list; by
    default :func:`reference_models`) and ``scores_references`` (the detector stand-ins'
    native binary scores)."""
    models = reference_models() if models is None else models
    return [
        Stage(
            name="features_references",
            role="encoder",
            target="madbench_common.benchmarks.madbench.stages.model_features:ModelFeatureStage",
            inputs=("assemble", "perturb"),
            outputs=("features",),
            shards=4,
            memory="4Gi",
            params={"models": list(models), "fps": 4.0, "frame_size": 112, "max_frames": 64},
            full={"params": {"models": []}},
        ),
        Stage(
            name="scores_references",
            role="core",
            target="madbench_common.benchmarks.madbench.stages.detector_scores:DetectorScoreStage",
            inputs=("features_references",),
            outputs=("scores",),
            params={"features_stage": "features_references", "detectors_only": True},
        ),
    ]


def _features(m: EvalModel) -> Stage:
    params: dict[str, Any] = {"modes": list(m.modes),
                              **m.frames}
    return Stage(
        name=stage_name("features", m.slug),
        role="detector" if m.detector else "encoder",
        target="madbench_common.benchmarks.madbench.stages.model_features:ModelFeatureStage",
        inputs=("assemble", "perturb"),
        outputs=("features",),
        shards=4,
        params=params,
        full={"model": m.slug, "image": m.image, "gpu": 1, "memory": m.memory,
              **({"timeout": m.timeout} if m.timeout else {})},
    )


def _scores(m: EvalModel) -> Stage:
    features = stage_name("features", m.slug)
    return Stage(
        name=stage_name("scores", m.slug),
        role="core",
        target="madbench_common.benchmarks.madbench.stages.detector_scores:DetectorScoreStage",
        inputs=(features,),
        outputs=("scores",),
        params={"features_stage": features},
    )


def eval_model_stages(models: tuple[EvalModel, ...] = EVAL_MODELS) -> list[Stage]:
    """Every model's feature stage, then every detector's scores stage."""
    return [_features(m) for m in models] + [_scores(m) for m in models if m.detector]
