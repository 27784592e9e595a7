"""Per-model feature stages: empty without a model, exact inputs and scores on every row,
the cache keyed by image and frame parameters, detector scores as binary ScoreRows."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from madbench_common.benchmarks.madbench.eval_models import (
    EVAL_MODELS,
    EvalModel,
    eval_model_stages,
)
from madbench_common.benchmarks.madbench.rows import FeatureRow, ScoreRow
from madbench_common.benchmarks.madbench.stages.features import image_id
from madbench_common.core.manifest import read_manifest_bytes
from madbench_common.core.store import FileStore, RunStore
from madbench_common.models.registry import REGISTRY, ModelSpec, register
from madbench_common.pipeline.graph import Graph, Stage
from madbench_common.pipeline.stage import make_context, merge_stage, run_shard
from tests.benchmarks.madbench.eval.test_feature_stage import _put_samples

_STAGES = "madbench_common.benchmarks.madbench.stages"

_TOY = "tests.benchmarks.madbench.stages.toy_detector"
TOY_SPEC = ModelSpec("test-rms-detector", "detector", f"{_TOY}:RmsDetector", True,
                     "reference-cpu", "test double: logistic of the RMS level")
TEST_SPECS = (TOY_SPEC, *(ModelSpec(slug, "detector", f"{_TOY}:{cls}", True,
                                    "reference-cpu", "test double")
                          for slug, cls in (("test-flaky-detector", "FlakyDetector"),
                                            ("test-unloadable-detector", "UnloadableDetector"),
                                            ("test-moduleless-detector", "ModulelessDetector"))))
TOY = EvalModel("test-rms-detector", "reference-cpu", ("A", "AV"), detector=True,
                frames={"fps": 5.0, "frame_size": 32, "max_frames": 3})


def _graph() -> Graph:
    others = tuple(EvalModel(slug, "reference-cpu", ("A", "AV"), detector=True,
                             frames=TOY.frames) for slug in
                   ("test-flaky-detector", "test-unloadable-detector",
                    "test-moduleless-detector"))
    return Graph([Stage("assemble", "core", "tests.unused:Assemble", outputs=("samples",)),
                  Stage("perturb", "core", f"{_STAGES}.perturb:PerturbStage",
                        inputs=("assemble",), outputs=("perturbed",),
                        params={"conditions": []}),  # no conditions: an empty manifest
                  *eval_model_stages((TOY, *others))])


def _run(run: RunStore, name: str, params: dict, image: str = "reference-cpu") -> list:
    ctx = make_context(run, _graph(), name, params, image, 0)
    run_shard(ctx, 0, 1)
    merge_stage(ctx, 1)
    kind = FeatureRow if name.startswith("features") else ScoreRow
    return read_manifest_bytes(kind, run.get_bytes(f"{name}/manifest.parquet"))


@pytest.fixture(scope="module", autouse=True)
def _toy_registered() -> Iterator[None]:
    """Register the test double for this module only: the process-wide registry is what
    ``tests/test_catalog.py`` checks, so a test slug must not outlive its tests."""
    for spec in TEST_SPECS:
        register(spec)
    yield
    for spec in TEST_SPECS:
        REGISTRY.pop(spec.slug, None)


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
    from madbench_common.models.registry import load_model
    from madbench_common.pipeline.identity import cache_identity

    def identity(image: str) -> str:  # the image with the model's adapter, weights, dtype
        return cache_identity("test-rms-detector", image_id(image), {},
                              load_model("test-rms-detector"))[:16]

    pinned = "ghcr.io/x/y:1@sha256:" + "ab" * 32
    base = {"model": "test-rms-detector"}
    _run(run, "features_test_rms_detector", base, image=pinned)
    _run(run, "features_test_rms_detector", {**base, "fps": 2.0})
    assert isinstance(run.store, FileStore)
    root = run.store.base / "_cache" / "features" / "test-rms-detector-1"
    identities = {p.name for p in root.iterdir()}
    assert identity(pinned) != identity("reference-cpu")
    assert {identity(pinned), identity("reference-cpu")} <= identities
    preps = {p.name for p in (root / identity("reference-cpu")).iterdir()}
    assert len(preps) == 2  # fps 5 and fps 2 are separate cache entries


def test_graph_has_one_feature_stage_per_model_and_full_profile_sets_it() -> None:
    from madbench_common.benchmarks.madbench.graph import build_graph

    graph = build_graph()
    for m in EVAL_MODELS:
        stage = graph[f"features_{m.slug.replace('-', '_')}"]
        assert (stage.model, stage.image, stage.gpu) == ("", "reference-cpu", 0)
        full = stage.in_profile("full")
        assert (full.model, full.image, full.gpu) == (m.slug, m.image, 1)
        assert m.slug in REGISTRY and REGISTRY[m.slug].image == m.image
        assert stage.name in graph["evaluate"].inputs


def test_a_model_exception_on_one_input_rejects_that_row_only(run: RunStore) -> None:
    """A model error on an item quarantines its row with a reason and a message;
    the other inputs of the same samples go on. A CUDA error is a fault, not a data
    reason: the row keeps ``device_error``, and over the stage's rejection budget (here
    every AV row: 52 %) the stage fails with exit 3 naming it."""
    from madbench_common.pipeline.stage import RejectionBudgetExceeded

    with pytest.raises(RejectionBudgetExceeded, match=r"\n  device_error: \d+ \(e\.g\. ") as err:
        _run(run, "features_test_flaky_detector", {"model": "test-flaky-detector"})
    assert err.value.exit_code == 3
    rows = _run(run, "features_test_flaky_detector", {"model": "test-flaky-detector",
                                                      "max_failed_fraction": 1.0})
    bad = [r for r in rows if not r.ok]
    assert bad and all(r.mode == "AV" and r.reason == "device_error" for r in bad)
    assert all(f"{r.sample_id} AV/{r.pairing}: RuntimeError: CUDA error" in r.detail
               for r in bad)
    assert {r.mode for r in rows if r.ok} == {"A"}


@pytest.mark.parametrize(("slug", "words"), [
    ("test-unloadable-detector", "could not be loaded (OSError: /weights/huggingface"),
    ("test-moduleless-detector", "madbench_no_such_module"),
])
def test_a_model_that_cannot_load_fails_the_stage_with_exit_3(run: RunStore, slug: str,
                                                              words: str) -> None:
    from madbench_common.core.errors import EnvironmentMissing

    with pytest.raises(EnvironmentMissing) as err:
        _run(run, f"features_{slug.replace('-', '_')}", {"model": slug})
    assert err.value.exit_code == 3 and words in str(err.value)
    assert not run.exists(f"features_{slug.replace('-', '_')}/_SUCCESS")
