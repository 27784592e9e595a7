"""Reference speaker embedder: Resemblyzer's GE2E d-vector (weights ship in its wheel)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from madbench_common.audio import resample
from madbench_common.types import Audio, Hertz

__all__ = ["ResemblyzerEmbedder"]

_RATE = 16000


class ResemblyzerEmbedder:
    """256-d unit-norm speaker embedding."""

    slug = "ref-resemblyzer"
    reference = True

    def __init__(self) -> None:
        from importlib.metadata import version

        from resemblyzer import VoiceEncoder

        self.version = f"resemblyzer-{version('resemblyzer')}"
        self._encoder = VoiceEncoder("cpu", verbose=False)

    def embed(self, audio: Audio, sample_rate: Hertz) -> npt.NDArray[np.float32]:
        from resemblyzer import preprocess_wav

        x = preprocess_wav(resample(audio, sample_rate, _RATE), source_sr=_RATE)
        if len(x) < _RATE // 2:  # too little voiced audio after trimming: use all of it
            x = resample(audio, sample_rate, _RATE)
        emb = np.asarray(self._encoder.embed_utterance(x), dtype=np.float32)
        return emb / max(float(np.linalg.norm(emb)), 1e-12)
