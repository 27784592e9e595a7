"""Reference VAD: Silero VAD, whose weights ship inside the ``silero-vad`` wheel."""

from __future__ import annotations

import numpy as np

from madbench_common.core.compat import zip_strict
from madbench_common.core.types import Audio, Hertz
from madbench_common.media.audio import resample
from madbench_common.models.roles import Segment

__all__ = ["SileroVAD", "coverage"]

_RATE = 16000
_WINDOW = 512  # Silero's window at 16 kHz


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
        return self.segments_many([audio], sample_rate)[0]

    def segments_many(self, audios: list[Audio], sample_rate: Hertz) -> list[list[Segment]]:
        """Segments of several signals in one batched pass (one model call per window)."""
        from silero_vad.utils_vad import get_speech_timestamps_from_probs

        signals = [resample(a, sample_rate, _RATE) for a in audios]
        out = []
        for x, probs in zip_strict(signals, self._probs(signals)):
            stamps = get_speech_timestamps_from_probs(
                probs.tolist(), sampling_rate=_RATE, threshold=self.threshold,
                min_speech_duration_ms=self.min_speech_ms, audio_length_samples=len(x),
            )
            out.append([Segment(st["start"] / _RATE, st["end"] / _RATE) for st in stamps])
        return out

    def speech_probs_many(self, audios: list[Audio], sample_rate: Hertz) -> list[np.ndarray]:
        """Silero's speech probability per 32 ms window (512 samples at 16 kHz) of each
        signal, in one batched pass."""
        return self._probs([resample(a, sample_rate, _RATE) for a in audios])

    def _probs(self, signals: list[Audio]) -> list[np.ndarray]:
        import torch

        longest = max(len(x) for x in signals)
        batch = torch.zeros(len(signals), longest)
        for i, x in enumerate(signals):
            batch[i, : len(x)] = torch.from_numpy(np.ascontiguousarray(x))
        with torch.inference_mode():
            probs = self._model.audio_forward(batch, _RATE)
        self._model.reset_states()
        return [probs[i, : -(-len(x) // _WINDOW)].numpy().astype(np.float32)
                for i, x in enumerate(signals)]


def coverage(segments: list[Segment], duration: float) -> float:
    """Fraction of ``duration`` covered by ``segments`` (assumed non-overlapping)."""
    if duration <= 0:
        return 0.0
    return min(1.0, sum(s.end - s.start for s in segments) / duration)
