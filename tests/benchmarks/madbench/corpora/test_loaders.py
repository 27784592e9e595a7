"""Corpus loaders on tiny fixtures in each dataset's real layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from madbench_common.benchmarks.madbench.corpora import load_corpus
from madbench_common.cli import main
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


def _repeat_line(path: Path, line_no: int) -> str:
    """Write ``path`` with its line ``line_no`` (1-based) given twice; returns that line."""
    lines = path.read_text().splitlines()
    lines.insert(line_no, lines[line_no - 1])
    path.write_text("\n".join(lines) + "\n")
    return lines[line_no - 1]


def test_a_repeated_line_is_quarantined_as_a_duplicate_in_every_loader(tmp_path: Path) -> None:
    """A repeated protocol or metadata line was two rows of one id, and the evaluation's
    index on sample_id ended in pandas' InvalidIndexError (a traceback, exit 1)."""
    la = layouts.asvspoof2019_la(tmp_path / "la", {"train": 4, "dev": 2, "eval": 2})
    _repeat_line(la / "LA" / "ASVspoof2019_LA_cm_protocols" / "ASVspoof2019.LA.cm.train.trn.txt",
                 2)
    as5 = layouts.asvspoof5(tmp_path / "as5", {"train": 4, "dev": 2, "eval": 3})
    _repeat_line(as5 / "ASVspoof5_protocols" / "ASVspoof5.eval.track_1.tsv", 1)
    itw = layouts.in_the_wild(tmp_path / "itw", 6)
    _repeat_line(itw / "release_in_the_wild" / "meta.csv", 3)
    favc = layouts.fakeavceleb(tmp_path / "favc", 1)
    _repeat_line(favc / "meta_data.csv", 3)
    for spec, second in ((f"asvspoof2019_la:{la}", ":3"), (f"asvspoof5:{as5}", ":2"),
                         (f"in_the_wild:{itw}", ":4"), (f"fakeavceleb:{favc}", ":4")):
        c = load_corpus(spec)
        dup = c.frame[c.frame["reason"] == "duplicate"]
        assert len(dup) == 1, spec
        assert second + ": repeats trial" in dup["detail"].iloc[0], dup["detail"].iloc[0]
        assert c.ok["sample_id"].is_unique
        assert dup["sample_id"].iloc[0] in set(c.ok["sample_id"])  # the first one is kept


def test_a_repeated_line_does_not_stop_a_cross_evaluation(tmp_path: Path) -> None:
    la = layouts.asvspoof2019_la(tmp_path / "la", {"train": 12, "dev": 4, "eval": 8})
    for part in ("train.trn", "eval.trl"):
        _repeat_line(la / "LA" / "ASVspoof2019_LA_cm_protocols" /
                     f"ASVspoof2019.LA.cm.{part}.txt", 3)
    itw = layouts.in_the_wild(tmp_path / "itw", 30)
    meta = itw / "release_in_the_wild" / "meta.csv"
    meta.write_text(meta.read_text() + "".join(ln + "\n" for ln in
                                               meta.read_text().splitlines()[1:]))
    assert main(["eval", "--train", f"asvspoof2019_la:{la}", "--test", f"in_the_wild:{itw}",
                 "--both-directions", "--n-boot", "0", "--out", str(tmp_path / "out")]) == 0


def test_asvspoof5_audio_one_level_down_is_found(tmp_path: Path) -> None:
    """``ASVspoof5_{train,dev,eval}/flac_*`` (the archives' names) loaded nothing, then
    "no train/val rows"; the flat layout still loads (test_asvspoof5)."""
    root = layouts.asvspoof5(tmp_path, {"train": 6, "dev": 4, "eval": 8}, nested=True)
    c = load_corpus(f"asvspoof5:{root}")
    assert c.counts()["by_split"] == {"train": 6, "val": 4, "test": 8}
    ok = c.ok.set_index("sample_id")
    assert ok.loc["E_0000000001", "audio_path"].endswith(
        "ASVspoof5_eval/flac_E_eval/E_0000000001.flac")
    assert set(c.frame[c.frame["status"] != "ok"]["reason"]) == {"bad_protocol_line"}


