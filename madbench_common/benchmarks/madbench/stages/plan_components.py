"""Component plan: the paper's candidate set — which generator setting makes which component.

A *setting* is one generator stage of the graph (role ``speech_generator`` or
``env_generator``, its branch in ``params["branch"]``): 3 speech branches × 2 and 3
environment paradigms × 2; QC then selects among the candidates (assembly). Speech
(§3.3): :meth:`PlanComponentsStage._speech`; environment (§3.4):
:meth:`PlanComponentsStage._env`. Demo knob: ``targets`` and ``mismatch_prompts``
(``make demo`` sets 1 and 1: 6 speech and 8 environment candidates per clip); the extra
mismatched labels are a seeded draw from the taxonomy's incompatible scenes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from madbench_common.benchmarks.madbench.rows import ComponentRow, PairRow
from madbench_common.benchmarks.madbench.sources import bounded_id
from madbench_common.benchmarks.madbench.stages.clips import ClipInputs, load_clip_inputs
from madbench_common.models.taxonomy import build_prompt, load_taxonomy
from madbench_common.pipeline.graph import Stage
from madbench_common.pipeline.paramspec import StageParams, param
from madbench_common.pipeline.stage import StageImpl

__all__ = ["CROSS_BRANCHES", "PlanComponentsStage", "component_id", "generator_stages",
           "mismatch_labels"]

CROSS_BRANCHES = ("tts_cross", "vc")
_ROLE = {"speech": "speech_generator", "env": "env_generator"}


def generator_stages(stages: Sequence[Stage], component: str) -> list[Stage]:
    """The graph's generator stages for ``component`` (``speech`` or ``env``), in order."""
    return [s for s in stages if s.role == _ROLE[component]]


def component_id(clip_id: str, setting: str, scene_match: bool = True, extra: str = "") -> str:
    """``<clip>.<setting>`` plus ``.<target>`` or ``.mismatch.<label>`` for the many-per-setting;
    bounded (:func:`~madbench_common.benchmarks.madbench.sources.bounded_id`): two 128-character
    clip ids must still name a file on the file store."""
    base = f"{clip_id}.{setting}" + ("" if scene_match else ".mismatch")
    return bounded_id(f"{base}.{extra}" if extra else base)


def mismatch_labels(label: str, first: str, k: int, seed: int) -> list[str]:
    """``k`` distinct incompatible labels for ``label``: ``first`` (the scene stage's pick),
    then a seeded draw from the rest of the taxonomy's ``mismatch`` list."""
    import numpy as np

    rest = sorted(set(load_taxonomy().fine[label].mismatch) - {first})
    order = [rest[i] for i in np.random.default_rng(seed).permutation(len(rest))]
    return [first, *order][:max(0, k)]


