"""Hostile sources are rejected with a reason, in bounded time and memory."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from madbench_common.core.errors import InputRejected
from madbench_common.core.usage import peak_rss_bytes
from madbench_common.media.guard import MediaLimits, decode_untrusted
from tests.media.clips import (
    bomb_mkv,
    huge_duration_mp4,
    huge_frame_mp4,
    make_clip,
    many_streams_mp4,
    speechlike,
)

LIMITS = MediaLimits(max_duration=12.0, timeout=30.0, max_memory=512 << 20)
BOUND_S = 10.0
"""Each hostile file must be refused well within this (the clean path takes < 1 s)."""


def _rejected(path: Path, limits: MediaLimits = LIMITS) -> tuple[InputRejected, float]:
    start = time.monotonic()
    with pytest.raises(InputRejected) as err:
        decode_untrusted(path, 16000, limits)
    return err.value, time.monotonic() - start


@pytest.fixture(scope="module", autouse=True)
def _warm_server() -> None:
    """Start the decoder server once, so timings measure the files, not its start."""
    with pytest.raises(InputRejected):
        decode_untrusted(Path(__file__), 16000, LIMITS)


def test_ordinary_clip_passes_with_bounded_memory(tmp_path: Path) -> None:
    clip = make_clip(tmp_path / "ok.mp4", speechlike(5.0, 48000))
    start = time.monotonic()
    got = decode_untrusted(clip, 16000, LIMITS)
    assert time.monotonic() - start < BOUND_S
    assert abs(len(got.audio) / 16000 - 5.0) < 0.1 and got.info.has_video
    assert 0 < got.peak_rss < 512 << 20


def test_decompression_bomb_stops_after_the_duration_limit(tmp_path: Path) -> None:
    bomb = bomb_mkv(tmp_path / "bomb.mkv", seconds=1200, declared=5.0)
    assert bomb.stat().st_size < 2 << 20  # 20 min of audio (77 MB as float) in < 2 MB
    before = peak_rss_bytes()
    exc, seconds = _rejected(bomb)
    assert exc.reason == "too_long" and "decoded more than 13.0s" in exc.detail
    assert seconds < BOUND_S
    assert peak_rss_bytes() - before < 64 << 20  # nothing was decoded in this process


def test_thousands_of_streams(tmp_path: Path) -> None:
    path = many_streams_mp4(tmp_path / "many.mp4", 3000)
    exc, seconds = _rejected(path)
    assert exc.reason == "too_many_streams" and seconds < BOUND_S


def test_a_few_streams_too_many(tmp_path: Path) -> None:
    exc, _ = _rejected(many_streams_mp4(tmp_path / "nine.mp4", 9))
    assert exc.reason == "too_many_streams" and "more than 8 streams" in exc.detail


def test_16k_by_16k_video(tmp_path: Path) -> None:
    exc, seconds = _rejected(huge_frame_mp4(tmp_path / "16k.mp4", 16384, 16384))
    assert exc.reason == "video_size_invalid" and seconds < BOUND_S


def test_16k_wide_video_within_ffmpeg_limits(tmp_path: Path) -> None:
    exc, seconds = _rejected(huge_frame_mp4(tmp_path / "16k8k.mp4", 16384, 8192))
    assert exc.reason == "resolution_too_high" and "16384x8192" in exc.detail
    assert seconds < BOUND_S


def test_huge_declared_duration(tmp_path: Path) -> None:
    exc, seconds = _rejected(huge_duration_mp4(tmp_path / "forever.mp4"))
    assert exc.reason == "too_long" and "declared duration" in exc.detail
    assert seconds < BOUND_S


@pytest.fixture
def listener() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP port that records every connection made to it."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    hits: list[bytes] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            hits.append(conn.recv(256))
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    yield srv.getsockname()[1], hits
    srv.close()


@pytest.mark.parametrize(("name", "text"), [
    ("list.m3u8", "#EXTM3U\n#EXT-X-TARGETDURATION:5\n#EXTINF:5,\nhttp://127.0.0.1:{port}/a.ts\n"
                  "#EXT-X-ENDLIST\n"),
    ("list.mp4", "ffconcat version 1.0\nfile 'http://127.0.0.1:{port}/b.mp4'\n"),
    ("pic.mp4", "file:///etc/passwd\n"),
])
def test_no_network_or_indirection(tmp_path: Path, listener: tuple[int, list[bytes]],
                                   name: str, text: str) -> None:
    port, hits = listener
    path = tmp_path / name
    path.write_text(text.format(port=port))
    exc, _ = _rejected(path)
    assert exc.reason in ("unsupported_container", "unreadable")
    time.sleep(0.2)
    assert hits == [], "FFmpeg opened a network connection"


def test_wall_clock_timeout(tmp_path: Path) -> None:
    clip = make_clip(tmp_path / "ok.mp4", speechlike(5.0, 48000))
    exc, seconds = _rejected(clip, MediaLimits(timeout=0.001))
    assert exc.reason == "decode_timeout" and seconds < BOUND_S


def test_memory_cap_holds_even_with_a_lax_duration_bound(tmp_path: Path) -> None:
    """20 min of audio would need 77 MB as float32; the decoder may add only 8 MiB."""
    bomb = bomb_mkv(tmp_path / "bomb.mkv", seconds=1200, declared=5.0)
    exc, seconds = _rejected(bomb, MediaLimits(max_duration=3600.0, max_memory=8 << 20))
    assert exc.reason == "decode_memory" and seconds < BOUND_S


def test_file_size_cap(tmp_path: Path) -> None:
    clip = make_clip(tmp_path / "ok.mp4", speechlike(5.0, 48000))
    exc, _ = _rejected(clip, MediaLimits(max_file_bytes=1000))
    assert exc.reason == "file_too_large"
