"""Audio codec round trips through FFmpeg (PyAV): encode at a set bitrate and rate, measure, decode.

The media layer's third module beside :mod:`~madbench_common.media.audio` (probe, decode)
and :mod:`~madbench_common.media.mux` (remux beside untouched video): :func:`encode_audio`
encodes a mono float track (MP3, AAC, Opus or μ-law), :func:`probe_encoded` measures what
was written, and :func:`decode_encoded` decodes it back at any rate.
"""

from __future__ import annotations

import io
import struct
import tempfile
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, cast

import av
import numpy as np
from av.audio.stream import AudioStream

from madbench_common.core.errors import ConfigError
from madbench_common.core.types import Audio, Hertz
from madbench_common.media.audio import decode_audio

__all__ = ["CODECS", "CodecSpec", "Encoded", "decode_encoded", "encode_audio", "probe_encoded"]


@dataclass(frozen=True)
class _Codec:
    encoder: str
    container: str
    suffix: str
    options: tuple[tuple[str, str], ...] = ()
    fixed_rate: Hertz = 0
    """Bits per second implied by the format per Hz of sample rate (PCM), else 0."""


CODECS: dict[str, _Codec] = {
    "mp3": _Codec("libmp3lame", "mp3", ".mp3"),
    "aac": _Codec("aac", "mp4", ".m4a"),
    "opus": _Codec("libopus", "ogg", ".opus", (("vbr", "off"),)),
    "mulaw": _Codec("pcm_mulaw", "wav", ".wav", fixed_rate=8),
}
"""The codecs :func:`encode_audio` knows, by the name conditions use."""


@dataclass(frozen=True)
class CodecSpec:
    """What to encode with: codec name (:data:`CODECS`), bitrate (bit/s) and sample rate."""

    codec: str
    sample_rate: Hertz
    bitrate: int = 0
    """Target bit/s; ignored (implied) for PCM codecs such as ``mulaw``."""

    def __post_init__(self) -> None:
        if self.codec not in CODECS:
            raise ConfigError(f"unknown codec {self.codec!r}; known: {sorted(CODECS)}")
        if self.sample_rate <= 0 or (not CODECS[self.codec].fixed_rate and self.bitrate <= 0):
            raise ConfigError(f"codec {self.codec}: needs a positive sample_rate and bitrate "
                              f"(got {self.sample_rate} Hz, {self.bitrate} bit/s)")


@dataclass(frozen=True)
class Encoded:
    """An encoded track (container bytes) and what probing it found."""

    data: bytes
    codec: str
    container: str
    decoder: str
    """The codec name FFmpeg's demuxer reports for the stream (``mp3float``, ``aac``, …)."""
    sample_rate: Hertz
    channels: int
    bitrate: float
    """Measured: 8 × Σ audio packet bytes / stream duration."""
    duration: float

    def params(self) -> dict[str, Any]:
        """The measured facts, for a row's parameters."""
        return {"container": self.container, "decoder": self.decoder,
                "measured_sample_rate": self.sample_rate, "measured_channels": self.channels,
                "measured_bitrate": round(self.bitrate, 1),
                "encoded_seconds": round(self.duration, 4), "encoded_bytes": len(self.data)}


def _frames(audio: Audio, sample_rate: Hertz, stream: AudioStream) -> list[av.AudioFrame]:
    """``audio`` as frames in the encoder's sample format, rate and frame size."""
    ctx = stream.codec_context
    resampler = av.AudioResampler(format=ctx.format.name, layout="mono", rate=ctx.sample_rate,
                                  frame_size=ctx.frame_size or 1024)
    data = np.ascontiguousarray(np.clip(audio, -1.0, 1.0, dtype=np.float32)[None, :])
    frame = av.AudioFrame.from_ndarray(data, format="flt", layout="mono")
    frame.sample_rate, frame.pts, frame.time_base = sample_rate, 0, Fraction(1, sample_rate)
    return [*resampler.resample(frame), *resampler.resample(None)]


def encode_audio(audio: Audio, sample_rate: Hertz, spec: CodecSpec) -> Encoded:
    """Encode mono ``audio`` (at ``sample_rate``) as ``spec`` says; resampled by libswresample.

    In memory, into the codec's usual container:

    ========  ============  =========  ================================================
    codec     encoder       container  rate control
    ========  ============  =========  ================================================
    mp3       libmp3lame    mp3        CBR at ``bitrate``
    aac       aac (FFmpeg)  mp4        average bitrate ``bitrate`` (FFmpeg's native AAC-LC)
    opus      libopus       ogg        hard CBR (``vbr=off``) at ``bitrate``
    mulaw     pcm_mulaw     wav        G.711 μ-law, 8 bits per sample (64 kbit/s at 8 kHz)
    ========  ============  =========  ================================================
    """
    codec = CODECS[spec.codec]
    buf = io.BytesIO()
    with av.open(buf, "w", format=codec.container) as out:
        stream = cast(AudioStream, out.add_stream(codec.encoder, rate=spec.sample_rate,
                                                  options=dict(codec.options)))
        stream.layout = "mono"
        if not codec.fixed_rate:
            stream.bit_rate = spec.bitrate
        stream.codec_context.open()
        for frame in _frames(audio, sample_rate, stream):
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return probe_encoded(buf.getvalue(), spec.codec)


def _opus_input_rate(extradata: bytes | None) -> Hertz:
    """The input sample rate an ``OpusHead`` records (RFC 7845 §5.1), 0 if absent."""
    if not extradata or len(extradata) < 16 or not extradata.startswith(b"OpusHead"):
        return 0
    return int(struct.unpack_from("<I", extradata, 12)[0])


def probe_encoded(data: bytes, codec: str) -> Encoded:
    """Measure an encoded track: decoder, sample rate, channels, bitrate, duration.

    From the container itself: the sample rate is, for Opus, the ``OpusHead`` input rate
    (the decoder always runs at 48 kHz); the bitrate is **measured**, 8 × the bytes of
    every audio packet over the stream's duration."""
    container = CODECS[codec].container
    with av.open(io.BytesIO(data), "r", format=container) as src:
        stream = src.streams.audio[0]
        ctx = stream.codec_context
        total, end = 0, Fraction(0)
        for packet in src.demux(stream):
            if packet.size and packet.pts is not None:
                total += packet.size
                end = max(end, (packet.pts + (packet.duration or 0)) * packet.time_base)
        rate = _opus_input_rate(ctx.extradata) if codec == "opus" else ctx.sample_rate
        seconds = float(end)
        return Encoded(data, codec, container, ctx.name, int(rate or ctx.sample_rate),
                       int(ctx.channels), 8.0 * total / seconds if seconds > 0 else 0.0, seconds)


def decode_encoded(encoded: Encoded, sample_rate: Hertz) -> Audio:
    """Decode an encoded track to mono float32 at ``sample_rate`` (libswresample)."""
    with tempfile.TemporaryDirectory(prefix="madbench-transcode-") as tmp:
        path = Path(tmp) / f"track{CODECS[encoded.codec].suffix}"
        path.write_bytes(encoded.data)
        return decode_audio(path, sample_rate)
