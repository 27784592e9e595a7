"""Fake environmental-audio stages: one per setting (3 paradigms × 2 generators, paper §3.5).

Text-to-audio gets the scene prompt, its negative prompt (the scene's exclusions) and
the clip duration; video-to-audio also the clip's frames (at the model's
``frame_request`` where it declares one, else the stage's ``frame_fps``/``frame_size``);
audio-to-audio gets the source environmental track ê and the prompts. The generator's
seed and the settings it reports (``last_settings``) are stored on the component row.
Scene-mismatched text-to-audio components are generated from the prompt of an
incompatible scene (planned by ``plan_components``); mismatched video- and
audio-conditioned tracks are borrowed at assembly instead of generated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from madbench_common.benchmarks.madbench.rows import ComponentRow
from madbench_common.benchmarks.madbench.stages.clips import (
    PlannedComponentStage,
    component_seed,
    fetch_video,
)
from madbench_common.core.types import Audio
from madbench_common.media.dsp import fit_length
from madbench_common.media.mux import sample_frames
from madbench_common.pipeline.paramspec import param

__all__ = ["EnvGenStage"]


class EnvGenStage(PlannedComponentStage):
    """Planned environment components of this setting → generated ``components``."""

    @dataclass(frozen=True)
    class Params(PlannedComponentStage.Params):
        frame_fps: float = param(2.0, optional=True, unit="fps", doc="rate of the frames a "
                                 "video-to-audio model without a frame_request of its own sees")
        frame_size: int = param(112, optional=True, unit="px (shorter side)",
                                doc="size of those frames")
        max_frames: int = param(64, optional=True, unit="frames", doc="most frames per clip")

    p: Params

    def _conditioning(self, plan: ComponentRow) -> dict[str, Any]:
        clip = self.clips[plan.clip_id]
        if plan.branch == "a2a":
            env, _ = self.ctx.load_audio(clip.stem.env_uri, clip.stem.env_sha256)
            return {"source_env": env}
        if plan.branch == "v2a":
            fps, size, cap = self._frame_request()
            with self.ctx.tempdir() as tmp:
                frames, got = sample_frames(fetch_video(self.ctx, clip.source, tmp), fps, size, cap)
            return {"frames": frames, "fps": got}
        return {}

    def _frame_request(self) -> tuple[float, int, int]:
        """Frame rate, shorter side and cap: the model's ``frame_request`` if it declares one
        (a video model needs its own rate and size), else the stage's parameters."""
        want = getattr(self.model, "frame_request", None)
        if want is not None:
            fps, size, cap = want
            return float(fps), int(size), int(cap)
        p = self.p
        return float(p.frame_fps), p.frame_size, p.max_frames

    def generate(self, plan: ComponentRow) -> Audio:
        n = round(plan.duration * plan.sample_rate)
        audio = self.model.generate(sample_rate=plan.sample_rate, duration=n / plan.sample_rate,
                                    prompt=plan.prompt, negative_prompt=plan.negative_prompt,
                                    seed=component_seed(self.ctx, plan.component_id),
                                    **self._conditioning(plan))
        return fit_length(audio, n)
