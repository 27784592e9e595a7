"""MMAudio adapter on a tiny network and tiny real-class feature models
(``make adapter-test IMAGE=v2a-mmaudio``): upstream's frame transforms, conditioning,
Euler flow-matching sampling, VAE decode and BigVGAN v2 vocoding on CPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mmaudio", reason="run make adapter-test IMAGE=v2a-mmaudio")

from madbench_common.models.mmaudio import MMAudioV2A
from madbench_common.weights import WeightsMissing
from models.envdata import demo_frames
from models.tiny_mmaudio import build_parts


@pytest.fixture(scope="module")
def model() -> MMAudioV2A:
    net, features, mode = build_parts()
    return MMAudioV2A.from_parts(net, features, mode, device="cpu", steps=3)


@pytest.fixture(scope="module")
def video() -> tuple[np.ndarray, float]:
    return demo_frames("demo_006", fps=25.0, size=96, max_frames=40)


def test_missing_weights_name_the_fetch_command(tmp_path: Path) -> None:
    frames, fps = demo_frames(max_frames=2)
    with pytest.raises(WeightsMissing, match="--image v2a-mmaudio"):
        MMAudioV2A(root=str(tmp_path)).generate(sample_rate=16000, duration=1.0, prompt="x",
                                               frames=frames, fps=fps)


def test_frames_go_on_mmaudio_grids(model: MMAudioV2A, video: tuple[np.ndarray, float]) -> None:
    clip, sync = model.condition_frames(*video, duration=1.3)
    assert tuple(clip.shape) == (1, 10, 3, 384, 384) and tuple(sync.shape) == (1, 32, 3, 224, 224)
    assert float(clip.min()) >= 0.0 and float(clip.max()) <= 1.0
    assert -1.0 <= float(sync.min()) < 0.0 < float(sync.max()) <= 1.0
    short = model.condition_frames(video[0][:5], video[1], duration=1.3)  # video too short
    tail = short[1][0, -10:]  # the demo is 12 fps: 5 frames last 0.42 s, then the last repeats
    assert short[1].shape[1] == 32 and bool((tail == tail[:1]).all())


@pytest.mark.parametrize("rate", [16000, 44100])
def test_generates_exactly_the_clip(model: MMAudioV2A, video: tuple[np.ndarray, float],
                                    rate: int) -> None:
    audio = model.generate(sample_rate=rate, duration=1.3, prompt="birds in a forest",
                           negative_prompt="wind", frames=video[0], fps=video[1], seed=5)
    assert audio.shape == (round(1.3 * rate),) and audio.dtype == np.float32
    assert np.isfinite(audio).all()
    s = model.last_settings
    assert (s["native_rate"], s["sampler"], s["steps"], s["cfg_strength"]) == (
        44100, "euler", 3, 4.5)
    assert s["fit"] in {"exact", "trim"} and s["negative_prompt"].startswith("wind, speech")
    assert (s["clip_frames"], s["sync_frames"]) == (10, 32)


def test_sampling_is_seeded_and_follows_the_video(model: MMAudioV2A,
                                                  video: tuple[np.ndarray, float]) -> None:
    kw = {"sample_rate": 16000, "duration": 1.0, "prompt": "rain", "fps": video[1]}
    a = model.generate(frames=video[0], seed=1, **kw)
    b = model.generate(frames=video[0], seed=1, **kw)
    c = model.generate(frames=video[0], seed=2, **kw)
    other, _ = demo_frames("demo_015", fps=25.0, size=96, max_frames=40)
    d = model.generate(frames=other, seed=1, **kw)
    assert np.array_equal(a, b) and not np.array_equal(a, c) and not np.allclose(a, d)
