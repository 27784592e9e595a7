"""Video-side media operations: remux new audio beside an untouched video stream, sample frames.

:func:`remux_with_audio` copies the source's video packets as they are (no decode, no
re-encode: the packet bytes of the output's video stream equal the source's) and
encodes the new audio track (AAC by default) at the source's original audio rate
and channel count. :func:`video_packets` exposes those bytes for tests.
:func:`sample_frames` decodes a few RGB frames for scene describers and
video-to-audio generators.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import cast

import av
import numpy as np
from av.audio.stream import AudioStream

from madbench_common.core.types import Audio, Frames, Hertz

__all__ = ["MuxResult", "remux_with_audio", "sample_frames", "video_digest", "video_packets"]

_AUDIO_BLOCK = 1024  # AAC frame size


@dataclass(frozen=True)
class MuxResult:
    """What went into the muxed file."""

    video_packets: int
    audio_codec: str
    sample_rate: Hertz
    channels: int


def _audio_frames(audio: Audio, sample_rate: Hertz, rate: Hertz,
                  channels: int) -> list[av.AudioFrame]:
    """``audio`` as encoder-ready planar float frames at ``rate`` (libswresample)."""
    layout = "stereo" if channels == 2 else "mono"
    resampler = av.AudioResampler(format="fltp", layout=layout, rate=rate,
                                  frame_size=_AUDIO_BLOCK)
    data = np.ascontiguousarray(np.clip(audio, -1.0, 1.0, dtype=np.float32)[None, :])
    frame = av.AudioFrame.from_ndarray(data, format="flt", layout="mono")
    frame.sample_rate, frame.pts, frame.time_base = sample_rate, 0, Fraction(1, sample_rate)
    return [*resampler.resample(frame), *resampler.resample(None)]


def remux_with_audio(
    video_path: str | Path, audio: Audio, sample_rate: Hertz, out_path: str | Path, *,
    out_rate: Hertz = 0, channels: int = 0, codec: str = "aac", bitrate: int = 128_000,
    aac_coder: str = "fast",
) -> MuxResult:
    """Write ``out_path``: ``video_path``'s first video stream copied packet for packet,
    plus ``audio`` (mono float32 at ``sample_rate``) encoded with ``codec``.

    ``out_rate`` and ``channels`` default to the source's audio stream (mono/stereo
    only; more channels are written as stereo). ``aac_coder="fast"`` is FFmpeg's fast
    AAC quantiser search (about 3x the default's speed); every variant, the re-assembled
    real one included, goes through the same encoder settings.
    """
    with av.open(str(video_path)) as src:
        v_in = src.streams.video[0]
        a_in = src.streams.audio[0] if src.streams.audio else None
        rate = out_rate or (a_in.codec_context.sample_rate if a_in else sample_rate)
        chans = 2 if (channels or (a_in.codec_context.channels if a_in else 1)) >= 2 else 1
        fmt = src.format.name.split(",")[0] if src.format.name else None
        with av.open(str(out_path), "w", format="mp4" if fmt == "mov" else None) as out:
            v_out = out.add_stream_from_template(v_in)
            options = {"aac_coder": aac_coder} if codec == "aac" and aac_coder else {}
            a_out = cast(AudioStream, out.add_stream(codec, rate=rate, options=options))
            a_out.layout = "stereo" if chans == 2 else "mono"
            if codec == "aac":
                a_out.bit_rate = bitrate
            n = 0
            for packet in src.demux(v_in):
                if packet.dts is None:  # the demuxer's flush packet
                    continue
                packet.stream = v_out
                out.mux(packet)
                n += 1
            for frame in _audio_frames(audio, sample_rate, rate, chans):
                out.mux(a_out.encode(frame))
            out.mux(a_out.encode(None))
    return MuxResult(n, codec, rate, chans)


def video_packets(path: str | Path) -> list[bytes]:
    """The raw bytes of every packet of the first video stream, in decode order."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        return [bytes(p) for p in container.demux(stream) if p.dts is not None]


def video_digest(path: str | Path) -> str:
    """sha256 of what decoding the first video stream depends on: codec, size, frame
    rate, time base, extradata and every packet's timestamps and bytes (files that
    differ only in audio agree)."""
    h = hashlib.sha256()
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        ctx = stream.codec_context
        h.update(f"{ctx.name}/{ctx.width}x{ctx.height}/{stream.average_rate}/"
                 f"{stream.time_base}/".encode())
        h.update(ctx.extradata or b"")
        for p in container.demux(stream):
            if p.dts is not None:
                data = bytes(p)
                h.update(f"{p.pts}/{p.dts}/{len(data)}/".encode() + data)
    return h.hexdigest()


def sample_frames(path: str | Path, fps: float = 2.0, size: int = 112,
                  max_frames: int = 64) -> tuple[Frames, float]:
    """RGB frames at about ``fps`` (shorter side scaled to ``size``), and the rate achieved."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        src_fps = float(stream.average_rate or 0) or fps
        step = max(1, round(src_fps / fps))
        frames = []
        for i, frame in enumerate(container.decode(stream)):
            if i % step:
                continue
            scale = size / min(frame.width, frame.height)
            w = max(2, round(frame.width * scale / 2) * 2)
            h = max(2, round(frame.height * scale / 2) * 2)
            frames.append(frame.to_ndarray(format="rgb24", width=w, height=h))
            if len(frames) >= max_frames:
                break
    if not frames:
        return np.zeros((0, size, size, 3), np.uint8), 0.0
    return np.stack(frames), src_fps / step
