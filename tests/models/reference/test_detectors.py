"""Reference detector stand-ins: documented features, native scores from fixed rules, and the
reference stages that evaluate every CPU reference."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from madbench_common.benchmarks.madbench.eval_models import reference_models, reference_stages
from madbench_common.benchmarks.madbench.rows import FeatureRow, ScoreRow
from madbench_common.core.manifest import read_manifest_bytes
from madbench_common.core.store import FileStore, RunStore
from madbench_common.models.reference.detectors import (
    AVSyncDetector,
    HFArtifactDetector,
    ModulationDetector,
)
from madbench_common.models.registry import REGISTRY
from madbench_common.pipeline.graph import Graph, Stage
from madbench_common.pipeline.stage import make_context, merge_stage, run_shard
from tests.benchmarks.madbench.eval.test_feature_stage import _put_samples

_STAGES = "madbench_common.benchmarks.madbench.stages"

SR = 16000


def test_every_group_has_reference_rows() -> None:
    groups: dict[str, list[str]] = {}
    for slug in (*reference_models(), "ref-av-stats"):
        spec = REGISTRY[slug]
        assert spec.reference and spec.paper_model
        groups.setdefault(spec.group, []).append(slug)
    assert {g: len(v) >= 1 for g, v in groups.items()} == {
        "av_detector": True, "av_encoder": True, "audio_encoder": True, "audio_detector": True}
    assert len(groups["av_encoder"]) >= 2 and len(groups["audio_encoder"]) >= 2
    assert len(groups["audio_detector"]) >= 2


def test_hf_artifact_rule_on_hand_made_signals() -> None:
    rng = np.random.default_rng(0)
    noise = (0.1 * rng.normal(size=SR)).astype(np.float32)  # flat high band → "fake"
    t = np.arange(SR) / SR
    harmonic = (0.1 * sum(np.sin(2 * np.pi * 200 * k * t) / k for k in range(1, 8))
                ).astype(np.float32)  # nothing above 1.4 kHz: a peaky, empty high band
    det = HFArtifactDetector()
    a, b = (det.embed(mode="A", audio=x, sample_rate=SR) for x in (noise, harmonic))
    assert a.vector.shape == (20,) and a.score_kind == "sigmoid(raw)"
    flat_hf, share_hf = float(a.vector[3]), float(a.vector[7])  # 4–8 kHz flatness, share
    assert share_hf > 0.05  # white noise: the weight saturates, h = the flatness
    assert a.score == pytest.approx(float(expit(10 * (flat_hf - 0.2))), rel=1e-3)
    assert a.score > 0.5 > b.score
    assert a.spec.audio_rate == SR and a.spec.audio_seconds == 1.0


def test_modulation_rule_prefers_syllable_rate_envelopes() -> None:
    t = np.arange(3 * SR) / SR
    carrier = np.random.default_rng(1).normal(size=t.size)
    syllabic = (0.1 * carrier * (1 + np.sin(2 * np.pi * 4 * t))).astype(np.float32)
    steady = (0.1 * carrier).astype(np.float32)
    det = ModulationDetector()
    s, f = (det.embed(mode="A", audio=x, sample_rate=SR) for x in (syllabic, steady))
    assert s.vector.shape == (48,) and s.score < f.score


def test_av_sync_rule_scores_audio_that_follows_the_picture_as_real() -> None:
    fps, n = 10.0, 40
    rng = np.random.default_rng(2)
    brightness = (np.sin(np.arange(n) / 2.0) > 0).astype(float)  # flashes: motion on edges
    frames = np.repeat(np.repeat(brightness[:, None, None, None] * 200 + 20, 16, 1), 16, 2)
    frames = np.repeat(frames, 3, axis=3).astype(np.uint8)
    motion = np.r_[0, np.abs(np.diff(brightness))]
    env = np.repeat(motion, int(SR / fps))
    follows = (0.2 * env * rng.normal(size=env.size) + 0.001 * rng.normal(size=env.size))
    ignores = 0.1 * rng.normal(size=env.size)
    det = AVSyncDetector()
    a, b = (det.embed(mode="AV", audio=x.astype(np.float32), sample_rate=SR, frames=frames,
                      fps=fps) for x in (follows, ignores))
    assert a.vector.shape == (44,) and a.spec.video_frames == n
    assert a.score < 0.01  # z far above 3: the audio follows the picture
    assert b.score > 0.2  # unrelated tracks stay near the rule's chance level (z ≈ 3)
    with pytest.raises(ValueError, match="modes"):
        det.embed(mode="A", audio=ignores.astype(np.float32), sample_rate=SR)


def _graph(models: tuple[str, ...]) -> Graph:
    return Graph([Stage("assemble", "core", "tests.unused:Assemble", outputs=("samples",)),
                  Stage("perturb", "core", f"{_STAGES}.perturb:PerturbStage",
                        inputs=("assemble",), outputs=("perturbed",),
                        params={"conditions": []}),
                  *reference_stages(models)])


def test_reference_stages_run_every_model_and_score_only_detectors(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    run = RunStore(FileStore(tmp_path_factory.mktemp("store")), "r")
    _put_samples(run, tmp_path_factory.mktemp("media"))
    graph = _graph(("ref-lfcc-stats", "ref-hf-artifact-det", "ref-av-sync-det"))
    for name in ("perturb", "features_references", "scores_references"):
        ctx = make_context(run, graph, name, {}, "reference-cpu", 0)
        run_shard(ctx, 0, 1)
        merge_stage(ctx, 1)
    feats = read_manifest_bytes(FeatureRow, run.get_bytes("features_references/manifest.parquet"))
    by_model: dict[str, set[tuple[str, str]]] = {}
    for f in feats:
        assert f.ok
        by_model.setdefault(f.model_slug, set()).add((f.mode, f.pairing))
    assert by_model == {"ref-lfcc-stats": {("A", "paired")},
                        "ref-hf-artifact-det": {("A", "paired")},
                        "ref-av-sync-det": {("AV", "paired"), ("AV", "shuffled")}}
    assert all(f.score is not None for f in feats if f.model_slug.endswith("-det"))
    scores = read_manifest_bytes(ScoreRow, run.get_bytes("scores_references/manifest.parquet"))
    assert {s.model for s in scores} == {"ref-hf-artifact-det", "ref-av-sync-det"}
    assert all(s.ok and s.task == "binary" for s in scores)
    full = graph.profiled("full").stages["features_references"]
    assert full.params["models"] == []  # the full profile runs the paper's models instead
