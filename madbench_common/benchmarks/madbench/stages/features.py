"""Feature-extraction stage: a frozen encoder's features for every sample, cached across runs.

Reads the ``samples`` manifest of ``assemble`` (and the ``perturbed`` samples of
``perturb``, the robustness conditions of the test split) and writes one
:class:`~madbench_common.benchmarks.madbench.rows.FeatureRow` per (sample, input mode, pairing). The
input identity is content-derived — the audio sha256 (``A``), the video sha256
(``V``) or the sha256 of both (``AV``) — so features live in a cache outside the
run, ``<store root>/_cache/features/<slug>-<version>/<identity>/<mode>/<input sha256>.npy``
(``identity``: the image, the adapter's code, its weights pins and loaded dtype), and
any later run (or protocol sharing the same mix) on the same model reuses them.

Shuffled pairing (paper §5.3: "the Shuffled condition (Sh) keeps the audio and label
unchanged and replaces only the video", at test time) is computed only for the
scene-consistency test samples, the only rows a shuffled score is read from: each
takes the video of **another test clip**. Test clips are put in a seeded random
cycle and each takes the video of the next one, so no sample ever gets its own
clip's video and every sample of a clip (all conditions and classes) gets the same
partner. The cycle depends only on the run seed — not on the stage name — so every
model's feature stage shows the same shuffled videos. The partner is not
constrained by scene (the paper gives none), so a partner may show a similar scene.
"""

from __future__ import annotations

import hashlib
import io
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from madbench_common.benchmarks.madbench.eval.tasks import SC_PROTOCOL
from madbench_common.benchmarks.madbench.rows import FeatureRow, PerturbedRow, SampleRow
from madbench_common.media.mux import sample_frames, video_digest
from madbench_common.models.registry import load_model
from madbench_common.models.roles import Frames
from madbench_common.pipeline.failures import is_fault, row_failure
from madbench_common.pipeline.paramspec import StageParams, param
from madbench_common.pipeline.stage import StageImpl

__all__ = ["FeatureStage", "image_id", "input_sha256", "shuffle_partners", "shuffle_rng",
           "shuffled_input"]

log = logging.getLogger("madbench")
_DECODED = 4
"""Distinct videos whose sampled frames a feature stage keeps (a clip's own and the
shuffled partner's)."""


def input_sha256(mode: str, audio_sha: str, video_sha: str) -> str:
    """The content identity of an encoder input."""
    if mode == "A":
        return audio_sha
    if mode == "V":
        return video_sha
    return hashlib.sha256(f"{audio_sha}:{video_sha}".encode()).hexdigest()


def shuffled_input(s: SampleRow) -> bool:
    """Whether a sample gets a shuffled-video input: clean scene-consistency test samples
    only (a robustness condition's samples are scored with their paired video)."""
    return (s.protocol == SC_PROTOCOL and s.split == "test"
            and not isinstance(s, PerturbedRow))


