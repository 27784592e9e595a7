"""Hostile input classes through ingest and the CLI: each row is quarantined with a reason
code or accepted where it is valid media, the run goes on, and nothing from the input
reaches the terminal as a raw control character or as rich markup.

One sources folder holds a case of every class beside a good clip, ingested once by the
real ``madbench -v`` command (a child process, so its log handler is the CLI's own; ``-v``
logs each quarantined row, as well as one summary line per reason).
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from madbench_common.benchmarks.madbench.rows import SourceRow
from madbench_common.benchmarks.madbench.sources import MAX_DERIVED_ID, bounded_id
from madbench_common.benchmarks.madbench.stages.plan_components import component_id
from madbench_common.cli import main
from madbench_common.core.manifest import read_manifest_bytes
from madbench_common.testing.faults import write_sources
from tests.media.clips import _ffmpeg, make_clip, speechlike

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[4]
RAW = ("\x1b", "\x9b", "\u202e", "\u2066", "\x07")
"""Bytes that act on a terminal (ESC, C1 CSI, a right-to-left override, an isolate, BEL)."""
COLUMNS = ["clip_id", "path", "speaker", "transcript", "scene_caption", "speech_stem"]


def _copy(src: Path, good: Path, name: str) -> str:
    (src / name).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(good, src / name)
    return name


def _ff(*args: str) -> None:
    subprocess.run([_ffmpeg(), "-v", "error", "-y", *args], check=True)


def _media(src: Path) -> list[dict[str, str]]:
    """Valid media of unusual kinds: a second audio stream, audio starting 3 s after the
    video, 16 channels at 8 kHz, Opus in Matroska; and NaN samples in a float track."""
    v = ["-f", "lavfi", "-i", "testsrc=size=64x48:rate=10:duration=6"]
    n = ["-f", "lavfi", "-i", "anoisesrc=d=6:c=pink:r=16000:a=0.3"]
    h264 = ["-c:v", "libx264", "-pix_fmt", "yuv420p"]
    _ff(*v, *n, "-f", "lavfi", "-i", "sine=frequency=500:sample_rate=44100:duration=6",
        "-map", "0", "-map", "1", "-map", "2", *h264, "-c:a", "aac", str(src / "two.mp4"))
    _ff(*v, "-itsoffset", "3", *n, "-map", "0", "-map", "1", *h264, "-c:a", "aac",
        str(src / "late.mp4"))
    _ff(*v, "-f", "lavfi", "-i", "anoisesrc=d=6:c=pink:r=8000:a=0.3", "-af",
        "pan=hexadecagonal|" + "|".join(f"c{i}=c0" for i in range(16)), *h264,
        "-c:a", "pcm_s16le", str(src / "ch16.mkv"))
    _ff(*v, *n, *h264, "-c:a", "libopus", str(src / "opus.mkv"))
    noise = (np.random.default_rng(0).standard_normal(16000 * 6) * 0.1).astype(np.float32)
    noise[100:110] = np.nan
    sf.write(src / "nan.wav", noise, 16000, subtype="FLOAT")
    _ff(*v, "-i", str(src / "nan.wav"), *h264, "-c:a", "copy", str(src / "nan.mkv"))
    inf = np.full(16000 * 5, np.inf, dtype=np.float32)
    sf.write(src / "inf_stem.wav", inf, 16000, subtype="FLOAT")
    return [dict(clip_id="two_streams", path="two.mp4"), dict(clip_id="late", path="late.mp4"),
            dict(clip_id="ch16", path="ch16.mkv"), dict(clip_id="opus", path="opus.mkv"),
            dict(clip_id="nan_main", path="nan.mkv")]


def _rows(src: Path, good: Path) -> list[dict[str, str]]:
    rows = [dict(clip_id="ok", path=_copy(src, good, "ok.mp4")),
            dict(clip_id="qhash", path=_copy(src, good, "q?x#y.mp4")),
            dict(clip_id="folder", path="dir.mp4"),
            dict(clip_id="esc_name", path=_copy(src, good, "\x1b[31mred\x1b]0;t\x07.mp4")),
            dict(clip_id="rtl_name", path=_copy(src, good, "\u202eevil\u2066.mp4")),
            dict(clip_id="markup_missing", path="[bold red]gone[/bold red]\x1b[2J\x9b1m.mp4"),
            dict(clip_id="forged_line", path="gone.mp4\n[12:00:00] INFO     ingest: all good"),
            dict(clip_id="path_max", path="a/" * 2100 + "x.mp4"),
            dict(clip_id="name_max", path="n" * 300 + ".mp4"),
            dict(clip_id="mega", path=_copy(src, good, "mega.mp4"), transcript="word " * 250_000),
            dict(clip_id="formula", path=_copy(src, good, "f.mp4"), transcript="=cmd|' /C x'!A0"),
            dict(clip_id="rtl_text", path=_copy(src, good, "r.mp4"),
                 transcript="\u202etxet\u202c \u05e9\u05dc\u05d5\u05dd"),
            dict(clip_id="a b", path=_copy(src, good, "ab1.mp4")),
            dict(clip_id="a_b", path=_copy(src, good, "ab2.mp4")),
            dict(clip_id="Clip", path=_copy(src, good, "case1.mp4")),
            dict(clip_id="clip", path=_copy(src, good, "case2.mp4")),
            dict(clip_id=unicodedata.normalize("NFC", "café"), path=_copy(src, good, "c1.mp4")),
            dict(clip_id=unicodedata.normalize("NFD", "café"), path=_copy(src, good, "c2.mp4")),
            dict(clip_id="twice", path=_copy(src, good, "t1.mp4")),
            dict(clip_id="twice", path=_copy(src, good, "t2.mp4")),
            dict(clip_id="<script>alert(1)</script>", path=_copy(src, good, "h.mp4"),
                 speaker="<img src=x onerror=alert(1)>", scene_caption="<b>[red]x[/red]</b>"),
            dict(clip_id="inf_stem", path=_copy(src, good, "s.mp4"), speech_stem="inf_stem.wav"),
            dict(clip_id="L" * 128, path=_copy(src, good, "long.mp4"))]
    (src / "dir.mp4").mkdir()
    return rows + _media(src)


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, SourceRow], str]:
    base = tmp_path_factory.mktemp("hostile")
    src = base / "src"
    src.mkdir()
    good = make_clip(base / "good.mp4", speechlike(5.0, 48000))
    write_sources(src / "sources.csv", _rows(src, good), COLUMNS)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "160"}
    proc = subprocess.run(
        [sys.executable, "-m", "madbench_common.cli", "-v", "run", "--sources",
         str(src / "sources.csv"), "--store", str(base / "store"), "--run-id", "h",
         "--until", "ingest", "--workers", "1", "--no-progress"],
        env=env, capture_output=True, text=True, errors="surrogateescape", timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = (base / "store" / "h" / "ingest" / "manifest.parquet").read_bytes()
    return base, {r.clip_id: r for r in read_manifest_bytes(SourceRow, data)}, proc.stderr


def _got(rows: dict[str, SourceRow]) -> dict[str, str]:
    return {k: "ok" if r.ok else r.reason for k, r in rows.items()}


def test_every_class_is_quarantined_with_a_reason_or_accepted(
        ingested: tuple[Path, dict[str, SourceRow], str]) -> None:
    _, rows, stderr = ingested
    got = _got(rows)
    assert "Traceback" not in stderr
    for cid in ("ok", "qhash", "esc_name", "rtl_name", "mega", "formula", "rtl_text",
                "script_alert_1_script", "L" * 128):
        assert got[cid] == "ok", (cid, got[cid], rows[cid].detail)
    assert got["folder"] == "not_a_file"
    assert got["markup_missing"] == got["forged_line"] == "missing"
    assert got["path_max"] == got["name_max"] == "path_too_long"
    assert got["inf_stem"] == "stem_non_finite_audio"
    assert got["nan_main"] == "non_finite_audio"
    # ids equal only after sanitising, NFKC or case folding: every row quarantined
    for cid in ("a_b", "Clip", "clip", "caf"):
        assert got[cid] == "clip_id_collision", (cid, got[cid])
    assert "'a b', 'a_b'" in rows["a_b"].detail
    assert got["twice"] == "duplicate_clip_id"
    assert len(rows["mega"].transcript) == len("word " * 250_000) - 1  # stripped, whole
    assert rows["script_alert_1_script"].speaker == "<img src=x onerror=alert(1)>"


def test_unusual_valid_media_is_accepted_and_recorded(
        ingested: tuple[Path, dict[str, SourceRow], str]) -> None:
    _, rows, _ = ingested
    got = _got(rows)
    for cid in ("two_streams", "late", "ch16", "opus"):
        assert got[cid] == "ok", (cid, rows[cid].detail)
    assert "first of 2 audio streams" in rows["two_streams"].orig_audio_codec
    assert rows["two_streams"].orig_sample_rate == 16000  # the first stream, not the 44.1k
    late = rows["late"]
    assert "after the video; padded" in late.orig_audio_codec
    assert late.duration == pytest.approx(9.0, abs=0.15)  # 3 s of silence, then 6 s
    assert rows["ch16"].orig_channels == 16 and rows["ch16"].orig_sample_rate == 8000


def test_no_raw_control_character_reaches_the_terminal(
        ingested: tuple[Path, dict[str, SourceRow], str],
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    base, _, stderr = ingested
    for ch in RAW:
        assert ch not in stderr, repr(ch)
    # a file name cannot forge a log line: its line break is shown, in the row's own line
    assert not any(ln.startswith("[12:00:00]") for ln in stderr.splitlines())
    assert "gone.mp4\\x0a[12:00:00]" in stderr
    assert "ingest: 4 rejected: clip_id_collision (e.g. Clip, a_b, caf)" in stderr
    # the log shows the name escaped (rich wraps long lines: compare without spaces)
    assert "[boldred]gone[/boldred]\\x1b[2J\\x9b1m.mp4" in "".join(stderr.split())
    monkeypatch.setenv("COLUMNS", "5000")  # a table cell on one line
    assert main(["status", "--store", str(base / "store"), "--run-id", "h", "--details"]) == 0
    out = capsys.readouterr()
    for ch in RAW:
        assert ch not in out.out + out.err, repr(ch)
    assert "[bold red]gone[/bold red]\\x1b[2J\\x9b1m.mp4" in out.out  # printed, not applied


def test_errors_show_control_characters_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    from madbench_common.cli import print_error
    from madbench_common.core.errors import ConfigError

    print_error(ConfigError("sources \x1b]0;pwned\x07\u202e[red]x[/red]: no such file"))
    err = capsys.readouterr().err
    assert not any(ch in err for ch in RAW)
    assert "\\x1b]0;pwned\\x07\\u202e[red]x[/red]" in err


def test_ids_from_two_long_clip_ids_are_bounded_and_distinct() -> None:
    a, b, c = "a" * 128, "b" * 128, "b" * 127 + "c"
    ids = {component_id(a, "speech_tts_cross_a", extra=t) for t in (b, c)}
    assert len(ids) == 2
    for cid in ids:
        assert len(cid) <= MAX_DERIVED_ID
        assert len(f"{cid}.wav.tmp12345678".encode()) < 255  # a file name on the file store
    assert bounded_id("short") == "short"
    assert bounded_id("x" * 300) == bounded_id("x" * 300)


def test_128_character_ids_through_the_cross_identity_branch(tmp_path: Path) -> None:
    """Twelve demo clips with 128-character ids, run on the file store up to a
    cross-identity generator, whose ids join two clip ids: every component is made."""
    from madbench_common.benchmarks.madbench.graph import build_graph
    from madbench_common.benchmarks.madbench.rows import ComponentRow
    from madbench_common.pipeline.local import LocalRunner, RunOptions

    demo = ROOT / "data" / "demo"
    with open(demo / "sources.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    picked = [rows[i] for i in (0, 1, 6, 7, 9, 10, 11, 12, 14, 15, 16, 17)]
    for i, r in enumerate(picked):
        r["clip_id"] = (f"L{i:02d}" + "x" * 200)[:128]
        for key in ("path", "speech_stem", "env_stem"):
            r[key] = str(demo / r[key])
    src = write_sources(tmp_path / "sources.csv", picked)
    opts = RunOptions(store=str(tmp_path / "store"), run_id="t", until="speech_tts_cross_a",
                      progress=False, params={"ingest": {"sources": str(src),
                                                         "allow_outside_sources": True}})
    LocalRunner(build_graph, opts).execute()
    data = (tmp_path / "store" / "t" / "speech_tts_cross_a" / "manifest.parquet").read_bytes()
    made = read_manifest_bytes(ComponentRow, data)
    # made, or refused for the demo audio itself (a clip without voiced frames), never
    # for a file name (the file store refused 266-character ids: OSError ENAMETOOLONG)
    assert sum(r.ok for r in made) > len(made) // 2
    assert all(r.ok or (r.reason == "generation_failed" and "Errno" not in r.detail)
               for r in made), [r.detail for r in made if not r.ok][:2]
    assert all(len(r.component_id) <= MAX_DERIVED_ID for r in made)
