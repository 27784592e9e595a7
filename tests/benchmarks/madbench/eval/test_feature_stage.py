"""Feature and evaluation stages on a synthetic samples manifest in a temporary FileStore run."""

from __future__ import annotations

import json
import zlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from madbench_common.benchmarks.madbench.rows import FeatureRow, SampleRow, ScoreRow
from madbench_common.benchmarks.madbench.stages.features import shuffle_partners, shuffle_rng
from madbench_common.core.manifest import read_manifest_bytes, write_manifest_bytes
from madbench_common.core.store import FileStore, RunStore
from madbench_common.media.audio import wav_bytes
from madbench_common.models.reference.encoders import AVStatsEncoder
from madbench_common.pipeline.graph import Graph, Stage
from madbench_common.pipeline.stage import make_context, merge_stage, run_shard
from tests.media.clips import make_clip

_STAGES = "madbench_common.benchmarks.madbench.stages"

SR, N_CLIPS = 16000, 20
SPLITS = ["train"] * 7 + ["val"] + ["test"] * 2
SC_CONDITIONS = ("D-R", "S-R", "D-S")


def _features(name: str, model: str, modes: list[str]) -> Stage:
    return Stage(name, "encoder", f"{_STAGES}.features:FeatureStage",
                 inputs=("assemble",), outputs=("features",), model=model,
                 params={"modes": modes, "fps": 10.0})


def _graph() -> Graph:
    return Graph([
        Stage("assemble", "core", "tests.unused:Assemble", outputs=("samples",)),
        _features("features", "ref-av-stats", ["A", "AV"]),
        _features("features_logmel", "ref-logmel-stats", ["A"]),
        Stage("omni_x", "omni", "tests.unused:Omni", inputs=("assemble",), outputs=("scores",)),
        Stage("evaluate", "core", f"{_STAGES}.evaluate:EvaluateStage",
              inputs=("assemble", "features", "features_logmel", "omni_x"), outputs=("scores",),
              params={"n_boot": 20, "logo": True}),
    ])


def _audio(clip: int, variant: str, extra: str = "") -> np.ndarray:
    rng = np.random.default_rng(zlib.crc32(f"{clip}/{variant}/{extra}".encode()))
    t = np.arange(SR) / SR
    x = 0.1 * rng.normal(size=SR) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t))
    if variant in "EQ":
        x += 0.2 * np.sin(2 * np.pi * 4000 * t)  # a "fake environment" that is easy to hear
    return x.astype(np.float32)


def _row(run: RunStore, c: int, variant: str, protocol: str, video: object, *, mix: str = "",
         suffix: str = "", **kw: object) -> SampleRow:
    """A sample; ``mix`` names its audio (rows of the same mix share the file)."""
    ainfo = run.put_bytes(f"assemble/audio/c{c}-{variant}{mix}.wav",
                          wav_bytes(_audio(c, variant, mix), SR))
    return SampleRow(
        sample_id=f"c{c:02d}-{variant}-{protocol}{suffix}", clip_id=f"c{c:02d}", variant=variant,
        speech_fake=variant in "SQ", env_fake=variant in "EQ", protocol=protocol,
        split=SPLITS[c % 10], speech_generator="tts" if variant in "SQ" else "",
        env_generator=f"t2a{c % 2}" if variant in "EQ" else "", audio_uri=ainfo.uri,
        audio_sha256=ainfo.sha256, video_uri=video.uri,  # type: ignore[attr-defined]
        video_sha256=video.sha256, duration=1.0, sample_rate=SR, **kw)  # type: ignore[attr-defined, arg-type]


def _put_samples(run: RunStore, tmp: Path) -> list[SampleRow]:
    rows = []
    for c in range(N_CLIPS):
        video = run.put_file(f"assemble/video/c{c}.mp4", make_clip(
            tmp / f"c{c}.mp4", None, duration=1.0, fps=10, size=(32 + 2 * c, 48)))
        rows += [_row(run, c, v, "balanced", video, scene_consistent=not (v in "EQ" and c % 2))
                 for v in "RSEQ"]
        for cond in SC_CONDITIONS if c % 2 == 0 else ():  # per (clip, condition, class)
            variant = "E" if cond == "D-S" else "R"
            for ok in (True, False):
                # consistent D-R / S-R: the clip's own R mix, the same file as its core R
                mix = "" if ok and cond != "D-S" else f"-{cond}-{ok}"
                rows.append(_row(run, c, variant, "scene_consistency", video, mix=mix,
                                 suffix=f"-{cond}-{ok}", sc_condition=cond, scene_consistent=ok))
    info = run.put_bytes("assemble/manifest.parquet", write_manifest_bytes(SampleRow, rows))
    marker = {"stage": "assemble", "fingerprint": "x", "manifest_sha256": info.sha256}
    run.put_bytes("assemble/_SUCCESS", json.dumps(marker).encode())
    return rows


