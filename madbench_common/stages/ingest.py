"""Ingest stage: probe each source, decode 16 kHz mono audio, keep the video untouched.

Rejects, with a reason per file: ``missing``, ``empty``, ``unreadable``,
``truncated``, ``no_audio``, ``no_video``, ``silent``, ``too_short``, ``too_long``,
``duplicate_clip_id``, and the bounds of untrusted media
(:mod:`madbench_common.media_guard`): ``file_too_large``, ``unsupported_container``,
``too_many_streams``, ``resolution_too_high``, ``video_size_invalid``,
``too_many_frames``, ``decode_timeout``, ``decode_memory``, ``decode_crashed``.
The original container is copied byte for byte into the store (later stages mux new
audio against its untouched video stream); every later stage that decodes video
reads only such accepted copies.
"""

from __future__ import annotations

import dataclasses
import logging
from functools import cached_property
from pathlib import Path
from typing import Any

import av
import numpy as np

from madbench_common.audio import MediaInfo, decode_audio, rms_dbfs
from madbench_common.errors import ConfigError, InputRejected
from madbench_common.media_guard import MediaLimits, decode_untrusted
from madbench_common.pipeline.stage import MapStage
from madbench_common.rows import SourceRow
from madbench_common.sources import SourceSpec, fetch_source, list_sources, source_size

__all__ = ["IngestStage", "check_source"]

log = logging.getLogger("madbench")
_TRUNCATION_TOLERANCE = 0.5  # seconds of audio missing vs the container's duration


def check_source(path: Path, sample_rate: int, limits: MediaLimits,
                 name: str) -> tuple[MediaInfo, np.ndarray]:
    """Stream facts and mono audio of a source, or :class:`InputRejected` with the reason."""
    if not path.exists():
        raise InputRejected(name, "missing", "file does not exist")
    if path.stat().st_size == 0:
        raise InputRejected(name, "empty", "file has zero bytes")
    decoded = decode_untrusted(path, sample_rate, limits, name)
    info, audio = decoded.info, decoded.audio
    if not info.has_audio:
        raise InputRejected(name, "no_audio", "no audio stream")
    if not info.has_video:
        raise InputRejected(name, "no_video", "no video stream")
    seconds = len(audio) / sample_rate
    if info.duration and seconds < info.duration - _TRUNCATION_TOLERANCE:
        raise InputRejected(name, "truncated",
                            f"decoded {seconds:.2f}s of audio, header says {info.duration:.2f}s")
    if not np.isfinite(audio).all():
        raise InputRejected(name, "unreadable", "audio has NaN or Inf samples")
    return info, audio


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
        limits = MediaLimits.from_params(p)
        size = source_size(spec.path)
        if size is not None and size > limits.max_file_bytes:
            raise InputRejected(spec.path, "file_too_large",
                                f"{size} bytes > {limits.max_file_bytes} bytes")
        path = fetch_source(spec.path, tmp)
        rate = int(p["sample_rate"])
        info, audio = check_source(path, rate, limits, spec.path)
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
