"""The MADBench pipeline, declared once: both the local runner and Argo read this graph."""

from __future__ import annotations

from dataclasses import replace

from madbench_common.benchmarks.madbench.eval_models import eval_model_stages, reference_stages
from madbench_common.benchmarks.madbench.omni_models import omni_model_stages
from madbench_common.core.errors import ConfigError
from madbench_common.models.catalog import qc_cards, stage_card
from madbench_common.pipeline.graph import Graph, Stage

__all__ = ["ENV_BRANCHES", "GENERATOR_SLOTS", "PAPER_SLOTS", "SPEECH_BRANCHES", "build_graph"]

_CLIP_INPUTS = ("ingest", "separate", "source_qc", "split")
SPEECH_BRANCHES = ("tts_same", "tts_cross", "vc")
ENV_BRANCHES = ("t2a", "v2a", "a2a")
GENERATOR_SLOTS = ("a", "b")
"""One generator stage ``speech_<branch>_<slot>`` / ``env_<paradigm>_<slot>`` each (paper
§3.3–3.4). Which model runs in it is on the catalog cards: the reference card whose slot
names the stage is its default, the paper card its ``full`` model."""


def _default(stage: str) -> str:
    """The model a one-model stage runs by default: its reference card's slug."""
    return stage_card(stage, reference=True).slug


def _full(stage: str) -> dict[str, object]:
    """A one-model stage's ``full`` profile from its paper card: model, image and the pod
    fields the card's slot sets."""
    card = stage_card(stage, reference=False)
    slot = card.slot
    assert slot is not None  # stage_card found the stage in it
    pod = {"gpu": slot.gpu, "memory": slot.memory, "timeout": slot.timeout,
           "gpu_memory_gib": slot.gpu_memory_gib}
    return {"model": card.slug, "image": card.image, **{k: v for k, v in pod.items() if v}}


_QC_SLOTS = {
    "source_qc": ("ASR + VAD + AST", "qc"),
    "split": ("ECAPA-TDNN", "qc"),
    "component_qc": ("ASR + VAD + ECAPA-TDNN + AST + CLAP", "qc"),
}
"""The QC stages, which run several models of the ``qc`` image at once (paper §3.2, §3.4)."""
_GENERATORS = tuple(f"{component}_{branch}_{slot}"
                    for component, branches in (("speech", SPEECH_BRANCHES),
                                                ("env", ENV_BRANCHES))
                    for branch in branches for slot in GENERATOR_SLOTS)
_CARD_SLOTS = ("separate", "scene", *_GENERATORS)
"""The one-model stages of the paper's graph, each filled by a catalog card's slot."""
PAPER_SLOTS = {**{stage: (card.paper, card.image) for stage, card in
                  zip(_CARD_SLOTS, (stage_card(s, reference=False) for s in _CARD_SLOTS))},
               **_QC_SLOTS}
"""Stage → (the paper's model, its image slot in ``images/images.lock.yaml``), paper §3.2–3.4:
from the paper card whose slot names the stage, or, for the QC stages, ``_QC_SLOTS``.

The defaults are CPU references standing in for these models (each reference card's
``paper`` names the model of its slot). ``workflows/full.yaml`` (each stage's ``full``
profile) runs the slots' models on their images; any one stage can also be switched with
``-p <stage>_image=... -p <stage>_model=...``. Generators in the ``full`` profile: paper
§3.3 (speech) and §3.4 (TTA AudioLDM2 / AudioGen, VTA MMAudio / FoleyCrafter, ATA AudioX /
AudioLDM2-ATA). Video models take frames at their own rate and size (``frame_request``). A
diffusion generator spends tens of seconds per component, so a full-profile shard may run
6 h (``_ENV_TIMEOUT``; raise ``<stage>_shards`` at the paper's scale; ``madbench plan``
compares). Scene: Qwen2.5-VL-32B (paper §3.4) on one 80 GB GPU
(``models/catalog/scene-qwen25vl.yaml``)."""
_FRAMES = {"frame_fps": 2.0, "frame_size": 112, "max_frames": 64}
_ENV_TIMEOUT = 21600
"""An environment generator's shard timeout in the ``full`` profile, unless its card sets one."""
_QC_POD = {"gpu": 1, "memory": "16Gi"}
"""The ``full`` profile's QC models (Whisper large-v3, ECAPA, AST, CLAP, Silero) share one
image; Whisper wants a GPU (fp16, about 3 GB)."""
_ECAPA_SAME_SPEAKER = 0.25
"""ECAPA cosine at or above which two utterances count as one speaker: the decision
threshold of speechbrain's ``SpeakerRecognition`` for spkrec-ecapa-voxceleb (the paper
gives none). The references' 0.6 / 0.2 were tuned for Resemblyzer, whose cosines run higher."""
_ECAPA_CLUSTER_DISTANCE = 1.0 - _ECAPA_SAME_SPEAKER


