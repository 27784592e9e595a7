"""Feature-extraction stage: a frozen encoder's features for every sample, cached across runs.

Writes one :class:`~madbench_common.benchmarks.madbench.rows.FeatureRow` per (sample, input
mode, pairing) of the ``assemble`` and ``perturb`` samples. Inputs are identified by
content (the audio, video or both's sha256), so features live in a cache outside the run,
keyed also by the model's identity, and later runs on the same model reuse them.
Shuffled pairing (paper §5.3) is computed for the scene-consistency test samples only:
test clips form a seeded cycle and each takes the next clip's video, so no sample gets its
own video, every sample of a clip gets the same partner, and every model's stage sees the
same shuffled videos.
"""

from __future__ import annotations

import hashlib
import io
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from madbench_common.benchmarks.madbench.eval.tasks import SC_PROTOCOL
from madbench_common.benchmarks.madbench.rows import FeatureRow, PerturbedRow, SampleRow
from madbench_common.media.mux import sample_frames, video_digest
from madbench_common.models.batching import embed_batch
from madbench_common.models.catalog import gpu_batch
from madbench_common.models.registry import load_model
from madbench_common.models.roles import Frames
from madbench_common.pipeline.failures import free_gpu_memory, is_fault, is_gpu_oom, row_failure
from madbench_common.pipeline.paramspec import StageParams, batch_param, param
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
        batch: int | None = batch_param("inputs")

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

    def batch_size(self) -> int:
        """Inputs per model call for the current encoder: the stage's ``batch`` parameter,
        else its card's ``gpu.batch`` (:func:`~madbench_common.models.catalog.gpu_batch`),
        else 1."""
        return self.p.batch or gpu_batch(str(getattr(self.encoder, "slug", "")),
                                         self.ctx.stage.name)

    def run_items(self, items: Sequence[str]) -> list[FeatureRow]:
        rows = []
        prov = self.ctx.provenance(self.encoder.slug, self.encoder.version)
        jobs = [(self.samples[item], mode, pairing) for item in items
                for mode, pairing in self._jobs(self.samples[item])]
        size = self.batch_size()
        if size > 1:
            self._prefetch(jobs, size)
        try:
            for s, mode, pairing in jobs:
                rows.append(self._row(s, mode, pairing).with_provenance(prov))
        finally:
            self._pending.clear()
        return rows

    @cached_property
    def _pending(self) -> dict[tuple[str, str], Any]:
        """(mode, input sha256) → a batch's checked result, until its row takes it."""
        return {}

    def _prefetch(self, jobs: Sequence[tuple[SampleRow, str, str]], size: int) -> None:
        """Encode the uncached inputs of ``jobs``, ``size`` of one mode per model call, into
        :attr:`_pending`. A batch that raises (a bad input, GPU memory) is left to
        :meth:`_row`, input by input at batch 1: a bad input is rejected with its own
        reason and the others still get their rows; an output that fails the checks is
        recomputed alone the same way. Rows and their order are those of batch 1."""
        todo: dict[tuple[str, str], tuple[SampleRow, SampleRow]] = {}
        for s, mode, pairing in jobs:
            video = s if pairing == "paired" else self.partners.get(s.sample_id)
            if video is None:
                continue
            key = (mode, input_sha256(mode, s.audio_sha256, video.video_sha256))
            if key not in todo and not self.ctx.run.store.exists(self.cache_key(*key)):
                todo[key] = (s, video)
        for mode in dict.fromkeys(mode for mode, _ in todo):
            keys = [k for k in todo if k[0] == mode]
            for chunk in (keys[i:i + size] for i in range(0, len(keys), size)):
                if len(chunk) > 1:
                    self._encode_chunk(chunk, todo)

    def _encode_chunk(self, chunk: Sequence[tuple[str, str]],
                      todo: Mapping[tuple[str, str], tuple[SampleRow, SampleRow]]) -> None:
        try:
            results = self._call_batch([self._inputs(mode, *todo[(mode, sha)])
                                        for mode, sha in chunk])
        except Exception as exc:  # each input again alone, in _row, with its own reason
            if is_gpu_oom(exc):
                free_gpu_memory()
            log.warning("%s: a batch of %d inputs failed (%s: %s); encoding them one by one",
                        self.ctx.stage.name, len(chunk), type(exc).__name__, exc)
            return
        for key, result in zip(chunk, results):
            try:
                self._pending[key] = self._checked(result)
            except ValueError:
                continue  # recomputed alone in _row, which rejects it with the reason

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
        vec = self._pending.pop((mode, sha), None)
        vec = self._encode(mode, s, video) if vec is None else vec
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

    def _inputs(self, mode: str, s: SampleRow, video: SampleRow) -> dict[str, Any]:
        """The model call's keyword arguments for one input (audio and/or frames)."""
        kwargs: dict[str, Any] = {"mode": mode}
        if mode in ("A", "AV"):
            audio, rate = self.ctx.load_audio(s.audio_uri, s.audio_sha256)
            kwargs["audio"], kwargs["sample_rate"] = audio, rate
        if mode in ("V", "AV"):
            kwargs["frames"], kwargs["fps"] = self._frames(video)
        return kwargs

    def _call(self, kwargs: Mapping[str, Any]) -> Any:
        """One input's model output (batch 1)."""
        return self.encoder.encode(**kwargs)

    def _call_batch(self, inputs: Sequence[Mapping[str, Any]]) -> list[Any]:
        """Several inputs' outputs, as :meth:`_call` gives each: the encoder's batched
        ``embed_batch`` where it has one, else :meth:`_call` in turn."""
        if hasattr(self.encoder, "embed_batch"):
            return [e.vector for e in embed_batch(self.encoder, inputs)]
        return [self._call(kwargs) for kwargs in inputs]

    def _checked(self, out: Any) -> Any:
        """The cached value of one output; a ValueError where it is unusable."""
        vec = np.asarray(out, dtype=np.float32)
        if not np.isfinite(vec).all():
            raise ValueError("encoder returned NaN or inf")
        return vec

    def _encode(self, mode: str, s: SampleRow, video: SampleRow) -> Any:
        return self._checked(self._call(self._inputs(mode, s, video)))
