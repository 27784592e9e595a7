"""Ingest against hostile or careless sources: content fingerprints, one guarded
path for stems and listings, confined paths, one bad row never stops the run."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.benchmarks.madbench.rows import SourceRow
from madbench_common.core.manifest import read_manifest_bytes
from madbench_common.core.usage import peak_rss_bytes
from madbench_common.media import guard as media_guard
from madbench_common.pipeline.local import LocalRunner, RunOptions, StageReport
from madbench_common.testing.faults import write_sources
from tests.media.clips import _ffmpeg, make_clip, speechlike

COLUMNS = ["clip_id", "path", "transcript", "speech_stem", "env_stem"]


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One good 5 s clip, copied into each test's sources folder."""
    return make_clip(tmp_path_factory.mktemp("media") / "good.mp4", speechlike(5.0, 48000))


@pytest.fixture(scope="module")
def other_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_clip(tmp_path_factory.mktemp("media2") / "other.mp4",
                     speechlike(6.0, 48000, seed=1))



def _run(tmp: Path, sources: str, **params: Any) -> tuple[dict[str, SourceRow], StageReport]:
    opts = RunOptions(store=str(tmp / "store"), run_id="t", until="ingest", progress=False,
                      params={"ingest": {"sources": sources, **params}})
    (report,) = LocalRunner(build_graph, opts).execute()
    data = (tmp / "store" / "t" / "ingest" / "manifest.parquet").read_bytes()
    return {r.clip_id: r for r in read_manifest_bytes(SourceRow, data)}, report


def _reasons(rows: dict[str, SourceRow]) -> dict[str, str]:
    return {k: (r.reason if not r.ok else "ok") for k, r in rows.items()}


def _folder(path: Path, clip: Path, *names: str) -> Path:
    """``path``, made, holding a copy of ``clip`` under each of ``names``."""
    path.mkdir(parents=True)
    for name in names:
        shutil.copy(clip, path / name)
    return path


# ---------------------------------------------------------------- item 1: content fingerprint


def test_editing_the_sources_recomputes_ingest(tmp_path: Path, clip: Path,
                                               other_clip: Path) -> None:
    src = _folder(tmp_path / "src", clip, "a.mp4", "b.mp4")
    rows = [{"clip_id": "a", "path": "a.mp4", "transcript": "first words"},
            {"clip_id": "b", "path": "b.mp4", "transcript": "other words"}]
    csv_path = write_sources(src / "sources.csv", rows, COLUMNS)
    got, _ = _run(tmp_path, str(csv_path))
    assert got["a"].transcript == "first words"
    rows[0]["transcript"] = "edited words"  # an edited transcript
    write_sources(csv_path, rows, COLUMNS)
    got, report = _run(tmp_path, str(csv_path))
    assert not report.skipped and got["a"].transcript == "edited words"
    before = got["b"].video_sha256
    shutil.copy(other_clip, src / "b.mp4")  # a replaced video, same path, same CSV
    got, report = _run(tmp_path, str(csv_path))
    assert not report.skipped and got["b"].video_sha256 != before
    assert abs(got["b"].duration - 6.0) < 0.1
    shutil.copy(clip, src / "c.mp4")  # an added clip
    write_sources(csv_path, [*rows, {"clip_id": "c", "path": "c.mp4"}], COLUMNS)
    got, report = _run(tmp_path, str(csv_path))
    assert not report.skipped and sorted(got) == ["a", "b", "c"]
    got, report = _run(tmp_path, str(csv_path))
    assert report.skipped  # nothing changed: skipped


