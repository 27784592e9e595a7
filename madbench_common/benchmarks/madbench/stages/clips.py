"""Shared inputs of the build stages: one eligible clip's rows and audio, and setting plans.

:class:`ClipInputs` joins a clip's ``sources``, ``stems``, ``source_qc`` and ``splits``
rows (and ``scenes`` when present); :func:`load_clip_inputs` reads them once per
shard. :func:`speech_active` cuts ŝ to the source speech regions.
:class:`PlannedComponentStage` is the base of
the generator stages (each makes the planned components of its own setting).
"""

from __future__ import annotations

import dataclasses
import json
import time
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from madbench_common.benchmarks.madbench.rows import (
    ComponentRow,
    SceneRow,
    SourceQCRow,
    SourceRow,
    SplitRow,
    StemRow,
)
from madbench_common.core.compat import zip_strict
from madbench_common.core.errors import ConfigError, InputRejected
from madbench_common.core.types import Audio, Hertz
from madbench_common.media.dsp import n_samples
from madbench_common.models.registry import load_model_with
from madbench_common.pipeline.failures import model_rejection
from madbench_common.pipeline.paramspec import StageParams, param
from madbench_common.pipeline.stage import MapStage, StageContext

__all__ = [
    "ClipInputs",
    "PlannedComponentStage",
    "component_seed",
    "fetch_video",
    "length_fields",
    "load_clip_inputs",
    "speech_active",
]


@dataclass(frozen=True)
class ClipInputs:
    """Everything upstream knows about one eligible clip."""

    source: SourceRow
    stem: StemRow
    qc: SourceQCRow
    split: SplitRow
    scene: SceneRow | None = None

    @property
    def clip_id(self) -> str:
        return self.source.clip_id

    @property
    def regions(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        return self.qc.speech_starts, self.qc.speech_ends


def load_clip_inputs(ctx: StageContext, with_scene: bool = False) -> dict[str, ClipInputs]:
    """Eligible clips (those with a split) keyed by clip id."""
    sources = {r.clip_id: r for r in ctx.read_input("ingest", SourceRow) if r.ok}
    stems = {r.clip_id: r for r in ctx.read_input("separate", StemRow) if r.ok}
    qc = {r.clip_id: r for r in ctx.read_input("source_qc", SourceQCRow)}
    scenes = ({r.clip_id: r for r in ctx.read_input("scene", SceneRow) if r.ok}
              if with_scene else {})
    out = {}
    for sp in ctx.read_input("split", SplitRow):
        cid = sp.clip_id
        if with_scene and cid not in scenes:
            continue
        out[cid] = ClipInputs(sources[cid], stems[cid], qc[cid], sp, scenes.get(cid))
    return out


def speech_active(speech: Audio, starts: Sequence[float], ends: Sequence[float],
                  rate: Hertz) -> Audio:
    """The samples of ``speech`` inside the regions, concatenated (all of it if none)."""
    parts = [speech[max(0, n_samples(s, rate)): n_samples(e, rate)]
             for s, e in zip_strict(starts, ends)]
    parts = [p for p in parts if len(p)]
    return np.concatenate(parts).astype(np.float32) if parts else speech


def fetch_video(ctx: StageContext, source: SourceRow, tmp: Path) -> Path:
    """The clip's original container, checksum-verified, as a local file."""
    suffix = Path(ctx.run.key_of(source.video_uri)).suffix or ".mp4"
    path = tmp / f"{source.clip_id}{suffix}"
    path.write_bytes(ctx.run.get_bytes(ctx.run.key_of(source.video_uri), source.video_sha256))
    return path


def component_seed(ctx: StageContext, component_id: str) -> int:
    """A generator seed derived from the run seed and the component id."""
    return int(ctx.rng("seed", component_id).integers(0, 2**31 - 1))


class PlannedComponentStage(MapStage[ComponentRow]):
    """Base of the generator stages: the planned components whose setting is this stage."""

    @dataclass(frozen=True)
    class Params(StageParams):
        branch: str = param("", paper="§3.3, §3.4", doc="the stage's generation branch "
                            "(tts_same, tts_cross, vc; t2a, v2a, a2a), set per stage")
        model_args: dict[str, Any] | str = param({}, doc="the generator's constructor "
                                                 "arguments (diffusion steps, guidance …; a "
                                                 "mapping or its JSON); empty: its adapter's "
                                                 "defaults, the paper's or upstream's")

    p: Params

    @cached_property
    def planned(self) -> dict[str, ComponentRow]:
        rows = self.ctx.read_input("plan_components", ComponentRow)
        return {r.component_id: r for r in rows if r.setting == self.ctx.stage.name}

    @cached_property
    def clips(self) -> dict[str, ClipInputs]:
        return load_clip_inputs(self.ctx, with_scene=True)

    @cached_property
    def model(self) -> Any:
        return load_model_with(self.p.model or self.ctx.stage.model, self.p.model_args)

    def plan(self) -> list[str]:
        return sorted(self.planned)

    def rejected_row(self, item: str, exc: InputRejected) -> ComponentRow:
        return dataclasses.replace(self.planned[item], status="rejected", reason=exc.reason,
                                   detail=str(exc), generator=self.model.slug)

    def run_item(self, item: str) -> ComponentRow:
        plan = self.planned[item]
        model = self.model  # load outside the guard: missing weights are a config error
        start = time.perf_counter()
        try:
            audio = self.generate(plan)
        except (ConfigError, ValueError, RuntimeError) as exc:
            # a data error is generation_failed; a device or code fault counts against the
            # stage's rejection budget; a GPU out of memory is raised again (row_failure)
            raise model_rejection(exc, item, "generation_failed") from None
        seconds = time.perf_counter() - start
        info = self.ctx.save_audio(f"{plan.component}/{item}.wav", audio, plan.sample_rate)
        # The generator call's seconds go to the shard marker (``item_seconds``), never to
        # the manifest: a wall-clock time there would change its sha256 on every rerun and
        # with it every downstream fingerprint (``gen_seconds`` stays 0).
        self.item_seconds[item] = round(seconds, 4)
        settings = getattr(model, "last_settings", None) or {}
        return dataclasses.replace(
            plan, generator=model.slug, uri=info.uri, sha256=info.sha256,
            duration=len(audio) / plan.sample_rate,
            gen_seed=component_seed(self.ctx, item),
            gen_settings=json.dumps(settings, sort_keys=True) if settings else "",
            **length_fields(settings, len(audio) / plan.sample_rate),
        ).with_provenance(self.ctx.provenance(model.slug, model.version))

    @abstractmethod
    def generate(self, plan: ComponentRow) -> Audio:
        """The component's audio: mono float32 at ``plan.sample_rate``, clip length."""


def length_fields(settings: Mapping[str, Any], target: float) -> dict[str, Any]:
    """The length columns of a generated component from its ``last_settings``.

    Speech adapters report ``duration_control`` and ``length_correction`` themselves.
    An environment adapter reports its native length and ``fit``
    (:func:`madbench_common.models.env_common.fit_output`); a ``loop`` or ``pad`` is a
    length fix-up of target / native seconds, ``exact`` and ``trim`` none (1.0). Component
    QC bounds it (paper §3.3–3.4 "duration alignment").
    """
    out = {k: settings[k] for k in ("duration_control", "length_correction") if k in settings}
    native = settings.get("native_seconds")
    if "length_correction" not in out and "fit" in settings and native:
        fixed = settings["fit"] in ("loop", "pad")
        out["length_correction"] = round(target / float(native), 6) if fixed else 1.0
    return out
