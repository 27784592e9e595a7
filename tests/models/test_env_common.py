"""Shared environment-adapter helpers on real arrays (main venv): output fit, frames, prompts."""

from __future__ import annotations

import numpy as np
import pytest

from madbench_common.models.env_common import (
    ALWAYS_EXCLUDED,
    center_crop_frames,
    fit_output,
    frame_indices,
    negative_prompt_for,
    resize_frames,
    to_mono,
)
from models.envdata import demo_env, demo_frames


def test_negative_prompt_always_carries_the_paper_exclusions() -> None:
    assert negative_prompt_for("") == ", ".join(ALWAYS_EXCLUDED)
    out = negative_prompt_for("speech, singing, music, media playback, talking, human voice")
    assert out == "speech, singing, music, media playback, talking, human voice"
    assert negative_prompt_for("Traffic").startswith("Traffic, speech")


def test_fit_output_resamples_and_names_the_fit() -> None:
    env = demo_env("demo_002", 2.0, 44100)  # a 44.1 kHz model output, real ambience
    exact, how = fit_output(env, 44100, 16000, 32000)
    assert (exact.shape, how) == ((32000,), "exact")
    ref = demo_env("demo_002", 2.0, 16000)
    assert np.corrcoef(exact[:31000], ref[:31000])[0, 1] > 0.99  # same signal, resampled
    trimmed, how = fit_output(env, 44100, 16000, 16000)
    assert (trimmed.shape, how) == ((16000,), "trim") and np.allclose(trimmed, exact[:16000])
    padded, how = fit_output(env, 44100, 16000, 32000 + 400)
    assert how == "pad" and np.array_equal(padded[:32000], exact)
    looped, how = fit_output(env, 44100, 16000, 80000)
    assert how == "loop" and looped.shape == (80000,)
    assert np.allclose(looped[:31000], exact[:31000])  # starts with the model's output
    assert np.isfinite(looped).all() and np.abs(looped).max() <= np.abs(exact).max() * 1.5


def test_fit_output_accepts_model_layouts() -> None:
    stereo = np.stack([np.ones(100), -np.ones(100)])[None]  # (B, C, T)
    assert np.allclose(to_mono(stereo), 0.0)
    with pytest.raises(ValueError, match="no audio"):
        fit_output(np.zeros(0), 16000, 16000, 10)


def test_frame_indices_pick_the_nearest_frame_on_the_model_grid() -> None:
    frames, fps = demo_frames("demo_004", fps=25.0, size=64, max_frames=50)
    idx = frame_indices(len(frames), fps, 8.0, 2.0)
    assert len(idx) == 16 and idx[0] == 0 and idx == sorted(idx)
    assert max(idx) <= len(frames) - 1
    assert frame_indices(3, 1.0, 2.0, 4.0)[-1] == 2  # short video: last frame repeats
    with pytest.raises(ValueError):
        frame_indices(0, 25.0, 8.0, 1.0)


def test_resize_and_crop_real_frames() -> None:
    frames, _ = demo_frames("demo_005", fps=2.0, size=112, max_frames=2)
    square = resize_frames(frames, (384, 384))
    assert square.shape == (len(frames), 384, 384, 3) and square.dtype == np.uint8
    short = resize_frames(frames, 224)
    assert min(short.shape[1:3]) == 224
    assert center_crop_frames(short, 224).shape[1:3] == (224, 224)