def _qc_card(role: str, reference: bool) -> str:
    """The slug of the reference or paper card with QC role ``role``."""
    card = qc_cards(reference).get(role)
    if card is None:
        kind = "reference" if reference else "paper"
        raise ConfigError(f"no {kind} catalog card has qc: {role} "
                          f"(madbench_common/models/catalog)")
    return card.slug


def _qc_image() -> str:
    """The one image of the ``full`` profile's QC models."""
    images = {c.image for c in qc_cards(reference=False).values()}
    if len(images) != 1:
        raise ConfigError(f"the QC models' paper cards name several images: {sorted(images)}")
    return images.pop()


def _qc_models(roles: tuple[str, ...], full_params: dict[str, object] | None = None
               ) -> tuple[dict[str, str], str, dict[str, object]]:
    """A QC stage's model parameters (the cards with those QC roles), its compound ``model``
    (``vad+asr+…``, derived from them, never typed twice) and its ``full`` overrides
    (model, image, params)."""
    refs = {k: _qc_card(k, reference=True) for k in roles}
    full = {**{k: _qc_card(k, reference=False) for k in roles}, **(full_params or {})}
    compound = "+".join(str(full[k]) for k in roles)
    return refs, "+".join(refs.values()), {"model": compound, "image": _qc_image(), **_QC_POD,
                                           "params": full}


def build_graph() -> Graph:
    """The MADBench build graph (paper §3.2 onwards), in declaration order."""
    source_qc_refs, source_qc_model, source_qc_full = _qc_models(("vad", "asr", "tagger"))
    return Graph(_wire_evaluate(
        [
            Stage(
                name="ingest",
                role="core",
                target="madbench_common.benchmarks.madbench.stages.ingest:IngestStage",
                outputs=("sources",),
                shards=4,
                timeout=1800,
            ),
            Stage(
                name="separate",
                role="separator",
                target="madbench_common.benchmarks.madbench.stages.separate:SeparateStage",
                inputs=("ingest",),
                outputs=("stems",),
                model=_default("separate"),
                shards=4,
                gpu=0,
                memory="4Gi",
                full=_full("separate"),
            ),
            Stage(
                name="source_qc",
                role="vad+asr",
                target="madbench_common.benchmarks.madbench.stages.source_qc:SourceQCStage",
                inputs=("ingest", "separate"),
                outputs=("source_qc",),
                model=source_qc_model,
                shards=4,
                memory="4Gi",
                params=source_qc_refs,
                full=source_qc_full,
            ),
            Stage(
                name="split",
                role="speaker_embedder",
                target="madbench_common.benchmarks.madbench.stages.split:SplitStage",
                inputs=("ingest", "separate", "source_qc"),
                outputs=("splits",),
                model=_qc_card("speaker", reference=True),
                full={"model": _qc_card("speaker", reference=False), "image": _qc_image(),
                      "memory": "8Gi",
                      "params": {"cluster_threshold": _ECAPA_CLUSTER_DISTANCE}},
            ),
            *_build_stages(),
        ]
    ))


def _wire_evaluate(stages: list[Stage]) -> list[Stage]:
    """``evaluate`` reads the clean and perturbed samples and every stage that writes
    features or scores (one per model)."""
    feeds = tuple(s.name for s in stages if s.name != "evaluate"
                  and s.outputs[:1] in (("features",), ("scores",)))
    return [replace(s, inputs=("assemble", "perturb", *feeds)) if s.name == "evaluate" else s
            for s in stages]