def test_asvspoof5_coded_copies_of_one_utterance_are_one_bootstrap_unit(tmp_path: Path) -> None:
    """CODEC_SEED was dropped: each coded copy was its own clip_id (resampling unit)."""
    root = layouts.asvspoof5(tmp_path, {"train": 2, "dev": 2, "eval": 9})
    test = load_corpus(f"asvspoof5:{root}").ok.set_index("sample_id")
    test = test[test["split"] == "test"]
    assert list(test["clip_id"]) == ["E_0000000000"] * 3 + ["E_0000000003"] * 3 + [
        "E_0000000006"] * 3
    assert test.loc["E_0000000004", "codec_seed"] == "E_0000000003"
    assert test.loc["E_0000000003", "codec_seed"] == "-"


def test_one_warning_line_per_reason_and_each_row_with_v(tmp_path: Path,
                                                          caplog: pytest.LogCaptureFixture
                                                          ) -> None:
    """Every rejected row logged its own warning (4 terminal lines each: 20,000 missing
    files gave 80,000 lines); now one line per reason, the rows at DEBUG (``-v``)."""
    import logging

    root = layouts.in_the_wild(tmp_path, 40)
    for wav in list((root / "release_in_the_wild").glob("*.wav"))[:25]:
        wav.unlink()
    caplog.set_level(logging.DEBUG, logger="madbench.corpus")
    load_corpus(f"in_the_wild:{root}")
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 2, warnings  # missing (25 rows) and bad_label (1 row)
    assert any("25 rows rejected (missing)" in w and "-v lists each" in w for w in warnings)
    rows = [r for r in caplog.records if r.name == "madbench.corpus"]
    assert len(rows) == 26 and all(r.levelno == logging.DEBUG for r in rows)


def test_verbose_flag_lists_each_rejected_row(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = layouts.in_the_wild(tmp_path, 6)
    for wav in list((root / "release_in_the_wild").glob("*.wav"))[:3]:
        wav.unlink()
    argv = [sys.executable, "-m", "madbench_common.cli", "eval", "--train",
            f"in_the_wild:{root}", "--test", f"in_the_wild:{root}", "--mode", "AV"]
    env = {"COLUMNS": "400", "PATH": "/usr/bin:/bin"}
    quiet = subprocess.run(argv, capture_output=True, text=True, env=env)
    loud = subprocess.run([*argv[:3], "-v", *argv[3:]], capture_output=True, text=True, env=env)
    assert quiet.returncode == loud.returncode == 3
    assert quiet.stderr.count("rejected itw/") == 0 and loud.stderr.count("rejected itw/") >= 8
    assert quiet.stderr.count("rows rejected (missing)") == 2  # one line per load


def test_mode_av_on_an_audio_only_corpus_exits_3_naming_it(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    """Was exit 0 with an empty table."""
    favc = layouts.fakeavceleb(tmp_path / "f", 3)
    itw = layouts.in_the_wild(tmp_path / "w", 12)
    code = main(["eval", "--train", f"fakeavceleb:{favc}", "--test", f"in_the_wild:{itw}",
                 "--mode", "AV", "--n-boot", "0", "--out", str(tmp_path / "out")])
    assert code == 3
    err = capsys.readouterr().err
    assert "in_the_wild" in err and "audio-only" in err and "--mode AV" in err


def test_fakeavceleb_accepts_its_parent_folder(tmp_path: Path) -> None:
    base = layouts.fakeavceleb(tmp_path, 2)
    assert base.parent == tmp_path
    parent, direct = load_corpus(f"fakeavceleb:{tmp_path}"), load_corpus(f"fakeavceleb:{base}")
    assert parent.root == str(base) and len(parent.ok) == len(direct.ok) == 4


def test_fakevideo_fakeaudio_speech_generator_is_the_voice_cloner(tmp_path: Path) -> None:
    """FakeVideo-FakeAudio rows named the face method (``faceswap-wav2lip``) as their
    speech generator; their audio is RTVC's (SV2TTS), like RealVideo-FakeAudio's."""
    every = load_corpus(f"fakeavceleb:{layouts.fakeavceleb(tmp_path, 2)}", video="all").ok
    by = {k: g for k, g in every.groupby("label_source")}
    assert set(by["FakeVideo-FakeAudio"]["speech_generator"]) == {"rtvc"}
    assert set(by["FakeVideo-FakeAudio"]["video_generator"]) == {"faceswap-wav2lip"}
    assert set(by["RealVideo-FakeAudio"]["speech_generator"]) == {"rtvc"}
    assert set(by["FakeVideo-RealAudio"]["speech_generator"]) == {""}
    assert set(by["FakeVideo-RealAudio"]["video_generator"]) == {"faceswap"}
    assert not every["speech_generator"].str.contains("wav2lip|faceswap|fsgan").any()
