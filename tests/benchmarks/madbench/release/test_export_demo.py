"""``madbench export`` of the demo build: loads with ``datasets.load_dataset`` (Audio feature),
the card lists every licence, incomplete runs are refused, S3 works."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from madbench_common.benchmarks.madbench.release.card import (
    NONCOMMERCIAL,
    Component,
    _licence_section,
    loading_example,
)
from madbench_common.benchmarks.madbench.release.export import export_run
from madbench_common.benchmarks.madbench.rows import ComponentRow, SampleRow
from madbench_common.cli import main
from madbench_common.core.errors import ConfigError
from madbench_common.core.manifest import read_manifest_bytes
from madbench_common.core.store import FileStore, RunStore
from madbench_common.media.audio import read_wav_bytes
from madbench_common.media.mux import video_packets

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]  # the fixture builds the graph


@pytest.fixture(scope="module")
def exported(demo_build: RunStore, demo_sources_csv: Path,
             tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "madbench-demo"
    store = _store(demo_build)
    assert main(["export", "--store", store, "--run-id", demo_build.run_id, "--to", str(out),
                 "--sources", str(demo_sources_csv),
                 "--set", "plan_components.targets=1"]) == 0
    return out


def _store(run: RunStore) -> str:
    assert isinstance(run.store, FileStore)
    return str(run.store.base)


def _front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1])


def test_every_config_loads_with_the_datasets_audio_feature(exported: Path,
                                                            demo_build: RunStore,
                                                            tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    # a cache of this test's own: datasets' default (~/.cache) is keyed by the folder's
    # name, so another session's cached Arrow files (naming its deleted FLACs) were reused
    cache = str(tmp_path / "hf-datasets")
    meta = _front_matter((exported / "README.md").read_text())
    configs = {c["config_name"]: c for c in meta["configs"]}
    assert {"balanced", "scene_matched", "scene_mismatched", "scene_consistency"} <= set(configs)
    assert any(name.startswith("robustness-mp3") for name in configs)
    # a robustness config holds one protocol, so `label` keeps that protocol's meaning
    for name in (n for n in configs if n.startswith("robustness-")):
        for entry in configs[name]["data_files"]:
            table = pq.read_table(exported / entry["path"][0]).to_pandas()
            assert table["protocol"].nunique() == 1 and name.endswith(table["protocol"][0])
            if table["protocol"][0] == "scene_consistency":
                assert (table["label"] == (~table["scene_consistent"]).astype(int)).all()
            else:
                assert (table["label"] == (table["variant"] != "R").astype(int)).all()
    samples = {s.sample_id: s for s in read_manifest_bytes(
        SampleRow, demo_build.get_bytes("assemble/manifest.parquet")) if s.ok}
    for name in ("balanced", "robustness-mp3_24k-balanced"):  # demo_build's one condition
        for entry in configs[name]["data_files"]:
            ds = datasets.load_dataset(str(exported), name, split=entry["split"],
                                      cache_dir=cache)
            table = pq.read_table(exported / entry["path"][0]).to_pandas()
            assert len(ds) == len(table) > 0
            assert isinstance(ds.features["audio"], datasets.Audio)
    ds = datasets.load_dataset(str(exported), "balanced", split="train", cache_dir=cache)
    row = ds[0]
    audio = row["audio"]
    assert audio["sampling_rate"] == 16000
    clean = samples[row["sample_id"]]
    want, _ = read_wav_bytes(demo_build.get_bytes(demo_build.key_of(clean.audio_uri)))
    np.testing.assert_allclose(audio["array"], want, atol=2.0 ** -22)  # 24-bit FLAC
    assert row["label"] == int(clean.variant != "R") and row["variant"] == clean.variant
    video = exported / "balanced" / "train" / row["video"]
    run_video = exported.parent / "run.mp4"
    run_video.write_bytes(demo_build.get_bytes(demo_build.key_of(clean.video_uri)))
    assert video_packets(video) == video_packets(run_video)


def test_card_lists_every_licence_and_generator(exported: Path, demo_build: RunStore,
                                               demo_sources_csv: Path) -> None:
    card = (exported / "README.md").read_text()
    meta = _front_matter(card)
    assert meta["license"] == "other" and meta["license_name"] == "madbench-composite"
    import csv

    # the licence of every clip whose audio is in the dataset (cross-identity targets and
    # scene-consistency donors included), and none of a clip that QC left out entirely
    used: set[str] = set()
    for s in read_manifest_bytes(SampleRow, demo_build.get_bytes("assemble/manifest.parquet")):
        if s.ok:
            used |= {s.clip_id, s.target_clip_id, s.env_donor_clip_id} - {""}
    with open(demo_sources_csv, newline="") as fh:
        by_clip = {r["clip_id"]: r["license"] for r in csv.DictReader(fh)}
    licences = {by_clip[c] for c in used}
    assert licences
    for lic in licences:
        assert lic in card
    for lic in {lic for c, lic in by_clip.items() if c not in used} - licences:
        if not any(lic in u for u in licences):
            assert lic not in card
    models = set()
    for stage in ("speech_tts_same_a", "speech_vc_b", "env_t2a_a", "env_a2a_b"):
        rows = read_manifest_bytes(ComponentRow,
                                   demo_build.get_bytes(f"{stage}/manifest.parquet"))
        models |= {r.model_slug for r in rows if r.ok and r.uri}
    for slug in models:
        assert f"| {slug} |" in card
    assert "GPL-3.0-or-later" in card and "LicenseRef-Flite" in card  # espeak-ng, flite
    assert "GPL-2+" in card  # the robustness noise set
    assert "No component is under a non-commercial licence" in card
    assert "## Table 1" in card and "Generation-eligible source clips" in card
    assert "## Known limitations" in card and "CPU reference models" in card
    assert "## Intended uses" in card
    assert loading_example("balanced") in card  # the code test_card_loading.py runs
    qc = card[card.find("## QC thresholds"):]
    assert "**source_qc** (verified" in qc and "max_wer: 0.8" in qc


def test_non_commercial_components_make_the_dataset_non_commercial() -> None:
    comps = [Component("generator", "tts-f5-same (speech_tts_same_a)",
                       "code MIT; F5TTS_v1_Base weights CC-BY-NC-4.0 (Emilia training data)",
                       "images/tts-f5/image.yaml"),
             Component("source clips", "3 clips", "CC-BY-SA-3.0", "sources.csv")]
    assert comps[0].noncommercial and not comps[1].noncommercial
    text = _licence_section(comps)
    assert "**This dataset is non-commercial.**" in text and "tts-f5-same" in text
    assert not NONCOMMERCIAL.search("Apache-2.0 AND GPL-3.0-or-later")


def test_incomplete_runs_are_refused(demo_build: RunStore, tmp_path: Path) -> None:
    partial = RunStore(FileStore(tmp_path / "store"), "partial")
    for key in ("assemble/_SUCCESS", "assemble/manifest.parquet"):
        partial.put_bytes(key, demo_build.get_bytes(key))
    with pytest.raises(ConfigError, match="the run is incomplete"):
        export_run(str(tmp_path / "store"), "partial", str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


@pytest.mark.s3
def test_export_to_s3(demo_build: RunStore, s3_uri: str) -> None:
    from madbench_common.core.store import open_store

    store = _store(demo_build)
    result = export_run(store, demo_build.run_id, s3_uri, robustness=False)
    dest = open_store(s3_uri)
    keys = set(dest.list(""))
    assert "README.md" in keys and "balanced/test/metadata.parquet" in keys
    assert result.files == len(keys)
    assert json.dumps(result.configs)  # plain data