def _put_manifest(run: RunStore, stage: str, row_type: type, rows: list) -> None:
    info = run.put_bytes(f"{stage}/manifest.parquet", write_manifest_bytes(row_type, rows))
    run.put_bytes(f"{stage}/_SUCCESS", json.dumps(
        {"stage": stage, "fingerprint": "x", "manifest_sha256": info.sha256}).encode())


def _put_omni(run: RunStore, rows: list[SampleRow]) -> None:
    """Zero-shot P_bin answers on the test split: fake-environment samples answered 'fake'."""
    out = [ScoreRow(sample_id=s.sample_id, task="binary", mode="AV", model="omni-x",
                    score=0.9 if s.variant in "EQ" else 0.3, parsed="fake" if s.variant in "EQ"
                    else "real") for s in rows if s.split == "test" and s.protocol == "balanced"]
    _put_manifest(run, "omni_x", ScoreRow, out)


def _run_stage(run: RunStore, name: str) -> list:
    ctx = make_context(run, _graph(), name, {}, "reference-cpu", 0)
    run_shard(ctx, 0, 1)
    merge_stage(ctx, 1)
    row_type = ScoreRow if name == "evaluate" else FeatureRow
    return read_manifest_bytes(row_type, run.get_bytes(f"{name}/manifest.parquet"))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> FileStore:
    return FileStore(tmp_path_factory.mktemp("store"))


@pytest.fixture(scope="module")
def first_run(store: FileStore, tmp_path_factory: pytest.TempPathFactory) -> RunStore:
    run = RunStore(store, "r1")
    rows = _put_samples(run, tmp_path_factory.mktemp("media"))
    _put_omni(run, rows)
    return run


def _samples(run: RunStore) -> list[SampleRow]:
    return read_manifest_bytes(SampleRow, run.get_bytes("assemble/manifest.parquet"))


def test_shuffled_video_only_for_scene_test_samples_from_other_test_clips(
        first_run: RunStore) -> None:
    rows = _run_stage(first_run, "features")
    samples = {s.sample_id: s for s in _samples(first_run)}
    assert all(r.ok for r in rows)
    shuffled = [r for r in rows if r.pairing == "shuffled"]
    sc_test = {k for k, s in samples.items()
               if s.protocol == "scene_consistency" and s.split == "test"}
    assert {r.sample_id for r in shuffled} == sc_test and {r.mode for r in shuffled} == {"AV"}
    assert len(rows) == 2 * len(samples) + len(sc_test)  # A and AV paired for every sample
    by = {(r.sample_id, r.mode, r.pairing): r for r in rows}
    sid = sorted(sc_test)[0]
    assert by[(sid, "AV", "paired")].sample_sha256 != by[(sid, "AV", "shuffled")].sample_sha256
    assert len(by[(sid, "AV", "paired")].features) == AVStatsEncoder.dims["AV"]
    partners = shuffle_partners(list(samples.values()), shuffle_rng(0))
    assert set(partners) == sc_test
    for k, p in partners.items():
        assert p.clip_id != samples[k].clip_id and p.split == "test"
    by_clip = {(samples[k].clip_id, p.clip_id) for k, p in partners.items()}
    assert len(by_clip) == len({samples[k].clip_id for k in sc_test})  # one partner per clip
    # seeded by the run seed only: another model's stage gets the same partners
    again = shuffle_partners(list(samples.values()), shuffle_rng(0))
    assert {k: p.clip_id for k, p in again.items()} == {k: p.clip_id for k, p in partners.items()}


