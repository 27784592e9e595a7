"""Robustness stage (``perturb``): every robustness condition on the test split of every protocol.

"Does the detector survive what happens to media on the way to it?" Each distinct audio
track of the test clips (all protocols, scene consistency included) runs through every
condition (:mod:`madbench_common.benchmarks.madbench.robustness`); every sample of the
track gets one :class:`~madbench_common.benchmarks.madbench.rows.PerturbedRow` per
condition (``sample_id = <clean id>@<condition>``, the clean labels and split, the
condition's parameters as configured and as measured). The only random choice is the
noise excerpt, drawn from the run seed and the clip id, so reruns are byte-identical.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from madbench_common.benchmarks.madbench.robustness.chain import apply_condition
from madbench_common.benchmarks.madbench.robustness.conditions import (
    Condition,
    builtin_conditions,
    parse_conditions,
)
from madbench_common.benchmarks.madbench.robustness.noise import BUILTIN, NoiseSet, load_noise_set
from madbench_common.benchmarks.madbench.rows import PerturbedRow, SampleRow
from madbench_common.core.types import Audio
from madbench_common.media.mux import remux_with_audio
from madbench_common.pipeline.paramspec import StageParams, param
from madbench_common.pipeline.stage import StageImpl

__all__ = ["PerturbStage", "perturbed_row"]

log = logging.getLogger("madbench")


def perturbed_row(clean: SampleRow, condition: Condition, index: int,
                  **fields: Any) -> PerturbedRow:
    """The clean sample's row under ``condition`` (``fields`` set the media and parameters)."""
    base = {f.name: getattr(clean, f.name) for f in dataclasses.fields(SampleRow)}
    base |= {"sample_id": f"{clean.sample_id}@{condition.name}",
             "clean_sample_id": clean.sample_id, "clean_audio_sha256": clean.audio_sha256,
             "condition": condition.name, "condition_index": index,
             "condition_family": condition.family}
    return PerturbedRow(**(base | fields))


class PerturbStage(StageImpl[PerturbedRow]):
    """``samples`` → ``perturbed`` (one item per test clip).

    Params: ``conditions`` (a list, or a mapping with a ``conditions`` list; default the
    packaged ``madbench_common/data/robustness.yaml``), ``noise`` (``builtin`` or a folder
    with ``noise.csv``), ``splits`` (default ``["test"]``), ``aac_coder`` (the mux's AAC
    quantiser search, as ``assemble``'s).
    """

    @dataclass(frozen=True)
    class Params(StageParams):
        conditions: list[dict[str, Any]] | dict[str, Any] = param(
            builtin_conditions(), shown="the packaged robustness.yaml",
            doc="perturbation conditions: a list, or a mapping with a conditions list")
        splits: list[str] = param(["test"], doc="splits whose samples are perturbed")
        noise: str = param(BUILTIN, doc="noise for noise conditions: builtin, or a folder "
                           "with noise.csv")
        aac_coder: str = param("fast", doc="the mux's AAC quantiser search, as assemble's")

    p: Params

    @cached_property
    def conditions(self) -> list[Condition]:
        return parse_conditions(self.p.conditions)

    @cached_property
    def noise(self) -> NoiseSet | None:
        needs = any(s.op == "noise" for c in self.conditions for s in c.chain)
        return load_noise_set(self.p.noise) if needs else None

    @cached_property
    def by_clip(self) -> dict[str, list[SampleRow]]:
        splits = set(self.p.splits)
        out: dict[str, list[SampleRow]] = {}
        for s in self.ctx.read_input("assemble", SampleRow):
            if s.ok and s.split in splits:
                out.setdefault(s.clip_id, []).append(s)
        return {k: sorted(v, key=lambda s: s.sample_id) for k, v in out.items()}

    def plan(self) -> list[str]:
        return sorted(self.by_clip) if self.conditions else []

    def run_items(self, items: Sequence[str]) -> list[PerturbedRow]:
        rows: list[PerturbedRow] = []
        for clip in items:
            tracks: dict[str, list[SampleRow]] = {}
            for s in self.by_clip[clip]:
                tracks.setdefault(s.audio_sha256, []).append(s)
            for samples in tracks.values():
                rows += self._track(clip, samples)
        return rows

    def _track(self, clip: str, samples: list[SampleRow]) -> list[PerturbedRow]:
        """Every condition on one distinct audio track, muxed beside the clip's untouched
        video stream as ``assemble`` muxes the clean track
        (:func:`~madbench_common.media.mux.remux_with_audio`: video packets copied byte for
        byte, AAC audio). A track that cannot be perturbed (e.g. a silent track under a
        noise condition) is quarantined per condition with reason ``perturb_failed``."""
        first = samples[0]
        audio, rate = self.ctx.load_audio(first.audio_uri, first.audio_sha256)
        rows: list[PerturbedRow] = []
        with self.ctx.tempdir() as tmp:
            video = tmp / "clean.mp4"
            video.write_bytes(self.ctx.run.get_bytes(self.ctx.run.key_of(first.video_uri),
                                                     first.video_sha256))
            for index, cond in enumerate(self.conditions):
                try:
                    out, record = apply_condition(audio, rate, cond, noise=self.noise,
                                                  noise_key=f"{self.ctx.seed}/{clip}")
                    media = self._save(clip, first, cond, out, rate, video, tmp)
                except (OSError, ValueError) as exc:
                    log.warning("perturb: %s %s failed: %s", first.sample_id, cond.name, exc)
                    rows += [perturbed_row(s, cond, index, status="rejected",
                                           reason="perturb_failed", detail=str(exc)[:200])
                             for s in samples]
                    continue
                params = json.dumps(record, sort_keys=True)
                prov = self.ctx.provenance("ffmpeg-pyav")
                rows += [perturbed_row(s, cond, index, condition_params=params, **media)
                         .with_provenance(prov) for s in samples]
        return rows

    def _save(self, clip: str, first: SampleRow, cond: Condition, audio: Audio, rate: int,
              video: Path, tmp: Path) -> dict[str, Any]:
        tag = f"{clip}-{first.audio_sha256[:12]}@{cond.name}"
        wav = self.ctx.save_audio(f"audio/{tag}.wav", audio, rate)
        mp4 = tmp / f"{tag}.mp4"
        mux = remux_with_audio(video, audio, rate, mp4,
                               aac_coder=self.p.aac_coder,
                               channels=1)
        info = self.ctx.run.put_file(self.ctx.key("video", mp4.name), mp4)
        return {"audio_uri": wav.uri, "audio_sha256": wav.sha256, "video_uri": info.uri,
                "video_sha256": info.sha256, "mux_audio_codec": mux.audio_codec,
                "mux_sample_rate": mux.sample_rate}