def test_the_same_csv_by_another_path_is_the_same_ingest(tmp_path: Path, clip: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    src = _folder(tmp_path / "src", clip, "a.mp4")
    csv_path = write_sources(src / "sources.csv", [{"clip_id": "a", "path": "a.mp4"}], COLUMNS)
    _run(tmp_path, str(csv_path))
    first = (tmp_path / "store" / "t" / "ingest" / "manifest.parquet").read_bytes()
    monkeypatch.chdir(tmp_path)
    _, report = _run(tmp_path, "src/../src/sources.csv")
    assert report.skipped
    _, report = _run(tmp_path, f"file://{csv_path}")
    assert report.skipped
    assert (tmp_path / "store" / "t" / "ingest" / "manifest.parquet").read_bytes() == first


# ---------------------------------------------------------------- item 2: stems are guarded


def _with_stem(tmp: Path, clip: Path, stem_name: str, stem: bytes | Path) -> dict[str, str]:
    src = tmp / "src"
    src.mkdir(exist_ok=True)
    shutil.copy(clip, src / "a.mp4")
    shutil.copy(clip, src / "ok.mp4")
    if isinstance(stem, Path):
        shutil.copy(stem, src / stem_name)
    else:
        (src / stem_name).write_bytes(stem)
    csv_path = write_sources(src / "sources.csv", [
        {"clip_id": "a", "path": "a.mp4", "speech_stem": stem_name},
        {"clip_id": "ok", "path": "ok.mp4"}], COLUMNS)
    rows, _ = _run(tmp, str(csv_path))
    assert rows["ok"].ok, "a bad stem must not stop the other clips"
    assert rows["a"].status == "rejected" and stem_name in rows["a"].detail
    return _reasons(rows)


@pytest.mark.parametrize(("name", "text"), [
    ("hls.flac", "#EXTM3U\n#EXT-X-TARGETDURATION:5\n#EXTINF:5,\nfile://{outside}\n"
                 "#EXT-X-ENDLIST\n"),
    ("list.wav", "ffconcat version 1.0\nfile '{outside}'\n"),
])
def test_playlist_stems_cannot_pull_in_other_files(tmp_path: Path, clip: Path, name: str,
                                                   text: str) -> None:
    outside = _folder(tmp_path / "elsewhere", clip, "secret.mp4") / "secret.mp4"
    reason = _with_stem(tmp_path, clip, name, text.format(outside=outside).encode())["a"]
    assert reason in ("stem_unsupported_container", "stem_unreadable")
    refs = list((tmp_path / "store").rglob("ref/speech/*.wav"))
    assert refs == []  # nothing of the outside file was imported


def test_a_stem_ffmpeg_cannot_open_rejects_its_clip_only(tmp_path: Path, clip: Path) -> None:
    junk = np.random.default_rng(0).bytes(5000)
    assert _with_stem(tmp_path, clip, "junk.flac", junk)["a"] in (
        "stem_unreadable", "stem_unsupported_container")


def test_a_stem_without_audio_rejects_its_clip_only(tmp_path: Path, clip: Path) -> None:
    """A video-only file as a stem decoded to no samples, was padded with zeros to the
    clip's length and passed for a silent reference (found by perf/attack_inputs.py)."""
    stem = tmp_path / "picture.mp4"
    subprocess.run([_ffmpeg(), "-v", "error", "-y", "-f", "lavfi", "-i",
                    "testsrc=size=32x32:rate=5:duration=5", "-c:v", "libx264", "-pix_fmt",
                    "yuv420p", str(stem)], check=True)
    assert _with_stem(tmp_path, clip, "picture.mp4", stem)["a"] == "stem_no_audio"
    assert list((tmp_path / "store").rglob("ref/speech/*.wav")) == []


def test_an_hour_long_stem_stops_at_the_duration_bound(tmp_path: Path, clip: Path) -> None:
    """A 1.5 h FLAC of silence (~0.5 MB) took ingest to 1.2 GiB RSS; now it is refused
    after 13 s of decoding, in the guarded child."""
    stem = tmp_path / "long.flac"
    subprocess.run([_ffmpeg(), "-v", "error", "-y", "-f", "lavfi", "-i",
                    "anullsrc=r=16000:cl=mono", "-t", "5400", "-c:a", "flac", str(stem)],
                   check=True)
    assert stem.stat().st_size < 4 << 20
    before = peak_rss_bytes()
    assert _with_stem(tmp_path, clip, "long.flac", stem)["a"] == "stem_too_long"
    assert peak_rss_bytes() - before < 100 << 20


# ---------------------------------------------------------------- item 3: bad rows


def test_bad_rows_are_quarantined_and_the_run_goes_on(tmp_path: Path, clip: Path) -> None:
    """A 300-character clip id, a Latin-1 row, a path ending '.mp4;x', an empty path."""
    src = _folder(tmp_path / "src", clip, "ok.mp4", "odd.mp4;x")
    text = ("clip_id,path,transcript\n"
            "ok,ok.mp4,fine\n"
            f"{'x' * 300},ok.mp4,long id\n"
            "odd,odd.mp4;x,odd name\n"
            "empty,,no path\n").encode() + "latin,ok.mp4,caf\u00e9\n".encode("latin-1")
    (src / "sources.csv").write_bytes(text)
    rows, _ = _run(tmp_path, str(src / "sources.csv"))
    reasons = _reasons(rows)
    long_id = next(k for k in reasons if k.startswith("xxx"))
    assert len(long_id) <= 128
    assert reasons == {"ok": "ok", "odd": "ok", long_id: "bad_clip_id",
                       "empty": "missing", "latin": "bad_encoding"}
    assert rows["odd"].video_uri.endswith("/video/odd.mp4")
    assert "line 6" in rows["latin"].detail and "caf\\xe9" in rows["latin"].detail


def test_a_file_name_that_is_not_utf8_in_folder_mode(tmp_path: Path, clip: Path) -> None:
    folder = _folder(tmp_path / "videos", clip, "good.mp4")
    shutil.copy(clip, os.fsencode(folder) + b"/caf\xe9.mp4")
    rows, _ = _run(tmp_path, str(folder))
    reasons = _reasons(rows)
    assert reasons.pop("good") == "ok"
    ((cid, reason),) = reasons.items()
    assert reason == "bad_file_name" and "caf\\xe9.mp4" in rows[cid].detail


# ---------------------------------------------------------------- item 4: measured bounds


def test_a_long_video_with_no_declared_duration_is_measured(tmp_path: Path) -> None:
    """30 min of video beside 6 s of audio, no container duration, no frame count: the
    frame count and times are measured by decoding, not taken from the header."""

    path = tmp_path / "src" / "long.mkv"
    path.parent.mkdir()
    subprocess.run([_ffmpeg(), "-v", "error", "-y", "-f", "lavfi", "-i",
                    "color=gray:s=16x16:r=1:d=1800", "-f", "lavfi", "-i",
                    "sine=f=220:r=16000:d=6", "-c:v", "libx264", "-g", "1800", "-c:a", "flac",
                    str(path)], check=True)
    data = bytearray(path.read_bytes())
    at = data.find(b"\x44\x89\x88")  # Segment Info / Duration: made a Void element
    data[at:at + 11] = b"\xec\x89" + bytes(9)
    path.write_bytes(bytes(data))
    import av

    with av.open(str(path)) as c:
        assert not c.duration and not c.streams.video[0].frames
    rows, _ = _run(tmp_path, str(path.parent))
    assert _reasons(rows) == {"long": "too_long"}
    assert "video frames over more than 13.0s" in rows["long"].detail


# ---------------------------------------------------------------- item 7: confinement


def test_paths_outside_the_sources_root_are_refused(tmp_path: Path, clip: Path) -> None:
    src = _folder(tmp_path / "src", clip, "in.mp4")
    outside = _folder(tmp_path / "outside", clip, "x.mp4")
    (src / "link.mp4").symlink_to(outside / "x.mp4")
    (src / "inner").mkdir()
    (src / "inner" / "ok.mp4").symlink_to(src / "in.mp4")  # a link that stays inside
    csv_path = write_sources(src / "sources.csv", [
        {"clip_id": "in", "path": "in.mp4"},
        {"clip_id": "inner", "path": "inner/ok.mp4"},
        {"clip_id": "up", "path": "../outside/x.mp4"},
        {"clip_id": "abs", "path": str(outside / "x.mp4")},
        {"clip_id": "fileuri", "path": f"file://{outside / 'x.mp4'}"},
        {"clip_id": "link", "path": "link.mp4"},
        {"clip_id": "s3", "path": "s3://another-bucket/x.mp4"},
        {"clip_id": "http", "path": "http://127.0.0.1:9/x.mp4"},
        {"clip_id": "stem", "path": "in.mp4", "env_stem": "../outside/x.mp4"},
    ], COLUMNS)
    rows, _ = _run(tmp_path, str(csv_path))
    outside_ids = {"up", "abs", "fileuri", "link", "s3", "stem"}
    assert _reasons(rows) == {"in": "ok", "inner": "ok", "http": "unsupported_location",
                              **{k: "outside_sources" for k in outside_ids}}
    assert "--allow-outside-sources" in rows["link"].detail
    assert str(outside / "x.mp4") in rows["link"].detail  # where the link leads
    with open(csv_path) as fh:  # the local rows only: this run has no S3 credentials
        local = [r for r in csv.DictReader(fh) if r["clip_id"] not in ("s3", "http")]
    write_sources(csv_path, local, COLUMNS)
    allowed, _ = _run(tmp_path, str(csv_path), allow_outside_sources=True)
    assert {k for k, r in allowed.items() if r.ok} == {"in", "inner", "up", "abs", "fileuri",
                                                     "link", "stem"}


def test_a_folder_link_that_leaves_the_folder_is_refused(tmp_path: Path, clip: Path) -> None:
    folder = _folder(tmp_path / "videos", clip, "a.mp4")
    outside = _folder(tmp_path / "outside", clip, "b.mp4")
    (folder / "b.mp4").symlink_to(outside / "b.mp4")
    (folder / "loop").symlink_to(folder)  # a folder link (a loop) is never followed
    rows, _ = _run(tmp_path, str(folder))
    assert _reasons(rows) == {"a": "ok", "b": "outside_sources"}


@pytest.mark.s3
def test_a_csv_on_s3_is_confined_to_its_bucket_and_prefix(tmp_path: Path, clip: Path,
                                                          s3_uri: str) -> None:
    from madbench_common.core.store import open_store

    store = open_store(s3_uri)
    store.put_file("src/in.mp4", clip)
    store.put_file("other/x.mp4", clip)
    text = ("clip_id,path\nin,in.mp4\nup,../other/x.mp4\n"
            f"bucket,s3://madbench-other/src/in.mp4\nlocal,{clip}\n"
            f"prefix,{s3_uri}/other/x.mp4\n")
    store.put_bytes("src/sources.csv", text.encode())
    rows, _ = _run(tmp_path, f"{s3_uri}/src/sources.csv")
    assert _reasons(rows) == {"in": "ok", **{k: "outside_sources" for k in
                                             ("up", "bucket", "local", "prefix")}}


# ---------------------------------------------------------------- item 10: content dedup


def test_identical_content_named_by_many_rows_is_decoded_once(
        tmp_path: Path, clip: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = _folder(tmp_path / "src", clip, "same.mp4")
    csv_path = write_sources(src / "sources.csv", [{"clip_id": f"c{i:03d}", "path": "same.mp4"}
                                                   for i in range(40)], COLUMNS)
    decodes = []
    real = media_guard._SERVER.call

    def counting(request: tuple[Any, ...], timeout: float) -> tuple[Any, ...]:
        if request[0] not in ("read_csv", "walk_folder", "hash_files", "stem"):
            decodes.append(request[0])
        return real(request, timeout)

    monkeypatch.setattr(media_guard._SERVER, "call", counting)
    from madbench_common.benchmarks.madbench.stages import ingest

    monkeypatch.setattr(ingest, "_DECODED", type(ingest._DECODED)())  # earlier tests' decodes
    rows, _ = _run(tmp_path, str(csv_path))
    assert len(rows) == 40 and all(r.ok for r in rows.values())
    assert len(decodes) == 1


# ---------------------------------------------------------------- listings are bounded too


def test_listings_are_read_within_bounds(tmp_path: Path) -> None:
    """A CSV over max_listing_bytes, a folder of too many entries, a FIFO named as the CSV:
    a configuration error naming it, at once (never a hang, never the whole file in RAM)."""
    import time

    from madbench_common.benchmarks.madbench.sources import read_listing
    from madbench_common.core.errors import ConfigError
    from madbench_common.media.guard import MediaLimits

    big = tmp_path / "big.csv"
    big.write_text("path\n" + "a.mp4\n" * 200_000)
    with pytest.raises(ConfigError, match="bytes > 1048576"):
        read_listing(str(big), limits=MediaLimits(max_listing_bytes=1 << 20))
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(30):
        (folder / f"{i}.txt").write_text("")
    with pytest.raises(ConfigError, match="more than 20 entries"):
        read_listing(str(folder), limits=MediaLimits(max_sources=20))
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(ConfigError, match="not a regular file"):
        read_listing(str(fifo))
    assert time.monotonic() - start < 30
