"""The omni stage on a synthetic samples manifest: rows per task × mode, cache, evaluate."""

from __future__ import annotations

import json
import zlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from madbench_common.benchmarks.madbench.omni_models import omni_model_stages
from madbench_common.benchmarks.madbench.prompts import MADBENCH_PROMPTS, PROMPT_DIR, load_prompt
from madbench_common.benchmarks.madbench.rows import SampleRow, ScoreRow
from madbench_common.benchmarks.madbench.stages import omni as omni_stage
from madbench_common.core.manifest import read_manifest_bytes, write_manifest_bytes
from madbench_common.core.store import FileStore, RunStore
from madbench_common.media.audio import wav_bytes
from madbench_common.models.registry import REGISTRY, ModelSpec
from madbench_common.pipeline.graph import Graph, Stage
from madbench_common.pipeline.stage import make_context, merge_stage, run_shard
from tests.media.clips import silent_clip_bytes

from .toy import BatchedToyOmni, ToyOmni

_STAGES = "madbench_common.benchmarks.madbench.stages"

SR = 16000
SPLITS = ("train", "val", "test", "test", "test")


def _graph(params: dict) -> Graph:
    return Graph([
        Stage("assemble", "core", "tests.unused:Assemble", outputs=("samples",)),
        Stage("omni_toy", "omni", f"{_STAGES}.omni:OmniStage",
              inputs=("assemble",), outputs=("scores",),
              params={"modes": ["A", "AV"], "scene_modes": ["AV"], "splits": ["val", "test"],
                      "fps": 5.0, "frame_size": 32, "max_frames": 8, **params}),
        Stage("evaluate", "core", f"{_STAGES}.evaluate:EvaluateStage",
              inputs=("assemble", "omni_toy"), outputs=("scores",),
              params={"n_boot": 10, "logo": False}),
    ])


def _audio(clip: int, variant: str, extra: str = "") -> np.ndarray:
    rng = np.random.default_rng(zlib.crc32(f"{clip}/{variant}/{extra}".encode()))
    x = 0.1 * rng.normal(size=SR)
    if variant in "EQ":
        x += 0.2 * np.sin(2 * np.pi * 3000 * np.arange(SR) / SR)
    return x.astype(np.float32)


def _sample(run: RunStore, c: int, variant: str, protocol: str, video: object,
            **kw: object) -> SampleRow:
    extra = str(kw.get("sc_condition", "")) + str(kw.get("scene_consistent", ""))
    a = run.put_bytes(f"assemble/c{c}-{variant}-{protocol}{extra}.wav",
                      wav_bytes(_audio(c, variant, extra), SR))
    return SampleRow(sample_id=f"c{c}-{variant}-{protocol}{extra}", clip_id=f"c{c}",
                     variant=variant, speech_fake=variant in "SQ", env_fake=variant in "EQ",
                     protocol=protocol, split=SPLITS[c], audio_uri=a.uri, audio_sha256=a.sha256,
                     video_uri=video.uri, video_sha256=video.sha256,  # type: ignore[attr-defined]
                     duration=1.0, sample_rate=SR, **kw)  # type: ignore[arg-type]


def _put(run: RunStore, stage: str, rows: list) -> None:
    info = run.put_bytes(f"{stage}/manifest.parquet", write_manifest_bytes(SampleRow, rows))
    run.put_bytes(f"{stage}/_SUCCESS", json.dumps(
        {"stage": stage, "fingerprint": "x", "manifest_sha256": info.sha256}).encode())


