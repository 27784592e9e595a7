"""The DEAF graph, declared once: ``madbench deaf run`` runs it, ``madbench render`` compiles it.

Stimuli (sentences, background library, ESC TTS, BSC speech and mixing, SIC voices) →
trials → one ``answer_<model>`` stage per model → judge → metrics → report. Stimulus
stages default to the CPU references (labelled stand-ins), so a laptop makes every clip;
each stage's ``full`` profile names what ``workflows/deaf.yaml`` runs: the paper's models,
data sets and APIs, with stand-ins refused. The judge and the report take the answer stages
as optional inputs, so one model's failed stage does not stop the others. Profiles,
parameters and keys are in the README (DEAF).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from madbench_common.benchmarks.deaf.design import ELEVENLABS_VOICES
from madbench_common.core.errors import ConfigError
from madbench_common.models.catalog import model_cards, model_name, stage_card
from madbench_common.pipeline.graph import Graph, Stage
from madbench_common.pipeline.paper_data import DATA_PATHS

__all__ = ["CLIP_STAGES", "PAPER_MODELS", "AnswerModel", "build_deaf_graph", "resolve_models"]

_PKG = "madbench_common.benchmarks.deaf"
CLIP_STAGES = ("esc_tts_a", "esc_tts_b", "esc_tts_c", "bsc_mix", "sic_tts")
"""The stages whose clips are asked about (``bsc_speech`` is mixed first)."""


@dataclass(frozen=True)
class AnswerModel:
    """One answer stage: ``answer_<name>`` runs ``slug`` on ``image``; a GPU model's pod
    asks for ``memory`` and, where set, a GPU of more than ``gpu_memory_gib``."""

    name: str
    slug: str
    image: str = "reference-cpu"
    gpu: int = 0
    secrets: tuple[str, ...] = ()
    memory: str = "48Gi"
    gpu_memory_gib: int = 0

    @property
    def stage(self) -> str:
        """``answer_<name>``: for a card's model, the catalog's per-model stage
        (:func:`~madbench_common.models.catalog.stage_name`)."""
        return f"answer_{self.name}"


def _from_cards() -> tuple[AnswerModel, ...]:
    """Every catalog card with an ``answer_<name>`` slot, in the paper's order."""
    return tuple(AnswerModel(model_name("answer", c.slug), c.slug, c.image, c.slot.gpu,
                             c.slot.secrets, c.slot.memory or "48Gi", c.slot.gpu_memory_gib)
                 for c in model_cards("answer") if c.slot)


PAPER_MODELS = _from_cards()
"""The seven models of §3.1, in the paper's order.

Qwen3-Omni-30B-A3B's thinker (the only part built: ``enable_audio_output=False``) has
31.3 B parameters (counted on the meta device from transformers 5.24's
``Qwen3OmniMoeThinkerConfig`` with the release's 48 text layers and 152,064-token
vocabulary; the release's 32 query heads add ~0.45 B): ~59 GiB in bf16. Its adapter
loads with ``from_pretrained`` (no ``device_map``) into host memory and then moves to
the GPU, so the pod holds the whole thinker in RAM once: 80 GiB covers it plus the
interpreter, torch and CUDA context (the other models keep 48 GiB). On the GPU it
needs the 59 GiB plus activations for a few seconds of audio: an 80 GB-class card
(A100/H100 80 GB, H200), hence ``gpu_memory_gib=70`` — more than a 48 GB L40S or
A6000 offers. (§3.1 ran every open model on one RTX 4090, 24 GB, which cannot hold
this thinker in bf16; the paper does not say how.)"""


def resolve_models(names: Sequence[str]) -> list[AnswerModel]:
    """Answer models from names of :data:`PAPER_MODELS` or ``name=slug`` pairs."""
    from madbench_common.models.registry import REGISTRY

    known = {m.name: m for m in PAPER_MODELS}
    out = []
    for item in names:
        name, eq, slug = item.partition("=")
        if not eq:
            if name not in known:
                raise ConfigError(f"unknown DEAF model {name!r}; known: {', '.join(known)} "
                                  "(or name=<registry slug>)")
            out.append(known[name])
            continue
        spec = REGISTRY.get(slug)
        if spec is None:
            raise ConfigError(f"--models {item!r}: no registered model {slug!r}")
        gpu = 0 if spec.image == "reference-cpu" else 1
        out.append(AnswerModel(name, slug, spec.image, gpu))
    if len({m.name for m in out}) != len(out):
        raise ConfigError("DEAF model names must be unique")
    return out


def _default(stage: str) -> str:
    """The stage's default model: the reference card whose slot names it."""
    return stage_card(stage, reference=True).slug


