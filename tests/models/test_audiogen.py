"""AudioGen adapter on a tiny random audiocraft LM + EnCodec written in the real checkpoint
layout (``make adapter-test IMAGE=env-audiogen``): real loaders, real token sampling."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("audiocraft", reason="run make adapter-test IMAGE=env-audiogen")

from madbench_common.models.adapters.audiogen import AudioGenTTA
from madbench_common.models.tiny.audiogen import install_tiny
from madbench_common.models.weights import WeightsMissing, weights_root
from tests.models.device import DEVICE


@pytest.fixture(scope="module")
def root() -> Path:
    """The tiny checkpoints go into the weights root HF_HOME points at (T5 is loaded by
    name through transformers' cache, as in the pods)."""
    if not os.environ.get("MADBENCH_WEIGHTS"):
        pytest.skip("needs MADBENCH_WEIGHTS and HF_HOME on one temp root (adapter-test.sh)")
    path = weights_root()
    install_tiny(path)
    return path


def test_missing_weights_name_the_fetch_command(tmp_path: Path) -> None:
    with pytest.raises(WeightsMissing, match="--image env-audiogen"):
        AudioGenTTA(root=str(tmp_path)).generate(sample_rate=16000, duration=1.0, prompt="x")


@pytest.mark.parametrize("rate", [16000, 22050])
def test_generates_the_clip_length_at_the_pipeline_rate(root: Path, rate: int) -> None:
    model = AudioGenTTA(device=DEVICE, top_k=16)
    audio = model.generate(sample_rate=rate, duration=1.3, prompt="rain on a window", seed=4,
                           negative_prompt="speech")
    assert audio.shape == (round(1.3 * rate),) and audio.dtype == np.float32
    assert np.isfinite(audio).all()
    s = model.last_settings
    assert (s["native_rate"], s["fit"], s["seed"], s["top_k"], s["cfg_coef"]) == (
        16000, "exact", 4, 16, 3.0)
    assert s["negative_prompt_used"] is False


def test_sampling_is_seeded(root: Path) -> None:
    model = AudioGenTTA(device=DEVICE, top_k=16)
    runs = [model.generate(sample_rate=16000, duration=1.0, prompt="birds", seed=s)
            for s in (3, 3, 5)]
    assert np.array_equal(runs[0], runs[1]) and not np.array_equal(runs[0], runs[2])


def test_clips_longer_than_the_window_use_audiocraft_extension(root: Path) -> None:
    model = AudioGenTTA(device=DEVICE, top_k=16, extend_stride=0.5)
    model.model.max_duration = 1.0  # the real window is 10 s; clips reach 12 s
    audio = model.generate(sample_rate=16000, duration=2.3, prompt="wind", seed=1)
    assert audio.shape == (36800,)
    s = model.last_settings  # within a codec frame (20 ms) of the request
    assert s["native_seconds"] == pytest.approx(2.3, abs=0.021) and s["fit"] in {"exact", "pad",
                                                                                "trim"}
