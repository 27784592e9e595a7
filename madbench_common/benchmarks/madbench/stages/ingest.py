"""Ingest stage: probe each source, decode 16 kHz mono audio, keep the video untouched.

Every file is read through the media guard and rejected with a reason when it fails a
check (:func:`check_source`); the original container is stored byte for byte. The
fingerprint hashes the listing's bytes and every file's content
(:meth:`IngestStage.content_identity`). Identical content named by many rows is decoded
once per process (a memo keyed by the file's sha256).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import av
import numpy as np

from madbench_common.benchmarks.madbench.rows import SourceRow
from madbench_common.benchmarks.madbench.sources import (
    SourceListing,
    SourceSpec,
    fetch_source,
    id_key,
    listing_identity,
    local_sha256,
    read_listing,
    source_size,
)
from madbench_common.core.errors import ConfigError, InputRejected
from madbench_common.media.audio import MediaInfo, rms_dbfs
from madbench_common.media.guard import DecodedSource, MediaLimits, decode_stem, decode_untrusted
from madbench_common.pipeline.paramspec import StageParams, param
from madbench_common.pipeline.stage import MapStage

__all__ = ["IngestStage", "check_source"]

log = logging.getLogger("madbench")
_TRUNCATION_TOLERANCE = 0.5  # seconds of audio missing vs the container's duration
_MEMO_ENTRIES = 32
_SHA256 = re.compile(r"[0-9a-f]{64}")
_DECODED: OrderedDict[tuple[str, int, MediaLimits], DecodedSource | InputRejected] = OrderedDict()
"""Decoded sources (or their rejection) by content sha256, rate and limits: identical
content named by many rows is decoded once per process."""


def check_source(path: Path, sample_rate: int, limits: MediaLimits,
                 name: str) -> tuple[MediaInfo, np.ndarray]:
    """Stream facts and mono audio of a source, or :class:`InputRejected` with the reason.

    Reasons: ``missing``, ``empty``, ``unreadable``, ``truncated``, ``no_audio``,
    ``no_video``, ``silent``, ``too_short``, ``too_long``, ``non_finite_audio`` (NaN or Inf
    samples), and the bounds of untrusted media (:mod:`madbench_common.media.guard`):
    ``file_too_large``, ``unsupported_container``, ``too_many_streams``,
    ``resolution_too_high``, ``video_size_invalid``, ``too_many_frames``,
    ``decode_timeout``, ``decode_memory``, ``decode_crashed``, ``not_a_file``. The stage
    adds ``duplicate_clip_id``, ``clip_id_collision`` (:meth:`IngestStage.collisions`),
    what the listing found wrong with a row (:mod:`madbench_common.benchmarks.madbench.sources`:
    ``outside_sources``, ``bad_encoding``, ``bad_file_name``, ``bad_clip_id``,
    ``path_too_long``, ``unsupported_location``) and a reference stem's failures
    (``stem_<reason>``, e.g. ``stem_unsupported_container``, ``stem_no_audio``); any other
    failure on one clip is sorted by :mod:`madbench_common.pipeline.failures`.
    """
    decoded = _checked(path, sample_rate, limits, name)
    return decoded.info, decoded.audio


def _checked(path: Path, sample_rate: int, limits: MediaLimits, name: str,
             exact: bool = False) -> DecodedSource:
    if not path.exists():
        raise InputRejected(name, "missing", "file does not exist")
    if path.stat().st_size == 0:
        raise InputRejected(name, "empty", "file has zero bytes")
    decoded = decode_untrusted(path, sample_rate, limits, name, exact)
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
        raise InputRejected(name, "non_finite_audio", "audio has NaN or Inf samples")
    return decoded


def _memo_decode(sha: str, path: Path, rate: int, limits: MediaLimits, name: str,
                 exact: bool) -> DecodedSource:
    """:func:`_checked`, once per content: later rows of the same bytes reuse the result
    (a rejection too, renamed to the row's file)."""
    if not _SHA256.fullmatch(sha):  # missing, not a file, …: no content to share
        return _checked(path, rate, limits, name, exact)
    key = (sha, rate, limits)
    if key not in _DECODED:
        try:
            _DECODED[key] = _checked(path, rate, limits, name, exact)
        except InputRejected as exc:
            _DECODED[key] = exc
        while len(_DECODED) > _MEMO_ENTRIES:
            _DECODED.popitem(last=False)
    _DECODED.move_to_end(key)
    found = _DECODED[key]
    if isinstance(found, InputRejected):
        raise InputRejected(name, found.reason, found.detail)
    return found


class IngestStage(MapStage[SourceRow]):
    """Turn a sources listing into the ``sources`` manifest."""

    content_params = ("sources",)

    @dataclass(frozen=True)
    class Params(StageParams):
        sources: str = param("", optional=True, doc="the sources listing: a CSV or a folder "
                             "(path or s3:// URI); fingerprinted by the content it names")
        allow_outside_sources: bool = param(False, optional=True, doc="let the listing name "
                                            "files outside its own folder")
        min_duration: float = param(4.0, unit="s", paper="§3.2", doc="shortest clip kept "
                                    "(\"approximately 4–12 seconds long\")")
        max_duration: float = param(12.0, unit="s", paper="§3.2",
                                    doc="longest clip kept; decoding stops beyond it")
        sample_rate: int = param(16000, unit="Hz", doc="rate the audio is decoded to (the "
                                 "separator's and the QC models' rate)")
        silence_dbfs: float = param(-70.0, unit="dBFS", doc="a clip quieter than this RMS is "
                                    "rejected as silent")
        max_streams: int = param(8, doc="most streams a source container may hold "
                                 "(untrusted-media bound)")
        max_width: int = param(4096, unit="px", doc="widest video decoded (untrusted-media bound)")
        max_height: int = param(4096, unit="px", doc="tallest video decoded")
        max_fps: float = param(240.0, unit="fps", doc="highest video frame rate decoded")
        max_file_mb: int = param(1024, unit="MiB", doc="largest source file read")
        decode_timeout: float = param(60.0, unit="s", doc="wall-clock limit for probing and "
                                      "decoding one file")
        decode_memory_mb: int = param(1024, unit="MiB", doc="address space the decoding "
                                      "process may add")

    p: Params

    @classmethod
    def content_identity(cls, params: Mapping[str, Any]) -> Any:
        """The listing's bytes and every file's content, not the ``sources`` text: editing a
        transcript, adding a clip or replacing a video recomputes ingest, and naming the
        same CSV by another path does not."""
        return listing_identity(_listing(params), MediaLimits.from_params(params))

    @cached_property
    def listing(self) -> SourceListing:
        return _listing(self.ctx.params)

    @cached_property
    def specs(self) -> dict[str, list[SourceSpec]]:
        by_id: dict[str, list[SourceSpec]] = {}
        for spec in self.listing.specs:
            by_id.setdefault(spec.clip_id, []).append(spec)
        return by_id

    @cached_property
    def collisions(self) -> dict[str, str]:
        """Clip id → what it collides with: ids that only sanitising, Unicode normalisation
        or case made equal (``a b`` and ``a_b``, ``Clip`` and ``clip``) would be one file on
        some stores, so every row involved is quarantined, never merged."""
        by_key: dict[str, list[str]] = {}
        for cid in self.specs:
            by_key.setdefault(id_key(cid), []).append(cid)
        out: dict[str, str] = {}
        for cid, specs in self.specs.items():
            clash = by_key[id_key(cid)]
            given = {s.given_id for s in specs}
            if len(clash) > 1 or len(given) > 1:
                names = sorted({s.given_id for c in clash for s in self.specs[c]})
                out[cid] = (f"clip id {cid!r} collides after sanitising, Unicode "
                            f"normalisation or case folding: "
                            + ", ".join(repr(n) for n in names[:6])
                            + (" …" if len(names) > 6 else "") + "; give each a distinct id")
        return out

    def plan(self) -> list[str]:
        return sorted(self.specs)

    def rejected_row(self, item: str, exc: InputRejected) -> SourceRow:
        spec = self.specs[item][0]
        return SourceRow(clip_id=item, source_path=spec.label, status="rejected",
                         reason=exc.reason, detail=str(exc)).with_provenance(
                             self.ctx.provenance("ffmpeg", av.__version__))

    def run_item(self, item: str) -> SourceRow:
        specs = self.specs[item]
        if item in self.collisions:
            raise InputRejected(specs[0].label, "clip_id_collision", self.collisions[item])
        if len(specs) > 1:
            paths = ", ".join(s.label for s in specs)
            raise InputRejected(specs[0].label, "duplicate_clip_id",
                                f"clip id {item!r} is used by {paths}")
        spec = specs[0]
        if spec.problem:
            raise InputRejected(spec.label, spec.problem, spec.detail)
        if not spec.path.startswith("s3://") and not os.path.lexists(spec.path):
            # before any temporary folder: a listing of 100,000 missing files stays fast
            raise InputRejected(spec.label, "missing", "file does not exist")
        with self.ctx.tempdir() as tmp:
            return self._ingest(spec, tmp)

    def _ingest(self, spec: SourceSpec, tmp: Path) -> SourceRow:
        # The original container is copied byte for byte into the store, named with the
        # extension of the container FFmpeg found (later stages mux new audio against its
        # untouched video stream); every later stage that decodes video reads only such
        # accepted copies.
        p = self.p
        limits = MediaLimits.from_params(self.ctx.params)
        name = spec.label
        size = source_size(spec.path)
        if size is not None and size > limits.max_file_bytes:
            raise InputRejected(name, "file_too_large",
                                f"{size} bytes > {limits.max_file_bytes} bytes")
        path = fetch_source(spec.path, tmp, limits.max_file_bytes)
        rate = p.sample_rate
        local = not spec.path.startswith("s3://")
        decoded = _memo_decode(local_sha256(str(path), limits), path, rate, limits, name,
                               exact=local)
        info, audio = decoded.info, decoded.audio
        duration = len(audio) / rate
        if duration < p.min_duration:
            raise InputRejected(name, "too_short", f"{duration:.2f}s < {p.min_duration}s")
        if duration > p.max_duration:
            raise InputRejected(name, "too_long", f"{duration:.2f}s > {p.max_duration}s")
        level = rms_dbfs(audio)
        if level < p.silence_dbfs:
            raise InputRejected(name, "silent", f"RMS {level:.1f} dBFS")
        stems = self._reference_stems(spec, rate, len(audio), tmp, limits)
        video = self.ctx.run.put_file(self.ctx.key("video", f"{spec.clip_id}{decoded.extension}"),
                                      path)
        wav = self.ctx.save_audio(f"audio/{spec.clip_id}.wav", audio, rate)
        row = SourceRow(
            clip_id=spec.clip_id, source_path=name, speaker=spec.speaker,
            gender=spec.gender, source_group=spec.source_group or spec.clip_id,
            transcript=spec.transcript, scene_caption=spec.scene_caption,
            video_uri=video.uri, video_sha256=video.sha256, video_codec=info.video_codec,
            width=info.width, height=info.height, fps=info.fps,
            audio_uri=wav.uri, audio_sha256=wav.sha256, duration=duration, sample_rate=rate,
            orig_sample_rate=info.sample_rate, orig_channels=info.channels,
            orig_audio_codec=_audio_note(info),
        ).with_provenance(self.ctx.provenance("ffmpeg", av.__version__))
        return dataclasses.replace(row, **stems)

    def _reference_stems(self, spec: SourceSpec, rate: int, length: int, tmp: Path,
                         limits: MediaLimits) -> dict[str, Any]:
        """Each given stem decoded through the guard, padded or cut to the clip's length;
        a stem that fails rejects the clip (``stem_<reason>``, naming the stem)."""
        out: dict[str, Any] = {}
        for name, where in (("speech", spec.speech_stem), ("env", spec.env_stem)):
            if not where:
                continue
            try:
                path = fetch_source(where, tmp, limits.max_file_bytes)
                stem = decode_stem(path, rate, limits, where,
                                   exact=not where.startswith("s3://"))
            except InputRejected as exc:
                raise InputRejected(where, f"stem_{exc.reason}",
                                    f"{name}_stem of {spec.label}: {exc.detail}") from None
            stem = np.pad(stem, (0, max(0, length - len(stem))))[:length]
            info = self.ctx.save_audio(f"ref/{name}/{spec.clip_id}.wav", stem, rate)
            out[f"ref_{name}_uri"], out[f"ref_{name}_sha256"] = info.uri, info.sha256
        return out


def _audio_note(info: MediaInfo) -> str:
    """The audio codec, with which stream was used when there were several and how late
    the audio starts when it starts after the video (both recorded with the row)."""
    notes = [f"first of {info.audio_streams} audio streams"] if info.audio_streams > 1 else []
    if info.audio_offset:
        notes.append(f"starts {info.audio_offset:.2f}s after the video; padded")
    return info.audio_codec + (f" ({'; '.join(notes)})" if notes else "")


def _listing(params: Mapping[str, Any]) -> SourceListing:
    uri = params.get("sources")
    if not uri:
        raise ConfigError("ingest needs a 'sources' parameter (a CSV or a folder)")
    return read_listing(str(uri), bool(params.get("allow_outside_sources")),
                        MediaLimits.from_params(params))
