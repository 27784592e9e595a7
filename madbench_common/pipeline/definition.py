"""The MADBench pipeline, declared once: both the local runner and Argo read this graph."""

from __future__ import annotations

from madbench_common.pipeline.graph import Graph, Stage

__all__ = ["ENV_FULL", "ENV_SETTINGS", "SCENE_FULL", "SPEECH_SETTINGS", "build_graph"]

_CLIP_INPUTS = ("ingest", "separate", "source_qc", "split")
SPEECH_SETTINGS = (
    ("tts_same", "a", "ref-flite-world-tts-same"),
    ("tts_same", "b", "ref-espeak-psola-tts-same"),
    ("tts_cross", "a", "ref-flite-world-tts-cross"),
    ("tts_cross", "b", "ref-espeak-psola-tts-cross"),
    ("vc", "a", "ref-world-vc"),
    ("vc", "b", "ref-psola-cepstral-vc"),
)
"""(branch, slot, default model): one generator stage ``speech_<branch>_<slot>`` each."""
ENV_SETTINGS = (
    ("t2a", "a", "ref-layered-t2a"),
    ("t2a", "b", "ref-spectral-t2a"),
    ("v2a", "a", "ref-layered-v2a"),
    ("v2a", "b", "ref-spectral-v2a"),
    ("a2a", "a", "ref-texture-a2a"),
    ("a2a", "b", "ref-stft-morph-a2a"),
)
_FRAMES = {"frame_fps": 2.0, "frame_size": 112, "max_frames": 64}
ENV_FULL = {
    ("t2a", "a"): ("env-audioldm2", "env-audioldm2", "16Gi"),
    ("t2a", "b"): ("env-audiogen", "env-audiogen", "16Gi"),
    ("v2a", "a"): ("v2a-mmaudio", "v2a-mmaudio", "24Gi"),
    ("v2a", "b"): ("v2a-foleycrafter", "v2a-foleycrafter", "16Gi"),
    ("a2a", "a"): ("a2a-audiox", "a2a-audiox", "16Gi"),
    ("a2a", "b"): ("env-audioldm2-ata", "env-audioldm2", "16Gi"),
}
"""(paradigm, slot) → (the paper's model, its image, pod memory) in the ``full`` profile
(paper §3.4: TTA AudioLDM2 / AudioGen, VTA MMAudio / FoleyCrafter, ATA AudioX /
AudioLDM2-ATA). Video models take frames at their own rate and size (``frame_request``).
A diffusion generator spends tens of seconds per component, so a full-profile shard may
run 6 h (raise ``<stage>_shards`` at the paper's scale; ``madbench plan`` compares)."""
SCENE_FULL = {"model": "scene-qwen25vl", "image": "scene-qwen25vl", "gpu": 1,
              "memory": "32Gi", "timeout": 7200}
"""The scene stage in the ``full`` profile: Qwen2.5-VL-32B (paper §3.4) on one 80 GB GPU."""


def build_graph() -> Graph:
    """The MADBench build graph (paper §3.2 onwards), in declaration order."""
    return Graph(
        [
            Stage(
                name="ingest",
                role="core",
                target="madbench_common.stages.ingest:IngestStage",
                outputs=("sources",),
                shards=4,
                timeout=1800,
                params={"min_duration": 4.0, "max_duration": 12.0, "sample_rate": 16000,
                        "silence_dbfs": -70.0},
            ),
            Stage(
                name="separate",
                role="separator",
                target="madbench_common.stages.separate:SeparateStage",
                inputs=("ingest",),
                outputs=("stems",),
                model="ref-deepfilternet3",
                shards=4,
                gpu=0,
                memory="4Gi",
            ),
            Stage(
                name="source_qc",
                role="vad+asr",
                target="madbench_common.stages.source_qc:SourceQCStage",
                inputs=("ingest", "separate"),
                outputs=("source_qc",),
                model="ref-silero-vad+ref-pocketsphinx",
                shards=4,
                memory="4Gi",
                params={"vad": "ref-silero-vad", "asr": "ref-pocketsphinx",
                        "min_speech_coverage": 0.3, "min_asr_coverage": 0.3,
                        "max_env_leakage": 0.35, "min_env_dbfs": -60.0,
                        "max_clip_fraction": 0.001},
            ),
            Stage(
                name="split",
                role="speaker_embedder",
                target="madbench_common.stages.split:SplitStage",
                inputs=("ingest", "separate", "source_qc"),
                outputs=("splits",),
                model="ref-resemblyzer",
                params={"ratios": [0.7, 0.1, 0.2], "cluster_threshold": 0.2},
            ),
            *_build_stages(),
        ]
    )