def _samples(run: RunStore) -> list[SampleRow]:
    """The clips' samples; the videos are the same bytes in every store of the process
    (:func:`silent_clip_bytes`), so two runs compared differ only in what the stage did."""
    rows = []
    for c in range(len(SPLITS)):
        video = run.put_bytes(f"assemble/c{c}.mp4", silent_clip_bytes(
            duration=1.0, fps=10, size=(32 + 8 * c, 48)))
        rows += [_sample(run, c, v, "balanced", video) for v in "RSEQ"]
        rows += [_sample(run, c, "R", "scene_consistency", video, sc_condition="D-R",
                         scene_consistent=ok) for ok in (True, False)]
    _put(run, "assemble", rows)
    return rows


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> ToyOmni:
    model = ToyOmni()
    monkeypatch.setattr(omni_stage, "load_model", lambda slug: model)
    monkeypatch.setitem(REGISTRY, "toy-omni", ModelSpec(
        "toy-omni", "omni", "omni.toy:ToyOmni", True, "reference-cpu",
        "tiny random linear test model", "Qwen2.5-Omni-7B", "omni"))
    return model


def _run(run: RunStore, name: str, params: dict, shards: int = 2) -> list[ScoreRow]:
    ctx = make_context(run, _graph(params), name, {}, "embedded", 0)
    for shard in range(shards):
        run_shard(ctx, shard, shards)
    merge_stage(ctx, shards)
    return read_manifest_bytes(ScoreRow, run.get_bytes(f"{name}/manifest.parquet"))


def test_rows_for_every_task_mode_and_the_scene_shuffle(toy: ToyOmni, tmp_path: Path) -> None:
    run = RunStore(FileStore(str(tmp_path / "store")), "r1")
    samples = {s.sample_id: s for s in _samples(run)}
    rows = _run(run, "omni_toy", {"model": "toy-omni"})
    asked = {r.sample_id for r in rows}
    assert asked == {k for k, s in samples.items() if s.split in ("val", "test")}
    core = [r for r in rows if samples[r.sample_id].protocol == "balanced"]
    assert {(r.task, r.mode, r.pairing) for r in core} == {
        (t, m, "paired") for t in ("binary", "fourway", "speech", "env") for m in ("A", "AV")}
    scene = [r for r in rows if r.task == "scene"]
    sc_test = [k for k, s in samples.items() if s.protocol == "scene_consistency"
               and s.split == "test"]
    assert {(r.mode, r.pairing) for r in scene} == {("AV", "paired"), ("AV", "shuffled")}
    assert len([r for r in scene if r.pairing == "shuffled"]) == len(sc_test)
    for r in rows:
        s = samples[r.sample_id]
        q = load_prompt(MADBENCH_PROMPTS[r.task]).question(r.task)
        assert r.ok and r.model == "toy-omni" and r.prompt_hash == q.hash and not r.excluded
        assert r.parsed in (*q.labels, "refusal", "unparsed") and r.answer
        if r.task == "fourway":
            assert r.score is None and len(r.probs) == 4 and sum(r.probs) == pytest.approx(1)
        else:
            assert r.score is not None and 0 < r.score < 1 and r.probs == ()
        if r.mode == "A":
            assert r.sample_sha256 == s.audio_sha256
    assert toy.calls == len(rows)


def test_rerun_and_a_new_prompt_version_ask_only_what_changed(toy: ToyOmni,
                                                              tmp_path: Path) -> None:
    store = FileStore(str(tmp_path / "store"))
    run = RunStore(store, "r1")
    _samples(run)
    first = _run(run, "omni_toy", {"model": "toy-omni"})
    calls = toy.calls
    # a new fingerprint (one more parameter, the same samples): the cache answers
    again = _run(RunStore(store, "r1"), "omni_toy",
                 {"model": "toy-omni", "samples_stage": "assemble"})
    assert toy.calls == calls
    assert [(r.sample_id, r.task, r.mode, r.pairing, r.score, r.probs, r.answer) for r in again] \
        == [(r.sample_id, r.task, r.mode, r.pairing, r.score, r.probs, r.answer) for r in first]
    bumped = tmp_path / "p_4way_v2.yaml"
    bumped.write_text((PROMPT_DIR / "p_4way.yaml").read_text().replace("version: 1",
                                                                       "version: 2"))
    third = _run(RunStore(store, "r1"), "omni_toy", {"model": "toy-omni",
                                                     "prompts": {"fourway": str(bumped)}})
    fourway = [r for r in third if r.task == "fourway"]
    assert toy.calls == calls + len(fourway)
    assert {r.prompt_hash for r in fourway} == {load_prompt(bumped).question("fourway").hash}


