"""Feature stages at batch 1 and batch 4: the same rows in the same order, a bad input
rejected alone with its reason while the rest of its batch succeeds, the batch size from
the card (``gpu.batch``) or the ``batch`` parameter, and never in the fingerprint."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from madbench_common.benchmarks.madbench.rows import FeatureRow, SampleRow
from madbench_common.core.errors import ConfigError, MadbenchError
from madbench_common.core.manifest import read_manifest_bytes
from madbench_common.core.store import FileStore, RunStore
from madbench_common.media.audio import wav_bytes
from madbench_common.models.catalog import cards, gpu_batch, load_card
from madbench_common.models.registry import REGISTRY, ModelSpec, register
from madbench_common.pipeline.graph import Graph, Stage
from madbench_common.pipeline.stage import make_context, merge_stage, run_shard
from tests.benchmarks.madbench.eval.test_feature_stage import SR, _audio, _put_manifest, _row
from tests.benchmarks.madbench.stages.toy_detector import BatchedRmsDetector
from tests.media.clips import silent_clip_bytes

_STAGES = "madbench_common.benchmarks.madbench.stages"
BATCHED = ModelSpec("test-batched-detector", "detector",
                    "tests.benchmarks.madbench.stages.toy_detector:BatchedRmsDetector", True,
                    "reference-cpu", "test double: batches, silent audio is bad input")
SILENT = "c02-S-balanced"
FRAMES = {"fps": 5.0, "frame_size": 32, "max_frames": 3}


def _graph() -> Graph:
    return Graph([
        Stage("assemble", "core", "tests.unused:Assemble", outputs=("samples",)),
        Stage("features", "encoder", f"{_STAGES}.features:FeatureStage", inputs=("assemble",),
              outputs=("features",), model="ref-av-stats",
              params={"modes": ["A", "AV"], "fps": 5.0}),
        Stage("features_batched", "encoder", f"{_STAGES}.model_features:ModelFeatureStage",
              inputs=("assemble",), outputs=("features",), model=BATCHED.slug,
              params={"modes": ["A", "AV"], **FRAMES}),
    ])


@pytest.fixture(scope="module", autouse=True)
def _registered() -> Iterator[None]:
    """The test double, for this module only (``tests/test_catalog.py`` checks the registry)."""
    register(BATCHED)
    yield
    REGISTRY.pop(BATCHED.slug, None)


def _samples(run: RunStore) -> None:
    """Six clips of R/S/E/Q samples, two lengths of audio; clips 3-5 also scene-consistency
    test samples (shuffled A-V inputs); the audio of ``SILENT`` is silence. The videos are
    the same bytes in every store of the process (:func:`silent_clip_bytes`), so two runs
    compared differ only in what the stage did."""
    rows = []
    for c in range(6):
        video = run.put_bytes(f"assemble/video/c{c}.mp4", silent_clip_bytes(
            duration=1.0, fps=10, size=(32 + 2 * c, 48)))
        for v in "RSEQ":
            row = _row(run, c, v, "balanced", video)
            if c % 2:  # mixed lengths: 0.75 s here, 1 s elsewhere
                short = run.put_bytes(f"assemble/audio/c{c}-{v}-short.wav",
                                      wav_bytes(_audio(c, v)[: 3 * SR // 4], SR))
                row = replace(row, audio_uri=short.uri, audio_sha256=short.sha256)
            if row.sample_id == SILENT:
                quiet = run.put_bytes("assemble/audio/silent.wav",
                                      wav_bytes(np.zeros(SR, np.float32), SR))
                row = replace(row, audio_uri=quiet.uri, audio_sha256=quiet.sha256)
            rows.append(row)
            if c >= 3 and v == "R":
                rows.append(replace(_row(run, c, "R", "scene_consistency", video,
                                         suffix="-sc"), split="test"))
    _put_manifest(run, "assemble", SampleRow, rows)


def _run(tmp: Path, name: str, params: dict) -> tuple[list[FeatureRow], bytes]:
    """A fresh store (the feature cache lives at its root), the stage run on one shard."""
    run = RunStore(FileStore(tmp / "store"), "r1")
    _samples(run)
    ctx = make_context(run, _graph(), name, params, "reference-cpu", 0)
    run_shard(ctx, 0, 1)
    merge_stage(ctx, 1)
    data = run.get_bytes(f"{name}/manifest.parquet")
    return read_manifest_bytes(FeatureRow, data), data


def test_reference_encoder_rows_identical_at_batch_one_and_four(tmp_path: Path) -> None:
    one, one_bytes = _run(tmp_path / "b1", "features", {"batch": 1})
    _, four_bytes = _run(tmp_path / "b4", "features", {"batch": 4})
    assert one and all(r.ok for r in one)
    assert {r.pairing for r in one} == {"paired", "shuffled"}
    assert one_bytes == four_bytes  # the same rows, order and values: the same manifest


def test_batches_of_four_the_same_rows_and_a_bad_input_rejected_alone(tmp_path: Path) -> None:
    BatchedRmsDetector.calls.clear()
    one, one_bytes = _run(tmp_path / "b1", "features_batched", {"batch": 1})
    assert set(BatchedRmsDetector.calls) == {1}  # batch 1: embed only
    BatchedRmsDetector.calls.clear()
    four, four_bytes = _run(tmp_path / "b4", "features_batched", {"batch": 4})
    calls = list(BatchedRmsDetector.calls)
    assert 4 in calls  # inputs went four to a model call
    assert one_bytes == four_bytes
    bad = [r for r in four if not r.ok]
    assert {(r.sample_id, r.reason) for r in bad} == {(SILENT, "item_failed")}
    assert [r for r in one if not r.ok] == bad  # the reason batch 1 gives
    assert all("silent input" in r.detail for r in bad)
    assert len(bad) == 2  # its A and its A-V input; everything else, its batch too, is fine
    assert sum(r.ok for r in four) == len(four) - 2 and all(r.score is not None
                                                            for r in four if r.ok)
    # every good input encoded once (an input shared by two rows too); the two failed
    # batches ran again one input at a time (their 3 good inputs each), plus any last
    # batch of one
    assert sum(calls) == len({(r.mode, r.sample_sha256) for r in four if r.ok})
    assert calls.count(1) >= 2 * 3 and max(calls) == 4


def test_batch_comes_from_the_card_and_the_parameter_overrides(tmp_path: Path) -> None:
    for slug, card in cards().items():
        for block in card.gpu:
            for stage in block["stages"]:
                assert gpu_batch(slug, stage) == block.get("batch", 1) >= 1
    assert gpu_batch("enc-tf5-xlsr", "features_enc_tf5_xlsr") > 1
    assert gpu_batch("ref-av-stats", "features") == 1  # no gpu block: batch 1
    assert gpu_batch("no-such-model", "features") == 1
    text = (Path(__file__).parents[4] / "madbench_common/models/catalog/enc-tf5-xlsr.yaml"
            ).read_text()
    with pytest.raises(ConfigError, match="gpu batch is a whole number"):
        load_card(text.replace("  batch: ", "  batch: -"), "x.yaml")
    with pytest.raises(MadbenchError, match="batch must be >= 1"):
        _run(tmp_path, "features", {"batch": 0})


def test_batch_size_is_not_in_the_fingerprint(tmp_path: Path) -> None:
    run = RunStore(FileStore(tmp_path / "store"), "r1")
    _samples(run)
    prints = {make_context(run, _graph(), "features_batched", params, "reference-cpu", 0)
              .fingerprint for params in ({}, {"batch": 1}, {"batch": 8})}
    assert len(prints) == 1
    other = make_context(run, _graph(), "features_batched", {"fps": 4.0}, "reference-cpu", 0)
    assert other.fingerprint not in prints  # a parameter that changes rows still counts
