"""A test double for the detector plumbing (never registered outside tests): its "native
score" is the logistic of the clip's RMS level in dB, a documented function of the input."""

from __future__ import annotations

import numpy as np

from madbench_common.roles import Embedding, Frames, InputSpec
from madbench_common.types import Audio, Hertz


class RmsDetector:
    slug, version, reference = "test-rms-detector", "1", True
    modes: tuple[str, ...] = ("A", "AV")

    def embed(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
              frames: Frames | None = None, fps: float = 0.0) -> Embedding:
        if audio is None:
            raise ValueError("audio needed")
        x = np.asarray(audio, dtype=np.float64)
        db = 20 * np.log10(np.sqrt(np.mean(x ** 2)) + 1e-9)
        nframes = 0 if frames is None else len(frames)
        vec = np.array([db, x.std(), float(nframes)], dtype=np.float32)
        spec = InputSpec(audio_rate=sample_rate, audio_seconds=x.size / sample_rate,
                         video_frames=nframes, video_fps=fps if nframes else 0.0,
                         pooling="whole clip", fallback="" if nframes or mode == "A" else "x")
        return Embedding(vec, spec, score=float(1 / (1 + np.exp(-(db + 20) / 5))),
                         score_kind="prob")
