"""The six detector adapters share one ``score()``/``features()`` tail:
:class:`EmbeddingDetector` runs ``embed()`` once in the detector's mode; the adapters'
own tests (in their image venvs) exercise it on tiny models of the real architectures."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest

from madbench_common.models.detector_base import EmbeddingDetector
from madbench_common.models.roles import Embedding, InputSpec

ADAPTERS = {
    "aasist": ("AasistDetector", "A"), "df_arena": ("DfArenaDetector", "A"),
    "xlsr_mamba": ("XlsrMambaDetector", "A"), "av_anomaly": ("AvAnomalyDetector", "AV"),
    "avh_align": ("AvhAlignDetector", "AV"), "batfd": ("BatfdPlusDetector", "AV"),
}


@pytest.mark.parametrize("module", sorted(ADAPTERS))
def test_adapters_use_the_shared_tail(module: str) -> None:
    name, mode = ADAPTERS[module]
    cls = getattr(importlib.import_module(f"madbench_common.models.adapters.{module}"), name)
    assert issubclass(cls, EmbeddingDetector) and cls.modes == (mode,)
    assert "score" not in vars(cls) and "features" not in vars(cls)


class _Recorded(EmbeddingDetector):
    """Records the ``embed()`` calls the shared tail makes."""

    def __init__(self, mode: str) -> None:
        self.modes = (mode,)
        self.calls: list[dict[str, Any]] = []

    def embed(self, **kwargs: Any) -> Embedding:
        self.calls.append(kwargs)
        spec = InputSpec(audio_rate=16000, audio_seconds=1.0, pooling="test")
        return Embedding(np.arange(3, dtype=np.float32), spec, 0.25, "prob")


@pytest.mark.parametrize("mode", ["A", "AV"])
def test_score_and_features_are_one_embed_in_the_detectors_mode(mode: str) -> None:
    det, audio = _Recorded(mode), np.zeros(16000, np.float32)
    frames = np.zeros((4, 8, 8, 3), np.uint8)
    assert det.score(audio, 16000, frames=frames, fps=4.0) == 0.25
    assert det.features(audio, 16000, frames=frames, fps=4.0).tolist() == [0.0, 1.0, 2.0]
    want: dict[str, Any] = {"mode": mode, "audio": audio, "sample_rate": 16000}
    if mode == "AV":  # an audio-only detector is never handed the frames
        want.update(frames=frames, fps=4.0)
    assert [sorted(c) for c in det.calls] == [sorted(want)] * 2
    assert all(c["mode"] == mode and c.get("fps") == want.get("fps") for c in det.calls)