def _generator(name: str) -> Stage:
    """``<component>_<branch>_<slot>``: a speech or environment generator stage."""
    component, _, setting = name.partition("_")
    branch = setting.rpartition("_")[0]
    role = "speech_generator" if component == "speech" else "env_generator"
    module = "speech_gen:SpeechGenStage" if component == "speech" else "env_gen:EnvGenStage"
    params: dict[str, object] = {"branch": branch}
    if branch == "v2a":
        params.update(_FRAMES)
    full = _full(name)
    if component == "env":
        full.setdefault("timeout", _ENV_TIMEOUT)
    return Stage(
        name=name,
        role=role,
        target=f"madbench_common.benchmarks.madbench.stages.{module}",
        inputs=(*_CLIP_INPUTS, "scene", "plan_components"),
        outputs=("components",),
        model=_default(name),
        full=full,
        gpu=1,
        memory="8Gi",
        shards=4,
        params=params,
    )


def _build_stages() -> list[Stage]:
    """Scene labelling, pairing, component plan, 12 generator settings, QC, assembly."""
    generators = [_generator(name) for name in _GENERATORS]
    qc_refs, qc_model, qc_full = _qc_models(
        ("vad", "asr", "speaker", "tagger"),
        {"prompt_model": _qc_card("prompt_model", reference=False), "asr_all": True,
         "min_same_similarity": _ECAPA_SAME_SPEAKER})
    return [
        Stage(
            name="scene",
            role="scene_labeller",
            target="madbench_common.benchmarks.madbench.stages.scene:SceneStage",
            inputs=_CLIP_INPUTS,
            outputs=("scenes",),
            model=_default("scene"),
            full=_full("scene"),
            shards=2,
        ),
        Stage(
            name="pairing",
            role="core",
            target="madbench_common.benchmarks.madbench.stages.pairing:PairingStage",
            inputs=_CLIP_INPUTS,
            outputs=("pairs",),
        ),
        Stage(
            name="plan_components",
            role="core",
            target="madbench_common.benchmarks.madbench.stages.plan_components:PlanComponentsStage",
            inputs=(*_CLIP_INPUTS, "scene", "pairing"),
            outputs=("components",),
        ),
        *generators,
        Stage(
            name="component_qc",
            role="vad+asr+speaker_embedder",
            target="madbench_common.benchmarks.madbench.stages.component_qc:ComponentQCStage",
            inputs=(*_CLIP_INPUTS, "scene", *(g.name for g in generators)),
            outputs=("components",),
            model=qc_model,
            shards=4,
            memory="4Gi",
            params=qc_refs,
            full=qc_full,
        ),
        Stage(
            name="assemble",
            role="core",
            target="madbench_common.benchmarks.madbench.stages.assemble:AssembleStage",
            inputs=(*_CLIP_INPUTS, "scene", "component_qc"),
            outputs=("samples",),
            shards=4,
        ),
        Stage(
            name="perturb",
            role="core",
            target="madbench_common.benchmarks.madbench.stages.perturb:PerturbStage",
            inputs=("assemble",),
            outputs=("perturbed",),
            shards=4,
            memory="4Gi",
        ),
        *_eval_stages(),
    ]


def _eval_stages() -> list[Stage]:
    """Frozen-encoder features (cached by sample sha256), then heads, metrics and reports.

    ``features`` runs the CPU reference encoder; one ``features_<slug>`` (and, for
    detectors, ``scores_<slug>``) per paper model follows (:mod:`.eval_models`), then
    ``features_references`` / ``scores_references`` with the other CPU references.
    """
    models = eval_model_stages() + reference_stages()
    return [
        Stage(
            name="features",
            role="encoder",
            target="madbench_common.benchmarks.madbench.stages.features:FeatureStage",
            inputs=("assemble", "perturb"),
            outputs=("features",),
            model=_default("features"),
            shards=4,
            memory="4Gi",
        ),
        *models,
        *omni_model_stages(),
        Stage(
            name="evaluate",
            role="core",
            target="madbench_common.benchmarks.madbench.stages.evaluate:EvaluateStage",
            inputs=("assemble", "features", *(m.name for m in models)),
            outputs=("scores",),
            memory="8Gi",
        ),
    ]