def test_no_model_plans_nothing(tmp_path: Path) -> None:
    run = RunStore(FileStore(str(tmp_path / "store")), "r1")
    _samples(run)
    assert _run(run, "omni_toy", {}) == []


def test_evaluate_reports_the_omni_group_with_parse_rates(toy: ToyOmni, tmp_path: Path) -> None:
    run = RunStore(FileStore(str(tmp_path / "store")), "r1")
    _samples(run)
    _run(run, "omni_toy", {"model": "toy-omni"})
    _run(run, "evaluate", {}, shards=1)
    marker = json.loads(run.get_bytes("evaluate/_SUCCESS"))
    report = run.get_bytes(f"{marker['prefix']}/report/report.md").decode()
    assert "Omni models (zero-shot)" in report
    assert "parse rates" in report
    assert load_prompt("P_bin").question("binary").hash[:12] in report
    assert "Is the audio of this clip an authentic recording" in report


def test_full_profile_puts_each_omni_model_on_its_own_image() -> None:
    stages = {s.name: s.in_profile("full") for s in omni_model_stages()}
    assert set(stages) == {"omni_minicpmo45", "omni_qwen25omni", "omni_gemma4",
                           "omni_baichuan15"}
    for s in stages.values():
        assert s.image == ("omni-qwen25omni" if s.model == "omni-gemma4" else s.model)
        assert s.image.startswith("omni-") and s.gpu == 1
        assert REGISTRY[s.model].group == "omni" and REGISTRY[s.model].image == s.image
        assert s.outputs == ("scores",)


def _batched_run(tmp: Path, monkeypatch: pytest.MonkeyPatch, batch: int,
                 ) -> tuple[list[ScoreRow], BatchedToyOmni]:
    """A fresh store (the response cache lives at its root) whose sample ``SILENT`` has
    silent audio; the stage at ``batch`` questions per call."""
    model = BatchedToyOmni()
    monkeypatch.setattr(omni_stage, "load_model", lambda slug: model)
    monkeypatch.setitem(REGISTRY, "toy-omni", ModelSpec(
        "toy-omni", "omni", "omni.toy:BatchedToyOmni", True, "reference-cpu", "test double"))
    run = RunStore(FileStore(str(tmp / "store")), "r1")
    rows = _samples(run)
    quiet = run.put_bytes("assemble/silent.wav", wav_bytes(np.zeros(SR, np.float32), SR))
    _put(run, "assemble", [replace(r, audio_uri=quiet.uri, audio_sha256=quiet.sha256)
                           if r.sample_id == SILENT else r for r in rows])
    params = {"model": "toy-omni", "batch": batch, "max_failed_fraction": 0.5}
    return _run(run, "omni_toy", params, shards=1), model


SILENT = "c2-S-balanced"


def test_batch_four_gives_the_rows_of_batch_one(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    one, model1 = _batched_run(tmp_path / "b1", monkeypatch, 1)
    four, model4 = _batched_run(tmp_path / "b4", monkeypatch, 4)
    assert model1.batches == [] and 4 in model4.batches  # batch 1 never calls answer_batch
    assert four == one  # the same rows, in the same order, the same values
    bad = [r for r in four if not r.ok]
    # the silent sample's questions are rejected alone, with batch 1's reason; the other
    # questions of their batches were asked again one by one and succeeded
    assert {r.sample_id for r in bad} == {SILENT} and len(bad) == 8
    assert {r.reason for r in bad} == {"item_failed"}
    assert all("silent input" in r.detail for r in bad)
    assert model4.calls == len(four) - len(bad)  # every other question answered once
