"""The modality sanity check catches a model whose processor drops the audio or the video."""

from __future__ import annotations

import json

import numpy as np

from madbench_common.benchmarks.madbench.omni.ask import Media
from madbench_common.benchmarks.madbench.omni.sanity import modality_sanity, sanity_json
from madbench_common.models.roles import OmniAnswer
from tests.benchmarks.madbench.omni.questions import BIN, SC

from .toy import ToyOmni


def _clips(n: int = 3) -> list[Media]:
    rng = np.random.default_rng(1)
    return [Media(rng.normal(0, 0.05 * (i + 1), 8000).astype(np.float32), 16000,
                  rng.integers(0, 255, (4, 16, 16, 3), dtype=np.uint8), 2.0) for i in range(n)]


class DropsAudio(ToyOmni):
    """A processor bug: the audio never reaches the model."""

    def answer(self, prompt: str, audio: np.ndarray, sample_rate: int, *args: object,
               **kwargs: object) -> OmniAnswer:
        return super().answer(prompt, np.zeros(16000, np.float32), 16000, *args, **kwargs)


class DropsVideo(ToyOmni):
    def answer(self, prompt: str, audio: np.ndarray, sample_rate: int, frames: object = None,
               fps: float = 0.0, **kwargs: object) -> OmniAnswer:
        return super().answer(prompt, audio, sample_rate, None, 0.0, **kwargs)


def test_a_model_that_hears_and_sees_passes() -> None:
    checks = modality_sanity(ToyOmni(), _clips(), BIN, SC)
    assert [c.name for c in checks] == ["silence", "noise", "shuffled_video"]
    assert all(c.passed for c in checks)
    assert json.loads(sanity_json(ToyOmni(), checks))["passed"] is True


def test_dropped_audio_fails_silence_and_noise() -> None:
    checks = {c.name: c for c in modality_sanity(DropsAudio(), _clips(), BIN, SC)}
    assert not checks["silence"].passed and checks["silence"].max_change == 0.0
    assert not checks["noise"].passed
    assert checks["shuffled_video"].passed


def test_dropped_video_fails_the_shuffle() -> None:
    checks = {c.name: c for c in modality_sanity(DropsVideo(), _clips(), BIN, SC)}
    assert checks["silence"].passed and not checks["shuffled_video"].passed


def test_shuffle_needs_two_videos() -> None:
    assert [c.name for c in modality_sanity(ToyOmni(), _clips(1), BIN, SC)] == [
        "silence", "noise"]