class PlanComponentsStage(StageImpl[ComponentRow]):
    """``splits`` + ``scenes`` + ``pairs`` → planned ``components`` (one task)."""

    @dataclass(frozen=True)
    class Params(StageParams):
        targets: int = param(4, unit="target speakers", paper="§3.3", doc="cross-identity "
                             "components per setting and clip: one per pairing target")
        mismatch_prompts: int = param(3, unit="prompts", paper="§3.4", doc="scene-mismatched "
                                      "prompts per text-to-audio setting and clip (6 + 6 = 12 "
                                      "per clip, nearest Table 1's 12.15)")

    p: Params

    @cached_property
    def clips(self) -> dict[str, ClipInputs]:
        return load_clip_inputs(self.ctx, with_scene=True)

    @cached_property
    def targets(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for r in sorted(self.ctx.read_input("pairing", PairRow), key=lambda r: r.rank):
            if r.ok and r.target_clip_id in self.clips:
                out.setdefault(r.clip_id, []).append(r.target_clip_id)
        return out

    def plan(self) -> list[str]:
        return ["all"]

    def run_items(self, items: Sequence[str]) -> list[ComponentRow]:
        if not items:
            return []
        stages = list(self.ctx.graph)
        rows = []
        for clip_id in sorted(self.clips):
            clip = self.clips[clip_id]
            rows += self._speech(clip, generator_stages(stages, "speech"))
            rows += self._env(clip, generator_stages(stages, "env"))
        prov = self.ctx.provenance("plan")
        return [r.with_provenance(prov) for r in sorted(rows, key=lambda r: r.component_id)]

    def _base(self, clip: ClipInputs, stage: Stage, component: str) -> dict[str, object]:
        scene = clip.scene
        assert scene is not None
        return {"clip_id": clip.clip_id, "component": component,
                "branch": str(stage.params["branch"]), "setting": stage.name,
                "split": clip.split.split, "scene_label": scene.scene_label,
                "duration": clip.source.duration, "sample_rate": clip.source.sample_rate}

    def _speech(self, clip: ClipInputs, stages: list[Stage]) -> list[ComponentRow]:
        """Same-identity settings once; cross-identity settings once per target.

        Paper §3.3: 34,056 components for 1,892 clips, exactly 18 per clip ("each source
        clip is paired with four target speakers, providing redundancy for QC-based
        selection"): every same-identity TTS setting once (2), and every cross-identity
        setting (cross TTS ×2, VC ×2) once per target, for the first ``targets`` of the
        clip's pairing ranks (4): 2 + 4 × 4 = 18. Cross-identity TTS speaks the source
        transcript in the target's voice, so its ``ref_text`` is the *target's* transcript;
        same-identity TTS gets the source's. A clip with fewer targets (pairing never
        relaxes a constraint silently) gets fewer candidates.
        """
        targets = self.targets.get(clip.clip_id, [])[: self.p.targets]
        rows = []
        for stage in stages:
            cross = stage.params["branch"] in CROSS_BRANCHES
            for target in (targets if cross else [""]):
                ref = self.clips[target] if target else clip
                rows.append(ComponentRow(
                    component_id=component_id(clip.clip_id, stage.name, extra=target),
                    target_clip_id=target, ref_clip_id=ref.clip_id, prompt=clip.qc.transcript,
                    ref_text=ref.qc.transcript,
                    **self._base(clip, stage, "speech")))  # type: ignore[arg-type]
        return rows

    def _env(self, clip: ClipInputs, stages: list[Stage]) -> list[ComponentRow]:
        """Every setting scene-matched; text-to-audio also ``mismatch_prompts`` mismatched.

        §3.4, Table 1: 22,987 components for 1,892 clips, 12.15 per clip. Every setting
        makes a scene-matched component (6); the text-to-audio settings also make
        ``mismatch_prompts`` scene-mismatched components each, from prompts of distinct
        incompatible scenes (2 × 3). 6 + 6 = 12 per clip is the whole-number plan nearest
        the paper's 12.15 (22,704 for 1,892 clips); the paper does not give its split.
        Video- and audio-conditioned mismatches are not generated (§3.4: they replace the
        track with one from an incompatible scene); assembly borrows them.
        """
        scene = clip.scene
        assert scene is not None
        k = self.p.mismatch_prompts
        seed = int(self.ctx.rng("mismatch", clip.clip_id).integers(0, 2**31 - 1))
        labels = mismatch_labels(scene.scene_label, scene.mismatch_label, k, seed)
        others = [build_prompt(label, clip.source.duration) for label in labels]
        rows: list[ComponentRow] = []
        for stage in stages:
            rows.append(self._env_row(clip, stage, scene.scene_label, scene.prompt,
                                      scene.negative_prompt, True))
            if stage.params["branch"] == "t2a":  # a mismatched scene keeps its own exclusions
                rows += [self._env_row(clip, stage, p.label, p.text, p.negative, False)
                         for p in others]
        return rows

    def _env_row(self, clip: ClipInputs, stage: Stage, label: str, prompt: str,
                 negative: str, match: bool) -> ComponentRow:
        return ComponentRow(
            component_id=component_id(clip.clip_id, stage.name, match,
                                      "" if match else label),
            scene_match=match, prompt=prompt, prompt_label=label, negative_prompt=negative,
            **self._base(clip, stage, "env"))  # type: ignore[arg-type]
