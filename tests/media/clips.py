"""Test media: tiny H.264/AAC clips made with PyAV, with knobs for every reject reason."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from fractions import Fraction
from functools import cache
from pathlib import Path

import av
import numpy as np

__all__ = ["make_clip", "silent_clip_bytes", "speechlike", "tone_mixture"]


def speechlike(duration: float, rate: int, seed: int = 0) -> np.ndarray:
    """Amplitude-modulated harmonic bursts with pauses: enough for level/IO tests."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(duration * rate)) / rate
    f0 = 120 + 30 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / rate
    voiced = sum(np.sin(k * phase) / k for k in range(1, 8))
    envelope = (np.sin(2 * np.pi * 2.5 * t) > -0.2).astype(float)
    noise = rng.standard_normal(len(t)) * 0.02
    return (0.3 * voiced * envelope + noise).astype(np.float32)


def tone_mixture(duration: float, rate: int) -> np.ndarray:
    t = np.arange(int(duration * rate)) / rate
    return (0.2 * np.sin(2 * np.pi * 440 * t) + 0.1 * np.sin(2 * np.pi * 97 * t)).astype(
        np.float32)


def make_clip(
    path: Path,
    audio: np.ndarray | None,
    rate: int = 48000,
    channels: int = 2,
    duration: float | None = None,
    video: bool = True,
    size: tuple[int, int] = (64, 48),
    fps: int = 10,
    faststart: bool = True,
) -> Path:
    """Write an MP4 (H.264 + AAC) with ``audio`` (mono float32, duplicated per channel)."""
    if duration is None:
        duration = len(audio) / rate if audio is not None else 2.0
    options = {"movflags": "+faststart"} if faststart else {}
    with av.open(str(path), "w", format="mp4", options=options) as out:
        vs = out.add_stream("libx264", rate=fps) if video else None
        if vs is not None:
            vs.width, vs.height, vs.pix_fmt = size[0], size[1], "yuv420p"
        as_ = out.add_stream("aac", rate=rate) if audio is not None else None
        if as_ is not None:
            as_.layout = "stereo" if channels == 2 else "mono"
        if vs is not None:
            for i in range(int(duration * fps)):
                img = np.full((size[1], size[0], 3), (i * 7) % 255, dtype=np.uint8)
                img[:, : (i % size[0])] = 200
                frame = av.VideoFrame.from_ndarray(img, format="rgb24")
                for pkt in vs.encode(frame):
                    out.mux(pkt)
            for pkt in vs.encode():
                out.mux(pkt)
        if as_ is not None and audio is not None:
            _encode_audio(out, as_, audio, rate, channels)
    return path


@cache
def silent_clip_bytes(duration: float, size: tuple[int, int], fps: int = 10) -> bytes:
    """The MP4 bytes of ``make_clip(path, None, duration=..., size=..., fps=...)``, encoded
    once per process.

    For tests that run a stage twice on fresh stores and compare what the runs wrote:
    libx264 does not always give the same bytes for the same frames. Now and then, in a
    process that has encoded before, one macroblock is coded another way: the same decoded
    pixels, a packet a byte longer (5 of 3,000 encodes in one process, the same 5 each
    time that process's calls are repeated, none with ``MALLOC_PERTURB_`` set: the
    encoder seems to read memory an earlier allocation left). An input's identity is its
    file's sha256 (``sample_sha256`` of the feature and score rows), so two encodes of
    one clip can make two runs' manifests differ; both runs must store the same bytes.
    """
    with tempfile.TemporaryDirectory(prefix="mb-clip-") as tmp:
        path = make_clip(Path(tmp) / "clip.mp4", None, duration=duration, fps=fps, size=size)
        return path.read_bytes()


def _encode_audio(out: av.container.OutputContainer, stream: av.audio.stream.AudioStream,
                  audio: np.ndarray, rate: int, channels: int) -> None:
    block = 1024
    data = np.tile(audio[None, :], (channels, 1)).astype(np.float32)
    for start in range(0, data.shape[1], block):
        chunk = np.ascontiguousarray(data[:, start : start + block])
        frame = av.AudioFrame.from_ndarray(chunk, format="fltp",
                                           layout="stereo" if channels == 2 else "mono")
        frame.sample_rate = rate
        frame.pts = start
        frame.time_base = Fraction(1, rate)
        for pkt in stream.encode(frame):
            out.mux(pkt)
    for pkt in stream.encode():
        out.mux(pkt)


# ---------------------------------------------------------------- hostile inputs


def _ffmpeg() -> str:
    import imageio_ffmpeg

    return str(imageio_ffmpeg.get_ffmpeg_exe())


def _boxes(data: bytes | bytearray, start: int = 0, end: int | None = None
           ) -> list[tuple[bytes, int, int]]:
    """(type, offset, size) of the ISO-BMFF boxes in ``data[start:end]`` (32-bit sizes)."""
    end = len(data) if end is None else end
    out = []
    while start + 8 <= end:
        size = int.from_bytes(data[start:start + 4], "big")
        out.append((bytes(data[start + 4:start + 8]), start, size))
        start += size
    return out


def _child(data: bytes | bytearray, box: tuple[bytes, int, int], kind: bytes
           ) -> tuple[bytes, int, int]:
    return next(b for b in _boxes(data, box[1] + 8, box[1] + box[2]) if b[0] == kind)


