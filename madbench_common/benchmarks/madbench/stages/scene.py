"""Scene stage: describe each eligible clip's video, assign a fine taxonomy label, build prompts.

Scene labelling is two steps (paper §3.4): ``describe`` (frames → caption; the
reference describer returns the sources' ``scene_caption``, the ``scene-qwen25vl``
image runs Qwen2.5-VL) and ``assign`` (caption → fine label: the deterministic keyword
step for references, a constrained VLM prompt for Qwen2.5-VL; the row records the
method and the raw answer from the labeller's ``last_assignment``). The label fixes
the scene-matched generation prompt and, through the taxonomy's incompatible scenes,
the label and prompt of the scene-mismatched one.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from madbench_common.benchmarks.madbench.rows import SceneRow
from madbench_common.benchmarks.madbench.stages.clips import (
    ClipInputs,
    fetch_video,
    load_clip_inputs,
)
from madbench_common.core.errors import ConfigError, InputRejected
from madbench_common.media.mux import sample_frames
from madbench_common.models.registry import load_model
from madbench_common.models.roles import SceneLabeller
from madbench_common.models.taxonomy import build_prompt, load_taxonomy, pick_mismatch
from madbench_common.pipeline.paramspec import StageParams, param
from madbench_common.pipeline.stage import MapStage

__all__ = ["SceneStage", "label_scene"]


def label_scene(labeller: SceneLabeller, caption: str, duration: float, seed: int,
                ) -> dict[str, str]:
    """Label, coarse label, prompts and a mismatch label for an already-made caption."""
    tax = load_taxonomy()
    label = labeller.assign(caption)
    if label not in tax.fine:
        raise InputRejected(caption, "unknown_label", f"labeller returned {label!r}")
    how = getattr(labeller, "last_assignment", None) or {}
    fine = tax.fine[label]
    prompt = build_prompt(label, duration, tax)
    other = pick_mismatch(label, seed, tax)
    return {"scene_label": label, "coarse_label": fine.coarse,
            "domain": tax.coarse[fine.coarse].domain, "prompt": prompt.text,
            "negative_prompt": prompt.negative, "mismatch_label": other,
            "mismatch_prompt": build_prompt(other, duration, tax).text,
            "taxonomy_version": tax.version, "label_method": how.get("method", "keyword"),
            "label_raw": how.get("raw", "")}


class SceneStage(MapStage[SceneRow]):
    """``splits`` (eligible clips) → ``scenes``."""

    @dataclass(frozen=True)
    class Params(StageParams):
        frame_fps: float = param(1.0, unit="fps", paper="§3.4", doc="rate of the frames the "
                                 "scene labeller sees (the paper names the model, Qwen2.5-VL-32B, "
                                 "not its frames: our choice)")
        frame_size: int = param(336, unit="px (shorter side)", doc="size of those frames")
        max_frames: int = param(16, unit="frames", doc="most frames per clip")

    p: Params

    @cached_property
    def clips(self) -> dict[str, ClipInputs]:
        return load_clip_inputs(self.ctx)

    @cached_property
    def labeller(self) -> SceneLabeller:
        model: SceneLabeller = load_model(self.p.model or self.ctx.stage.model)
        return model

    def plan(self) -> list[str]:
        return sorted(self.clips)

    def rejected_row(self, item: str, exc: InputRejected) -> SceneRow:
        return SceneRow(clip_id=item, status="rejected", reason=exc.reason, detail=str(exc))

    def run_item(self, item: str) -> SceneRow:
        clip = self.clips[item]
        src = clip.source
        p = self.p
        with self.ctx.tempdir() as tmp:
            frames, fps = sample_frames(fetch_video(self.ctx, src, tmp), float(p.frame_fps),
                                        p.frame_size, p.max_frames)
        try:
            caption = self.labeller.describe(frames, fps, hint=src.scene_caption)
        except ConfigError as exc:
            raise InputRejected(item, "no_caption", str(exc)) from None
        hint = " ".join(src.scene_caption.split())
        source = "hint" if self.labeller.reference and caption == hint else "model"
        seed = int(self.ctx.rng("mismatch", item).integers(0, 2**31 - 1))
        fields = label_scene(self.labeller, caption, src.duration, seed)
        return SceneRow(clip_id=item, split=clip.split.split, source_group=src.source_group,
                        caption=caption, caption_source=source,
                        **fields).with_provenance(  # type: ignore[arg-type]
            self.ctx.provenance(self.labeller.slug, self.labeller.version))