def _generator(component: str, branch: str, slot: str, model: str) -> Stage:
    role = "speech_generator" if component == "speech" else "env_generator"
    module = "speech_gen:SpeechGenStage" if component == "speech" else "env_gen:EnvGenStage"
    params: dict[str, object] = {"branch": branch}
    if branch == "v2a":
        params.update(_FRAMES)
    env_full = ENV_FULL.get((branch, slot)) if component == "env" else None
    full = {"model": env_full[0], "image": env_full[1], "memory": env_full[2],
            "timeout": 21600} if env_full else {}
    return Stage(
        name=f"{component}_{branch}_{slot}",
        role=role,
        target=f"madbench_common.stages.{module}",
        inputs=(*_CLIP_INPUTS, "scene", "plan_components"),
        outputs=("components",),
        model=model,
        full=full,
        gpu=1,
        memory="8Gi",
        shards=4,
        params=params,
    )


def _build_stages() -> list[Stage]:
    """Scene labelling, pairing, component plan, 12 generator settings, QC, assembly."""
    generators = [_generator("speech", *s) for s in SPEECH_SETTINGS]
    generators += [_generator("env", *s) for s in ENV_SETTINGS]
    return [
        Stage(
            name="scene",
            role="scene_labeller",
            target="madbench_common.stages.scene:SceneStage",
            inputs=_CLIP_INPUTS,
            outputs=("scenes",),
            model="ref-caption-hint",
            full=SCENE_FULL,
            shards=2,
            params={"frame_fps": 1.0, "frame_size": 336, "max_frames": 16},
        ),
        Stage(
            name="pairing",
            role="core",
            target="madbench_common.stages.pairing:PairingStage",
            inputs=_CLIP_INPUTS,
            outputs=("pairs",),
            params={"targets": 4, "max_similarity": 0.85},
        ),
        Stage(
            name="plan_components",
            role="core",
            target="madbench_common.stages.plan_components:PlanComponentsStage",
            inputs=(*_CLIP_INPUTS, "scene", "pairing"),
            outputs=("components",),
            params={"speech_per_clip": 3, "env_per_clip": 2},
        ),
        *generators,
        Stage(
            name="component_qc",
            role="vad+asr+speaker_embedder",
            target="madbench_common.stages.component_qc:ComponentQCStage",
            inputs=(*_CLIP_INPUTS, "scene", *(g.name for g in generators)),
            outputs=("components",),
            model="ref-silero-vad+ref-pocketsphinx+ref-resemblyzer",
            shards=4,
            memory="4Gi",
            params={"vad": "ref-silero-vad", "asr": "ref-pocketsphinx",
                    "speaker": "ref-resemblyzer", "prompt_model": "",
                    "max_duration_error": 0.001, "min_rms_dbfs": -60.0,
                    "max_clip_fraction": 0.001, "max_outside_db": -30.0,
                    "max_env_leakage": 0.2, "max_wer": 0.8,
                    "wer_gate": ["transcript", "asr_source"], "asr_all": False,
                    "min_same_similarity": 0.6, "min_identity_shift": 0.0},
        ),
        Stage(
            name="assemble",
            role="core",
            target="madbench_common.stages.assemble:AssembleStage",
            inputs=(*_CLIP_INPUTS, "scene", "component_qc"),
            outputs=("samples",),
            shards=4,
            params={"reuse_cap": 2, "ceiling": 0.99, "aac_coder": "fast", "channels": 1},
        ),
        *_eval_stages(),
    ]


def _eval_stages() -> list[Stage]:
    """Frozen-encoder features (cached by sample sha256), then heads, metrics and reports."""
    return [
        Stage(
            name="features",
            role="encoder",
            target="madbench_common.stages.features:FeatureStage",
            inputs=("assemble",),
            outputs=("features",),
            model="ref-av-stats",
            shards=4,
            memory="4Gi",
            params={"modes": ["A", "AV"], "pairings": ["paired", "shuffled"], "fps": 4.0,
                    "frame_size": 112},
        ),
        Stage(
            name="evaluate",
            role="core",
            target="madbench_common.stages.evaluate:EvaluateStage",
            inputs=("assemble", "features"),
            outputs=("scores",),
            memory="8Gi",
            params={"n_boot": 1000, "logo": True, "c": 1.0},
        ),
    ]
