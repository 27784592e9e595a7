"""The DEAF graph, declared once: ``madbench deaf run`` runs it, ``madbench render`` compiles it.

Stimuli (sentences, background library, three ESC TTS settings, BSC speech and mixing,
SIC voices) → trials → one ``answer_<model>`` stage per model → judge → metrics →
report. Stage defaults are the CPU references and the rule judge, so a laptop runs the
whole graph; each stage's ``full`` profile names what ``workflows/deaf.yaml`` runs:
the paper's models on their images, ElevenLabs for SIC and DeepSeek-R1 as the judge.

One model's failed answer stage does not stop the others: the judge and the report take
the answer stages as optional inputs (``Stage.optional_inputs``). On Argo they wait for
every answer stage to finish, succeeded or failed (``depends``, ``failFast: false``); the
judge judges the models that answered, metrics cover them, and the report lists each
absent model as such (no answers: its stage failed or did not run). The workflow still
ends Failed, naming the failed stage. A local ``madbench deaf run`` stops at the first
failed stage instead (rerun it, or ``--models`` without that model, to finish).

SIC voices (``sic_tts``'s ``voices``: profile → ElevenLabs voice id) are the workflow
parameter ``sic_tts_voices`` (JSON), by default :data:`~.design.ELEVENLABS_VOICES`.

Answer stages: the paper's seven models by default (§3.1), or any list of
:data:`PAPER_MODELS` names and ``name=slug`` pairs naming any registered ``OmniModel``
(the MADBench omni adapters included), e.g. ``qwen2_audio,qwen25_omni=omni-qwen25omni``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from madbench_common.deaf.design import ELEVENLABS_VOICES
from madbench_common.errors import ConfigError
from madbench_common.pipeline.graph import Graph, Stage

__all__ = ["CLIP_STAGES", "PAPER_MODELS", "AnswerModel", "build_deaf_graph", "resolve_models"]

_PKG = "madbench_common.deaf"
CLIP_STAGES = ("esc_tts_a", "esc_tts_b", "esc_tts_c", "bsc_mix", "sic_tts")
"""The stages whose clips are asked about (``bsc_speech`` is mixed first)."""


@dataclass(frozen=True)
class AnswerModel:
    """One answer stage: ``answer_<name>`` runs ``slug`` on ``image``."""

    name: str
    slug: str
    image: str = "reference-cpu"
    gpu: int = 0
    secrets: tuple[str, ...] = ()

    @property
    def stage(self) -> str:
        return f"answer_{self.name}"


PAPER_MODELS = (
    AnswerModel("gemini_25_flash", "deaf-gemini-2.5-flash", secrets=("GEMINI_API_KEY",)),
    AnswerModel("gemini_3_flash", "deaf-gemini-3-flash", secrets=("GEMINI_API_KEY",)),
    AnswerModel("gpt_4o_audio", "deaf-gpt-4o-audio", secrets=("OPENAI_API_KEY",)),
    AnswerModel("audio_flamingo3", "deaf-audio-flamingo3", "deaf-tf5", 1),
    AnswerModel("qwen2_audio", "deaf-qwen2-audio", "deaf-tf5", 1),
    AnswerModel("qwen3_omni", "deaf-qwen3-omni", "deaf-tf5", 1),
    AnswerModel("salmonn", "deaf-salmonn", "deaf-salmonn", 1),
)
"""The seven models of §3.1, in the paper's order."""


def resolve_models(names: Sequence[str]) -> list[AnswerModel]:
    """Answer models from names of :data:`PAPER_MODELS` or ``name=slug`` pairs."""
    from madbench_common.registry import REGISTRY

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


