"""Reference VAD: Silero VAD, whose weights ship inside the ``silero-vad`` wheel."""

from __future__ import annotations

import numpy as np

from madbench_common.audio import resample
from madbench_common.roles import Segment
from madbench_common.types import Audio, Hertz

__all__ = ["SileroVAD", "coverage"]

_RATE = 16000


class SileroVAD:
    """Speech segments from Silero VAD (JIT model, CPU)."""

    slug = "ref-silero-vad"
    reference = True

    def __init__(self, threshold: float = 0.5, min_speech_ms: int = 150) -> None:
        from importlib.metadata import version

        from silero_vad import load_silero_vad

        self.version = f"silero-vad-{version('silero-vad')}"
        self._model = load_silero_vad()
        self.threshold = threshold
        self.min_speech_ms = min_speech_ms

    def segments(self, audio: Audio, sample_rate: Hertz) -> list[Segment]:
        import torch
        from silero_vad import get_speech_timestamps

        x = torch.from_numpy(np.ascontiguousarray(resample(audio, sample_rate, _RATE)))
        stamps = get_speech_timestamps(
            x, self._model, sampling_rate=_RATE, threshold=self.threshold,
            min_speech_duration_ms=self.min_speech_ms, return_seconds=False,
        )
        self._model.reset_states()
        return [Segment(s["start"] / _RATE, s["end"] / _RATE) for s in stamps]


def coverage(segments: list[Segment], duration: float) -> float:
    """Fraction of ``duration`` covered by ``segments`` (assumed non-overlapping)."""
    if duration <= 0:
        return 0.0
    return min(1.0, sum(s.end - s.start for s in segments) / duration)
