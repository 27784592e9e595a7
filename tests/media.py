"""Test media: tiny H.264/AAC clips made with PyAV, with knobs for every reject reason."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np

__all__ = ["make_clip", "speechlike", "tone_mixture"]


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
