"""Audio and media I/O: probe and decode with PyAV, resample, WAV bytes, levels."""

from __future__ import annotations

import io
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import soundfile as sf
from scipy.io import wavfile
from scipy.signal import resample_poly

from madbench_common.core.types import Audio, Hertz, Seconds

__all__ = [
    "MediaInfo",
    "decode_audio",
    "probe",
    "read_wav_bytes",
    "resample",
    "rms_dbfs",
    "si_sdr",
    "wav_bytes",
]


@dataclass(frozen=True)
class MediaInfo:
    """Stream facts of a media file, as the container and decoders report them."""

    duration: Seconds
    has_video: bool
    has_audio: bool
    video_codec: str = ""
    width: int = 0
    height: int = 0
    fps: float = 0.0
    audio_codec: str = ""
    sample_rate: Hertz = 0
    channels: int = 0
    audio_streams: int = 0
    """How many audio streams the file has (the first is the one decoded)."""
    audio_offset: Seconds = 0.0
    """Seconds the first audio stream starts after the first video stream (0 if it does
    not start later); decoded audio is padded by this much, so it lines up with the video."""


def probe(path: str | Path) -> MediaInfo:
    """Stream facts of ``path``; raises ``av.FFmpegError`` if it cannot be opened."""
    with av.open(str(path)) as container:
        video = container.streams.video[0] if container.streams.video else None
        audio = container.streams.audio[0] if container.streams.audio else None
        duration = container.duration / av.time_base if container.duration else 0.0
        return MediaInfo(
            duration=float(duration),
            has_video=video is not None,
            has_audio=audio is not None,
            video_codec=video.codec_context.name if video else "",
            width=video.codec_context.width if video else 0,
            height=video.codec_context.height if video else 0,
            fps=float(video.average_rate or Fraction(0)) if video else 0.0,
            audio_codec=audio.codec_context.name if audio else "",
            sample_rate=audio.codec_context.sample_rate if audio else 0,
            channels=audio.codec_context.channels if audio else 0,
        )


def decode_audio(path: str | Path, sample_rate: Hertz = 16000) -> Audio:
    """Decode the first audio stream, downmixed to mono and resampled (libswresample)."""
    resampler = av.AudioResampler(format="flt", layout="mono", rate=sample_rate)
    chunks: list[np.ndarray] = []
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        for frame in container.decode(stream):
            for out in resampler.resample(frame):
                chunks.append(out.to_ndarray().reshape(-1))
        for out in resampler.resample(None):
            chunks.append(out.to_ndarray().reshape(-1))
    if not chunks:
        return np.zeros(0, dtype=np.float32)
    return np.concatenate(chunks).astype(np.float32, copy=False)


def resample(audio: Audio, sr_from: Hertz, sr_to: Hertz) -> Audio:
    """Polyphase resampling (scipy), exact rational ratio."""
    if sr_from == sr_to:
        return audio.astype(np.float32, copy=False)
    ratio = Fraction(sr_to, sr_from)
    out = resample_poly(audio, ratio.numerator, ratio.denominator)
    return np.asarray(out, dtype=np.float32)


def wav_bytes(audio: Audio, sample_rate: Hertz) -> bytes:
    """Float32 WAV bytes: lossless (x − ŝ − ê stays exact) and byte-deterministic.

    scipy writes a plain ``fmt``/``data`` file; libsndfile would add a PEAK chunk with
    a timestamp, which breaks content addressing and reproducible manifests.
    """
    buf = io.BytesIO()
    wavfile.write(buf, sample_rate, np.asarray(audio, dtype=np.float32))
    return buf.getvalue()


def read_wav_bytes(data: bytes) -> tuple[Audio, Hertz]:
    """Inverse of :func:`wav_bytes` (any format libsndfile reads, mono-downmixed)."""
    audio, sr = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    return audio.mean(axis=1).astype(np.float32), int(sr)


def rms_dbfs(audio: Audio, floor: float = -120.0) -> float:
    """RMS level in dB relative to full scale; ``floor`` for empty or silent input."""
    if audio.size == 0:
        return floor
    rms = float(np.sqrt(np.mean(np.square(audio, dtype=np.float64))))
    return max(floor, 20.0 * np.log10(rms)) if rms > 0 else floor


def si_sdr(estimate: Audio, reference: Audio) -> float:
    """Scale-invariant SDR in dB (Le Roux et al., 2019), zero-mean, over the common length."""
    n = min(len(estimate), len(reference))
    est = estimate[:n].astype(np.float64) - np.mean(estimate[:n])
    ref = reference[:n].astype(np.float64) - np.mean(reference[:n])
    energy = float(np.dot(ref, ref))
    if energy == 0.0:
        return float("nan")
    target = (np.dot(est, ref) / energy) * ref
    noise = est - target
    return float(10.0 * np.log10(np.dot(target, target) / max(np.dot(noise, noise), 1e-20)))