def test_features_are_cached_across_runs(first_run: RunStore, store: FileStore,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    if not first_run.exists("features/_SUCCESS"):
        _run_stage(first_run, "features")
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
    assert calls == [] and len(rows) == len(_run_stage(first_run, "features"))
    # <slug>-<version>/<identity: image, adapter code, weights pins, dtype>/<mode>/<sha>.npy
    cached = [k.split("/")[3:] for k in store.list("_cache/features/ref-av-stats-1")]
    assert {len(k[0]) for k in cached} == {16} and len({k[0] for k in cached}) == 1
    assert "A" in {k[1] for k in cached}


def test_evaluate_stage_reports_every_model(first_run: RunStore) -> None:
    rows = _run_stage(first_run, "features")
    # a second model's feature stage (its A features taken from the first, to save time)
    audio = [replace(r, model_slug="ref-logmel-stats") for r in rows if r.mode == "A"]
    _put_manifest(first_run, "features_logmel", FeatureRow, audio)
    scores = _run_stage(first_run, "evaluate")
    assert {r.model for r in scores} == {"ref-av-stats", "ref-logmel-stats"}  # heads only
    assert {r.task for r in scores} == {"binary", "fourway", "speech", "env", "scene"}
    four = next(r for r in scores if r.task == "fourway")
    assert len(four.probs) == 4 and four.score is None
    assert all(0 <= r.score <= 1 for r in scores if r.task != "fourway")
    keys = first_run.list("evaluate")
    report = json.loads(first_run.get_bytes(next(k for k in keys if k.endswith("report.json"))))
    assert [m["slug"] for m in report["models"]] == ["ref-av-stats", "ref-logmel-stats", "omni-x"]
    env = next(r for r in report["models"][0]["tables"]["tasks"]
               if r["task"] == "env" and r["mode"] == "A")
    assert env["auc"] > 0.9
    omni = report["models"][2]["tables"]
    assert {r["task"] for r in omni["tasks"]} == {"binary"} and omni["parse"]
    facts = report["runs"][0]  # the summary's facts of the run that wrote the report
    assert facts["run_id"] == first_run.run_id and facts["pipeline"] == "madbench"
    assert facts["commit"] and facts["images"]["reference-cpu"][-1] == "evaluate"
    md = first_run.get_bytes(next(k for k in keys if k.endswith("report.md"))).decode()
    assert md.split("\n## ")[1].startswith("Summary")
    table2 = md.split("\n## ")[2]
    assert table2.startswith("Table 2") and "| omni-x | A-V | P_bin (zero-shot) |" in table2
    assert "(excl. 0.0%)" not in table2
    # the paper's Table 2 groups (A-V encoders, omni, then a model of no group); the
    # audio-only encoder goes to the same layout beyond the paper
    assert table2.find("Frozen A-V encoders") < table2.find("Other models")
    assert "Frozen audio encoders" not in table2 and "ref-logmel-stats" not in table2
    beyond = md[md.find("## Beyond the paper — Table 2"):]
    assert "**Frozen audio encoders**" in beyond and "ref-logmel-stats" in beyond


def test_the_report_counts_its_writer_under_the_image_it_runs_in(first_run: RunStore) -> None:
    """A marker the evaluate stage left in an earlier run (another image here) must not
    change the facts the next evaluate writes: the writer counts under its own image."""
    from madbench_common.benchmarks.madbench.eval.facts import run_facts

    if not first_run.exists("evaluate/_SUCCESS"):
        test_evaluate_stage_reports_every_model(first_run)
    images = run_facts(first_run, _graph(), image="madbench-next")["images"]
    assert images["madbench-next"] == ["evaluate"]
    assert not any("evaluate" in stages for img, stages in images.items()
                   if img != "madbench-next")


def test_report_render_writes_the_report_again(first_run: RunStore,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """``madbench report --render``: the three files again from report.json, no scoring."""
    from madbench_common.cli import main

    if not first_run.exists("evaluate/_SUCCESS"):
        test_evaluate_stage_reports_every_model(first_run)
    html = next(k for k in first_run.list("evaluate") if k.endswith("report.html"))
    before = json.loads(first_run.get_bytes(html.replace(".html", ".json")))
    first_run.put_bytes(html, b"stale")
    assert main(["report", "--store", first_run.store.root, "--run-id", first_run.run_id,
                 "--render"]) == 0
    assert capsys.readouterr().out.startswith("## Summary")
    page = first_run.get_bytes(html).decode()
    assert page.startswith("<!doctype html>") and "id=summary" in page
    after = json.loads(first_run.get_bytes(html.replace(".html", ".json")))
    assert after["models"] == before["models"]  # every record kept as it was
