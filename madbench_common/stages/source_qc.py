"""Source QC stage: speech coverage, transcript, leakage, environment level, clipping.

Every score goes into the ``source_qc`` manifest whether or not the clip passes;
``eligible`` and ``fail_reasons`` apply the configurable thresholds.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np

from madbench_common.audio import rms_dbfs
from madbench_common.errors import InputRejected
from madbench_common.pipeline.stage import MapStage
from madbench_common.reference.vad import coverage
from madbench_common.registry import load_model
from madbench_common.roles import ASR, VAD, Segment
from madbench_common.rows import SourceQCRow, SourceRow, StemRow

__all__ = ["SourceQCStage", "clip_fraction", "eligibility"]

_CLIP_LEVEL = 0.999


def clip_fraction(audio: np.ndarray) -> float:
    """Share of samples at or beyond ±0.999 full scale."""
    return float(np.mean(np.abs(audio) >= _CLIP_LEVEL)) if audio.size else 0.0


def eligibility(scores: dict[str, Any], params: dict[str, Any]) -> tuple[str, ...]:
    """The failed checks (empty when the clip is eligible)."""
    fails = []
    if scores["speech_coverage"] < params["min_speech_coverage"]:
        fails.append("low_speech_coverage")
    asr = scores["asr_coverage"]
    if asr is not None and asr < params["min_asr_coverage"]:
        fails.append("low_asr_coverage")
    if not scores["transcript"].strip():
        fails.append("no_transcript")
    if scores["env_leakage"] > params["max_env_leakage"]:
        fails.append("speech_leakage_in_env")
    if scores["env_rms_dbfs"] < params["min_env_dbfs"]:
        fails.append("low_env_energy")
    if scores["clip_fraction"] > params["max_clip_fraction"]:
        fails.append("clipping")
    return tuple(fails)


class SourceQCStage(MapStage[SourceQCRow]):
    """``sources`` + ``stems`` → ``source_qc``."""

    row_type = SourceQCRow

    @cached_property
    def inputs(self) -> dict[str, tuple[SourceRow, StemRow]]:
        sources = {r.clip_id: r for r in self.ctx.read_input("ingest", SourceRow) if r.ok}
        stems = self.ctx.read_input("separate", StemRow)
        return {s.clip_id: (sources[s.clip_id], s) for s in stems if s.ok}

    @cached_property
    def vad(self) -> VAD:
        model: VAD = load_model(self.ctx.params["vad"])
        return model

    @cached_property
    def asr(self) -> ASR:
        model: ASR = load_model(self.ctx.params["asr"])
        return model

    def plan(self) -> list[str]:
        return sorted(self.inputs)

    def rejected_row(self, item: str, exc: InputRejected) -> SourceQCRow:
        return SourceQCRow(clip_id=item, status="rejected", reason=exc.reason, detail=str(exc))

    def run_item(self, item: str) -> SourceQCRow:
        src, stem = self.inputs[item]
        mix, rate = self.ctx.load_audio(src.audio_uri, src.audio_sha256)
        speech, _ = self.ctx.load_audio(stem.speech_uri, stem.speech_sha256)
        env, _ = self.ctx.load_audio(stem.env_uri, stem.env_sha256)
        segments, env_segments = self._vad_pair(speech, env, rate)
        duration = len(mix) / rate
        scores: dict[str, Any] = {
            "speech_coverage": coverage(segments, duration),
            "speech_seconds": sum(s.end - s.start for s in segments),
            "speech_starts": tuple(s.start for s in segments),
            "speech_ends": tuple(s.end for s in segments),
            "env_leakage": coverage(env_segments, duration),
            "env_rms_dbfs": rms_dbfs(env),
            "clip_fraction": clip_fraction(mix),
            **self._transcript(src, speech, rate),
        }
        fails = eligibility(scores, self.ctx.params)
        slug = f"{self.vad.slug}+{self.asr.slug if scores['transcript_source'] == 'asr' else ''}"
        return SourceQCRow(clip_id=item, eligible=not fails, fail_reasons=fails,
                           **scores).with_provenance(
            self.ctx.provenance(slug.rstrip("+"), self.vad.version))

    def _vad_pair(self, speech: np.ndarray, env: np.ndarray, rate: int) -> list[list[Segment]]:
        """VAD of ŝ and ê, batched into one pass when the model supports it."""
        many = getattr(self.vad, "segments_many", None)
        if many is not None:
            result: list[list[Segment]] = many([speech, env], rate)
            return result
        return [self.vad.segments(speech, rate), self.vad.segments(env, rate)]

    def _transcript(self, src: SourceRow, speech: np.ndarray, rate: int) -> dict[str, Any]:
        if src.transcript.strip():
            return {"transcript": src.transcript, "transcript_source": "given",
                    "asr_coverage": None}
        result = self.asr.transcribe(speech, rate)
        return {"transcript": result.text, "transcript_source": "asr",
                "asr_coverage": result.coverage}
