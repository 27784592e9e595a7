"""The shared tail of the detector adapters.

AASIST, DF-Arena, XLSR-Mamba (mode A) and AV-Anomaly, AVH-Align, BA-TFD+ (mode AV) each
compute, in one forward, the native score and the features of a clip as an
:class:`~madbench_common.models.roles.Embedding`. Their
:class:`~madbench_common.models.roles.Detector`
methods ``score()`` and ``features()`` are that one ``embed()`` in the detector's mode:
written once here, not six times.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from madbench_common.core.types import Audio, Hertz
from madbench_common.models.roles import Embedding, Frames

__all__ = ["EmbeddingDetector"]


class EmbeddingDetector(ABC):
    """A detector whose ``embed()`` yields both its score and its features.

    ``modes`` holds its one mode: ``A`` (the audio alone) or ``AV`` (the clip's
    ``frames`` at ``fps`` as well).
    """

    modes: tuple[str, ...]

    @abstractmethod
    def embed(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
              frames: Frames | None = None, fps: float = 0.0) -> Embedding:
        """The clip's features, with the native score (``Embedding.score``)."""

    def _embed_clip(self, audio: Audio, sample_rate: Hertz, frames: Frames | None,
                    fps: float) -> Embedding:
        mode = self.modes[0]
        if mode == "A":
            return self.embed(mode="A", audio=audio, sample_rate=sample_rate)
        return self.embed(mode=mode, audio=audio, sample_rate=sample_rate, frames=frames,
                          fps=fps)

    def score(self, audio: Audio, sample_rate: Hertz, *, frames: Frames | None = None,
              fps: float = 0.0) -> float:
        """The detector's native score (its own scale; ``Embedding.score_kind`` says which)."""
        s = self._embed_clip(audio, sample_rate, frames, fps).score
        assert s is not None
        return s

    def features(self, audio: Audio, sample_rate: Hertz, *, frames: Frames | None = None,
                 fps: float = 0.0) -> np.ndarray:
        """The detector's features (the vector of the same forward as :meth:`score`)."""
        return self._embed_clip(audio, sample_rate, frames, fps).vector
