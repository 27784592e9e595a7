"""Ingest stage: probe each source, decode 16 kHz mono audio, keep the video untouched.

Rejects, with a reason per file: ``missing``, ``empty``, ``unreadable``,
``truncated``, ``no_audio``, ``no_video``, ``silent``, ``too_short``, ``too_long``,
``duplicate_clip_id``. The original container is copied byte for byte into the
store (later stages mux new audio against its untouched video stream).
"""

from __future__ import annotations

import dataclasses
import logging
from functools import cached_property
from pathlib import Path
from typing import Any

import av
import numpy as np

from madbench_common.audio import MediaInfo, decode_audio, probe, rms_dbfs
from madbench_common.errors import ConfigError, InputRejected
from madbench_common.pipeline.stage import MapStage
from madbench_common.rows import SourceRow
from madbench_common.sources import SourceSpec, fetch_source, list_sources

__all__ = ["IngestStage", "check_media", "ingest_audio"]

log = logging.getLogger("madbench")
_CONTAINER_MAGIC = (b"ftyp", b"\x1aE\xdf\xa3", b"RIFF")
_TRUNCATION_TOLERANCE = 0.5  # seconds of audio missing vs the container's duration


def _looks_like_media(path: Path) -> bool:
    with open(path, "rb") as fh:
        head = fh.read(16)
    return any(m in head for m in _CONTAINER_MAGIC)


def check_media(path: Path) -> MediaInfo:
    """Probe ``path`` or raise :class:`InputRejected` with the reason."""
    if not path.exists():
        raise InputRejected(str(path), "missing", "file does not exist")
    if path.stat().st_size == 0:
        raise InputRejected(str(path), "empty", "file has zero bytes")
    try:
        info = probe(path)
    except (av.FFmpegError, UnicodeDecodeError) as exc:
        reason = "truncated" if _looks_like_media(path) else "unreadable"
        raise InputRejected(str(path), reason, str(exc)) from None
    if not info.has_audio:
        raise InputRejected(str(path), "no_audio", "no audio stream")
    if not info.has_video:
        raise InputRejected(str(path), "no_video", "no video stream")
    return info


def ingest_audio(path: Path, info: MediaInfo, sample_rate: int) -> np.ndarray:
    """Decode to mono at ``sample_rate``; a short decode against the header is truncation."""
    try:
        audio = decode_audio(path, sample_rate)
    except av.FFmpegError as exc:
        raise InputRejected(str(path), "truncated", f"decoding failed: {exc}") from None
    decoded = len(audio) / sample_rate
    if info.duration and decoded < info.duration - _TRUNCATION_TOLERANCE:
        raise InputRejected(str(path), "truncated",
                            f"decoded {decoded:.2f}s of audio, header says {info.duration:.2f}s")
    if not np.isfinite(audio).all():
        raise InputRejected(str(path), "unreadable", "audio has NaN or Inf samples")
    return audio


class IngestStage(MapStage[SourceRow]):
    """Turn a sources listing into the ``sources`` manifest."""

    row_type = SourceRow

    @cached_property
    def specs(self) -> dict[str, list[SourceSpec]]:
        uri = self.ctx.params.get("sources")
        if not uri:
            raise ConfigError("ingest needs a 'sources' parameter (a CSV or a folder)")
        by_id: dict[str, list[SourceSpec]] = {}
        for spec in list_sources(str(uri)):
            by_id.setdefault(spec.clip_id, []).append(spec)
        return by_id

    def plan(self) -> list[str]:
        return sorted(self.specs)

    def rejected_row(self, item: str, exc: InputRejected) -> SourceRow:
        spec = self.specs[item][0]
        return SourceRow(clip_id=item, source_path=spec.path, status="rejected",
                         reason=exc.reason, detail=str(exc)).with_provenance(
                             self.ctx.provenance("ffmpeg", av.__version__))

    def run_item(self, item: str) -> SourceRow:
        specs = self.specs[item]
        if len(specs) > 1:
            paths = ", ".join(s.path for s in specs)
            raise InputRejected(specs[0].path, "duplicate_clip_id",
                                f"clip id {item!r} is used by {paths}")
        with self.ctx.tempdir() as tmp:
            return self._ingest(specs[0], tmp)

    def _ingest(self, spec: SourceSpec, tmp: Path) -> SourceRow:
        p = self.ctx.params
        path = fetch_source(spec.path, tmp)
        info = check_media(path)
        rate = int(p["sample_rate"])
        audio = ingest_audio(path, info, rate)
        duration = len(audio) / rate
        if duration < float(p["min_duration"]):
            raise InputRejected(spec.path, "too_short",
                                f"{duration:.2f}s < {p['min_duration']}s")
        if duration > float(p["max_duration"]):
            raise InputRejected(spec.path, "too_long", f"{duration:.2f}s > {p['max_duration']}s")
        level = rms_dbfs(audio)
        if level < float(p["silence_dbfs"]):
            raise InputRejected(spec.path, "silent", f"RMS {level:.1f} dBFS")
        video = self.ctx.run.put_file(self.ctx.key("video", f"{spec.clip_id}{path.suffix}"), path)
        wav = self.ctx.save_audio(f"audio/{spec.clip_id}.wav", audio, rate)
        row = SourceRow(
            clip_id=spec.clip_id, source_path=spec.path, speaker=spec.speaker,
            gender=spec.gender, source_group=spec.source_group or spec.clip_id,
            transcript=spec.transcript, scene_caption=spec.scene_caption,
            video_uri=video.uri, video_sha256=video.sha256, video_codec=info.video_codec,
            width=info.width, height=info.height, fps=info.fps,
            audio_uri=wav.uri, audio_sha256=wav.sha256, duration=duration, sample_rate=rate,
            orig_sample_rate=info.sample_rate, orig_channels=info.channels,
            orig_audio_codec=info.audio_codec,
        ).with_provenance(self.ctx.provenance("ffmpeg", av.__version__))
        return dataclasses.replace(row, **self._reference_stems(spec, rate, len(audio), tmp))

    def _reference_stems(
        self, spec: SourceSpec, rate: int, length: int, tmp: Path
    ) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, path in (("speech", spec.speech_stem), ("env", spec.env_stem)):
            if not path:
                continue
            stem = decode_audio(fetch_source(path, tmp), rate)
            stem = np.pad(stem, (0, max(0, length - len(stem))))[:length]
            info = self.ctx.save_audio(f"ref/{name}/{spec.clip_id}.wav", stem, rate)
            out[f"ref_{name}_uri"], out[f"ref_{name}_sha256"] = info.uri, info.sha256
        return out
