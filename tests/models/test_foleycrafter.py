"""FoleyCrafter adapter on tiny random checkpoints of its three repos
(``make adapter-test IMAGE=v2a-foleycrafter``): upstream's loaders (auffusion UNet and
ControlNet at tiny sizes, IP-adapter, onset detector, vocoder), its pipeline and vocoder
on CPU, with the device a parameter."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("foleycrafter", reason="run make adapter-test IMAGE=v2a-foleycrafter")

from madbench_common.models.adapters.foleycrafter import FoleyCrafterV2A, onset_condition
from madbench_common.models.tiny.foleycrafter import install_tiny
from madbench_common.models.weights import WeightsMissing
from tests.models.device import DEVICE
from tests.models.envdata import demo_frames
from tests.models.tiny import tiny_root


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_root(tmp_path_factory, install_tiny)


@pytest.fixture(scope="module")
def video() -> tuple[np.ndarray, float]:
    return demo_frames("demo_010", fps=15.0, size=224, max_frames=200)


def test_missing_weights_name_the_fetch_command(tmp_path: Path,
                                                video: tuple[np.ndarray, float]) -> None:
    with pytest.raises(WeightsMissing, match="--image v2a-foleycrafter"):
        FoleyCrafterV2A(root=str(tmp_path)).generate(sample_rate=16000, duration=1.0,
                                                     prompt="x", frames=video[0], fps=video[1])


def test_onset_condition_maps_frames_to_spectrogram_columns() -> None:
    import torch

    probs = torch.tensor([0.9] * 5 + [0.1] * 5)  # onsets in the first half of the frames
    cond = onset_condition(probs, 5.0)  # 5 s of a 10 s canvas: 512 columns used
    assert tuple(cond.shape) == (1, 1, 256, 1024)
    row = cond[0, 0, 0]
    assert bool((row[:256] == 1).all()) and bool((row[256:] == -1).all())
    assert bool((cond[0, 0] == row).all())


def test_short_clip_is_cut_from_the_10s_canvas(root: Path,
                                               video: tuple[np.ndarray, float]) -> None:
    model = FoleyCrafterV2A(root=str(root), device=DEVICE, steps=2, onset_frames=16)
    audio = model.generate(sample_rate=16000, duration=1.5, prompt="birds in a forest",
                           negative_prompt="wind", frames=video[0], fps=video[1], seed=3)
    assert audio.shape == (24000,) and audio.dtype == np.float32 and np.isfinite(audio).all()
    s = model.last_settings
    assert (s["fit"], s["native_rate"], s["native_seconds"], s["conditioned_seconds"]) == (
        "trim", 16000, 10.0, 1.5)
    assert s["negative_prompt"].startswith("wind, speech") and s["steps"] == 2


def test_long_clip_continues_on_the_videos_end_and_sampling_is_seeded(
        root: Path, video: tuple[np.ndarray, float]) -> None:
    """11 s: a second canvas conditioned on the video's last 10 s (start 1 s), cross-faded
    in; no loop."""
    model = FoleyCrafterV2A(root=str(root), device=DEVICE, steps=1, guidance=1.0,
                            onset_frames=16)
    kw = {"sample_rate": 8000, "duration": 11.0, "prompt": "rain", "frames": video[0],
          "fps": video[1]}
    a, b = model.generate(seed=1, **kw), model.generate(seed=1, **kw)
    assert a.shape == (88000,) and np.array_equal(a, b)
    s = model.last_settings
    assert s["fit"] == "continued" and s["conditioned_seconds"] == 10
    assert s["windows"] == [0.0, 1.0]


def test_window_frames_come_from_the_window(root: Path) -> None:
    """150 frames at 15 fps = 10 s of video: the window from 1 s spans frames 15..149."""
    model = FoleyCrafterV2A(root=str(root), device=DEVICE, onset_frames=4)
    frames = np.arange(150)[:, None, None, None] * np.ones((1, 2, 2, 3), np.uint8)
    got = model._frames(frames, 15.0, 9.0, start=1.0)[:, 0, 0, 0]
    assert got.tolist() == [15, 59, 104, 149]
    assert model._frames(frames, 15.0, 10.0)[:, 0, 0, 0].tolist() == [0, 49, 99, 149]
