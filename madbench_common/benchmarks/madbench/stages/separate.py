"""Separation stage: speech estimate ŝ from the separator, residual ê = x − ŝ.

Mixture consistency holds by construction (ê is defined as the residual), so
ŝ + ê reproduces x up to float32 rounding; ``mixture_error`` records the largest
deviation. Where the sources carry clean stems, SI-SDR of ŝ and ê is reported.
A multi-source separator (MossFormer2: two outputs) also reports which output it took
as ŝ, by which rule, and the per-output figures; they go on the stems row.
"""

from __future__ import annotations

import dataclasses
from functools import cached_property
from typing import Any

import numpy as np

from madbench_common.benchmarks.madbench.rows import SourceRow, StemRow
from madbench_common.core.errors import InputRejected
from madbench_common.media.audio import si_sdr
from madbench_common.models.registry import load_model
from madbench_common.models.roles import SeparatedSpeech, Separator
from madbench_common.pipeline.stage import MapStage

__all__ = ["SeparateStage", "separate_clip"]


def separate_clip(separator: Separator, audio: np.ndarray, rate: int) -> tuple[
        np.ndarray, np.ndarray, dict[str, Any]]:
    """(ŝ, ê, source choice) with ê = x − ŝ, both float32 and as long as ``audio``.

    The choice holds the :class:`StemRow` fields ``speech_source``, ``source_rule``,
    ``source_scores`` and ``source_gains`` for a multi-source separator, else nothing.
    """
    detailed = getattr(separator, "separate_detailed", None)
    choice: dict[str, Any] = {}
    if detailed is None:
        raw = separator.separate(audio, rate)
    else:
        result: SeparatedSpeech = detailed(audio, rate)
        raw = result.speech
        choice = {"speech_source": result.source, "source_rule": result.rule,
                  "source_scores": tuple(result.scores), "source_gains": tuple(result.gains)}
    speech = np.asarray(raw, dtype=np.float32)
    if speech.shape != audio.shape or not np.isfinite(speech).all():
        raise ValueError(f"separator {separator.slug} returned a bad estimate")
    return speech, (audio - speech).astype(np.float32), choice


class SeparateStage(MapStage[StemRow]):
    """``sources`` → ``stems``."""

    @cached_property
    def sources(self) -> dict[str, SourceRow]:
        return {r.clip_id: r for r in self.ctx.read_input("ingest", SourceRow) if r.ok}

    @cached_property
    def separator(self) -> Separator:
        sep: Separator = load_model(self.p.model or self.ctx.stage.model)
        return sep

    def plan(self) -> list[str]:
        return sorted(self.sources)

    def rejected_row(self, item: str, exc: InputRejected) -> StemRow:
        return StemRow(clip_id=item, status="rejected", reason=exc.reason, detail=str(exc))

    def run_item(self, item: str) -> StemRow:
        src = self.sources[item]
        audio, rate = self.ctx.load_audio(src.audio_uri, src.audio_sha256)
        speech, env, choice = separate_clip(self.separator, audio, rate)
        s_info = self.ctx.save_audio(f"speech/{item}.wav", speech, rate)
        e_info = self.ctx.save_audio(f"env/{item}.wav", env, rate)
        error = float(np.max(np.abs(audio.astype(np.float64) - speech - env), initial=0.0))
        row = StemRow(
            clip_id=item, speech_uri=s_info.uri, speech_sha256=s_info.sha256,
            env_uri=e_info.uri, env_sha256=e_info.sha256, duration=len(audio) / rate,
            sample_rate=rate, mixture_error=error,
        ).with_provenance(self.ctx.provenance(self.separator.slug, self.separator.version))
        return dataclasses.replace(row, **choice, **self._scores(src, audio, speech, env))

    def _scores(self, src: SourceRow, audio: np.ndarray, speech: np.ndarray,
                env: np.ndarray) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if src.ref_speech_uri:
            ref, _ = self.ctx.load_audio(src.ref_speech_uri, src.ref_speech_sha256)
            out["si_sdr_speech"] = si_sdr(speech, ref)
            out["si_sdr_speech_input"] = si_sdr(audio, ref)
        if src.ref_env_uri:
            ref, _ = self.ctx.load_audio(src.ref_env_uri, src.ref_env_sha256)
            out["si_sdr_env"] = si_sdr(env, ref)
        return out
