"""Feature and evaluation stages on a synthetic samples manifest in a temporary FileStore run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from media import make_clip

from madbench_common.audio import wav_bytes
from madbench_common.manifest import read_manifest_bytes, write_manifest_bytes
from madbench_common.pipeline.graph import Graph, Stage
from madbench_common.pipeline.stage import make_context, merge_stage, run_shard
from madbench_common.reference.encoders import AVStatsEncoder
from madbench_common.registry import REGISTRY, ModelSpec, register
from madbench_common.rows import FeatureRow, SampleRow, ScoreRow
from madbench_common.store import FileStore, RunStore

if "ref-av-stats" not in REGISTRY:
    register(ModelSpec("ref-av-stats", "encoder",
                       "madbench_common.reference.encoders:AVStatsEncoder", True, "reference-cpu",
                       "log-mel ⊕ frame stats ⊕ A-V correlations"))

SR, N_CLIPS = 16000, 20
SPLITS = ["train"] * 7 + ["val"] + ["test"] * 2


def _graph() -> Graph:
    return Graph([
        Stage("assemble", "core", "tests.unused:Assemble", outputs=("samples",)),
        Stage("features", "encoder", "madbench_common.stages.features:FeatureStage",
              inputs=("assemble",), outputs=("features",), model="ref-av-stats",
              params={"modes": ["A", "AV"], "fps": 10.0}),
        Stage("evaluate", "core", "madbench_common.stages.evaluate:EvaluateStage",
              inputs=("assemble", "features"), outputs=("scores",),
              params={"n_boot": 20, "logo": True}),
    ])


def _audio(clip: int, variant: str) -> np.ndarray:
    rng = np.random.default_rng(clip * 10 + "RSEQ".index(variant))
    t = np.arange(SR) / SR
    x = 0.1 * rng.normal(size=SR) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t))
    if variant in "EQ":
        x += 0.2 * np.sin(2 * np.pi * 4000 * t)  # a "fake environment" that is easy to hear
    return x.astype(np.float32)


def _put_samples(run: RunStore, tmp: Path) -> list[SampleRow]:
    rows = []
    for c in range(N_CLIPS):
        video = make_clip(tmp / f"c{c}.mp4", None, duration=1.0, fps=10, size=(32 + 2 * c, 48))
        vinfo = run.put_file(f"assemble/video/c{c}.mp4", video)
        for v in "RSEQ":
            ainfo = run.put_bytes(f"assemble/audio/c{c}-{v}.wav", wav_bytes(_audio(c, v), SR))
            rows.append(SampleRow(
                sample_id=f"c{c:02d}-{v}-balanced", clip_id=f"c{c:02d}", variant=v,
                speech_fake=v in "SQ", env_fake=v in "EQ",
                scene_consistent=not (v in "EQ" and c % 2), protocol="balanced",
                split=SPLITS[c % 10], speech_generator="tts" if v in "SQ" else "",
                env_generator=f"t2a{c % 2}" if v in "EQ" else "", audio_uri=ainfo.uri,
                audio_sha256=ainfo.sha256, video_uri=vinfo.uri, video_sha256=vinfo.sha256,
                duration=1.0, sample_rate=SR))
    info = run.put_bytes("assemble/manifest.parquet", write_manifest_bytes(SampleRow, rows))
    marker = {"stage": "assemble", "fingerprint": "x", "manifest_sha256": info.sha256}
    run.put_bytes("assemble/_SUCCESS", json.dumps(marker).encode())
    return rows


def _run_stage(run: RunStore, name: str) -> list:
    ctx = make_context(run, _graph(), name, {}, "reference-cpu", 0)
    run_shard(ctx, 0, 1)
    merge_stage(ctx, 1)
    row_type = FeatureRow if name == "features" else ScoreRow
    return read_manifest_bytes(row_type, run.get_bytes(f"{name}/manifest.parquet"))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> FileStore:
    return FileStore(tmp_path_factory.mktemp("store"))


@pytest.fixture(scope="module")
def first_run(store: FileStore, tmp_path_factory: pytest.TempPathFactory) -> RunStore:
    run = RunStore(store, "r1")
    _put_samples(run, tmp_path_factory.mktemp("media"))
    return run


def test_feature_rows_and_shuffled_pairing(first_run: RunStore) -> None:
    rows = _run_stage(first_run, "features")
    assert all(r.ok for r in rows)
    kinds = {(r.mode, r.pairing) for r in rows}
    assert kinds == {("A", "paired"), ("AV", "paired"), ("AV", "shuffled")}
    assert len(rows) == 4 * N_CLIPS * 3
    by = {(r.sample_id, r.mode, r.pairing): r for r in rows}
    paired = by[("c00-R-balanced", "AV", "paired")]
    shuffled = by[("c00-R-balanced", "AV", "shuffled")]
    assert paired.sample_sha256 != shuffled.sample_sha256
    assert len(paired.features) == AVStatsEncoder.dims["AV"] and paired.model_slug == "ref-av-stats"


def test_features_are_cached_across_runs(first_run: RunStore, store: FileStore,
                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    original = AVStatsEncoder.encode

    def counting(self: AVStatsEncoder, **kw: object) -> np.ndarray:
        calls.append(str(kw["mode"]))
        return original(self, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(AVStatsEncoder, "encode", counting)
    second = RunStore(store, "r2")
    for key in ("assemble/manifest.parquet", "assemble/_SUCCESS"):
        second.put_bytes(key, first_run.get_bytes(key))
    rows = _run_stage(second, "features")
    assert calls == [] and len(rows) == 4 * N_CLIPS * 3
    assert store.list("_cache/features/ref-av-stats-1/A")


def test_evaluate_stage_writes_scores_and_report(first_run: RunStore) -> None:
    if not first_run.exists("features/_SUCCESS"):
        _run_stage(first_run, "features")
    scores = _run_stage(first_run, "evaluate")
    tasks = {r.task for r in scores}
    assert {"binary", "fourway", "env", "scene_ds"} <= tasks
    keys = first_run.list("evaluate")
    assert any(k.endswith("report/report.html") for k in keys)
    report = json.loads(first_run.get_bytes(next(k for k in keys if k.endswith("report.json"))))
    env = next(r for r in report["tables"]["tasks"] if r["task"] == "env" and r["mode"] == "A")
    assert env["auc"] > 0.9