def _stimulus_stages() -> list[Stage]:
    esc = [Stage(name=f"esc_tts_{s}", role="emotional_tts",
                 target=f"{_PKG}.stages_stimuli:EscStage",
                 inputs=("deaf_sentences",), outputs=("deaf_stimuli",),
                 model=f"ref-deaf-emotion-{s}", shards=4, params={"setting": s, "emis": ""})
           for s in "abc"]
    return [
        Stage(name="deaf_sentences", role="core", target=f"{_PKG}.stages_stimuli:SentencesStage",
              outputs=("deaf_sentences",), timeout=600,
              params={"sentences": "", "emis": "", "per_stratum": 0}),
        Stage(name="deaf_envlib", role="core", target=f"{_PKG}.stages_stimuli:EnvLibStage",
              outputs=("deaf_envlib",), timeout=600,
              params={"library": "", "demand": "", "seconds": 20.0}),
        *esc,
        Stage(name="bsc_speech", role="voice_tts", target=f"{_PKG}.stages_stimuli:BscSpeechStage",
              inputs=("deaf_sentences",), outputs=("deaf_stimuli",), model="ref-deaf-voices",
              shards=2),
        Stage(name="bsc_mix", role="core", target=f"{_PKG}.stages_stimuli:BscMixStage",
              inputs=("deaf_sentences", "bsc_speech", "deaf_envlib"), outputs=("deaf_stimuli",),
              shards=4, params={"snrs": [-10, -5, 0, 5, 10], "pairing_seed": 0}),
        Stage(name="sic_tts", role="voice_tts", target=f"{_PKG}.stages_stimuli:SicStage",
              inputs=("deaf_sentences",), outputs=("deaf_stimuli",), model="ref-deaf-voices",
              shards=2, params={"model_args": {}, "voices": ""},
              full={"model": "deaf-elevenlabs", "params": {"voices": dict(ELEVENLABS_VOICES)}},
              secrets=("ELEVENLABS_API_KEY",), workflow_params=("voices",)),
    ]


def _answer_stage(m: AnswerModel) -> Stage:
    return Stage(
        name=m.stage, role="omni", target=f"{_PKG}.stages_eval:AnswerStage",
        inputs=("deaf_trials", *CLIP_STAGES), outputs=("deaf_answers",), model=m.slug,
        memory="4Gi", shards=4, timeout=6 * 3600, secrets=m.secrets,
        params={"repeats": 3, "cache": "", "model_args": {}},
        full={"image": m.image, "gpu": m.gpu, "memory": "48Gi"} if m.gpu else {},
    )


def build_deaf_graph(models: Sequence[str] = ()) -> Graph:
    """The DEAF graph with answer stages for ``models`` (default: the paper's seven)."""
    answer = resolve_models(models) if models else list(PAPER_MODELS)
    answer_stages = [_answer_stage(m) for m in answer]
    names = tuple(s.name for s in answer_stages)
    return Graph([
        *_stimulus_stages(),
        Stage(name="deaf_trials", role="core", target=f"{_PKG}.stages_eval:TrialsStage",
              inputs=CLIP_STAGES, outputs=("deaf_trials",), params={"prompts": ""}),
        *answer_stages,
        Stage(name="deaf_judge", role="judge", target=f"{_PKG}.stages_eval:JudgeStage",
              inputs=("deaf_trials", *names), optional_inputs=names,
              outputs=("deaf_verdicts",), shards=4,
              timeout=6 * 3600, secrets=("JUDGE_API_KEY",),
              params={"mode": "rule+llm", "judge_base_url": "", "judge_model": "",
                      "judge_key_env": "JUDGE_API_KEY", "judge_prompt": "", "cache": ""},
              full={"params": {"judge_base_url": "https://api.deepseek.com/v1",
                               "judge_model": "deepseek-reasoner"}}),
        Stage(name="deaf_metrics", role="core", target=f"{_PKG}.stages_eval:MetricsStage",
              inputs=("deaf_trials", "deaf_judge"), outputs=("deaf_metrics",),
              memory="4Gi", params={"n_boot": 10_000}),
        Stage(name="deaf_report", role="core", target=f"{_PKG}.stage_report:ReportStage",
              inputs=("deaf_metrics", "deaf_judge", "deaf_envlib", *CLIP_STAGES, *names),
              optional_inputs=names, outputs=("deaf_report",)),
    ])