def shuffle_rng(seed: int) -> np.random.Generator:
    """The shuffle's generator: from the run seed alone, shared by every feature stage."""
    digest = hashlib.sha256(f"{seed}/shuffled-video".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def shuffle_partners(samples: Sequence[SampleRow],
                     rng: np.random.Generator) -> dict[str, SampleRow]:
    """sample id → the sample whose video it is shown with (another scene-consistency
    test clip); samples without a shuffled input, or a lone test clip, get none."""
    clips: dict[str, SampleRow] = {}
    for s in (s for s in samples if shuffled_input(s)):
        if s.clip_id not in clips or s.variant == "R":
            clips[s.clip_id] = s
    order = sorted(clips)
    cycle = [order[i] for i in rng.permutation(len(order))] if len(order) > 1 else []
    nxt = {clip: clips[cycle[(i + 1) % len(cycle)]] for i, clip in enumerate(cycle)}
    return {s.sample_id: nxt[s.clip_id] for s in samples
            if shuffled_input(s) and s.clip_id in nxt}


def image_id(image: str) -> str:
    """A short, path-safe identity of the image a stage ran in."""
    if "@sha256:" in image:
        return image.rsplit("@sha256:", 1)[1][:16]
    if image in ("", "embedded"):
        return "embedded"
    return hashlib.sha256(image.encode()).hexdigest()[:16]


class FeatureStage(StageImpl[FeatureRow]):
    """``samples`` → ``features`` for one encoder (params: model, modes, pairings, fps)."""

    row_type = FeatureRow
    id_field = "sample_id"
    separable = True

    @dataclass(frozen=True)
    class Params(StageParams):
        modes: list[str] = param(["A", "AV"], paper="§5.4", doc="input modes encoded (A "
                                 "audio, V video, AV both) where the encoder takes them")
        pairings: list[str] = param(["paired", "shuffled"], paper="§5.3", doc="paired video, "
                                    "and the scene-consistency test samples' shuffled video")
        fps: float = param(4.0, unit="fps", doc="rate of the frames the encoder sees")
        frame_size: int = param(112, unit="px (shorter side)", doc="size of those frames")
        max_frames: int = param(64, optional=True, unit="frames", doc="most frames per sample")
        samples_stage: str = param("assemble", optional=True, doc="the stage whose samples "
                                   "are encoded")

    p: Params

    @cached_property
    def samples(self) -> dict[str, SampleRow]:
        """The clean samples and, where the stage reads ``perturb``, every robustness
        condition's samples."""
        source = self.p.samples_stage
        rows: list[SampleRow] = list(self.ctx.read_input(source, SampleRow))
        if "perturb" in self.ctx.stage.inputs:
            rows += self.ctx.read_input("perturb", PerturbedRow)
        return {s.sample_id: s for s in rows if s.ok}

    @cached_property
    def encoder(self) -> Any:
        return load_model(self.p.model or self.ctx.stage.model)

    @cached_property
    def partners(self) -> dict[str, SampleRow]:
        return shuffle_partners(sorted(self.samples.values(), key=lambda s: s.sample_id),
                                shuffle_rng(self.ctx.seed))

    def plan(self) -> list[str]:
        return sorted(self.samples)

    def _jobs(self, s: SampleRow) -> list[tuple[str, str]]:
        """(mode, pairing) inputs of one sample: paired always, shuffled video where due."""
        modes = [m for m in self.p.modes if m in self.encoder.modes]
        pairings = self.p.pairings
        return [(m, p) for m in modes for p in pairings
                if p == "paired" or (m != "A" and shuffled_input(s))]

    def run_items(self, items: Sequence[str]) -> list[FeatureRow]:
        rows = []
        prov = self.ctx.provenance(self.encoder.slug, self.encoder.version)
        for item in items:
            s = self.samples[item]
            for mode, pairing in self._jobs(s):
                rows.append(self._row(s, mode, pairing).with_provenance(prov))
        return rows

    def _row(self, s: SampleRow, mode: str, pairing: str) -> FeatureRow:
        video = s if pairing == "paired" else self.partners.get(s.sample_id)
        if video is None:
            return FeatureRow(sample_id=s.sample_id, sample_sha256="", mode=mode,
                              pairing=pairing, status="rejected", reason="no_shuffle_partner")
        sha = input_sha256(mode, s.audio_sha256, video.video_sha256)
        try:
            encoded = self._encoded(sha, mode, s, video)
        except Exception as exc:  # one input's failure quarantines its row (a missing
            # module, weight or writable path, or a full disk, fails the stage instead)
            failed = row_failure(exc, f"{s.sample_id} {mode}/{pairing}")
            log.warning("%s: %s %s/%s failed: %s", self.ctx.stage.name, s.sample_id, mode,
                        pairing, failed)
            return FeatureRow(sample_id=s.sample_id, sample_sha256=sha, mode=mode,
                              pairing=pairing, status="rejected",
                              reason=failed.reason if is_fault(failed.reason) else "encode_failed",
                              detail=f"{s.sample_id} {mode}/{pairing}: {failed.detail}"[:500])
        return FeatureRow(sample_id=s.sample_id, sample_sha256=sha, mode=mode, pairing=pairing,
                          **encoded)

    def _encoded(self, sha: str, mode: str, s: SampleRow, video: SampleRow) -> dict[str, Any]:
        """The row's feature columns for one input (raises where encoding fails)."""
        return {"features": tuple(float(v) for v in self._cached(sha, mode, s, video))}

    @cached_property
    def identity(self) -> str:
        """What cached features depend on besides the input: the image, the encoder's adapter
        code, weights pins and loaded dtype (:func:`~madbench_common.pipeline.identity.
        cache_identity`), 16 hex digits."""
        from madbench_common.pipeline.identity import cache_identity

        slug = self.p.model or self.ctx.stage.model
        return cache_identity(slug, image_id(self.ctx.image), self.ctx.params,
                              self.encoder)[:16]

    def cache_key(self, mode: str, sha: str) -> str:
        return (f"_cache/features/{self.encoder.slug}-{self.encoder.version}/{self.identity}/"
                f"{mode}/{sha}.npy")

    def _cached(self, sha: str, mode: str, s: SampleRow, video: SampleRow) -> np.ndarray:
        store, key = self.ctx.run.store, self.cache_key(mode, sha)
        if store.exists(key):
            return np.load(io.BytesIO(store.get_bytes(key)))
        vec = self._encode(mode, s, video)
        buf = io.BytesIO()
        np.save(buf, vec)
        store.put_bytes(key, buf.getvalue())
        return vec

    @cached_property
    def _decoded(self) -> dict[str, tuple[Frames, float]]:
        return {}

    def _frames(self, video: SampleRow) -> tuple[Frames, float]:
        """Sampled frames of a sample's video. A clip's samples carry the same video
        packets (new audio beside the source's untouched video; robustness conditions too),
        so the last few decodes are kept by :func:`video_digest` (a demux, no decode)."""
        p = self.p
        with self.ctx.tempdir() as tmp:
            path = tmp / "video.mp4"
            path.write_bytes(self.ctx.run.get_bytes(self.ctx.run.key_of(video.video_uri),
                                                    video.video_sha256))
            key = video_digest(path)
            if key not in self._decoded:
                if len(self._decoded) >= _DECODED:
                    self._decoded.pop(next(iter(self._decoded)))
                self._decoded[key] = sample_frames(
                    path, fps=float(p.fps), size=p.frame_size, max_frames=p.max_frames)
            frames, rate = self._decoded[key]
            return frames.copy(), rate

    def _encode(self, mode: str, s: SampleRow, video: SampleRow) -> np.ndarray:
        kwargs: dict[str, Any] = {"mode": mode}
        if mode in ("A", "AV"):
            audio, rate = self.ctx.load_audio(s.audio_uri, s.audio_sha256)
            kwargs["audio"], kwargs["sample_rate"] = audio, rate
        if mode in ("V", "AV"):
            kwargs["frames"], kwargs["fps"] = self._frames(video)
        vec = np.asarray(self.encoder.encode(**kwargs), dtype=np.float32)
        if not np.isfinite(vec).all():
            raise ValueError("encoder returned NaN or inf")
        return vec
