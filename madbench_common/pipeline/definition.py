"""The MADBench pipeline, declared once: both the local runner and Argo read this graph."""

from __future__ import annotations

from madbench_common.pipeline.graph import Graph, Stage

__all__ = ["build_graph"]


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
                params={"ratios": [0.7, 0.1, 0.2], "cluster_threshold": 0.25},
            ),
        ]
    )
