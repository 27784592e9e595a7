"""Fake-speech stages: one per setting (3 branches × 2 generators, paper §3.5).

Same-identity TTS re-speaks the source transcript in the source speaker's voice (ŝ
as reference); cross-identity TTS speaks it in the paired target speaker's voice;
voice conversion converts ŝ towards the target. The generator is asked for exactly
the source's speech duration (the summed source speech regions) and the result is
fitted into those regions (:func:`madbench_common.media.dsp.place_in_regions`): every
non-speech region of the fake track is digital silence, and the track is exactly
as long as the source clip.
"""

from __future__ import annotations

from madbench_common.benchmarks.madbench.rows import ComponentRow
from madbench_common.benchmarks.madbench.stages.clips import (
    PlannedComponentStage,
    component_seed,
    speech_active,
)
from madbench_common.core.errors import InputRejected
from madbench_common.core.types import Audio
from madbench_common.media.dsp import place_in_regions
from madbench_common.models.roles import SpeechGenerator

__all__ = ["SpeechGenStage", "generate_speech", "reference_text"]


def generate_speech(gen: SpeechGenerator, *, source: Audio, reference: Audio, rate: int,
                    starts: tuple[float, ...], ends: tuple[float, ...], text: str,
                    seed: int, ref_text: str | None = None) -> Audio:
    """A fake speech track for one clip, placed into the source speech regions.

    ``source`` and ``reference`` are full-length ŝ tracks of the source and of the
    reference speaker (the source itself for same-identity TTS). ``ref_text`` is what
    the reference says: the source transcript (``text``, the default) for same-identity
    TTS, the target's own transcript for cross-identity TTS.
    """
    active = speech_active(source, starts, ends, rate)
    ref = speech_active(reference, starts, ends, rate) if reference is source else reference
    duration = len(active) / rate
    kwargs = {"source_audio": active} if gen.branch == "vc" else {}
    speech = gen.generate(sample_rate=rate, duration=duration, ref_audio=ref,
                          ref_text=text if ref_text is None else ref_text, text=text,
                          seed=seed, **kwargs)
    return place_in_regions(speech, starts, ends, rate, len(source))


def reference_text(plan: ComponentRow) -> str:
    """What the reference audio says: the source transcript for same-identity speech,
    the target's own transcript for a cross-identity plan (§3.3). A cross-identity plan
    whose target transcript is empty is rejected (``no_target_transcript``): the
    source's transcript would pair the target's audio with words it does not say, and a
    TTS conditioned on that mismatch makes worse speech that QC may not catch."""
    if plan.branch != "tts_cross":  # same-identity TTS; voice conversion reads no text
        return plan.ref_text or plan.prompt
    if not plan.ref_text.strip():
        raise InputRejected(plan.component_id, "no_target_transcript",
                            f"target {plan.target_clip_id} has no "
                            "transcript to condition the reference on")
    return plan.ref_text


class SpeechGenStage(PlannedComponentStage):
    """Planned speech components of this setting → generated ``components``."""

    def _speech(self, clip_id: str) -> Audio:
        stem = self.clips[clip_id].stem
        return self.ctx.load_audio(stem.speech_uri, stem.speech_sha256)[0]

    def generate(self, plan: ComponentRow) -> Audio:
        clip = self.clips[plan.clip_id]
        source = self._speech(plan.clip_id)
        if plan.target_clip_id:
            target = self.clips.get(plan.target_clip_id)
            if target is None:
                raise InputRejected(plan.component_id, "missing_target", plan.target_clip_id)
            t_qc = target.qc
            reference = speech_active(self._speech(plan.target_clip_id), t_qc.speech_starts,
                                      t_qc.speech_ends, target.source.sample_rate)
        else:
            reference = source
        starts, ends = clip.regions
        return generate_speech(self.model, source=source, reference=reference,
                               rate=plan.sample_rate, starts=starts, ends=ends,
                               text=plan.prompt, seed=component_seed(self.ctx, plan.component_id),
                               ref_text=reference_text(plan))
