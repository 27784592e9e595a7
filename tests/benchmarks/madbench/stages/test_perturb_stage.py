"""The perturb stage on a synthetic run: every test sample per condition, video untouched,
parameters on the row, deterministic; features and evaluation score every condition."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from madbench_common.benchmarks.madbench.robustness.conditions import builtin_conditions
from madbench_common.benchmarks.madbench.rows import FeatureRow, PerturbedRow, SampleRow, ScoreRow
from madbench_common.core.manifest import read_manifest_bytes
from madbench_common.core.store import FileStore, RunStore
from madbench_common.media.audio import read_wav_bytes, wav_bytes
from madbench_common.media.mux import video_packets
from madbench_common.pipeline.graph import Graph, Stage
from madbench_common.pipeline.stage import make_context, merge_stage, run_shard
from tests.benchmarks.madbench.eval.test_feature_stage import _put_manifest, _put_samples

_STAGES = "madbench_common.benchmarks.madbench.stages"

PICK = ("mp3_24k", "telephone_g711", "noise_5db")
CONDITIONS = [c for c in builtin_conditions() if c["name"] in PICK]


def _graph() -> Graph:
    return Graph([
        Stage("assemble", "core", "tests.unused:Assemble", outputs=("samples",)),
        Stage("perturb", "core", f"{_STAGES}.perturb:PerturbStage",
              inputs=("assemble",), outputs=("perturbed",),
              params={"conditions": CONDITIONS, "noise": "builtin", "splits": ["test"]}),
        Stage("features", "encoder", f"{_STAGES}.features:FeatureStage",
              inputs=("assemble", "perturb"), outputs=("features",), model="ref-logmel-stats",
              params={"modes": ["A"]}),
        Stage("evaluate", "core", f"{_STAGES}.evaluate:EvaluateStage",
              inputs=("assemble", "perturb", "features"), outputs=("scores",),
              params={"n_boot": 20, "logo": False}),
    ])


def _run(run: RunStore, name: str, shards: int = 1, params: dict | None = None) -> list:
    ctx = make_context(run, _graph(), name, params or {}, "reference-cpu", 0)
    for shard in range(shards):
        run_shard(ctx, shard, shards)
    merge_stage(ctx, shards)
    kind = {"perturb": PerturbedRow, "features": FeatureRow, "evaluate": ScoreRow}[name]
    return read_manifest_bytes(kind, run.get_bytes(f"{name}/manifest.parquet"))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> RunStore:
    r = RunStore(FileStore(tmp_path_factory.mktemp("store")), "r1")
    _put_samples(r, tmp_path_factory.mktemp("media"))
    return r


@pytest.fixture(scope="module")
def perturbed(run: RunStore) -> list[PerturbedRow]:
    return _run(run, "perturb", shards=2)


def _clean(run: RunStore) -> dict[str, SampleRow]:
    rows = read_manifest_bytes(SampleRow, run.get_bytes("assemble/manifest.parquet"))
    return {s.sample_id: s for s in rows}


def test_every_test_sample_of_every_protocol_under_every_condition(
        run: RunStore, perturbed: list[PerturbedRow]) -> None:
    clean = _clean(run)
    test = {k for k, s in clean.items() if s.split == "test"}
    assert {s.protocol for k, s in clean.items() if k in test} == {"balanced",
                                                                    "scene_consistency"}
    assert all(r.ok for r in perturbed)
    assert {r.sample_id for r in perturbed} == {f"{k}@{c}" for k in test for c in PICK}
    for r in perturbed:
        c = clean[r.clean_sample_id]
        assert (r.clip_id, r.variant, r.protocol, r.split, r.scene_consistent, r.sc_condition) \
            == (c.clip_id, c.variant, c.protocol, c.split, c.scene_consistent, c.sc_condition)
        assert r.clean_audio_sha256 == c.audio_sha256 != r.audio_sha256
        assert r.condition_index == PICK.index(r.condition) and r.stage == "perturb"


def test_parameters_on_every_row(perturbed: list[PerturbedRow]) -> None:
    for r in perturbed:
        params = json.loads(r.condition_params)
        assert params["condition"] == r.condition and params["sample_rate"] == 16000
        if r.condition == "mp3_24k":
            (step,) = params["steps"]
            assert (step["codec"], step["bitrate"], step["measured_bitrate"],
                    step["measured_sample_rate"]) == ("mp3", 24000, 24000.0, 16000)
        if r.condition == "noise_5db":
            (step,) = params["steps"]
            assert step["measured_snr_db"] == pytest.approx(5.0, abs=1e-3)
            assert len(step["noise_sha256"]) == 64 and step["noise_file"].endswith(".flac")
    by_clip = {}
    for r in (r for r in perturbed if r.condition == "noise_5db"):
        noise = json.loads(r.condition_params)["steps"][0]
        by_clip.setdefault(r.clip_id, set()).add((noise["noise_file"], noise["noise_offset_s"]))
    assert all(len(v) == 1 for v in by_clip.values())  # one excerpt per clip


def test_video_untouched_audio_perturbed(run: RunStore, perturbed: list[PerturbedRow],
                                         tmp_path: Path) -> None:
    clean = _clean(run)
    for r in [r for r in perturbed if r.variant == "E"][:3]:
        c = clean[r.clean_sample_id]
        paths = []
        for name, row in (("p.mp4", r), ("c.mp4", c)):
            path = tmp_path / f"{r.condition}-{name}"
            path.write_bytes(run.get_bytes(run.key_of(row.video_uri), row.video_sha256))
            paths.append(path)
        assert video_packets(paths[0]) == video_packets(paths[1])
        a, rate = read_wav_bytes(run.get_bytes(run.key_of(r.audio_uri), r.audio_sha256))
        b, _ = read_wav_bytes(run.get_bytes(run.key_of(c.audio_uri), c.audio_sha256))
        assert rate == 16000 and a.shape == b.shape and not np.allclose(a, b, atol=1e-4)


def test_rerun_is_byte_identical(run: RunStore, perturbed: list[PerturbedRow],
                                 tmp_path: Path) -> None:
    other = RunStore(FileStore(tmp_path), "r2")
    for key in ("assemble/manifest.parquet", "assemble/_SUCCESS"):
        other.put_bytes(key, run.get_bytes(key))
    for key in run.list("assemble"):
        if not key.endswith(("manifest.parquet", "_SUCCESS")):
            other.put_bytes(key, run.get_bytes(key))
    _run(other, "perturb", shards=3)
    assert other.get_bytes("perturb/manifest.parquet") == run.get_bytes("perturb/manifest.parquet")


def test_a_silent_track_is_quarantined_and_the_run_goes_on(tmp_path: Path) -> None:
    run = RunStore(FileStore(tmp_path / "s"), "r")
    (tmp_path / "m").mkdir()
    rows = _put_samples(run, tmp_path / "m")
    victim = next(s for s in rows if s.split == "test" and s.protocol == "balanced")
    info = run.put_bytes("assemble/audio/silent.wav", wav_bytes(np.zeros(16000, np.float32),
                                                                16000))
    rows = [s if s.sample_id != victim.sample_id else
            replace(s, audio_uri=info.uri, audio_sha256=info.sha256) for s in rows]
    _put_manifest(run, "assemble", SampleRow, rows)
    noisy = [c for c in CONDITIONS if c["name"] == "noise_5db"]
    out = _run(run, "perturb", params={"conditions": noisy, "splits": ["test"]})
    bad = [r for r in out if not r.ok]
    assert {(r.clean_sample_id, r.condition, r.reason) for r in bad} == {
        (victim.sample_id, "noise_5db", "perturb_failed")}
    assert "silent" in bad[0].detail
    assert sum(r.ok for r in out) == len(out) - 1


def test_features_and_evaluation_score_every_condition(run: RunStore,
                                                       perturbed: list[PerturbedRow]) -> None:
    feats = _run(run, "features")
    ids = {r.sample_id for r in feats}
    assert {r.sample_id for r in perturbed} <= ids
    assert not [r for r in feats if "@" in r.sample_id and r.pairing != "paired"]
    _run(run, "evaluate")
    key = next(k for k in run.list("evaluate") if k.endswith("report.json"))
    report = json.loads(run.get_bytes(key))
    robust = report["models"][0]["tables"]["robustness"]
    assert {r["condition"] for r in robust} == {"clean", *PICK}
    html = run.get_bytes(key.replace("report.json", "report.html")).decode()
    assert "Robustness: AUC per condition" in html or "Robustness</b>" in html
    md = run.get_bytes(key.replace("report.json", "report.md")).decode()
    assert "## Robustness: binary AUC by condition" in md