def _paper(stage: str) -> str:
    """The stage's ``full`` model: the paper card whose slot names it."""
    return stage_card(stage, reference=False).slug


def _stimulus_stages() -> list[Stage]:
    esc = [Stage(name=f"esc_tts_{s}", role="emotional_tts",
                 target=f"{_PKG}.stages_stimuli:EscStage",
                 inputs=("deaf_sentences",), outputs=("deaf_stimuli",),
                 model=_default(f"esc_tts_{s}"), shards=4,
                 params={"setting": s},
                 full={"params": {"emis": DATA_PATHS["emis"], "stand_ins": "refuse"}},
                 workflow_params=("emis", "model_args", "stand_ins"))
           for s in "abc"]
    return [
        Stage(name="deaf_sentences", role="core", target=f"{_PKG}.stages_stimuli:SentencesStage",
              outputs=("deaf_sentences",), timeout=600,
              full={"params": {"emis": DATA_PATHS["emis"], "stand_ins": "refuse"}},
              workflow_params=("emis", "stand_ins")),
        Stage(name="deaf_envlib", role="core", target=f"{_PKG}.stages_stimuli:EnvLibStage",
              outputs=("deaf_envlib",), timeout=600,
              full={"params": {"demand": DATA_PATHS["demand"], "stand_ins": "refuse"}},
              workflow_params=("demand", "stand_ins")),
        *esc,
        Stage(name="bsc_speech", role="voice_tts", target=f"{_PKG}.stages_stimuli:BscSpeechStage",
              inputs=("deaf_sentences",), outputs=("deaf_stimuli",), model=_default("bsc_speech"),
              shards=2,
              full={"model": _paper("bsc_speech"),
                    "params": {"model_args": {"region": "eastus",
                                              "voices": {"narrator": "en-US-GuyNeural"}}}},
              secrets=("AZURE_SPEECH_KEY",), workflow_params=("model_args",)),
        Stage(name="bsc_mix", role="core", target=f"{_PKG}.stages_stimuli:BscMixStage",
              inputs=("deaf_sentences", "bsc_speech", "deaf_envlib"), outputs=("deaf_stimuli",),
              shards=4),
        Stage(name="sic_tts", role="voice_tts", target=f"{_PKG}.stages_stimuli:SicStage",
              inputs=("deaf_sentences",), outputs=("deaf_stimuli",), model=_default("sic_tts"),
              shards=2,
              full={"model": _paper("sic_tts"), "params": {"voices": dict(ELEVENLABS_VOICES)}},
              secrets=("ELEVENLABS_API_KEY",), workflow_params=("voices",)),
    ]


def _answer_stage(m: AnswerModel) -> Stage:
    return Stage(
        name=m.stage, role="omni", target=f"{_PKG}.stages_eval:AnswerStage",
        inputs=("deaf_trials", *CLIP_STAGES), outputs=("deaf_answers",), model=m.slug,
        memory="4Gi", shards=4, timeout=6 * 3600, secrets=m.secrets,
        full={"image": m.image, "gpu": m.gpu, "memory": m.memory,
              **({"gpu_memory_gib": m.gpu_memory_gib} if m.gpu_memory_gib else {})}
        if m.gpu else {},
    )


def build_deaf_graph(models: Sequence[str] = ()) -> Graph:
    """The DEAF graph with answer stages for ``models`` (default: the paper's seven)."""
    answer = resolve_models(models) if models else list(PAPER_MODELS)
    answer_stages = [_answer_stage(m) for m in answer]
    names = tuple(s.name for s in answer_stages)
    return Graph([
        *_stimulus_stages(),
        Stage(name="deaf_trials", role="core", target=f"{_PKG}.stages_eval:TrialsStage",
              inputs=CLIP_STAGES, outputs=("deaf_trials",)),
        *answer_stages,
        Stage(name="deaf_judge", role="judge", target=f"{_PKG}.stages_eval:JudgeStage",
              inputs=("deaf_trials", *names), optional_inputs=names,
              outputs=("deaf_verdicts",), shards=4,
              timeout=6 * 3600, secrets=("JUDGE_API_KEY",),
              workflow_params=("mode", "judge_base_url", "judge_model_id")),
        Stage(name="deaf_metrics", role="core", target=f"{_PKG}.stages_eval:MetricsStage",
              inputs=("deaf_trials", "deaf_judge"), outputs=("deaf_metrics",),
              memory="4Gi"),
        Stage(name="deaf_report", role="core", target=f"{_PKG}.stage_report:ReportStage",
              inputs=("deaf_metrics", "deaf_judge", "deaf_envlib", *CLIP_STAGES, *names),
              optional_inputs=names, outputs=("deaf_report",)),
    ])
