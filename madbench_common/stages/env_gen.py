"""Fake environmental-audio stages: one per setting (3 paradigms × 2 generators, paper §3.5).

Text-to-audio gets the scene prompt and the clip duration; video-to-audio also the
clip's frames (sampled at ``frame_fps``); audio-to-audio gets the source
environmental track ê and the prompt. Scene-mismatched text-to-audio components are
generated from the prompt of an incompatible scene (planned by
``plan_components``); mismatched video- and audio-conditioned tracks are borrowed
at assembly instead of generated.
"""

from __future__ import annotations

from typing import Any

from madbench_common.dsp import fit_length
from madbench_common.mux import sample_frames
from madbench_common.rows import ComponentRow
from madbench_common.stages.clips import PlannedComponentStage, component_seed, fetch_video
from madbench_common.types import Audio

__all__ = ["EnvGenStage"]


class EnvGenStage(PlannedComponentStage):
    """Planned environment components of this setting → generated ``components``."""

    def _conditioning(self, plan: ComponentRow) -> dict[str, Any]:
        clip = self.clips[plan.clip_id]
        if plan.branch == "a2a":
            env, _ = self.ctx.load_audio(clip.stem.env_uri, clip.stem.env_sha256)
            return {"source_env": env}
        if plan.branch == "v2a":
            p = self.ctx.params
            with self.ctx.tempdir() as tmp:
                frames, fps = sample_frames(fetch_video(self.ctx, clip.source, tmp),
                                            float(p["frame_fps"]), int(p["frame_size"]),
                                            int(p["max_frames"]))
            return {"frames": frames, "fps": fps}
        return {}

    def generate(self, plan: ComponentRow) -> Audio:
        n = round(plan.duration * plan.sample_rate)
        audio = self.model.generate(sample_rate=plan.sample_rate, duration=n / plan.sample_rate,
                                    prompt=plan.prompt, seed=component_seed(self.ctx,
                                                                            plan.component_id),
                                    **self._conditioning(plan))
        return fit_length(audio, n)
