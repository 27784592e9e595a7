"""Per-model feature stages: empty without a model, exact inputs and scores on every row,
the cache keyed by image and frame parameters, detector scores as binary ScoreRows."""

from __future__ import annotations

import pytest
from eval.test_feature_stage import _put_samples

from madbench_common.manifest import read_manifest_bytes
from madbench_common.pipeline.eval_models import EVAL_MODELS, EvalModel, eval_model_stages
from madbench_common.pipeline.graph import Graph, Stage
from madbench_common.pipeline.stage import make_context, merge_stage, run_shard
from madbench_common.registry import REGISTRY, ModelSpec, register
from madbench_common.rows import FeatureRow, ScoreRow
from madbench_common.stages.model_features import image_id
from madbench_common.store import FileStore, RunStore

if "test-rms-detector" not in REGISTRY:
    register(ModelSpec("test-rms-detector", "detector", "stages.toy_detector:RmsDetector", True,
                       "reference-cpu", "test double: logistic of the RMS level"))
TOY = EvalModel("test-rms-detector", "reference-cpu", ("A", "AV"), detector=True,
                frames={"fps": 5.0, "frame_size": 32, "max_frames": 3})


def _graph() -> Graph:
    return Graph([Stage("assemble", "core", "tests.unused:Assemble", outputs=("samples",)),
                  Stage("perturb", "core", "madbench_common.stages.perturb:PerturbStage",
                        inputs=("assemble",), outputs=("perturbed",),
                        params={"conditions": []}),  # no conditions: an empty manifest
                  *eval_model_stages((TOY,))])


def _run(run: RunStore, name: str, params: dict, image: str = "reference-cpu") -> list:
    ctx = make_context(run, _graph(), name, params, image, 0)
    run_shard(ctx, 0, 1)
    merge_stage(ctx, 1)
    kind = FeatureRow if name.startswith("features") else ScoreRow
    return read_manifest_bytes(kind, run.get_bytes(f"{name}/manifest.parquet"))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> RunStore:
    r = RunStore(FileStore(tmp_path_factory.mktemp("store")), "r1")
    _put_samples(r, tmp_path_factory.mktemp("media"))
    ctx = make_context(r, _graph(), "perturb", {}, "reference-cpu", 0)
    run_shard(ctx, 0, 1)
    merge_stage(ctx, 1)
    return r


def test_without_a_model_the_stage_writes_nothing(run: RunStore) -> None:
    assert _run(run, "features_test_rms_detector", {}) == []


def test_rows_carry_the_input_and_the_native_score(run: RunStore) -> None:
    rows = _run(run, "features_test_rms_detector", {"model": "test-rms-detector"})
    ok = [r for r in rows if r.ok]
    assert {(r.mode, r.pairing) for r in ok} == {("A", "paired"), ("AV", "paired"),
                                                 ("AV", "shuffled")}
    a = next(r for r in ok if r.mode == "A")
    assert (a.audio_rate, a.audio_seconds, a.video_frames, a.pooling) == (16000, 1.0, 0,
                                                                         "whole clip")
    av = next(r for r in ok if r.mode == "AV")
    assert av.video_frames == 3 and av.video_fps == pytest.approx(5.0)
    assert a.score_kind == "prob" and 0 < a.score < 1
    assert a.model_slug == "test-rms-detector" and len(a.features) == 3
    scores = _run(run, "scores_test_rms_detector", {})
    assert len(scores) == len(rows)
    by = {(s.sample_id, s.mode, s.pairing): s for s in scores}
    for r in ok:
        s = by[(r.sample_id, r.mode, r.pairing)]
        assert (s.task, s.model, s.score) == ("binary", "test-rms-detector", r.score)


def test_cache_is_keyed_by_image_and_frame_parameters(run: RunStore) -> None:
    base = {"model": "test-rms-detector"}
    _run(run, "features_test_rms_detector", base, image="ghcr.io/x/y:1@sha256:" + "ab" * 32)
    _run(run, "features_test_rms_detector", {**base, "fps": 2.0})
    assert isinstance(run.store, FileStore)
    root = run.store.base / "_cache" / "features" / "test-rms-detector-1"
    images = {p.name for p in root.iterdir()}
    assert {"abababababababab", image_id("reference-cpu")} <= images
    preps = {p.name for p in (root / image_id("reference-cpu")).iterdir()}
    assert len(preps) == 2  # fps 5 and fps 2 are separate cache entries


def test_graph_has_one_feature_stage_per_model_and_full_profile_sets_it() -> None:
    from madbench_common.pipeline.definition import build_graph

    graph = build_graph()
    for m in EVAL_MODELS:
        stage = graph[f"features_{m.slug.replace('-', '_')}"]
        assert (stage.model, stage.image, stage.gpu) == ("", "reference-cpu", 0)
        full = stage.in_profile("full")
        assert (full.model, full.image, full.gpu) == (m.slug, m.image, 1)
        assert m.slug in REGISTRY and REGISTRY[m.slug].image == m.image
        assert stage.name in graph["evaluate"].inputs