def bomb_mkv(path: Path, seconds: int = 1200, declared: float = 5.0) -> Path:
    """Decompression-bomb-like: ``seconds`` of FLAC silence (a few hundred kB) in a
    Matroska file whose header declares only ``declared`` seconds."""
    import struct
    import subprocess

    subprocess.run([_ffmpeg(), "-v", "error", "-y", "-f", "lavfi", "-i",
                    "anullsrc=r=8000:cl=mono", "-f", "lavfi", "-i", "color=black:s=16x16:r=1",
                    "-t", str(seconds), "-c:a", "flac", "-c:v", "libx264", "-g", "600",
                    str(path)], check=True)
    data = bytearray(path.read_bytes())
    at = data.find(b"\x44\x89\x88")  # Segment Info / Duration, 8-byte float, in ms
    data[at + 3:at + 11] = struct.pack(">d", declared * 1000)
    path.write_bytes(bytes(data))
    return path


def many_streams_mp4(path: Path, streams: int) -> Path:
    """An MP4 with one video and ``streams`` - 1 audio tracks (the audio trak repeated)."""
    make_clip(path, speechlike(1.0, 16000), rate=16000, channels=1, faststart=False)
    data = bytearray(path.read_bytes())
    moov = next(b for b in _boxes(data) if b[0] == b"moov")
    assert moov[1] + moov[2] == len(data), "moov must come last"
    traks = [b for b in _boxes(data, moov[1] + 8, moov[1] + moov[2]) if b[0] == b"trak"]
    audio = bytes(data[traks[-1][1]:traks[-1][1] + traks[-1][2]])
    extra = bytearray()
    for n in range(len(traks) + 1, streams + 1):
        trak = bytearray(audio)
        tkhd = _child(trak, (b"trak", 0, len(trak)), b"tkhd")
        trak[tkhd[1] + 20:tkhd[1] + 24] = n.to_bytes(4, "big")  # track_ID (version 0)
        extra += trak
    mvhd = _child(data, moov, b"mvhd")
    data[mvhd[1] + mvhd[2] - 4:mvhd[1] + mvhd[2]] = (streams + 1).to_bytes(4, "big")
    data[moov[1]:moov[1] + 4] = (moov[2] + len(extra)).to_bytes(4, "big")
    path.write_bytes(bytes(data + extra))
    return path


def huge_frame_mp4(path: Path, width: int, height: int) -> Path:
    """An MJPEG MP4 whose headers (sample entry, track, JPEG SOF) declare ``width``×``height``
    while its frames hold 256×256 pixels of data."""
    with av.open(str(path), "w", format="mp4") as out:
        vs = out.add_stream("mjpeg", rate=1)
        vs.width, vs.height, vs.pix_fmt = 256, 256, "yuvj420p"
        for k in range(2):
            img = np.zeros((256, 256, 3), np.uint8)
            frame = av.VideoFrame.from_ndarray(img, format="rgb24").reformat(format="yuvj420p")
            frame.pts = k
            for pkt in vs.encode(frame):
                out.mux(pkt)
        for pkt in vs.encode():
            out.mux(pkt)
    data = bytearray(path.read_bytes())
    size = width.to_bytes(2, "big") + height.to_bytes(2, "big")
    entry = data.find(b"mp4v") + 4 + 6 + 2 + 16  # VisualSampleEntry width, height
    data[entry:entry + 4] = size
    tkhd = data.find(b"tkhd") - 4 + 8 + 4 + 20 + 8 + 8 + 36  # version 0: width, height 16.16
    data[tkhd:tkhd + 8] = (width << 16).to_bytes(4, "big") + (height << 16).to_bytes(4, "big")
    sof = b"\xff\xc0\x00\x11\x08\x01\x00\x01\x00"
    data = bytearray(bytes(data).replace(sof, sof[:5] + height.to_bytes(2, "big")
                                         + width.to_bytes(2, "big")))
    path.write_bytes(bytes(data))
    return path


def huge_duration_mp4(path: Path) -> Path:
    """A valid 5 s clip whose headers declare ~2^31 time units per track (58 h): sample
    deltas (``stts``), edit lists, track, media and movie headers all say so."""
    make_clip(path, speechlike(5.0, 48000))
    data = bytearray(path.read_bytes())
    big = (2**31 - 1).to_bytes(4, "big")

    def each(kind: bytes) -> Iterator[int]:
        at = 0
        while (at := data.find(kind, at + 1)) > 0:
            yield at

    for at in each(b"stts"):  # the last sample's duration
        last = at + 12 + 8 * (int.from_bytes(data[at + 8:at + 12], "big") - 1)
        data[last + 4:last + 8] = big
    for at in each(b"elst"):
        for i in range(int.from_bytes(data[at + 8:at + 12], "big")):
            data[at + 12 + 12 * i:at + 16 + 12 * i] = big
    for kind, offset in ((b"mvhd", 20), (b"mdhd", 20), (b"tkhd", 24)):
        for at in each(kind):
            if data[at + 4] == 0:  # version 0 boxes
                data[at + offset:at + offset + 4] = big
    path.write_bytes(bytes(data))
    return path
