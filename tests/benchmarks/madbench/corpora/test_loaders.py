"""Corpus loaders on tiny fixtures in each dataset's real layout (issue 23)."""

from __future__ import annotations

from pathlib import Path

import pytest

from madbench_common.benchmarks.madbench.corpora import load_corpus
from madbench_common.core.errors import ConfigError

from . import layouts


def test_asvspoof2019_la(tmp_path: Path) -> None:
    root = layouts.asvspoof2019_la(tmp_path, {"train": 6, "dev": 4, "eval": 6})
    c = load_corpus(f"asvspoof2019_la:{root}")  # the parent of LA/ is accepted too
    assert c.name == "asvspoof2019_la" and c.tasks == ("binary",) and c.root.endswith("LA")
    ok = c.ok
    assert c.counts()["by_split"] == {"train": 6, "val": 4, "test": 6}
    row = ok[ok["sample_id"] == "LA_T_1000001"].iloc[0]
    assert (row["variant"], row["label_source"], row["speech_generator"], row["speaker"]) \
        == ("S", "spoof", "A02", "LA_0001")
    assert row["audio_path"].endswith("ASVspoof2019_LA_train/flac/LA_T_1000001.flac")
    assert ok[ok["variant"] == "R"]["speech_generator"].eq("").all()
    bad = c.frame[c.frame["status"] != "ok"]
    assert sorted(bad["reason"]) == ["bad_protocol_line", "missing"]
    assert "ASVspoof2019.LA.cm.eval.trl.txt:7: expected 5 fields" in " ".join(bad["detail"])


def test_asvspoof5(tmp_path: Path) -> None:
    root = layouts.asvspoof5(tmp_path, {"train": 6, "dev": 4, "eval": 8})
    c = load_corpus(f"asvspoof5:{root}")
    assert c.tasks == ("binary",) and c.counts()["by_split"] == {"train": 6, "val": 4, "test": 8}
    ok = c.ok.set_index("sample_id")
    assert (ok.loc["T_0000000001", "variant"], ok.loc["T_0000000001", "speech_generator"]) \
        == ("S", "A06")
    assert ok.loc["E_0000000002", "codec"] == "C03" and ok.loc["T_0000000000", "variant"] == "R"
    assert ok.loc["D_0000000000", "audio_path"].endswith("flac_D/D_0000000000.flac")
    bad = c.frame[c.frame["status"] != "ok"]
    assert list(bad["reason"]) == ["bad_protocol_line"] and "expected 10 fields" in \
        bad["detail"].iloc[0]


def test_in_the_wild(tmp_path: Path) -> None:
    root = layouts.in_the_wild(tmp_path, 20)
    c = load_corpus(f"in_the_wild:{root}")
    ok = c.ok
    assert c.tasks == ("binary",) and len(ok) == 20
    assert set(ok["split"]) <= {"train", "val", "test"}
    assert ok.groupby("speaker")["split"].nunique().max() == 1  # no speaker spans splits
    assert (ok["variant"] == "S").sum() == 10
    bad = c.frame[c.frame["status"] != "ok"]
    assert list(bad["reason"]) == ["bad_label"] and "unknown" in bad["detail"].iloc[0]
    again = load_corpus(f"in_the_wild:{root / 'release_in_the_wild'}")
    assert list(again.ok["split"]) == list(ok["split"])  # deterministic


def test_fakeavceleb_maps_audio_labels_and_keeps_real_video_by_default(tmp_path: Path) -> None:
    base = layouts.fakeavceleb(tmp_path, 3)
    c = load_corpus(f"fakeavceleb:{base}")
    assert c.tasks == ("binary", "speech") and c.modality == "AV"
    ok = c.ok
    assert set(ok["label_source"]) == {"RealVideo-RealAudio", "RealVideo-FakeAudio"}
    by = dict(zip(ok["label_source"], ok["variant"]))
    assert by == {"RealVideo-RealAudio": "R", "RealVideo-FakeAudio": "S"}
    assert ok.groupby("speaker")["split"].nunique().max() == 1
    # a source video and the fakes made from it are one bootstrap unit
    assert ok.groupby("speaker")["clip_id"].nunique().max() == 1
    assert (c.frame["reason"] == "missing").sum() == 1
    every = load_corpus(f"fakeavceleb:{base}", video="all").ok
    assert len(every) == 12 and set(every["video_fake"]) == {True, False}
    fvra = every[every["label_source"] == "FakeVideo-RealAudio"]
    assert set(fvra["variant"]) == {"R"}  # labelled by its audio


@pytest.mark.parametrize("spec", ["asvspoof5", "nope:/x", "asvspoof2019_la:"])
def test_bad_specs(spec: str) -> None:
    with pytest.raises(ConfigError, match="expected <name>:<path>"):
        load_corpus(spec)


def test_missing_protocol_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="ASVspoof2019_LA_cm_protocols: missing"):
        load_corpus(f"asvspoof2019_la:{tmp_path}")
    with pytest.raises(ConfigError, match=r"meta\.csv: missing"):
        load_corpus(f"in_the_wild:{tmp_path}")
    (tmp_path / "meta_data.csv").write_text("a,b\n")
    with pytest.raises(ConfigError, match="unexpected header"):
        load_corpus(f"fakeavceleb:{tmp_path}")
