"""Component plan: which generator setting makes which component of which clip.

A *setting* is one generator stage of the graph (role ``speech_generator`` or
``env_generator``, its branch in ``params["branch"]``): 3 speech branches × 2 and
3 environment paradigms × 2. Each clip gets ``speech_per_clip`` speech settings and
``env_per_clip`` scene-matched environment settings, rotated so every setting is
used equally often within a split (:func:`assign_settings`); the paper's full
build sets both to 6. Every clip also gets one scene-mismatched text-to-audio
component (prompt of an incompatible scene), alternating between the t2a settings.
Video- and audio-conditioned mismatches are not generated: assembly borrows a
track from a clip of an incompatible scene.

Cross-identity settings (``tts_cross``, ``vc``) take the source's pair of rank
``r``, where ``r`` is the setting's index among them, so the four targets of a
source are spread over the four cross-identity settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

from madbench_common.pipeline.graph import Stage
from madbench_common.pipeline.stage import StageImpl
from madbench_common.rows import ComponentRow, PairRow
from madbench_common.stages.clips import ClipInputs, assign_settings, load_clip_inputs

__all__ = ["CROSS_BRANCHES", "PlanComponentsStage", "component_id", "generator_stages"]

CROSS_BRANCHES = ("tts_cross", "vc")
_ROLE = {"speech": "speech_generator", "env": "env_generator"}


def generator_stages(stages: Sequence[Stage], component: str) -> list[Stage]:
    """The graph's generator stages for ``component`` (``speech`` or ``env``), in order."""
    return [s for s in stages if s.role == _ROLE[component]]


def component_id(clip_id: str, setting: str, scene_match: bool = True) -> str:
    return f"{clip_id}.{setting}" + ("" if scene_match else ".mismatch")


class PlanComponentsStage(StageImpl[ComponentRow]):
    """``splits`` + ``scenes`` + ``pairs`` → planned ``components`` (one task)."""

    row_type = ComponentRow
    id_field = "component_id"

    @cached_property
    def clips(self) -> dict[str, ClipInputs]:
        return load_clip_inputs(self.ctx, with_scene=True)

    @cached_property
    def targets(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for r in sorted(self.ctx.read_input("pairing", PairRow), key=lambda r: r.rank):
            if r.ok:
                out.setdefault(r.clip_id, []).append(r.target_clip_id)
        return out

    def plan(self) -> list[str]:
        return ["all"]

    def run_items(self, items: Sequence[str]) -> list[ComponentRow]:
        if not items:
            return []
        stages = list(self.ctx.graph)
        rows = self._speech(generator_stages(stages, "speech"))
        rows += self._env(generator_stages(stages, "env"))
        prov = self.ctx.provenance("plan")
        return [r.with_provenance(prov) for r in sorted(rows, key=lambda r: r.component_id)]

    def _by_split(self, clips: Sequence[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for c in clips:
            out.setdefault(self.clips[c].split.split, []).append(c)
        return out

    def _base(self, clip: ClipInputs, stage: Stage, component: str) -> dict[str, object]:
        scene = clip.scene
        assert scene is not None
        return {"clip_id": clip.clip_id, "component": component,
                "branch": str(stage.params["branch"]), "setting": stage.name,
                "split": clip.split.split, "scene_label": scene.scene_label,
                "duration": clip.source.duration, "sample_rate": clip.source.sample_rate}

    def _speech(self, stages: list[Stage]) -> list[ComponentRow]:
        cross = [s.name for s in stages if s.params["branch"] in CROSS_BRANCHES]
        rows = []
        for clip_id, names in self._assign(stages, "speech").items():
            clip = self.clips[clip_id]
            for stage in (s for s in stages if s.name in names):
                target = ""
                if stage.name in cross:
                    pool = self.targets.get(clip_id, [])
                    if not pool:
                        continue
                    target = pool[cross.index(stage.name) % len(pool)]
                rows.append(ComponentRow(
                    component_id=component_id(clip_id, stage.name), target_clip_id=target,
                    ref_clip_id=target or clip_id, prompt=clip.qc.transcript,
                    **self._base(clip, stage, "speech")))  # type: ignore[arg-type]
        return rows

    def _assign(self, stages: list[Stage], component: str) -> dict[str, tuple[str, ...]]:
        names = [s.name for s in stages]
        per_clip = int(self.ctx.params[f"{component}_per_clip"])
        return assign_settings(self._by_split(sorted(self.clips)), names, per_clip,
                               self.ctx.rng(component))

    def _env(self, stages: list[Stage]) -> list[ComponentRow]:
        rows = []
        for clip_id, names in self._assign(stages, "env").items():
            clip = self.clips[clip_id]
            for stage in (s for s in stages if s.name in names):
                rows.append(self._env_row(clip, stage, True))
        t2a = [s for s in stages if s.params["branch"] == "t2a"]
        if t2a:
            for clip_id, (name,) in assign_settings(
                    self._by_split(sorted(self.clips)), [s.name for s in t2a], 1,
                    self.ctx.rng("env_mismatch")).items():
                stage = next(s for s in t2a if s.name == name)
                rows.append(self._env_row(self.clips[clip_id], stage, False))
        return rows

    def _env_row(self, clip: ClipInputs, stage: Stage, match: bool) -> ComponentRow:
        scene = clip.scene
        assert scene is not None
        prompt = scene.prompt if match else scene.mismatch_prompt
        label = scene.scene_label if match else scene.mismatch_label
        return ComponentRow(component_id=component_id(clip.clip_id, stage.name, match),
                            scene_match=match, prompt=prompt, prompt_label=label,
                            negative_prompt=scene.negative_prompt,
                            **self._base(clip, stage, "env"))  # type: ignore[arg-type]
