"""Ingest: one test per reject reason, and odd-but-valid formats that must be accepted."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.benchmarks.madbench.rows import SourceRow
from madbench_common.core.manifest import read_manifest_bytes
from madbench_common.core.store import FileStore, RunStore
from madbench_common.media.audio import decode_audio, probe
from madbench_common.pipeline.local import LocalRunner, RunOptions
from tests.media.clips import make_clip, speechlike


def _ingest(tmp: Path, files: dict[str, Path | str], **params: object) -> dict[str, SourceRow]:
    csv_path = tmp / "sources.csv"
    with open(csv_path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["clip_id", "path", "speaker"])
        for cid, path in files.items():
            w.writerow([cid, str(path), "spk"])
    opts = RunOptions(store=str(tmp / "store"), run_id="t", until="ingest", progress=False,
                      params={"ingest": {"sources": str(csv_path), **params}})
    LocalRunner(build_graph, opts).execute()
    data = (tmp / "store" / "t" / "ingest" / "manifest.parquet").read_bytes()
    return {r.clip_id: r for r in read_manifest_bytes(SourceRow, data)}


def _good(tmp: Path, name: str = "good.mp4", **kw: object) -> Path:
    rate = int(kw.pop("rate", 48000))  # type: ignore[call-overload]
    return make_clip(tmp / name, speechlike(5.0, rate), rate=rate, **kw)  # type: ignore[arg-type]


def test_48k_stereo_is_accepted_and_downmixed(tmp_path: Path) -> None:
    src = _good(tmp_path, rate=48000, channels=2)
    rows = _ingest(tmp_path, {"a": src})
    row = rows["a"]
    assert row.ok, row.detail
    assert (row.sample_rate, row.orig_sample_rate, row.orig_channels) == (16000, 48000, 2)
    assert abs(row.duration - 5.0) < 0.1
    run = RunStore(FileStore(tmp_path / "store"), "t")
    video = run.get_bytes(run.key_of(row.video_uri), row.video_sha256)
    assert video == src.read_bytes()  # the original container, byte for byte
    from madbench_common.media.audio import read_wav_bytes
    audio, sr = read_wav_bytes(run.get_bytes(run.key_of(row.audio_uri), row.audio_sha256))
    assert sr == 16000 and audio.ndim == 1
    ref = decode_audio(src, 16000)
    assert np.allclose(audio, ref, atol=1e-6)


def test_44k_mono_is_accepted(tmp_path: Path) -> None:
    rows = _ingest(tmp_path, {"m": _good(tmp_path, rate=44100, channels=1)})
    assert rows["m"].ok and rows["m"].orig_sample_rate == 44100 and rows["m"].orig_channels == 1


def _reason(tmp: Path, path: Path | str, **params: object) -> str:
    rows = _ingest(tmp, {"x": path, "ok": _good(tmp)}, **params)
    assert rows["ok"].ok, "a bad file must not stop the rest of the run"
    assert rows["x"].status == "rejected"
    assert str(path) in rows["x"].detail  # the error names the file
    return rows["x"].reason


def test_missing(tmp_path: Path) -> None:
    assert _reason(tmp_path, tmp_path / "nope.mp4") == "missing"


def test_empty(tmp_path: Path) -> None:
    (tmp_path / "empty.mp4").write_bytes(b"")
    assert _reason(tmp_path, tmp_path / "empty.mp4") == "empty"


def test_unreadable(tmp_path: Path) -> None:
    (tmp_path / "junk.mp4").write_bytes(np.random.default_rng(0).bytes(4096))
    assert _reason(tmp_path, tmp_path / "junk.mp4") == "unreadable"


def test_truncated_moov_at_end(tmp_path: Path) -> None:
    full = _good(tmp_path, "full.mp4", faststart=False).read_bytes()
    (tmp_path / "cut.mp4").write_bytes(full[: len(full) // 2])
    assert _reason(tmp_path, tmp_path / "cut.mp4") == "truncated"


def test_truncated_faststart(tmp_path: Path) -> None:
    full = _good(tmp_path, "full.mp4", faststart=True).read_bytes()
    (tmp_path / "cut.mp4").write_bytes(full[: len(full) // 2])
    assert _reason(tmp_path, tmp_path / "cut.mp4") == "truncated"


def test_no_audio(tmp_path: Path) -> None:
    path = make_clip(tmp_path / "mute.mp4", None, duration=5.0)
    assert probe(path).has_video
    assert _reason(tmp_path, path) == "no_audio"


def test_no_video(tmp_path: Path) -> None:
    path = make_clip(tmp_path / "audio.mp4", speechlike(5.0, 48000), video=False)
    assert _reason(tmp_path, path) == "no_video"


def test_digital_silence(tmp_path: Path) -> None:
    path = make_clip(tmp_path / "silent.mp4", np.zeros(48000 * 5, np.float32))
    assert _reason(tmp_path, path) == "silent"


def test_too_short_and_too_long_are_configurable(tmp_path: Path) -> None:
    short = make_clip(tmp_path / "short.mp4", speechlike(2.0, 48000))
    assert _reason(tmp_path, short) == "too_short"
    long_ = tmp_path / "long"
    long_.mkdir()
    path = make_clip(long_ / "long.mp4", speechlike(8.0, 48000))
    assert _reason(long_, path, max_duration=7.0) == "too_long"


def test_duplicate_clip_ids(tmp_path: Path) -> None:
    csv_path = tmp_path / "dups.csv"
    a, b = _good(tmp_path, "a.mp4"), _good(tmp_path, "b.mp4")
    csv_path.write_text(f"clip_id,path\nsame,{a}\nsame,{b}\n")
    opts = RunOptions(store=str(tmp_path / "s"), run_id="t", until="ingest", progress=False,
                      params={"ingest": {"sources": str(csv_path)}})
    LocalRunner(build_graph, opts).execute()
    data = (tmp_path / "s" / "t" / "ingest" / "manifest.parquet").read_bytes()
    (row,) = read_manifest_bytes(SourceRow, data)
    assert row.reason == "duplicate_clip_id" and "a.mp4" in row.detail and "b.mp4" in row.detail


def test_folder_listing(tmp_path: Path) -> None:
    folder = tmp_path / "videos"
    folder.mkdir()
    _good(folder, "one clip.mp4")
    (folder / "notes.txt").write_text("ignored")
    opts = RunOptions(store=str(tmp_path / "s"), run_id="t", until="ingest", progress=False,
                      params={"ingest": {"sources": str(folder)}})
    LocalRunner(build_graph, opts).execute()
    data = (tmp_path / "s" / "t" / "ingest" / "manifest.parquet").read_bytes()
    (row,) = read_manifest_bytes(SourceRow, data)
    assert row.ok and row.clip_id == "one_clip" and row.source_group == "one_clip"


@pytest.mark.parametrize("value", [""])
def test_missing_sources_parameter_is_a_config_error(tmp_path: Path, value: str) -> None:
    from madbench_common.core.errors import ConfigError

    opts = RunOptions(store=str(tmp_path / "s"), run_id="t", until="ingest", progress=False)
    with pytest.raises(ConfigError, match="sources"):
        LocalRunner(build_graph, opts).execute()
